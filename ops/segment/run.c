/* The segment entry points, straight through: validate (args.c), plan (plan.c,
 * plan_backward.c), get every kernel the plan uses (kernels.c), take the scratch, copy host ids
 * into it, run the plan's launch sequence (forward.c, backward.c), release. */
#include <stdlib.h>
#include <string.h>

#include "jitops/segment.h"
#include "ops/segment/args.h"
#include "ops/segment/kernels.h"
#include "ops/segment/launches.h"
#include "ops/segment/plan.h"
#include "runtime/op_support.h"

/* The ids as the kernels read them: the caller's device ids, or host ids copied (compacted)
 * into the scratch at `copy_offset` on the stream. */
static jitops_status device_ids(jitops_runtime_t *runtime, const jitops__segment_call *call,
                                char *scratch, size_t copy_offset, void *stream,
                                jitops__segment_ids *ids) {
  *ids = (jitops__segment_ids){.ptr = call->ids,
                               .stride = call->id_stride,
                               .rows = (int32_t)call->rows,
                               .segments = (int32_t)call->segments};
  if (call->host_ids == NULL)
    return JITOPS_SUCCESS;
  char *copy = scratch + copy_offset;
  ids->ptr = copy;
  ids->stride = 1;
  const size_t elem = jitops__dtype_size(call->id_dtype);
  const size_t bytes = (size_t)call->rows * elem;
  if (bytes == 0)
    return JITOPS_SUCCESS;
  const char *src = (const char *)jitops__tensor_ptr(call->host_ids);
  if (call->id_stride == 1)
    return jitops__memcpy_async(runtime, copy, src, bytes, stream);
  /* Strided host ids are packed first. The copy from pageable memory is staged before
   * cuMemcpyAsync returns, so the packed buffer can be freed right after. */
  char *packed = malloc(bytes);
  if (packed == NULL)
    return jitops__fail(JITOPS_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes to pack host ids",
                        call->fn, bytes);
  for (int64_t i = 0; i < call->rows; ++i)
    memcpy(packed + (size_t)i * elem, src + (ptrdiff_t)(i * call->id_stride) * (ptrdiff_t)elem,
           elem); /* addressable (args.c): no product overflows, a negative stride reads down */
  jitops_status status = jitops__memcpy_async(runtime, copy, packed, bytes, stream);
  free(packed);
  return status;
}

/* Takes the scratch (`bytes` of it: none, the caller's workspace, or stream-ordered memory) and
 * puts the ids on the device; end() gives the scratch back. */
static jitops_status begin(jitops_runtime_t *runtime, const jitops__segment_call *call,
                           const jitops_workspace *workspace, size_t bytes, size_t ids_copy,
                           void *stream, jitops__scratch *scratch, jitops__segment_launch *launch) {
  JITOPS__TRY(jitops__scratch_acquire(runtime, stream, workspace, bytes, scratch));
  *launch = (jitops__segment_launch){
      .runtime = runtime, .call = call, .scratch = scratch->ptr, .stream = stream};
  jitops_status status = device_ids(runtime, call, launch->scratch, ids_copy, stream, &launch->ids);
  if (status != JITOPS_SUCCESS)
    jitops__scratch_release(runtime, stream, scratch);
  return status;
}

static jitops_status end(jitops_runtime_t *runtime, void *stream, jitops__scratch *scratch,
                         jitops_status status) {
  jitops__scratch_release(runtime, stream, scratch);
  return status;
}

jitops_status jitops_segment_reduce(jitops_runtime_t *runtime, jitops_segment_reduction reduction,
                                    const DLTensor *data, const DLTensor *segment_ids,
                                    int64_t num_segments, const DLTensor *out,
                                    const jitops_segment_options *options,
                                    const jitops_workspace *workspace, void *stream) {
  static const char fn[] = "jitops_segment_reduce";
  jitops__segment_call call;
  JITOPS__TRY(jitops__segment_check_forward(fn, runtime, reduction, data, segment_ids, num_segments,
                                            out, options, &call));
  JITOPS__TRY(jitops__segment_check_workspace(fn, workspace));
  jitops__segment_forward_plan plan;
  JITOPS__TRY(jitops__segment_plan_forward(jitops__runtime_props(runtime), &call, &plan));
  jitops__segment_forward_kernels kernels;
  JITOPS__TRY(jitops__segment_get_forward_kernels(runtime, &call, &plan, true, stream, &kernels));
  if (plan.path == JITOPS__SEGMENT_PATH_EMPTY && kernels.count_too_large == NULL)
    return JITOPS_SUCCESS;
  jitops__scratch scratch;
  jitops__segment_launch launch;
  JITOPS__TRY(begin(runtime, &call, workspace, plan.workspace_bytes, plan.ids_copy, stream,
                    &scratch, &launch));
  return end(runtime, stream, &scratch, jitops__segment_launch_forward(&launch, &plan, &kernels));
}

jitops_status
jitops_segment_reduce_workspace_size(jitops_runtime_t *runtime, jitops_segment_reduction reduction,
                                     const DLTensor *data, const DLTensor *segment_ids,
                                     int64_t num_segments, const DLTensor *out,
                                     const jitops_segment_options *options, size_t *bytes) {
  static const char fn[] = "jitops_segment_reduce_workspace_size";
  JITOPS__REQUIRE_NONNULL(fn, bytes);
  jitops__segment_call call;
  JITOPS__TRY(jitops__segment_check_forward(fn, runtime, reduction, data, segment_ids, num_segments,
                                            out, options, &call));
  jitops__segment_forward_plan plan;
  JITOPS__TRY(jitops__segment_plan_forward(jitops__runtime_props(runtime), &call, &plan));
  *bytes = plan.workspace_bytes;
  return JITOPS_SUCCESS;
}

jitops_status jitops_segment_reduce_backward(jitops_runtime_t *runtime,
                                             jitops_segment_reduction reduction,
                                             const DLTensor *grad_out, const DLTensor *data,
                                             const DLTensor *out, const DLTensor *segment_ids,
                                             int64_t num_segments, const DLTensor *grad_data,
                                             const jitops_segment_options *options,
                                             const jitops_workspace *workspace, void *stream) {
  static const char fn[] = "jitops_segment_reduce_backward";
  jitops__segment_call call;
  JITOPS__TRY(jitops__segment_check_backward(fn, runtime, reduction, grad_out, data, out,
                                             segment_ids, num_segments, grad_data, options, &call));
  JITOPS__TRY(jitops__segment_check_workspace(fn, workspace));
  jitops__segment_backward_plan plan;
  JITOPS__TRY(jitops__segment_plan_backward(jitops__runtime_props(runtime), &call, &plan));
  jitops__segment_backward_kernels kernels;
  JITOPS__TRY(jitops__segment_get_backward_kernels(runtime, &call, &plan, true, stream, &kernels));
  if (call.rows == 0 || call.cols == 0)
    return JITOPS_SUCCESS; /* grad_data is empty */
  jitops__scratch scratch;
  jitops__segment_launch launch;
  JITOPS__TRY(begin(runtime, &call, workspace, plan.workspace_bytes, plan.ids_copy, stream,
                    &scratch, &launch));
  return end(runtime, stream, &scratch, jitops__segment_launch_backward(&launch, &plan, &kernels));
}

jitops_status jitops_segment_reduce_backward_workspace_size(
    jitops_runtime_t *runtime, jitops_segment_reduction reduction, const DLTensor *grad_out,
    const DLTensor *data, const DLTensor *out, const DLTensor *segment_ids, int64_t num_segments,
    const DLTensor *grad_data, const jitops_segment_options *options, size_t *bytes) {
  static const char fn[] = "jitops_segment_reduce_backward_workspace_size";
  JITOPS__REQUIRE_NONNULL(fn, bytes);
  jitops__segment_call call;
  JITOPS__TRY(jitops__segment_check_backward(fn, runtime, reduction, grad_out, data, out,
                                             segment_ids, num_segments, grad_data, options, &call));
  jitops__segment_backward_plan plan;
  JITOPS__TRY(jitops__segment_plan_backward(jitops__runtime_props(runtime), &call, &plan));
  *bytes = plan.workspace_bytes;
  return JITOPS_SUCCESS;
}
