/* Planning a fused linear cross-entropy call: which algorithm, how many rows per chunk, how
 * wide the vocabulary groups are, which steps run, and where each scratch buffer lives. Pure
 * host arithmetic on the problem's sizes (no device), so workspace queries and the CPU tests
 * use it too. */
#ifndef JITOPS_OPS_FLCE_PLAN_H
#define JITOPS_OPS_FLCE_PLAN_H

#include <stdbool.h>

#include "runtime/op_support.h"

/* The source every flce kernel comes from. */
#define JITOPS__FLCE_SOURCE "jitops/flce.cuh"

/* cuBLASLt's workspace: what NVIDIA recommends for Hopper. */
#define JITOPS__FLCE_BLAS_WORKSPACE ((size_t)32 << 20)

/* Scratch buffers are laid out from a 256-byte boundary; a caller's workspace may start
 * anywhere, so a call asks for this much more than the layout and aligns its start. */
#define JITOPS__FLCE_SCRATCH_ALIGN ((size_t)256)

typedef struct jitops__flce_problem {
  int64_t bt, h, v;
  size_t elem;     /* bytes of T */
  size_t acc_elem; /* bytes of the accumulation type: 4, or 8 for f64 */
  bool grad_input; /* which gradients the call computes */
  bool grad_weight;
  bool grad_bias;
  bool grad_weight_16bit; /* grad_weight's dtype is f16/bf16: several chunks need f32 scratch */
  int64_t chunk_rows;     /* the option: 0 chooses */
  int64_t budget;         /* scratch bytes allowed, > 0 */
} jitops__flce_problem;

typedef enum jitops__flce_algorithm {
  JITOPS__FLCE_ROWS = 0, /* 3 GEMMs per row chunk */
  JITOPS__FLCE_VOCAB =
      1 /* row chunks for loss/grad_input, then vocabulary groups for grad_weight */
} jitops__flce_algorithm;

/* What a planned call does, besides the first pass's logits GEMM and row kernel per chunk. */
typedef struct jitops__flce_steps {
  bool pass2;        /* vocab algorithm: grad_weight by vocabulary groups */
  bool pass1_grads;  /* the first pass writes gradients (else only lse and loss) */
  bool colsum_pass1; /* grad_bias from the first pass's gradients */
  bool colsum_pass2; /* ... or from the second pass's */
} jitops__flce_steps;

typedef struct jitops__flce_plan {
  jitops__flce_algorithm algorithm;
  int64_t chunk_rows;   /* rows per chunk of the first pass (>= 1) */
  int64_t ld_logits;    /* row stride of the chunk buffer: V rounded up to a whole
                         * JITOPS__FLCE_LOGITS_LD_MULTIPLE elements */
  int64_t group_cols;   /* vocab: vocabulary columns per group of the second pass */
  int64_t ld_group;     /* vocab: row stride of the group buffer */
  bool grad_weight_acc; /* rows: grad_weight accumulates in f32 scratch, converted at the end */
  jitops__flce_steps steps;
  /* Byte offsets into the (256-byte aligned) scratch. The region holds the chunk buffer, then
   * the f32 grad_weight accumulator (rows), or the group buffer (vocab, second pass). */
  size_t off_count, off_loss, off_lse, off_bias, off_blas, off_region, off_gw_acc;
  size_t blas_bytes;
  size_t total_bytes;
  size_t workspace_bytes; /* what the call asks for: total_bytes + JITOPS__FLCE_SCRATCH_ALIGN */
} jitops__flce_plan;

/* The scratch budget of a call that sets none (include/jitops/flce.h states the rule), from
 * the device's free and total bytes at the call; both 0 when they are unknown (a compile-only
 * runtime), which gives the least automatic budget. */
int64_t jitops__flce_auto_budget(size_t free_bytes, size_t total_bytes);

/* Fills `plan`. Fails with JITOPS_ERR_INVALID_ARGUMENT, naming `fn` and the option, when
 * scratch_budget_bytes (or chunk_rows) cannot fit the problem. */
jitops_status jitops__flce_plan_make(const char *fn, const jitops__flce_problem *problem,
                                     jitops__flce_plan *plan);

#endif
