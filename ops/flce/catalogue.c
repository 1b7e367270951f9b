/* The prewarm catalogue of fused linear cross-entropy (ops/catalogue_family.h): the kernels of
 * a language model's output layer in bf16, f16 and f32 with a large vocabulary (rows of >= 8192
 * columns) and no bias, softcap, label smoothing or z-loss; reduction mean (and sum/none, which
 * share the statistics pass); a vocabulary shard's statistics pass; the f32 accumulator
 * conversions, loss reductions and backward scales of contiguous gradients. Names come from
 * kernels.c's builders, as a call's do. */
#include <stdio.h>
#include <string.h>

#include "ops/catalogue_family.h"
#include "ops/flce/flce_abi.h"
#include "ops/flce/kernels.h"

typedef struct entry {
  const char *kernel;   /* "rows", "count_valid", or a kernel of two type parameters */
  jitops__dtype a, b;   /* the type parameters; rows: T and DY */
  int64_t rows_columns; /* rows: the columns of its buffer, which set its block */
  int mode;             /* rows: JITOPS__FLCE_MODE_* */
  bool mean;            /* rows */
} entry;

#define BF16 JITOPS__DTYPE_BF16
#define F16  JITOPS__DTYPE_F16
#define F32  JITOPS__DTYPE_F32
#define TWO(kernel, a, b)                                                                          \
  { kernel, a, b, 0, 0, false }
#define ROWS(t, columns, mode, mean)                                                               \
  { "rows", t, F32, columns, JITOPS__FLCE_MODE_##mode, mean }
/* A whole vocabulary's statistics pass (every reduction), its full pass for the mean and for
 * sum/none, and the vocab algorithm's slices, of two group widths (a vocabulary shard's
 * backward uses the wider, and its statistics pass the shard's). */
#define LARGE_VOCABULARY_ROWS(t)                                                                   \
  ROWS(t, 8192, STATS, false), ROWS(t, 8192, FULL, true), ROWS(t, 8192, FULL, false),              \
      ROWS(t, 8192, SLICE, true), ROWS(t, 1024, SLICE, true), ROWS(t, 8192, SHARD_STATS, false)
/* A 16-bit T's: those, the f32 accumulator into T (strided and flat), the loss reduced into T,
 * and the backward's scales by a T or an f32 dy. */
#define HALF_TYPE_ENTRIES(t)                                                                       \
  LARGE_VOCABULARY_ROWS(t), TWO("convert", F32, t), TWO("convert_flat", F32, t),                   \
      TWO("reduce_loss", F32, t), TWO("scale_flat", t, t), TWO("scale_flat", t, F32)

static const entry entries[] = {
    {"count_valid", F32, F32, 0, 0, false},
    TWO("reduce_loss", F32, F32),
    TWO("convert", F32, F32),
    HALF_TYPE_ENTRIES(BF16),
    HALF_TYPE_ENTRIES(F16),
    LARGE_VOCABULARY_ROWS(F32),
    TWO("scale_flat", F32, F32),
};

static size_t flce_count(void) {
  return sizeof entries / sizeof entries[0];
}

static void flce_entry(size_t index, char *buf, size_t size) {
  const entry *e = &entries[index];
  if (strcmp(e->kernel, "count_valid") == 0) {
    snprintf(buf, size, "jitops::flce::count_valid");
  } else if (strcmp(e->kernel, "rows") == 0) {
    jitops__flce_rows_kind kind = {e->a,    e->b,  jitops__flce_rows_block(e->rows_columns),
                                   e->mode, false, false,
                                   false,   false, e->mean};
    jitops__flce_rows_name(&kind, buf, size);
  } else {
    jitops__flce_name2(e->kernel, e->a, e->b, buf, size);
  }
}

const jitops__catalogue_family jitops__catalogue_flce = {"flce", flce_count,          NULL,
                                                         NULL,   JITOPS__FLCE_SOURCE, flce_entry};
