/* flce: fused linear cross-entropy, the loss of a language model's output layer, for 64 tokens
 * of width 128 over a vocabulary of 1000 (jitops_flce_forward, which also computes the
 * gradient with respect to the input, then jitops_flce_backward, which scales it by the
 * upstream gradient). Checked against the unfused computation in double: logits =
 * input @ weight^T, then the mean cross-entropy over the rows that are not ignored.
 *
 * Exit status: 0 when the results are correct, or, without a GPU, when the calls passed
 * validation and compiled their kernels; 1 otherwise. */
#include <math.h>

#include "example_util.h"

enum { BT = 64, H = 128, V = 1000, IGNORED_ROW = 5, IGNORE_INDEX = -100 };

int main(void) {
  example ex;
  if (example_start(&ex, "flce"))
    return 1;

  /* Varied inputs and weights that give logits of order 1. One row's target is ignore_index:
   * that row has no loss, no gradient, and does not count in the mean. */
  static float input[BT * H], weight[V * H], grad_input[BT * H];
  int64_t target[BT];
  for (int i = 0; i < BT * H; ++i)
    input[i] = sinf(0.3f * (float)(i / H) + 0.7f * (float)(i % H));
  for (int i = 0; i < V * H; ++i)
    weight[i] = 0.3f * sinf(0.61f * (float)i);
  for (int t = 0; t < BT; ++t)
    target[t] = t == IGNORED_ROW ? IGNORE_INDEX : (t * 37) % V;
  float loss, dy = 0.5f;

  /* Device tensors: the inputs copied from the arrays above, the outputs only allocated (the
   * calls write every element). */
  const DLDataType f32 = {kDLFloat, 32, 1}, i64 = {kDLInt, 64, 1};
  int64_t input_shape[2] = {BT, H}, weight_shape[2] = {V, H}, target_shape[1] = {BT};
  DLTensor input_t = example_tensor(&ex, f32, 2, input_shape, input);
  DLTensor weight_t = example_tensor(&ex, f32, 2, weight_shape, weight);
  DLTensor target_t = example_tensor(&ex, i64, 1, target_shape, target);
  DLTensor dy_t = example_tensor(&ex, f32, 0, NULL, &dy); /* scalars are 0-d */
  DLTensor loss_t = example_tensor(&ex, f32, 0, NULL, NULL);
  DLTensor grad_input_t = example_tensor(&ex, f32, 2, input_shape, NULL);
  if (ex.failed)
    return example_end(&ex, 1);

  /* The tensors the call reads and writes; the ones left NULL (bias, lse, grad_weight,
   * grad_bias) are not used. grad_output NULL means dy = 1 during the forward: the backward
   * then scales the saved gradient by the real dy once it is known, as Liger-Kernel does. */
  jitops_flce_tensors tensors = {.input = &input_t,
                                 .weight = &weight_t,
                                 .target = &target_t,
                                 .loss = &loss_t,
                                 .grad_input = &grad_input_t};
  jitops_flce_options options;
  jitops_flce_options_init(&options); /* mean reduction, ignore_index -100 */
  /* Without a GPU these calls validate their arguments (the forward also plans its chunks and
   * scratch), compile the kernels they would launch, and return JITOPS_ERR_NO_DEVICE. */
  if (!example_called(&ex, "jitops_flce_forward",
                      jitops_flce_forward(ex.rt, &tensors, &options, NULL, NULL)) ||
      !example_called(&ex, "jitops_flce_backward",
                      jitops_flce_backward(ex.rt, &dy_t, &grad_input_t, NULL, NULL, NULL)))
    return example_end(&ex, 1);
  if (!ex.has_gpu)
    return example_end(&ex, 0);
  if (!example_download(&ex, &loss, &loss_t) || !example_download(&ex, grad_input, &grad_input_t))
    return example_end(&ex, 1);

  /* The reference: per counted row, loss = lse(z) - z[target], and d loss / d z is
   * softmax(z) - onehot(target), divided by the count for the mean and scaled by dy. */
  static double want_grad[BT * H], z[V];
  double want_loss = 0;
  int counted = 0;
  for (int t = 0; t < BT; ++t)
    counted += target[t] != IGNORE_INDEX;
  for (int t = 0; t < BT; ++t) {
    if (target[t] == IGNORE_INDEX)
      continue;
    double top = -INFINITY, sum = 0;
    for (int v = 0; v < V; ++v) {
      z[v] = 0;
      for (int k = 0; k < H; ++k)
        z[v] += (double)input[t * H + k] * weight[v * H + k];
      top = fmax(top, z[v]);
    }
    for (int v = 0; v < V; ++v)
      sum += exp(z[v] - top);
    double lse = top + log(sum);
    want_loss += (lse - z[target[t]]) / counted;
    for (int v = 0; v < V; ++v) {
      double dz = (exp(z[v] - lse) - (v == target[t])) / counted * dy;
      for (int k = 0; k < H; ++k)
        want_grad[t * H + k] += dz * weight[v * H + k];
    }
  }
  int ok = example_check("loss (mean)", &loss, &want_loss, 1, 0, 1e-4);
  ok &= example_check("grad_input [BT, H]", grad_input, want_grad, BT * H, 1e-6, 1e-4);
  printf("flce: %s\n", ok ? "correct" : "wrong");
  return example_end(&ex, ok ? 0 : 1);
}
