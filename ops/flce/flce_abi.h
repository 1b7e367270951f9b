/* jitops/flce_abi.h — what the fused linear cross-entropy host code (the C files of ops/flce/)
 * and its kernels (flce.cuh) share: what the row kernel does with a row, the block sizes and
 * vector widths both sides size launches and alignment checks by, and the one argument struct
 * of each kernel. Written in the common subset of C and CUDA C++ (see templates/abi.h); each
 * struct's layout checks follow it and run in both compilers. */
#ifndef JITOPS_OPS_FLCE_ABI_H
#define JITOPS_OPS_FLCE_ABI_H

#if defined(__CUDACC_RTC__)
#include "jitops/abi.h"
#else
#include "templates/abi.h"
#endif

/* What jitops::flce::rows does with a row of logits (its MODE template parameter). */
#define JITOPS__FLCE_MODE_STATS 0 /* the row's log-sum-exp and loss */
#define JITOPS__FLCE_MODE_FULL  1 /* those, then the gradient over the row, in place */
#define JITOPS__FLCE_MODE_SLICE 2 /* the gradient of a vocabulary slice from a saved lse */
/* A vocabulary shard's part of the statistics: the log-sum-exp over the shard's columns, and
 * in place of the loss the shard's linear part, (1 - eps) z_y when the target is one of its
 * columns (0 when another shard's, NaN when none of the vocabulary's) + (eps / V) sum_j z_j. */
#define JITOPS__FLCE_MODE_SHARD_STATS 3

/* Bytes per vector access of the row kernel and of scale_flat. A logits buffer's row stride
 * is a multiple of JITOPS__FLCE_LOGITS_LD_MULTIPLE elements, so that every row starts on such
 * an access (and on a 128-byte line for the GEMMs, for 16-bit types); scale_flat runs only on
 * gradients aligned to JITOPS__FLCE_VECTOR_BYTES. */
#define JITOPS__FLCE_VECTOR_BYTES       16
#define JITOPS__FLCE_LOGITS_LD_MULTIPLE 64

/* Elements per access of convert_flat: its source and destination are aligned to this many
 * of their elements. */
#define JITOPS__FLCE_CONVERT_FLAT_VEC 4

/* Threads per block of colsum (one column each), convert_flat and scale_flat (grid-stride). */
#define JITOPS__FLCE_FLAT_THREADS 256

/* Threads of the one-block reductions (count_valid, reduce_loss): one partial sum per warp,
 * combined in a fixed order. */
#define JITOPS__FLCE_REDUCE_THREADS 1024

/* The row kernel's scalars are doubles: checked as templates/abi.h checks the others. */
JITOPS__ABI_SCALAR(double, 8);

/* The argument of jitops::flce::rows: one block per row of a logits buffer. */
typedef struct jitops__flce_rows_args {
  void *logits;          /* T [rows, ld]: the GEMM's logits, overwritten by the gradient */
  const int64_t *target; /* [BT], indexed by the global row */
  const void *bias;      /* T [V] or NULL */
  const void *dy;        /* DY: [BT] (reduction none) or a scalar; NULL means 1 */
  const int64_t *count;  /* the number of non-ignored rows (read for the mean) */
  void *lse_rows;        /* acc_t<T> [BT]: written by STATS, FULL, SHARD_STATS, read by SLICE */
  void *loss_rows;       /* acc_t<T> [BT]: written by STATS and FULL (SHARD_STATS: linear) */
  int64_t ld;            /* row stride of `logits`: a multiple of LOGITS_LD_MULTIPLE */
  int64_t row0;          /* global row of the buffer's first row */
  int64_t ncols;         /* columns held by the buffer */
  int64_t col0;          /* weight (and bias) row of the buffer's column 0 */
  int64_t vocab;         /* V: the whole vocabulary's size, sharded or not */
  int64_t target_stride;
  int64_t bias_stride;
  int64_t dy_stride; /* 0 for a scalar dy */
  int64_t ignore_index;
  double label_smoothing;
  double softcap; /* read when the SOFTCAP template parameter is set */
  double z_loss_scale;
  /* Vocabulary index of weight row 0: a shard's first row (0 unsharded). Target y is the
   * buffer's column y - vocab0 - col0. */
  int64_t vocab0;
} jitops__flce_rows_args;
JITOPS__ABI_SIZE(jitops__flce_rows_args, 160);
JITOPS__ABI_OFFSET(jitops__flce_rows_args, ld, 56);
JITOPS__ABI_OFFSET(jitops__flce_rows_args, label_smoothing, 128);
JITOPS__ABI_OFFSET(jitops__flce_rows_args, z_loss_scale, 144);
JITOPS__ABI_OFFSET(jitops__flce_rows_args, vocab0, 152);

/* The argument of jitops::flce::count_valid: *count = the rows whose target is not
 * ignore_index. */
typedef struct jitops__flce_count_args {
  const int64_t *target; /* [n] */
  int64_t target_stride;
  int64_t n;
  int64_t ignore_index;
  int64_t *count;
} jitops__flce_count_args;
JITOPS__ABI_SIZE(jitops__flce_count_args, 40);
JITOPS__ABI_OFFSET(jitops__flce_count_args, count, 32);

/* The argument of jitops::flce::colsum: acc[j] (+)= the sum over rows of g[r * ld + j]. */
typedef struct jitops__flce_colsum_args {
  const void *g; /* T [nrows, ld] */
  int64_t ld;
  int64_t nrows;
  int64_t ncols;
  void *acc;          /* A [ncols] */
  int32_t accumulate; /* non-zero: add to acc instead of overwriting it */
} jitops__flce_colsum_args;
JITOPS__ABI_SIZE(jitops__flce_colsum_args, 48);
JITOPS__ABI_OFFSET(jitops__flce_colsum_args, acc, 32);
JITOPS__ABI_OFFSET(jitops__flce_colsum_args, accumulate, 40);

/* The argument of jitops::flce::convert: dst[r * dst_ld + c] = src[r * src_ld + c]. */
typedef struct jitops__flce_convert_args {
  const void *src;
  int64_t src_ld;
  void *dst;
  int64_t dst_ld;
  int64_t nrows;
  int64_t ncols;
} jitops__flce_convert_args;
JITOPS__ABI_SIZE(jitops__flce_convert_args, 48);
JITOPS__ABI_OFFSET(jitops__flce_convert_args, dst, 16);
JITOPS__ABI_OFFSET(jitops__flce_convert_args, ncols, 40);

/* The argument of jitops::flce::scale (x[r * ld + c] *= dy[0]) and jitops::flce::zero
 * (x[r * ld + c] = 0, dy unused). */
typedef struct jitops__flce_scale_args {
  void *x;
  int64_t ld;
  int64_t nrows;
  int64_t ncols;
  const void *dy; /* DY, one element on the device */
} jitops__flce_scale_args;
JITOPS__ABI_SIZE(jitops__flce_scale_args, 40);
JITOPS__ABI_OFFSET(jitops__flce_scale_args, dy, 32);

/* The argument of jitops::flce::convert_flat: dst[i] = src[i] for i < n, both contiguous and
 * aligned to CONVERT_FLAT_VEC elements. */
typedef struct jitops__flce_convert_flat_args {
  const void *src;
  void *dst;
  int64_t n;
} jitops__flce_convert_flat_args;
JITOPS__ABI_SIZE(jitops__flce_convert_flat_args, 24);
JITOPS__ABI_OFFSET(jitops__flce_convert_flat_args, n, 16);

/* The argument of jitops::flce::scale_flat: x[i] *= dy[0] for i < n, contiguous and aligned
 * to VECTOR_BYTES. */
typedef struct jitops__flce_scale_flat_args {
  void *x;
  int64_t n;
  const void *dy;
} jitops__flce_scale_flat_args;
JITOPS__ABI_SIZE(jitops__flce_scale_flat_args, 24);
JITOPS__ABI_OFFSET(jitops__flce_scale_flat_args, dy, 16);

/* The argument of jitops::flce::reduce_loss: *out = the sum of loss_rows[0, n), divided by
 * *count when mean is non-zero. */
typedef struct jitops__flce_reduce_args {
  const void *loss_rows; /* A [n] */
  int64_t n;
  const int64_t *count;
  void *out;    /* L, one element */
  int32_t mean; /* non-zero: divide by *count */
} jitops__flce_reduce_args;
JITOPS__ABI_SIZE(jitops__flce_reduce_args, 40);
JITOPS__ABI_OFFSET(jitops__flce_reduce_args, out, 24);
JITOPS__ABI_OFFSET(jitops__flce_reduce_args, mean, 32);

#endif
