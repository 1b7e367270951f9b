/* ctc: the CTC loss of a batch of 4 sequences and its gradient (jitops_ctc_loss,
 * jitops_ctc_loss_backward), checked against a reference computed here in double: the loss by
 * the standard alpha recursion, the gradient by central differences of that loss (the
 * library's default gradient is the exact derivative with respect to log_probs).
 *
 * Exit status: 0 when the results are correct, or, without a GPU, when every kernel compiled;
 * 1 otherwise. */
#include <math.h>

#include "example_util.h"

enum { T = 50, N = 4, C = 20, S = 10, BLANK = 0 };

static double log_add(double a, double b) {
  if (a == -INFINITY || b == -INFINITY)
    return a == -INFINITY ? b : a;
  return fmax(a, b) + log1p(exp(-fabs(a - b)));
}

/* -log of the sum over the alignments of sample n (y: its len labels, steps: its input
 * length, at least 1) of exp(sum_t lp[t, n, path_t]), by the alpha recursion over the
 * blank-extended target (blank, y0, blank, y1, ..., blank). lp is [T, N, C]. */
static double ctc_nll(const double *lp, int n, const int64_t *y, int64_t len, int64_t steps) {
  double alpha[2 * S + 1], next[2 * S + 1];
  int states = 2 * (int)len + 1;
  for (int s = 0; s < states; ++s)
    alpha[s] = s < 2 ? lp[n * C + (s ? y[0] : BLANK)] : -INFINITY;
  for (int64_t t = 1; t < steps; ++t) {
    for (int s = 0; s < states; ++s) {
      int64_t label = s % 2 ? y[s / 2] : BLANK;
      double a = s >= 1 ? log_add(alpha[s], alpha[s - 1]) : alpha[s];
      /* A label may skip the blank before it, unless it repeats the previous label. */
      if (s >= 2 && label != BLANK && label != y[s / 2 - 1])
        a = log_add(a, alpha[s - 2]);
      next[s] = a + lp[(t * N + n) * C + label];
    }
    memcpy(alpha, next, states * sizeof *next);
  }
  return -(states > 1 ? log_add(alpha[states - 1], alpha[states - 2]) : alpha[0]);
}

int main(void) {
  example ex;
  if (example_start(&ex, "ctc"))
    return 1;

  /* log_probs: log_softmax over C classes of varied logits. Targets are padded [N, S], labels
   * in [1, C) since 0 is the blank; the last sample's target is empty. */
  static float lp[T * N * C], grad[T * N * C];
  static double lpd[T * N * C], want_grad[T * N * C];
  for (int row = 0; row < T * N; ++row) {
    double z[C], sum = 0;
    for (int c = 0; c < C; ++c) {
      z[c] = 2 * sin(0.37 * row + 1.3 * c) + cos(0.11 * row * c);
      sum += exp(z[c]);
    }
    for (int c = 0; c < C; ++c)
      lpd[row * C + c] = lp[row * C + c] = (float)(z[c] - log(sum));
  }
  int64_t targets[N * S], input_lengths[N] = {50, 44, 37, 25}, target_lengths[N] = {10, 8, 5, 0};
  for (int i = 0; i < N * S; ++i)
    targets[i] = 1 + (i * 7) % (C - 1);
  targets[4] = targets[3]; /* a repeated label: its alignments need a blank in between */
  float grad_loss[N] = {1.0f, 0.5f, -2.0f, 0.25f}, loss[N];

  /* The tensors, in the order the calls take them. Device memory for log_probs and targets,
   * copied from the arrays above. */
  const DLDataType f32 = {kDLFloat, 32, 1}, i64 = {kDLInt, 64, 1};
  int64_t lp_shape[3] = {T, N, C}, targets_shape[2] = {N, S}, batch_shape[1] = {N};
  DLTensor log_probs_t = example_tensor(&ex, f32, 3, lp_shape, lp);
  DLTensor targets_t = example_tensor(&ex, i64, 2, targets_shape, targets);
  /* The lengths stay in host memory (kDLCPU): the library checks each of them before any
   * launch and copies them to the device itself. (Lengths in device memory skip that check
   * and copy, so that the call can be captured in a CUDA graph.) */
  DLTensor input_lengths_t = {
      .data = input_lengths, .device = {kDLCPU, 0}, .ndim = 1, .dtype = i64, .shape = batch_shape};
  DLTensor target_lengths_t = input_lengths_t;
  target_lengths_t.data = target_lengths;
  /* The upstream gradient, then the outputs, which are only allocated (all written). */
  DLTensor grad_loss_t = example_tensor(&ex, f32, 1, batch_shape, grad_loss);
  DLTensor loss_t = example_tensor(&ex, f32, 1, batch_shape, NULL);
  DLTensor grad_t = example_tensor(&ex, f32, 3, lp_shape, NULL);
  if (ex.failed)
    return example_end(&ex, 1);

  /* Reduction none: one loss per sample, and one upstream gradient per sample. The default is
   * PyTorch's mean. */
  jitops_ctc_options options;
  jitops_ctc_options_init(&options);
  options.reduction = JITOPS_CTC_REDUCTION_NONE;
  if (!example_called(&ex, "jitops_ctc_loss",
                      jitops_ctc_loss(ex.rt, &log_probs_t, &targets_t, &input_lengths_t,
                                      &target_lengths_t, &options, &loss_t, NULL, NULL)) ||
      !example_called(&ex, "jitops_ctc_loss_backward",
                      jitops_ctc_loss_backward(ex.rt, &log_probs_t, &targets_t, &input_lengths_t,
                                               &target_lengths_t, &grad_loss_t, &options, &grad_t,
                                               NULL, NULL, NULL)))
    return example_end(&ex, 1);
  if (!ex.has_gpu)
    return example_end(&ex, 0);
  if (!example_download(&ex, loss, &loss_t) || !example_download(&ex, grad, &grad_t))
    return example_end(&ex, 1);

  double want_loss[N];
  for (int n = 0; n < N; ++n)
    want_loss[n] = ctc_nll(lpd, n, targets + n * S, target_lengths[n], input_lengths[n]);
  /* d loss_n / d lp[t, n, c] by central differences, times the upstream gradient. */
  const double h = 1e-5;
  for (int i = 0; i < T * N * C; ++i) {
    int n = i / C % N;
    double keep = lpd[i], up, down;
    lpd[i] = keep + h;
    up = ctc_nll(lpd, n, targets + n * S, target_lengths[n], input_lengths[n]);
    lpd[i] = keep - h;
    down = ctc_nll(lpd, n, targets + n * S, target_lengths[n], input_lengths[n]);
    lpd[i] = keep;
    want_grad[i] = grad_loss[n] * (up - down) / (2 * h);
  }
  int ok = example_check("loss [N]", loss, want_loss, N, 1e-4, 1e-3);
  ok &= example_check("grad_log_probs [T,N,C]", grad, want_grad, T * N * C, 1e-4, 1e-3);
  printf("ctc: %s\n", ok ? "correct" : "wrong");
  return example_end(&ex, ok ? 0 : 1);
}
