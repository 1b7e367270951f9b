/*
 * Fused linear cross-entropy (FLCE): the loss of a language model's output layer,
 *
 *     logits = input @ weight^T (+ bias),     loss = cross_entropy(logits, target),
 *
 * and its gradients, without ever storing the [BT, V] logits. The rows are processed chunk
 * by chunk: a cuBLASLt GEMM writes one chunk of logits into scratch, a JIT-compiled kernel
 * turns it into the loss and, in place, into the gradient with respect to the logits, and
 * two more GEMMs take that to grad_input and grad_weight. Semantics follow Liger-Kernel's
 * LigerFusedLinearCrossEntropyLoss (which follows torch.nn.functional.cross_entropy):
 *
 *   per non-ignored row t, with z = logits[t] (after the softcap), y = target[t],
 *   lse = log(sum_j exp(z_j)), eps = label_smoothing, zl = z_loss_scale:
 *     loss_t = lse - (1 - eps) z_y - (eps / V) sum_j z_j + zl lse^2
 *   softcap s > 0 replaces the logits by s tanh(logits / s) first (Gemma 2).
 *   reduction none: loss[t] = loss_t (0 for ignored rows);
 *             sum:  the sum over rows;  mean: that sum / (number of non-ignored rows).
 *   Ignored rows (target == ignore_index) have zero loss and zero gradient and are not
 *   counted. When every row is ignored the mean is 0/0 = NaN, as in PyTorch; the sum is 0;
 *   every gradient is 0 either way. A target outside [0, V) that is not ignore_index makes
 *   that row's loss NaN (PyTorch raises a device assert instead); the row still counts in the
 *   mean's denominator, and its gradient lacks the target term.
 *
 * Numerics: the logits of a 16-bit dtype are rounded to that dtype by the GEMM (as in the
 * unfused PyTorch computation); everything after that is f32 (f64 for f64): log-sum-exp,
 * loss, and the gradient, whose -1 at the target is folded in before the single rounding
 * back to the dtype. grad_weight of a 16-bit dtype is accumulated across chunks in f32
 * (or produced by one GEMM over all rows) and rounded once at the end; grad_bias likewise.
 *
 * Determinism: every reduction has a fixed order, and the cuBLASLt algorithm for a shape is
 * chosen once per machine (by timing, unless JITOPS_TUNE=0) and kept in the kernel cache, so
 * reruns on the same GPU, in this process or the next, are bit-identical. The plan (and so
 * the rounding of grad_weight) follows the scratch budget: the automatic one depends on free
 * memory only when less than an eighth of the device is free; pass a budget to make the plan
 * independent of memory pressure too.
 *
 * No host synchronization: the count of non-ignored rows stays on the device, and the
 * mean's division happens in a kernel that reads it. The ops can be captured in a graph.
 */
#ifndef JITOPS_FLCE_H
#define JITOPS_FLCE_H

#include "jitops/jitops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum jitops_flce_reduction {
  JITOPS_FLCE_REDUCTION_NONE = 0,
  JITOPS_FLCE_REDUCTION_MEAN = 1,
  JITOPS_FLCE_REDUCTION_SUM = 2
} jitops_flce_reduction;

typedef struct jitops_flce_options {
  jitops_flce_reduction reduction; /* default JITOPS_FLCE_REDUCTION_MEAN */
  int64_t ignore_index;            /* default -100 */
  double label_smoothing;          /* in [0, 1]; default 0 */
  double softcap;                  /* 0 (default) turns it off; else finite and > 0 */
  double z_loss_scale;             /* finite and >= 0; default 0 */
  /* Rows per chunk of the row pass. 0 (default): chosen from the problem and the budget. */
  int64_t chunk_rows;
  /* Upper bound of the scratch memory (workspace) the call uses, cuBLASLt's included; a
   * budget given is honoured exactly. 0 (default): at each call, a sixteenth of the device's
   * memory, but no more than half of what is free, within [JITOPS_FLCE_DEFAULT_SCRATCH_BUDGET,
   * JITOPS_FLCE_MAX_AUTO_SCRATCH_BUDGET] (the least on a compile-only runtime). See "Memory"
   * below. */
  int64_t scratch_budget_bytes;
  /* Vocabulary parallelism (the jitops_flce_shard_* entry points only; both 0, the default,
   * everywhere else): the weight and bias hold rows [vocab_start, vocab_start + V_r) of a
   * vocabulary of vocab_size rows. vocab_start >= 0, vocab_size >= vocab_start + V_r. */
  int64_t vocab_start;
  int64_t vocab_size;
} jitops_flce_options;

/* The least and the most scratch budget a call that sets none gets. */
#define JITOPS_FLCE_DEFAULT_SCRATCH_BUDGET  ((int64_t)1 << 30)
#define JITOPS_FLCE_MAX_AUTO_SCRATCH_BUDGET ((int64_t)8 << 30)

/* Fills `options` with the defaults above. */
JITOPS_API void jitops_flce_options_init(jitops_flce_options *options);

/* The tensors of one call. Device tensors on the runtime's device. T is the dtype of input
 * and weight: f16, bf16, f32 or f64. A is the accumulation type: f32, or f64 for f64.
 *
 *   input        [BT, H]  T, rows contiguous (strides[1] == 1), any row stride >= H
 *   weight       [V, H]   T, as nn.Linear stores it; rows contiguous, row stride >= H
 *   bias         [V]      T, any stride; NULL for none
 *   target       [BT]     int64, any stride
 *   grad_output  NULL: dy = 1. Otherwise dy, applied to the gradients this call computes:
 *                a scalar (0-d or [1]) for mean and sum, [BT] (any stride) for none;
 *                f16, bf16, f32 or f64.
 *   loss         [BT] for none (stride != 0), else 0-d or [1]; T or f32 (f64 for f64)
 *   lse          NULL, or [BT] A (stride != 0): each row's log-sum-exp (0 for ignored
 *                rows); z-loss per row is z_loss_scale * lse^2
 *   grad_input   NULL, or [BT, H] T, rows contiguous, row stride >= H
 *   grad_weight  NULL, or [V, H], T or (for a 16-bit T) f32, rows contiguous, row stride
 *                >= H. Overwritten, not accumulated into.
 *   grad_bias    NULL, or [V] (stride != 0), T or (for a 16-bit T) f32; needs bias.
 * Output tensors must not overlap each other or the inputs. */
typedef struct jitops_flce_tensors {
  const DLTensor *input;
  const DLTensor *weight;
  const DLTensor *bias;
  const DLTensor *target;
  const DLTensor *grad_output;
  DLTensor *loss;
  DLTensor *lse;
  DLTensor *grad_input;
  DLTensor *grad_weight;
  DLTensor *grad_bias;
} jitops_flce_tensors;

/* The forward, with the gradients: writes loss (and lse), and whichever of grad_input,
 * grad_weight and grad_bias are given, for dy = grad_output (or 1). Passing the per-token
 * dy here is how reduction none is differentiated: dy_t scales row t before the sum over
 * rows that grad_weight is, which no later rescaling can do. With grad_output NULL and
 * reduction mean or sum, jitops_flce_backward rescales the saved gradients by a later dy
 * (Liger's scheme).
 *
 * Algorithm ("Memory" explains the choice; all three are exact, with the numerics above):
 *   rows:   per chunk of rows, logits GEMM, row kernel, grad_input GEMM, grad_weight GEMM
 *           (accumulated in f32 for a 16-bit grad_weight when there are several chunks);
 *   vocab:  a first pass over row chunks computes the loss, lse and grad_input; a second
 *           pass over vocabulary groups recomputes those logits for all rows and produces
 *           each group of grad_weight with one GEMM, so no [V, H] f32 accumulator exists.
 *           It costs one more logits GEMM (4 GEMMs instead of 3) and much less memory.
 *
 * Memory: scratch = a few bytes per row + cuBLASLt's 32 MiB + the chunk's logits
 * (chunk_rows * V * sizeof(T)) + in the rows algorithm with several chunks and a 16-bit
 * grad_weight, a V * H f32 accumulator. The rows algorithm is used when it fits
 * scratch_budget_bytes, the vocab algorithm otherwise; jitops_flce_workspace_size says how
 * much a call will use. Scratch comes from `workspace` when it is at least that large, else
 * allocated stream-ordered on `stream` from the runtime's memory pool. A budget that holds
 * the logits of all BT rows at once (BT * V * sizeof(T) beyond the rest) runs them as one
 * chunk, with no accumulator: the fewest GEMMs, for the most memory. bench/NOTES-flce.md
 * has the measured trade-off between time and memory.
 *
 * Errors: JITOPS_ERR_INVALID_ARGUMENT (NULL runtime, tensors, required tensor, a bad
 * option, grad_bias without bias, a budget too small for the problem),
 * JITOPS_ERR_INVALID_SHAPE (ranks and sizes, H or V < 1, a compact tensor of more than 2^63
 * bytes), JITOPS_ERR_INVALID_DTYPE, JITOPS_ERR_INVALID_LAYOUT (strides, byte offsets and
 * alignment: elements more than 2^63 bytes from the first, a byte_offset above 2^63 - 1,
 * addresses past the address space), JITOPS_ERR_OUT_OF_RANGE (a tensor of more than 2^63
 * elements, scratch that 64 bits cannot count), JITOPS_ERR_INVALID_DEVICE,
 * JITOPS_ERR_NO_DEVICE (compile-only runtime, after compiling the call's kernels),
 * JITOPS_ERR_UNSUPPORTED (no cuBLASLt algorithm), JITOPS_ERR_COMPILE, JITOPS_ERR_DRIVER,
 * JITOPS_ERR_OUT_OF_MEMORY.
 * Deterministic. Asynchronous on `stream`; never synchronizes. */
JITOPS_API jitops_status jitops_flce_forward(jitops_runtime_t *runtime,
                                             const jitops_flce_tensors *tensors,
                                             const jitops_flce_options *options,
                                             const jitops_workspace *workspace, void *stream);

/* The scratch bytes jitops_flce_forward will use for these tensors and options (the same
 * validation; no device work). With the automatic budget it reads the device's free memory,
 * as the call does: a workspace of this size serves a call made right after. */
JITOPS_API jitops_status jitops_flce_workspace_size(jitops_runtime_t *runtime,
                                                    const jitops_flce_tensors *tensors,
                                                    const jitops_flce_options *options,
                                                    size_t *bytes);

/* The backward for reduction mean or sum after a forward with grad_output NULL: multiplies
 * the saved grad_input, grad_weight and grad_bias (each may be NULL) in place by the scalar
 * grad_output (0-d or [1]; f16, bf16, f32 or f64), read on the device. A [BT] grad_output
 * (reduction none) is rejected with JITOPS_ERR_INVALID_SHAPE: pass it to
 * jitops_flce_forward instead. Layouts as in jitops_flce_tensors. Needs no workspace. On a
 * compile-only runtime it compiles its kernels, then returns JITOPS_ERR_NO_DEVICE.
 * Deterministic; asynchronous on `stream`. */
JITOPS_API jitops_status jitops_flce_backward(jitops_runtime_t *runtime,
                                              const DLTensor *grad_output, DLTensor *grad_input,
                                              DLTensor *grad_weight, DLTensor *grad_bias,
                                              void *stream);

/* ---- vocabulary parallelism ------------------------------------------------------------------
 *
 * Megatron-style vocabulary-parallel FLCE: rank r holds weight [V_r, H] (and bias [V_r]), rows
 * [vocab_start, vocab_start + V_r) of a vocabulary of vocab_size rows (options->vocab_start,
 * options->vocab_size), and every rank holds all BT rows of input and the global targets. The
 * loss is computed in two calls with collectives between them, which the caller runs:
 *
 *   per non-ignored row t, with the global logits z (after the softcap), V = vocab_size:
 *     loss_t = lse - linear + z_loss_scale lse^2,
 *     lse    = log sum_j exp(z_j) over all V columns,
 *     linear = (1 - eps) z_y + (eps / V) sum_j z_j, a sum over shards.
 *
 * 1. jitops_flce_shard_stats on every rank: lse_local[t] (the log-sum-exp of the shard's logits)
 *    and linear[t] (the shard's part of linear: (1 - eps) z_y when y is one of its rows, plus
 *    (eps / V) times the sum of its logits). Ignored rows give 0 and 0; a target outside
 *    [0, vocab_size) that is not ignore_index gives linear NaN (the loss's NaN, as unsharded).
 * 2. The caller combines: m = max all-reduce of lse_local; lse = m + log(sum all-reduce of
 *    exp(lse_local - m)); linear = sum all-reduce of linear; loss_t from those, set to 0 where
 *    target == ignore_index (whose lse is then log(ranks), not 0), reduced as it chooses (the
 *    mean divides by the count of non-ignored rows).
 * 3. jitops_flce_shard_backward on every rank, given that lse: recomputes the shard's logits
 *    chunk by chunk and writes the shard's grad_weight and grad_bias and its partial
 *    grad_input, for dy = grad_output as in jitops_flce_forward (the mean's division by the
 *    count of non-ignored rows happens on the device); the caller sum-all-reduces grad_input.
 *
 * Tensors as in jitops_flce_tensors, with V = V_r (the shard's rows). lse_local, linear and lse
 * are [BT] of the accumulation type A (f32; f64 for f64), any stride (not 0 for the outputs).
 * Outputs must not overlap each other or the inputs: refused with JITOPS_ERR_INVALID_LAYOUT.
 * Errors as jitops_flce_forward's; an options->vocab_start below 0 or a vocab_size below
 * vocab_start + V_r is JITOPS_ERR_INVALID_ARGUMENT (and jitops_flce_forward refuses options
 * that set either). Deterministic (the caller's collectives aside); asynchronous on `stream`;
 * never synchronizes. Memory and the algorithm as jitops_flce_forward's with V = V_r. */

/* Phase 1. tensors: input, weight, bias (or NULL) and target; the others NULL. Reads the
 * options' ignore_index, label_smoothing, softcap, chunk_rows, scratch_budget_bytes,
 * vocab_start and vocab_size (the reduction and z_loss_scale must be valid, but do not
 * matter). Writes lse_local [BT] and linear [BT]. */
JITOPS_API jitops_status jitops_flce_shard_stats(jitops_runtime_t *runtime,
                                                 const jitops_flce_tensors *tensors,
                                                 const jitops_flce_options *options,
                                                 DLTensor *lse_local, DLTensor *linear,
                                                 const jitops_workspace *workspace, void *stream);

/* The scratch bytes jitops_flce_shard_stats will use (the same validation; no device work). */
JITOPS_API jitops_status jitops_flce_shard_stats_workspace_size(jitops_runtime_t *runtime,
                                                                const jitops_flce_tensors *tensors,
                                                                const jitops_flce_options *options,
                                                                const DLTensor *lse_local,
                                                                const DLTensor *linear,
                                                                size_t *bytes);

/* Phase 3. tensors: input, weight, bias (or NULL), target, grad_output (or NULL: dy = 1), and
 * whichever of grad_input (the shard's partial [BT, H]), grad_weight [V_r, H] and grad_bias
 * [V_r] are wanted (overwritten); loss and lse NULL. lse: [BT] A, the combined log-sum-exp of
 * step 2 (its ignored rows are not read). */
JITOPS_API jitops_status jitops_flce_shard_backward(jitops_runtime_t *runtime,
                                                    const jitops_flce_tensors *tensors,
                                                    const jitops_flce_options *options,
                                                    const DLTensor *lse,
                                                    const jitops_workspace *workspace,
                                                    void *stream);

/* The scratch bytes jitops_flce_shard_backward will use (the same validation; no device
 * work). */
JITOPS_API jitops_status jitops_flce_shard_backward_workspace_size(
    jitops_runtime_t *runtime, const jitops_flce_tensors *tensors,
    const jitops_flce_options *options, const DLTensor *lse, size_t *bytes);

#ifdef __cplusplus
}
#endif

#endif /* JITOPS_FLCE_H */
