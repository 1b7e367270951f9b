/*
 * libjitops — CTC loss (connectionist temporal classification).
 *
 * PyTorch's ctc_loss semantics, with the exact gradient by default:
 *
 *   log_probs       [T, N, C], any strides (elements, negative allowed), f16, bf16, f32 or f64,
 *                   on the runtime's device. Half types accumulate in f32, f64 in f64. Unlike
 *                   PyTorch's CUDA kernel, f16 and bf16 are accepted. The values need not be
 *                   normalized; the loss is -log of the sum over alignments of
 *                   exp(sum_t log_probs[t, n, path_t]).
 *   targets         int32 or int64, either padded [N, S] (sample n uses targets[n, :len_n]) or
 *                   concatenated 1-D (sample n's targets follow sample n-1's), any strides.
 *                   Labels must lie in [0, C) and differ from blank.
 *   input_lengths   [N], int32 or int64, 0 <= input_lengths[n] <= T.
 *   target_lengths  [N], the same dtype as input_lengths, >= 0; padded: <= S; concatenated:
 *                   their sum <= targets' length.
 *
 * Where the lengths live decides how they are checked:
 *   - Host memory (kDLCPU or kDLCUDAHost), both of them: every length, and every used target
 *     when the targets are in host memory too, is checked before any launch; a bad one returns
 *     JITOPS_ERR_OUT_OF_RANGE naming the argument and the sample. The lengths (and host
 *     targets) are then copied to device scratch with an asynchronous copy on `stream`; from
 *     pageable memory that copy is staged (the call returns once the host data is consumed),
 *     and it cannot be captured in a CUDA graph.
 *   - Device memory, both of them (targets must then be in device memory too): no host
 *     synchronization, graph-capturable. The kernels check every length and used target; an
 *     invalid sample never causes an out-of-bounds access and yields NaN: its loss is NaN
 *     (so a sum or mean is NaN), its alpha/beta rows and its gradient rows [0, T) are NaN.
 *     For concatenated targets a sample's start is the sum of the earlier target lengths, so
 *     a bad length also invalidates every later sample.
 *   One in host and one in device memory is rejected (JITOPS_ERR_INVALID_DEVICE).
 *
 * Exact cases. An empty target gives -sum_t log_probs[t, n, blank]. A target that no
 * alignment fits (longer than its input, counting one blank between repeated labels) gives
 * +inf, or 0 with zero_infinity. input_length 0 gives 0 for an empty target and +inf
 * otherwise. All arithmetic uses true -inf (no sentinels), and a NaN in log_probs propagates.
 *
 * Reductions: none ([N]), sum, and PyTorch's mean: mean over the batch of
 * loss_n / max(target_length_n, 1) (NaN for N = 0). zero_infinity replaces +inf losses (and
 * their gradients) by 0 before the reduction.
 *
 * Gradient (jitops_ctc_loss_backward). With gamma_t(s) the posterior probability of state s
 * of the blank-extended target at time t, and g_n the upstream gradient of sample n (g for
 * sum, g / (N * max(target_length_n, 1)) for mean):
 *   EXACT (default):  d loss / d log_probs[t, n, c] = -g_n * sum_{s labelled c} gamma_t(s),
 *                     the true derivative, which passes a finite-difference check;
 *   PYTORCH:          g_n * (exp(log_probs[t, n, c]) - sum_{s labelled c} gamma_t(s)), what
 *                     torch.nn.functional.ctc_loss's backward returns. It assumes log_probs
 *                     came from log_softmax; after log_softmax's backward both agree.
 * Rows t >= input_length are 0. An infinite loss gives 0 rows with zero_infinity, otherwise
 * NaN rows for t < input_length (as PyTorch).
 *
 * Determinism: every output is bit-identical from run to run on the same GPU; there are no
 * atomics (the reductions over states, labels and the batch run in a fixed order).
 *
 * Capacity. A kernel is specialized for the float and index dtypes, the target layout, and a
 * capacity bucket: the next power of two >= 2 * S_max + 1 (at least 32), where S_max is the
 * longest target (host lengths), S (padded targets with device lengths) or
 * options.max_target_length (concatenated targets with device lengths). The recursion keeps
 * its states in registers up to a capacity of 8192, in shared memory while they fit the
 * device's opt-in limit, and in global memory beyond: there is no upper limit.
 *
 * Workspace: see jitops_ctc_workspace_size. With a NULL or too small workspace the scratch is
 * allocated from the runtime's memory pool on `stream` and freed in stream order. The backward pass
 * needs 2 * N * T * (2 * S_max + 1) accumulation-type values for alpha and beta, like
 * PyTorch's log_alpha and log_beta.
 *
 * Every entry point runs asynchronously on `stream` and never synchronizes. All of them
 * validate every argument first and return, besides the statuses named above,
 * JITOPS_ERR_INVALID_ARGUMENT (a NULL pointer, bad options), JITOPS_ERR_INVALID_SHAPE,
 * JITOPS_ERR_INVALID_DTYPE, JITOPS_ERR_INVALID_LAYOUT (misaligned data, or an output whose
 * strides make elements overlap), JITOPS_ERR_INVALID_DEVICE, JITOPS_ERR_COMPILE,
 * JITOPS_ERR_NO_DEVICE (compile-only runtime, after validation and compilation),
 * JITOPS_ERR_OUT_OF_MEMORY, JITOPS_ERR_UNSUPPORTED and JITOPS_ERR_DRIVER.
 */
#ifndef JITOPS_CTC_H
#define JITOPS_CTC_H

#include "jitops/jitops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum jitops_ctc_reduction {
  JITOPS_CTC_REDUCTION_NONE = 0, /* loss [N] */
  JITOPS_CTC_REDUCTION_SUM = 1,  /* scalar */
  JITOPS_CTC_REDUCTION_MEAN = 2  /* scalar: mean_n loss_n / max(target_length_n, 1) */
} jitops_ctc_reduction;

typedef enum jitops_ctc_gradient {
  JITOPS_CTC_GRADIENT_EXACT = 0,  /* d loss / d log_probs */
  JITOPS_CTC_GRADIENT_PYTORCH = 1 /* PyTorch's exp(log_probs) * g - ... convention */
} jitops_ctc_gradient;

/* Where the recursion keeps its states. AUTO picks registers, then shared, then global memory
 * by capacity; the others force a tier (for testing, or to leave shared memory to other
 * kernels) and fail with JITOPS_ERR_UNSUPPORTED when the capacity does not fit it. */
typedef enum jitops_ctc_storage {
  JITOPS_CTC_STORAGE_AUTO = 0,
  JITOPS_CTC_STORAGE_REGISTERS = 1, /* capacity <= 8192 */
  JITOPS_CTC_STORAGE_SHARED = 2,    /* while the states fit the device's shared memory */
  JITOPS_CTC_STORAGE_GLOBAL = 3     /* any capacity */
} jitops_ctc_storage;

typedef struct jitops_ctc_options {
  int64_t blank;                  /* in [0, C); default 0 */
  jitops_ctc_reduction reduction; /* default MEAN, as PyTorch */
  int zero_infinity;              /* non-zero: infinite losses and their gradients become 0 */
  jitops_ctc_gradient gradient;   /* default EXACT */
  /* Concatenated targets with device lengths only: the longest target length, which sets the
   * capacity bucket without reading the lengths; a longer target makes its sample NaN. 0 means
   * the targets' length (always safe, possibly slow). Ignored otherwise. */
  int64_t max_target_length;
  jitops_ctc_storage storage; /* default AUTO */
} jitops_ctc_options;

/* Fills `options` with the defaults above. */
JITOPS_API void jitops_ctc_options_init(jitops_ctc_options *options);

typedef enum jitops_ctc_pass {
  JITOPS_CTC_PASS_LOSS = 0,      /* jitops_ctc_loss */
  JITOPS_CTC_PASS_BACKWARD = 1,  /* jitops_ctc_loss_backward (with or without its loss) */
  JITOPS_CTC_PASS_ALPHA_BETA = 2 /* jitops_ctc_alpha_beta */
} jitops_ctc_pass;

/* The workspace bytes `pass` needs for these inputs (validated as the pass would). With host
 * lengths it reads them (the bound depends on the longest target). `options` NULL: defaults. */
JITOPS_API jitops_status jitops_ctc_workspace_size(
    jitops_runtime_t *runtime, const DLTensor *log_probs, const DLTensor *targets,
    const DLTensor *input_lengths, const DLTensor *target_lengths,
    const jitops_ctc_options *options, jitops_ctc_pass pass, size_t *bytes);

/* The loss. `loss`: [N] for reduction none, else a scalar (ndim 0, or shape [1]); its dtype is
 * log_probs' dtype, or f32 when log_probs is f16 or bf16; device memory. `options` NULL:
 * defaults. One launch for reduction none, two otherwise. */
JITOPS_API jitops_status jitops_ctc_loss(jitops_runtime_t *runtime, const DLTensor *log_probs,
                                         const DLTensor *targets, const DLTensor *input_lengths,
                                         const DLTensor *target_lengths,
                                         const jitops_ctc_options *options, DLTensor *loss,
                                         const jitops_workspace *workspace, void *stream);

/* The gradient w.r.t. log_probs, into `grad_log_probs` ([T, N, C], log_probs' dtype, any
 * non-overlapping strides, not overlapping log_probs). `grad_loss` is the upstream gradient:
 * [N] for reduction none, else a scalar, with the dtype rules of `loss`. It runs the fused
 * alpha+beta pass (alpha and beta of a sample in parallel, by two blocks) and then the
 * gradient, one warp per (t, n) row. `loss` is optional (NULL to skip): when given, it
 * receives what jitops_ctc_loss would return, from the same pass, so one call gives both. */
JITOPS_API jitops_status jitops_ctc_loss_backward(
    jitops_runtime_t *runtime, const DLTensor *log_probs, const DLTensor *targets,
    const DLTensor *input_lengths, const DLTensor *target_lengths, const DLTensor *grad_loss,
    const jitops_ctc_options *options, DLTensor *grad_log_probs, DLTensor *loss,
    const jitops_workspace *workspace, void *stream);

/* The fused alpha+beta pass for callers who compose their own gradient. log_alpha and log_beta:
 * [N, T, L] with L >= 2 * S_max + 1 (S_max as for the capacity), any non-overlapping strides;
 * nll: [N]; all three in the accumulation dtype (f32 for f16/bf16/f32, f64 for f64), device
 * memory. log_alpha[n, t, s] = log of the probability of the prefixes ending in state s at
 * time t, emission at t included; log_beta[n, t, s] likewise for the suffixes starting there
 * (emission at t included, as PyTorch's), so that
 *   log_alpha + log_beta - log_probs[t, n, l'_s] + nll
 * is the log posterior of state s at t. Entries with t >= input_length or
 * s >= 2 * target_length + 1 are -inf; an invalid sample (device lengths) is NaN throughout.
 * nll is the unreduced loss, without zero_infinity. Only options.blank, max_target_length
 * and storage matter. */
JITOPS_API jitops_status
jitops_ctc_alpha_beta(jitops_runtime_t *runtime, const DLTensor *log_probs, const DLTensor *targets,
                      const DLTensor *input_lengths, const DLTensor *target_lengths,
                      const jitops_ctc_options *options, DLTensor *log_alpha, DLTensor *log_beta,
                      DLTensor *nll, const jitops_workspace *workspace, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* JITOPS_CTC_H */
