/* Planning a scan launch: collapse the tensors to a scan axis plus batch dimensions, choose
 * the kernel (rows or cols, with or without look-back), and spell its name expression. Pure
 * host logic, no GPU: the catalogue and the CPU tests use it too. */
#ifndef JITOPS_OPS_SCAN_PLAN_H
#define JITOPS_OPS_SCAN_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "ops/scan/scan_abi.h"
#include "runtime/op_support.h"

/* The source every scan kernel comes from. */
#define JITOPS__SCAN_SOURCE "jitops/scan.cuh"

/* The kernel-level operations (policies in scan_ops.cuh). A cumsum backward is a cumsum
 * running the other way. */
typedef enum jitops__scan_kop {
  JITOPS__SCAN_K_CUMSUM = 0,
  JITOPS__SCAN_K_CUMPROD,
  JITOPS__SCAN_K_CUMMAX,
  JITOPS__SCAN_K_CUMMIN,
  JITOPS__SCAN_K_LCSE,
  JITOPS__SCAN_K_CUMPROD_BWD,
  JITOPS__SCAN_K_EXTREMUM_BWD,
  JITOPS__SCAN_K_LCSE_BWD,
  JITOPS__SCAN_K_COUNT
} jitops__scan_kop;

typedef enum jitops__scan_kind { JITOPS__SCAN_ROWS = 0, JITOPS__SCAN_COLS = 1 } jitops__scan_kind;

/* A rows look-back's tiles: wide ones where the op has them (jitops__scan_rows_wide), on axes
 * long enough for them. A row that one narrow tile holds may be a tile alone (tiles 1, no
 * scratch): the one-tile rows of plan.c. */
typedef enum jitops__scan_width {
  JITOPS__SCAN_NARROW = 0, /* 8 warps of up to 16 positions a lane */
  JITOPS__SCAN_WIDE = 1    /* staged by cp.async: 8 warps of 128 (in place) or 64 bytes a lane */
} jitops__scan_width;

typedef struct jitops__scan_plan {
  jitops__scan_kind kind;
  int lookback;             /* look-back tiles (joined by decoupled look-back; a one-tile row,
                               tiles 1, looks back at nothing and has no scratch) */
  jitops__scan_width width; /* rows look-back: its tiles */
  int warps;                /* rows: warps per block */
  int items;                /* rows: positions per lane per chunk; cols: per thread per tile */
  int64_t tiles;            /* look-back: tiles along the axis */
  uint32_t grid;            /* blocks (x) */
  uint32_t block_x, block_y;
  uint32_t shared_bytes; /* dynamic shared memory (cols: the staged tile) */
  size_t state_bytes;    /* sizeof(Op::State) */
  int quick;             /* the kernel may be a quick build (jitops__scan_kop_quick) */
  size_t scratch_bytes;
  size_t zero_words; /* 32-bit words at the start of the scratch to zero: ticket and flags */
  size_t flags_offset, agg_offset, inc_offset; /* agg, inc: 0 for rows (their words hold states) */
  size_t group_flags_offset, group_agg_offset; /* 0: no groups (cols) */
  char name[256];                              /* the kernel's name expression */
} jitops__scan_plan;

/* The ops' tensor counts: inputs then outputs, as the templates' Tensors lists. */
int jitops__scan_kop_tensors(jitops__scan_kop kop);

/* Whether the kernel op's kernels in `dtype` may be quick builds (runtime/kernel_batch.h):
 * every product that feeds a sum is an explicit fma in scan_ops.cuh, so their bits cannot
 * depend on the optimization level, except where an f64 log-domain op calls the math library
 * (exp, log, log1p), whose code the optimizer may contract. */
int jitops__scan_kop_quick(jitops__scan_kop kop, jitops__dtype dtype);

/* Whether the kernel op takes `dtype` (cumsum and cumprod take ints). */
int jitops__scan_kop_takes(jitops__scan_kop kop, jitops__dtype dtype);

/* Collapses `tensors` (ntens of them, all of one shape) around `axis` into the kernels'
 * geometry (jitops/scan_abi.h): batch dimensions of size 1 go, the rest are ordered by
 * decreasing stride (so lanes run along the unit stride) and merge where every tensor is
 * contiguous across them. */
void jitops__scan_geom_build(jitops__scan_geom *g, int ntens, const DLTensor *const *tensors,
                             int axis, int reverse);

/* Chooses the kernel for a non-empty problem. `sm_count` 0 means a typical GPU. Fails with
 * JITOPS_ERR_UNSUPPORTED only for grids beyond the device's limits. */
jitops_status jitops__scan_plan_make(const char *fn, jitops__scan_plan *plan, jitops__scan_kop kop,
                                     jitops__dtype dtype, const jitops__scan_geom *g, int sm_count);

/* Whether the op has wide look-back tiles (scan.cuh, rows_stages_async): one input, one output of
 * its size and a state of at most 8 bytes (cumsum, cumprod, and logcumsumexp but in f64), and
 * every other op; the plan takes them on long enough axes whose 2-byte elements line up in words
 * (and whose positions fit 31 bits where int64 indices are staged as 32 beside 2- or 4-byte
 * data). */
int jitops__scan_rows_wide(jitops__scan_kop kop, jitops__dtype dtype);

/* The name expression of one specialization (what the plan and the catalogue compile); `width`
 * picks a rows look-back's tiles (wide ones only where the op has them; unused for cols), and
 * `items` a rows kernel's positions a lane (0: the layout's usual; the plan's own for the walk
 * of short rows in bulk). */
void jitops__scan_kernel_name(jitops__scan_kop kop, jitops__dtype dtype, jitops__scan_kind kind,
                              int nb, int lookback, jitops__scan_width width, int items, char *buf,
                              size_t size);

#endif
