/* jitops/scan_abi.h — what the scan host code (the C files of ops/scan/) and the scan kernels
 * (scan.cuh) share: the bounds of a collapsed problem, the block shape and the memory
 * figures both sides size launches by, and jitops__scan_args, the one argument of every scan
 * kernel. Written in the common subset of C and CUDA C++ (see templates/abi.h); the layout
 * checks at the end run in both compilers. */
#ifndef JITOPS_OPS_SCAN_ABI_H
#define JITOPS_OPS_SCAN_ABI_H

#if defined(__CUDACC_RTC__)
#include "jitops/abi.h"
#else
#include "templates/abi.h"
#endif

/* Tensors of one call (inputs, then outputs: 4 for the cumprod and logcumsumexp backwards),
 * and batch dimensions left once the scan axis is taken out of a rank-8 tensor. */
#define JITOPS__SCAN_MAX_TENSORS 4
#define JITOPS__SCAN_MAX_BATCH   7

/* The cols kernel's block: 32 chains across the lanes, 8 warps along the axis. */
#define JITOPS__SCAN_COLS_BX 32
#define JITOPS__SCAN_COLS_BY 8

/* Shared memory: what one SM has (sm_90: 228 KiB) and what the driver keeps of it per block;
 * the static staging a rows block may use (under the 48 KiB static limit). The host sizes
 * grids and picks ITEMS by these; the kernels bound their blocks per SM by them and check
 * their staging against them. */
#define JITOPS__SCAN_SM_SHARED             233472
#define JITOPS__SCAN_BLOCK_RESERVED_SHARED 1024
#define JITOPS__SCAN_ROWS_STAGE_BUDGET     40960

/* The collapsed problem: `chains` independent scans of length `len`. Tensor k's element at
 * batch coordinate b and axis position m is ptr[k] + Σ_d b_d·bstride[k][d] + m·astride[k]
 * (in elements). Only the first ntens tensors and nb batch dimensions are in use; the kernel
 * knows both as template parameters and never reads past them. */
typedef struct jitops__scan_geom {
  char *ptr[JITOPS__SCAN_MAX_TENSORS]; /* each tensor's first element (data + byte_offset) */
  int64_t len;                         /* length of the scan axis */
  int64_t astride[JITOPS__SCAN_MAX_TENSORS];
  int64_t chains; /* the product of bshape */
  int64_t bshape[JITOPS__SCAN_MAX_BATCH];
  int64_t bstride[JITOPS__SCAN_MAX_TENSORS][JITOPS__SCAN_MAX_BATCH];
  int64_t reverse; /* non-zero: the scan runs from the last element to the first */
  int32_t ntens;   /* the host's record of how many entries are in use */
  int32_t nb;
} jitops__scan_geom;

/* The look-back scratch, laid out by the host. A ticket counter, then:
 *   cols kernel (tile-level look-back, scan_lookback.cuh tile_prefix): one flag per (tile,
 *     chain), and the aggregate and inclusive state arrays, indexed tile * chains + chain;
 *   rows kernel (grouped look-back, grouped_tile_prefix): in `flags` one word per (tile, chain),
 *     in `group_flags` one per (group of JITOPS__SCAN_GROUP tiles, chain), each holding a flag
 *     and the state it flags (one 64-bit word for a 4-byte state, else one 64-bit half per 4
 *     bytes of state), and each group's aggregate again in group_agg; agg and inc are NULL.
 * The host zeroes the ticket and every flag or word before the launch. All NULL without
 * look-back. */
typedef struct jitops__scan_scratch {
  uint32_t *ticket;
  uint32_t *flags;
  char *agg;
  char *inc;
  int64_t chains;
  uint32_t *group_flags;
  char *group_agg;
} jitops__scan_scratch;

/* Tiles per group of the grouped look-back: a warp's width. */
#define JITOPS__SCAN_GROUP 32

/* The argument of jitops::scan::rows and jitops::scan::cols. */
typedef struct jitops__scan_args {
  jitops__scan_geom geom;
  jitops__scan_scratch scratch;
} jitops__scan_args;

JITOPS__ABI_OFFSET(jitops__scan_geom, len, 32);
JITOPS__ABI_OFFSET(jitops__scan_geom, bstride, 136);
JITOPS__ABI_OFFSET(jitops__scan_geom, ntens, 368);
JITOPS__ABI_SIZE(jitops__scan_geom, 376);
JITOPS__ABI_OFFSET(jitops__scan_scratch, chains, 32);
JITOPS__ABI_OFFSET(jitops__scan_scratch, group_agg, 48);
JITOPS__ABI_SIZE(jitops__scan_scratch, 56);
JITOPS__ABI_OFFSET(jitops__scan_args, scratch, 376);
JITOPS__ABI_SIZE(jitops__scan_args, 432);

#endif
