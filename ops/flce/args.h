/* Argument validation of the fused linear cross-entropy entry points (args.c), and what a
 * valid call hands the plan and the launches: sizes, dtypes, pointers and strides. All of it
 * on the host, before any device work. */
#ifndef JITOPS_OPS_FLCE_ARGS_H
#define JITOPS_OPS_FLCE_ARGS_H

#include <stdbool.h>

#include "jitops/flce.h"
#include "ops/flce/plan.h"
#include "runtime/op_support.h"

/* Which entry point a call is for. */
typedef enum jitops__flce_kind {
  JITOPS__FLCE_FORWARD = 0,       /* jitops_flce_forward */
  JITOPS__FLCE_SHARD_STATS = 1,   /* jitops_flce_shard_stats: loss is linear, lse lse_local */
  JITOPS__FLCE_SHARD_BACKWARD = 2 /* jitops_flce_shard_backward: saved_lse is lse */
} jitops__flce_kind;

typedef struct jitops__flce_call {
  jitops__flce_kind kind;
  jitops_flce_options opt;
  int64_t bt, h, v;  /* v: the weight's rows (a shard's V_r) */
  int64_t vocab0;    /* the vocabulary index of weight row 0: 0, or options->vocab_start */
  int64_t vocab;     /* the vocabulary's size: v, or options->vocab_size */
  jitops__dtype t;   /* input and weight */
  jitops__dtype acc; /* f32, or f64 for f64 */
  const void *x;
  int64_t ldx;
  const void *w;
  int64_t ldw;
  const void *bias; /* NULL: none */
  int64_t bias_stride;
  const int64_t *target;
  int64_t target_stride;
  const void *dy; /* NULL: dy = 1 */
  jitops__dtype dy_dtype;
  int64_t dy_stride; /* 0 for a scalar */
  void *loss;
  jitops__dtype loss_dtype;
  int64_t loss_stride;
  void *lse; /* NULL: not wanted */
  int64_t lse_stride;
  const void *saved_lse; /* shard backward: the combined lse, A [BT] */
  int64_t saved_lse_stride;
  void *gi; /* NULL: not wanted */
  int64_t ldgi;
  void *gw;
  jitops__dtype gw_dtype;
  int64_t ldgw;
  void *gb;
  jitops__dtype gb_dtype;
  int64_t gb_stride;
} jitops__flce_call;

/* Checks everything (runtime, tensors, options; NULL options means the defaults) and fills
 * `call`. `fn` names the entry point in messages. */
jitops_status jitops__flce_check_forward(const char *fn, jitops_runtime_t *runtime,
                                         const jitops_flce_tensors *tensors,
                                         const jitops_flce_options *options,
                                         jitops__flce_call *call);

/* The same for jitops_flce_shard_stats (the call's loss is linear, its lse lse_local) and
 * jitops_flce_shard_backward (its saved_lse is lse). */
jitops_status jitops__flce_check_shard_stats(const char *fn, jitops_runtime_t *runtime,
                                             const jitops_flce_tensors *tensors,
                                             const jitops_flce_options *options,
                                             const DLTensor *lse_local, const DLTensor *linear,
                                             jitops__flce_call *call);
jitops_status jitops__flce_check_shard_backward(const char *fn, jitops_runtime_t *runtime,
                                                const jitops_flce_tensors *tensors,
                                                const jitops_flce_options *options,
                                                const DLTensor *lse, jitops__flce_call *call);

/* The planner's view of a valid call. A call that sets no budget gets the least automatic
 * one here; the entry points (run.c) replace it with the device's. */
void jitops__flce_problem_of(const jitops__flce_call *call, jitops__flce_problem *problem);

/* A validated gradient tensor of jitops_flce_backward: rows x cols with row stride ld (a
 * vector is rows = n, cols = 1, ld = its stride). data NULL when the tensor was NULL. */
typedef struct jitops__flce_grad {
  void *data;
  jitops__dtype dtype;
  int64_t rows, cols, ld;
} jitops__flce_grad;

/* Checks jitops_flce_backward's arguments: the scalar grad_output's dtype into *dy_dtype, the
 * gradients (grad_input, grad_weight, grad_bias) into grads[0..2]. */
jitops_status jitops__flce_check_backward(const char *fn, jitops_runtime_t *runtime,
                                          const DLTensor *grad_output, DLTensor *grad_input,
                                          DLTensor *grad_weight, DLTensor *grad_bias,
                                          jitops__dtype *dy_dtype, jitops__flce_grad grads[3]);

#endif
