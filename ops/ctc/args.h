/* Argument validation of the CTC entry points: the inputs every entry point shares (into a
 * jitops__ctc_call), and each entry point's outputs. All of it on the host, before any GPU
 * work; every failure names the argument. */
#ifndef JITOPS_OPS_CTC_ARGS_H
#define JITOPS_OPS_CTC_ARGS_H

#include "jitops/ctc.h"
#include "ops/ctc/call.h"
#include "runtime/op_support.h"

/* The inputs every entry point takes. */
typedef struct jitops__ctc_inputs {
  const DLTensor *log_probs, *targets, *input_lengths, *target_lengths;
  const jitops_ctc_options *options; /* NULL: the defaults */
} jitops__ctc_inputs;

/* Checks the runtime, log_probs, the options, the targets and both lengths, and reads lengths
 * and targets that live in host memory (host_data.c). Fills `call`, which must then be
 * released, whatever the status. */
jitops_status jitops__ctc_check_inputs(const char *fn, jitops_runtime_t *runtime,
                                       const jitops__ctc_inputs *in, jitops__ctc_call *call);

/* Frees what jitops__ctc_check_inputs allocated. */
void jitops__ctc_call_release(jitops__ctc_call *call);

/* `loss` or `grad_loss` (named `arg`): [N] for reduction none, else a scalar; log_probs'
 * dtype, or f32 for half types. `output`: written by the kernels, so it must not overlap
 * itself. */
jitops_status jitops__ctc_check_loss(const jitops__ctc_call *call, const jitops_runtime_t *runtime,
                                     const char *arg, const DLTensor *t, bool output);

/* grad_log_probs: log_probs' shape and dtype, apart from log_probs and from itself. */
jitops_status jitops__ctc_check_grad(const jitops__ctc_call *call, const jitops_runtime_t *runtime,
                                     const DLTensor *log_probs, const DLTensor *grad);

/* log_alpha and log_beta ([N, T, >= 2 S_max + 1] of the accumulation dtype, with equal
 * strides) and nll ([N]). */
jitops_status jitops__ctc_check_alpha_beta(const jitops__ctc_call *call,
                                           const jitops_runtime_t *runtime,
                                           const DLTensor *log_alpha, const DLTensor *log_beta,
                                           const DLTensor *nll);

#endif
