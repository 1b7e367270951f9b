/* jitops/repeat_abi.h — what the repeat host code (the C files of ops/repeat/) and the repeat
 * kernels (repeat.cuh) share: the rank bound, the block shape, and the one argument each kernel
 * takes. Written in the common subset of C and CUDA C++ (see templates/abi.h); the layout
 * checks at the end run in both compilers. */
#ifndef JITOPS_OPS_REPEAT_ABI_H
#define JITOPS_OPS_REPEAT_ABI_H

#if defined(__CUDACC_RTC__)
#include "jitops/abi.h"
#else
#include "templates/abi.h"
#endif

/* Dimensions of an output (len(repeats)), before collapsing. */
#define JITOPS__REPEAT_MAX_RANK 8
/* Threads a block of every repeat kernel, and column vectors a thread of the forward copies. */
#define JITOPS__REPEAT_THREADS 256
#define JITOPS__REPEAT_UNROLL  4

/* jitops::repeat::fwd's argument: the output as rows × width (its innermost dimension), the
 * rows over NB outer dimensions. Only the first NB entries of the arrays are in use (NB, a
 * template parameter, is the collapsed rank less one). Strides are in elements. */
typedef struct jitops__repeat_fwd_args {
  const char *x;
  char *y;
  int64_t rows;       /* product of the output's outer dimensions */
  int64_t width;      /* the output's innermost dimension */
  int64_t in_w;       /* the input's innermost dimension (width = in_w × its repeat count) */
  int64_t xs_w, ys_w; /* innermost strides */
  int64_t tc;         /* threads per row, a power of two dividing JITOPS__REPEAT_THREADS */
  int64_t col_blocks; /* blocks along one row */
  int64_t in_step;    /* (tc · VEC) mod in_w: how far a thread's input column moves per vector */
  int64_t oshape[JITOPS__REPEAT_MAX_RANK - 1], ishape[JITOPS__REPEAT_MAX_RANK - 1];
  int64_t xs[JITOPS__REPEAT_MAX_RANK - 1], ys[JITOPS__REPEAT_MAX_RANK - 1];
} jitops__repeat_fwd_args;

/* The argument of jitops::repeat::bwd and bwd_finish, over the D collapsed dimensions of dx
 * (D, a template parameter; only the first D entries of the arrays are in use). */
typedef struct jitops__repeat_bwd_args {
  const char *dy;
  char *dx;
  char *partial;     /* split copies: splits × n × VEC partial sums in acc_t<T> */
  int64_t n;         /* dx elements / VEC */
  int64_t combos;    /* number of copies: the product of rep */
  int64_t split_len; /* copies per blockIdx.y */
  int64_t splits;    /* ranges of copies (bwd_finish adds their partial sums) */
  int64_t ishape[JITOPS__REPEAT_MAX_RANK]; /* dx's (collapsed) shape */
  int64_t rep[JITOPS__REPEAT_MAX_RANK];    /* repeat counts */
  int64_t dxs[JITOPS__REPEAT_MAX_RANK];    /* dx strides */
  int64_t dys[JITOPS__REPEAT_MAX_RANK];    /* dy strides */
  int64_t rstep[JITOPS__REPEAT_MAX_RANK];  /* dy offset between copies along d: ishape × dys */
} jitops__repeat_bwd_args;

JITOPS__ABI_OFFSET(jitops__repeat_fwd_args, in_step, 72);
JITOPS__ABI_OFFSET(jitops__repeat_fwd_args, ys, 248);
JITOPS__ABI_SIZE(jitops__repeat_fwd_args, 304);
JITOPS__ABI_OFFSET(jitops__repeat_bwd_args, splits, 48);
JITOPS__ABI_OFFSET(jitops__repeat_bwd_args, rstep, 312);
JITOPS__ABI_SIZE(jitops__repeat_bwd_args, 376);

#endif
