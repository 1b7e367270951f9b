/* Argument validation of the fused linear cross-entropy entry points (args.c), and what a
 * valid call hands the plan and the launches: sizes, dtypes, pointers and strides. All of it
 * on the host, before any device work. */
#ifndef JITOPS_OPS_FLCE_ARGS_H
#define JITOPS_OPS_FLCE_ARGS_H

#include <stdbool.h>

#include "jitops/flce.h"
#include "runtime/op_support.h"

typedef struct jitops__flce_call {
  jitops_flce_options opt;
  int64_t bt, h, v;
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
