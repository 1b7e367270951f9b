/* Segment reductions (jitops/segment.h): jitops_segment_reduce and its backward. */
#include "binding.h"

typedef struct segment_call {
  jitops_runtime_t *runtime;
  jitops_segment_reduction reduction;
  int64_t num_segments;
  jp_tensor data, ids, out, grad_out, grad_data, dropped;
  DLTensor *data_ptr, *out_ptr;
  jitops_segment_options options;
  void *stream;
} segment_call;

/* The leading (mode, runtime, reduction) of both functions. */
static int read_leading(PyObject *const *args, segment_call *c, jp_mode *mode) {
  int reduction;
  jitops_segment_options_init(&c->options);
  if (jp_arg_mode_runtime(args, mode, &c->runtime) < 0 ||
      jp_arg_int(args[2], "reduction", &reduction) < 0)
    return -1;
  c->reduction = (jitops_segment_reduction)reduction;
  return 0;
}

static jitops_status run_forward(void *ctx, const jitops_workspace *workspace) {
  segment_call *c = ctx;
  return jitops_segment_reduce(c->runtime, c->reduction, &c->data.dl, &c->ids.dl, c->num_segments,
                               &c->out.dl, &c->options, workspace, c->stream);
}

/* segment_reduce(mode, runtime, reduction, data, segment_ids, num_segments, out, sorted, fill,
 *                dropped_count, algorithm, stream): fill None keeps the dtype's default,
 *                dropped_count None counts nothing, algorithm is a jitops_segment_algorithm. */
static PyObject *segment_reduce(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  segment_call c;
  jp_mode mode;
  int algorithm;
  if (jp_arg_count("segment_reduce", nargs, 12) < 0 || read_leading(args, &c, &mode) < 0 ||
      jp_arg_int64(args[5], "num_segments", &c.num_segments) < 0 ||
      jp_arg_int(args[7], "sorted", &c.options.sorted) < 0 ||
      jp_arg_int(args[10], "algorithm", &algorithm) < 0 ||
      jp_arg_pointer(args[11], "stream", &c.stream) < 0)
    return NULL;
  c.options.algorithm = (jitops_segment_algorithm)algorithm;
  if (args[8] != Py_None) {
    c.options.has_fill = 1;
    if (jp_arg_double(args[8], "fill", &c.options.fill) < 0)
      return NULL;
  }
  JP_READ(args[3], mode, "data", &c.data);
  JP_READ(args[4], mode, "segment_ids", &c.ids);
  JP_READ(args[6], mode, "out", &c.out);
  DLTensor *dropped;
  JP_READ_OPTIONAL(args[9], mode, "dropped_count", &c.dropped, &dropped);
  c.options.dropped_count = dropped;
  size_t bytes = 0;
  jitops_status status = jitops_segment_reduce_workspace_size(
      c.runtime, c.reduction, &c.data.dl, &c.ids.dl, c.num_segments, &c.out.dl, &c.options, &bytes);
  return jp_finish(mode, status, bytes, jp_tensor_device(&c.data), run_forward, &c);
}

static jitops_status run_backward(void *ctx, const jitops_workspace *workspace) {
  segment_call *c = ctx;
  return jitops_segment_reduce_backward(c->runtime, c->reduction, &c->grad_out.dl, c->data_ptr,
                                        c->out_ptr, &c->ids.dl, c->num_segments, &c->grad_data.dl,
                                        &c->options, workspace, c->stream);
}

/* segment_reduce_backward(mode, runtime, reduction, grad_out, data, out, segment_ids,
 *                         num_segments, grad_data, sorted, first_occurrence, stream) */
static PyObject *segment_reduce_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  segment_call c;
  jp_mode mode;
  if (jp_arg_count("segment_reduce_backward", nargs, 12) < 0 || read_leading(args, &c, &mode) < 0 ||
      jp_arg_int64(args[7], "num_segments", &c.num_segments) < 0 ||
      jp_arg_int(args[9], "sorted", &c.options.sorted) < 0 ||
      jp_arg_int(args[10], "first_occurrence", &c.options.first_occurrence) < 0 ||
      jp_arg_pointer(args[11], "stream", &c.stream) < 0)
    return NULL;
  JP_READ(args[3], mode, "grad", &c.grad_out);
  JP_READ_OPTIONAL(args[4], mode, "data", &c.data, &c.data_ptr);
  JP_READ_OPTIONAL(args[5], mode, "out", &c.out, &c.out_ptr);
  JP_READ(args[6], mode, "segment_ids", &c.ids);
  JP_READ(args[8], mode, "grad_data", &c.grad_data);
  size_t bytes = 0;
  jitops_status status = jitops_segment_reduce_backward_workspace_size(
      c.runtime, c.reduction, &c.grad_out.dl, c.data_ptr, c.out_ptr, &c.ids.dl, c.num_segments,
      &c.grad_data.dl, &c.options, &bytes);
  return jp_finish(mode, status, bytes, jp_tensor_device(&c.grad_out), run_backward, &c);
}

PyMethodDef jp_segment_methods[] = {
    {"segment_reduce", JP_FASTCALL(segment_reduce), METH_FASTCALL, NULL},
    {"segment_reduce_backward", JP_FASTCALL(segment_reduce_backward), METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL}};
