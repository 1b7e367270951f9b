/* segment: TensorFlow's unsorted_segment_sum and unsorted_segment_max of 1000 rows of 8
 * columns into 50 segments (jitops_segment_reduce), and the gradient of the sum
 * (jitops_segment_reduce_backward), checked against plain loops in double.
 *
 * Exit status: 0 when the results are correct, or, without a GPU, when every kernel compiled;
 * 1 otherwise. */
#include <float.h>
#include <math.h>

#include "example_util.h"

enum { ROWS = 1000, COLS = 8, SEGMENTS = 50, DROPPED_ROW = 5 };

int main(void) {
  example ex;
  if (example_start(&ex, "segment"))
    return 1;

  /* Ids in no order, covering segments 0..48: segment 49 stays empty. One row has id -1 and
   * is dropped, as TensorFlow drops it. grad_out is the upstream gradient of the sum. */
  static float data[ROWS * COLS], sum[SEGMENTS * COLS], max[SEGMENTS * COLS];
  static float grad_out[SEGMENTS * COLS], grad_data[ROWS * COLS];
  int32_t ids[ROWS];
  for (int i = 0; i < ROWS; ++i)
    ids[i] = i == DROPPED_ROW ? -1 : (i * 37) % (SEGMENTS - 1);
  for (int i = 0; i < ROWS * COLS; ++i)
    data[i] = sinf(0.1f * (float)i) + 0.25f * cosf(0.37f * (float)i);
  for (int i = 0; i < SEGMENTS * COLS; ++i)
    grad_out[i] = 0.5f + 0.01f * (float)i;

  /* Device tensors: data, ids and grad_out copied from the arrays above, the outputs only
   * allocated (the ops write every element). Ids may also live in host memory: they are then
   * checked on the host and copied to the device by the call. */
  const DLDataType f32 = {kDLFloat, 32, 1}, i32 = {kDLInt, 32, 1};
  int64_t data_shape[2] = {ROWS, COLS}, out_shape[2] = {SEGMENTS, COLS}, ids_shape[1] = {ROWS};
  DLTensor data_t = example_tensor(&ex, f32, 2, data_shape, data);
  DLTensor ids_t = example_tensor(&ex, i32, 1, ids_shape, ids);
  DLTensor grad_out_t = example_tensor(&ex, f32, 2, out_shape, grad_out);
  DLTensor sum_t = example_tensor(&ex, f32, 2, out_shape, NULL);
  DLTensor max_t = example_tensor(&ex, f32, 2, out_shape, NULL);
  DLTensor grad_data_t = example_tensor(&ex, f32, 2, data_shape, NULL);
  if (ex.failed)
    return example_end(&ex, 1);

  /* options NULL: unsorted ids, the empty max segment takes the lowest float (TensorFlow),
   * no counter of ids >= num_segments. The backward of the sum needs neither data nor out. */
  if (!example_called(&ex, "jitops_segment_reduce sum",
                      jitops_segment_reduce(ex.rt, JITOPS_SEGMENT_SUM, &data_t, &ids_t, SEGMENTS,
                                            &sum_t, NULL, NULL, NULL)) ||
      !example_called(&ex, "jitops_segment_reduce max",
                      jitops_segment_reduce(ex.rt, JITOPS_SEGMENT_MAX, &data_t, &ids_t, SEGMENTS,
                                            &max_t, NULL, NULL, NULL)) ||
      !example_called(&ex, "jitops_segment_reduce_backward sum",
                      jitops_segment_reduce_backward(ex.rt, JITOPS_SEGMENT_SUM, &grad_out_t, NULL,
                                                     NULL, &ids_t, SEGMENTS, &grad_data_t, NULL,
                                                     NULL, NULL)))
    return example_end(&ex, 1);
  if (!ex.has_gpu)
    return example_end(&ex, 0);
  if (!example_download(&ex, sum, &sum_t) || !example_download(&ex, max, &max_t) ||
      !example_download(&ex, grad_data, &grad_data_t))
    return example_end(&ex, 1);

  /* The reference. An empty max segment is the lowest float, -FLT_MAX. */
  static double want_sum[SEGMENTS * COLS], want_max[SEGMENTS * COLS], want_grad[ROWS * COLS];
  for (int i = 0; i < SEGMENTS * COLS; ++i)
    want_max[i] = -FLT_MAX;
  for (int i = 0; i < ROWS; ++i) {
    if (ids[i] < 0)
      continue; /* dropped: it adds nothing, and its gradient is 0 */
    int s = ids[i];
    for (int d = 0; d < COLS; ++d) {
      want_sum[s * COLS + d] += data[i * COLS + d];
      want_max[s * COLS + d] = fmax(want_max[s * COLS + d], data[i * COLS + d]);
      want_grad[i * COLS + d] = grad_out[s * COLS + d];
    }
  }
  int ok = example_check("sum", sum, want_sum, SEGMENTS * COLS, 1e-5, 1e-4);
  ok &= example_check("max", max, want_max, SEGMENTS * COLS, 0, 0);
  printf("  empty segment %d: sum %g, max %g\n", SEGMENTS - 1, sum[(SEGMENTS - 1) * COLS],
         max[(SEGMENTS - 1) * COLS]);
  ok &= example_check("sum backward", grad_data, want_grad, ROWS * COLS, 0, 0);
  printf("  dropped row %d: grad_data %g\n", DROPPED_ROW, grad_data[DROPPED_ROW * COLS]);
  printf("segment: %s\n", ok ? "correct" : "wrong");
  return example_end(&ex, ok ? 0 : 1);
}
