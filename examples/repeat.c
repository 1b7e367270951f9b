/* repeat: torch.Tensor.repeat of a 3 x 4 matrix by (2, 1, 3) (jitops_repeat), and its
 * gradient (jitops_repeat_backward), checked against plain loops in double.
 *
 * Exit status: 0 when the results are correct, or, without a GPU, when every kernel compiled;
 * 1 otherwise. */
#include <math.h>

#include "example_util.h"

/* x [3, 4] is padded to [1, 3, 4] (one repeat per output dimension, so repeats may outnumber
 * x's dimensions), and repeated into y [1 * 2, 3 * 1, 4 * 3] = [2, 3, 12]. */
enum { XR = 3, XC = 4, R0 = 2, R1 = 1, R2 = 3 };
enum { Y0 = R0, Y1 = XR * R1, Y2 = XC * R2 };

int main(void) {
  example ex;
  if (example_start(&ex, "repeat"))
    return 1;

  /* dy is the upstream gradient of y: each element of dx sums dy over x's 6 copies. */
  float x[XR * XC], y[Y0 * Y1 * Y2], dy[Y0 * Y1 * Y2], dx[XR * XC];
  for (int i = 0; i < XR * XC; ++i)
    x[i] = 1.5f * (float)i - 4.25f;
  for (int i = 0; i < Y0 * Y1 * Y2; ++i)
    dy[i] = sinf(0.3f * (float)i) + 0.125f;

  /* The arguments, in the order the calls take them. x and dy are copied to the device; y and
   * dx are only allocated (all written). The repeats are a plain host array. */
  const DLDataType f32 = {kDLFloat, 32, 1};
  int64_t x_shape[2] = {XR, XC}, y_shape[3] = {Y0, Y1, Y2};
  DLTensor x_t = example_tensor(&ex, f32, 2, x_shape, x);
  const int64_t repeats[3] = {R0, R1, R2};
  DLTensor y_t = example_tensor(&ex, f32, 3, y_shape, NULL);
  DLTensor dy_t = example_tensor(&ex, f32, 3, y_shape, dy);
  DLTensor dx_t = example_tensor(&ex, f32, 2, x_shape, NULL);
  if (ex.failed)
    return example_end(&ex, 1);

  /* The backward's workspace (NULL) comes from the runtime's pool when it needs any. */
  if (!example_called(&ex, "jitops_repeat", jitops_repeat(ex.rt, &x_t, repeats, 3, &y_t, NULL)) ||
      !example_called(&ex, "jitops_repeat_backward",
                      jitops_repeat_backward(ex.rt, &dy_t, repeats, 3, &dx_t, NULL, NULL)))
    return example_end(&ex, 1);
  if (!ex.has_gpu)
    return example_end(&ex, 0);
  if (!example_download(&ex, y, &y_t) || !example_download(&ex, dx, &dx_t))
    return example_end(&ex, 1);

  /* The reference: y[a, b, c] = x[b % 3, c % 4], and dx gathers dy back the same way. */
  double want_y[Y0 * Y1 * Y2], want_dx[XR * XC] = {0};
  for (int a = 0; a < Y0; ++a)
    for (int b = 0; b < Y1; ++b)
      for (int c = 0; c < Y2; ++c) {
        int i = (a * Y1 + b) * Y2 + c, source = (b % XR) * XC + c % XC;
        want_y[i] = x[source];
        want_dx[source] += dy[i];
      }
  int ok = example_check("y [2, 3, 12]", y, want_y, Y0 * Y1 * Y2, 0, 0);
  ok &= example_check("backward dx [3, 4]", dx, want_dx, XR * XC, 1e-5, 1e-5);
  printf("repeat: %s\n", ok ? "correct" : "wrong");
  return example_end(&ex, ok ? 0 : 1);
}
