/* scan: the cumulative sum and the cumulative max (with its indices) along the rows of a
 * 4 x 1000 matrix (jitops_scan), and the gradient of the cumulative max (jitops_scan_backward),
 * checked against plain loops in double.
 *
 * Exit status: 0 when the results are correct, or, without a GPU, when every kernel compiled;
 * 1 otherwise. */
#include <math.h>

#include "example_util.h"

enum { ROWS = 4, COLS = 1000, AXIS = 1 };

int main(void) {
  example ex;
  if (example_start(&ex, "scan"))
    return 1;

  /* x repeats values (steps of 0.1 with a slow upward drift), so the running max changes
   * along the row and often ties; dy is the upstream gradient of the cumulative max. */
  static float x[ROWS * COLS], dy[ROWS * COLS], sum[ROWS * COLS], max[ROWS * COLS];
  static float dx[ROWS * COLS];
  static int64_t indices[ROWS * COLS];
  for (int i = 0; i < ROWS * COLS; ++i) {
    int r = i / COLS, j = i % COLS;
    x[i] = (float)((j * 7 + r * 13) % 29 + j / 50) * 0.1f - 1.3f;
    dy[i] = cosf(0.05f * (float)i);
  }

  /* Device tensors: x and dy copied from the arrays above, the outputs only allocated (the
   * ops write every element). */
  const DLDataType f32 = {kDLFloat, 32, 1}, i64 = {kDLInt, 64, 1};
  int64_t shape[2] = {ROWS, COLS};
  DLTensor x_t = example_tensor(&ex, f32, 2, shape, x);
  DLTensor dy_t = example_tensor(&ex, f32, 2, shape, dy);
  DLTensor sum_t = example_tensor(&ex, f32, 2, shape, NULL);
  DLTensor max_t = example_tensor(&ex, f32, 2, shape, NULL);
  DLTensor indices_t = example_tensor(&ex, i64, 2, shape, NULL); /* always int64 */
  DLTensor dx_t = example_tensor(&ex, f32, 2, shape, NULL);
  if (ex.failed)
    return example_end(&ex, 1);

  /* Forward along axis 1, not reversed. cumsum takes no indices (NULL); cummax fills them.
   * The backward of cummax routes dy to the saved indices, so it needs neither x nor y. */
  if (!example_called(
          &ex, "jitops_scan cumsum",
          jitops_scan(ex.rt, JITOPS_SCAN_CUMSUM, &x_t, AXIS, 0, &sum_t, NULL, NULL, NULL)) ||
      !example_called(
          &ex, "jitops_scan cummax",
          jitops_scan(ex.rt, JITOPS_SCAN_CUMMAX, &x_t, AXIS, 0, &max_t, &indices_t, NULL, NULL)) ||
      !example_called(&ex, "jitops_scan_backward cummax",
                      jitops_scan_backward(ex.rt, JITOPS_SCAN_CUMMAX, &dy_t, NULL, NULL, &indices_t,
                                           AXIS, 0, &dx_t, NULL, NULL)))
    return example_end(&ex, 1);
  if (!ex.has_gpu)
    return example_end(&ex, 0);
  if (!example_download(&ex, sum, &sum_t) || !example_download(&ex, max, &max_t) ||
      !example_download(&ex, indices, &indices_t) || !example_download(&ex, dx, &dx_t))
    return example_end(&ex, 1);

  /* The reference. Among equal values the later one wins (PyTorch's rule), hence >=. */
  static double want_sum[ROWS * COLS], want_max[ROWS * COLS], want_dx[ROWS * COLS];
  static int64_t want_indices[ROWS * COLS];
  int wrong_indices = 0;
  for (int r = 0; r < ROWS; ++r) {
    double running = 0, best = -INFINITY;
    int64_t best_j = 0;
    for (int j = 0; j < COLS; ++j) {
      int i = r * COLS + j;
      running += x[i];
      if (x[i] >= best) {
        best = x[i];
        best_j = j;
      }
      want_sum[i] = running;
      want_max[i] = best;
      want_indices[i] = best_j;
      want_dx[r * COLS + best_j] += dy[i];
      wrong_indices += indices[i] != best_j;
    }
  }
  int ok = example_check("cumsum", sum, want_sum, ROWS * COLS, 1e-3, 1e-4);
  ok &= example_check("cummax values", max, want_max, ROWS * COLS, 0, 0);
  /* The last index of a row is where its maximum was last seen. */
  printf("  %-24s %5d values, last %-12lld (reference %lld), %d wrong: %s\n", "cummax indices",
         ROWS * COLS, (long long)indices[COLS - 1], (long long)want_indices[COLS - 1],
         wrong_indices, wrong_indices ? "wrong" : "correct");
  ok &= wrong_indices == 0;
  ok &= example_check("cummax backward dx", dx, want_dx, ROWS * COLS, 1e-4, 1e-4);
  printf("scan: %s\n", ok ? "correct" : "wrong");
  return example_end(&ex, ok ? 0 : 1);
}
