/* Scans (jitops/scan.h): jitops_scan and jitops_scan_backward. */
#include "binding.h"

typedef struct scan_call {
  jitops_runtime_t *runtime;
  jitops_scan_op op;
  int axis, reverse;
  jp_tensor x, y, indices, dy, dx;
  DLTensor *indices_ptr, *x_ptr, *y_ptr;
  void *stream;
} scan_call;

static int read_scalars(PyObject *const *args, scan_call *c, jp_mode *mode) {
  int op;
  if (jp_arg_mode_runtime(args, mode, &c->runtime) < 0 || jp_arg_int(args[2], "op", &op) < 0)
    return -1;
  c->op = (jitops_scan_op)op;
  return 0;
}

static jitops_status run_forward(void *ctx, const jitops_workspace *workspace) {
  scan_call *c = ctx;
  return jitops_scan(c->runtime, c->op, &c->x.dl, c->axis, c->reverse, &c->y.dl, c->indices_ptr,
                     workspace, c->stream);
}

/* scan(mode, runtime, op, x, axis, reverse, y, indices, stream) */
static PyObject *scan(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  scan_call c;
  jp_mode mode;
  if (jp_arg_count("scan", nargs, 9) < 0 || read_scalars(args, &c, &mode) < 0 ||
      jp_arg_int(args[4], "dim", &c.axis) < 0 || jp_arg_int(args[5], "reverse", &c.reverse) < 0 ||
      jp_arg_pointer(args[8], "stream", &c.stream) < 0)
    return NULL;
  JP_READ(args[3], mode, "x", &c.x);
  JP_READ(args[6], mode, "y", &c.y);
  JP_READ_OPTIONAL(args[7], mode, "indices", &c.indices, &c.indices_ptr);
  size_t bytes = 0;
  jitops_status status = jitops_scan_workspace_size(c.runtime, c.op, &c.x.dl, c.axis, c.reverse,
                                                    &c.y.dl, c.indices_ptr, &bytes);
  return jp_finish(mode, status, bytes, jp_tensor_device(&c.x), run_forward, &c);
}

static jitops_status run_backward(void *ctx, const jitops_workspace *workspace) {
  scan_call *c = ctx;
  return jitops_scan_backward(c->runtime, c->op, &c->dy.dl, c->x_ptr, c->y_ptr, c->indices_ptr,
                              c->axis, c->reverse, &c->dx.dl, workspace, c->stream);
}

/* scan_backward(mode, runtime, op, dy, x, y, indices, axis, reverse, dx, stream) */
static PyObject *scan_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  scan_call c;
  jp_mode mode;
  if (jp_arg_count("scan_backward", nargs, 11) < 0 || read_scalars(args, &c, &mode) < 0 ||
      jp_arg_int(args[7], "dim", &c.axis) < 0 || jp_arg_int(args[8], "reverse", &c.reverse) < 0 ||
      jp_arg_pointer(args[10], "stream", &c.stream) < 0)
    return NULL;
  JP_READ(args[3], mode, "grad", &c.dy);
  JP_READ_OPTIONAL(args[4], mode, "x", &c.x, &c.x_ptr);
  JP_READ_OPTIONAL(args[5], mode, "y", &c.y, &c.y_ptr);
  JP_READ_OPTIONAL(args[6], mode, "indices", &c.indices, &c.indices_ptr);
  JP_READ(args[9], mode, "grad_x", &c.dx);
  size_t bytes = 0;
  jitops_status status =
      jitops_scan_backward_workspace_size(c.runtime, c.op, &c.dy.dl, c.x_ptr, c.y_ptr,
                                          c.indices_ptr, c.axis, c.reverse, &c.dx.dl, &bytes);
  return jp_finish(mode, status, bytes, jp_tensor_device(&c.dy), run_backward, &c);
}

PyMethodDef jp_scan_methods[] = {{"scan", JP_FASTCALL(scan), METH_FASTCALL, NULL},
                                 {"scan_backward", JP_FASTCALL(scan_backward), METH_FASTCALL, NULL},
                                 {NULL, NULL, 0, NULL}};
