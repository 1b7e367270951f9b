/* Repeat (jitops/repeat.h): jitops_repeat and jitops_repeat_backward. */
#include "binding.h"

#define MAX_REPEATS 8

typedef struct repeat_call {
  jitops_runtime_t *runtime;
  jp_tensor in, out;
  int64_t repeats[MAX_REPEATS];
  int count;
  void *stream;
} repeat_call;

/* Both functions take (mode, runtime, input, repeats, output, stream). */
static int read_call(const char *fn, PyObject *const *args, Py_ssize_t nargs, repeat_call *c,
                     jp_mode *mode) {
  return jp_arg_count(fn, nargs, 6) < 0 || jp_arg_mode_runtime(args, mode, &c->runtime) < 0 ||
                 jp_arg_int64_list(args[3], "repeats", c->repeats, MAX_REPEATS, &c->count) < 0 ||
                 jp_arg_pointer(args[5], "stream", &c->stream) < 0
             ? -1
             : 0;
}

static jitops_status run_forward(void *ctx, const jitops_workspace *workspace) {
  repeat_call *c = ctx;
  return jitops_repeat(c->runtime, &c->in.dl, c->repeats, c->count, &c->out.dl, c->stream);
}

/* repeat(mode, runtime, x, repeats, y, stream). The forward has no workspace and no size
 * function: in validation mode it runs on the compile-only runtime, which validates, compiles
 * and then refuses to launch with JITOPS_ERR_NO_DEVICE — the sign that validation passed. */
static PyObject *repeat(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  repeat_call c;
  jp_mode mode;
  if (read_call("repeat", args, nargs, &c, &mode) < 0)
    return NULL;
  JP_READ(args[2], mode, "x", &c.in);
  JP_READ(args[4], mode, "y", &c.out);
  if (mode == JP_VALIDATE) { /* the compile-only runtime may compile: other threads run */
    PyThreadState *save = PyEval_SaveThread();
    jitops_status status = run_forward(&c, NULL);
    PyEval_RestoreThread(save);
    return status == JITOPS_SUCCESS || status == JITOPS_ERR_NO_DEVICE ? jp_done(mode, 1)
                                                                      : jp_raise(status);
  }
  return jp_finish(mode, JITOPS_SUCCESS, 0, jp_tensor_device(&c.in), run_forward, &c);
}

static jitops_status run_backward(void *ctx, const jitops_workspace *workspace) {
  repeat_call *c = ctx;
  return jitops_repeat_backward(c->runtime, &c->in.dl, c->repeats, c->count, &c->out.dl, workspace,
                                c->stream);
}

/* repeat_backward(mode, runtime, grad_y, repeats, grad_x, stream) */
static PyObject *repeat_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  repeat_call c;
  jp_mode mode;
  if (read_call("repeat_backward", args, nargs, &c, &mode) < 0)
    return NULL;
  JP_READ(args[2], mode, "grad", &c.in);
  JP_READ(args[4], mode, "grad_x", &c.out);
  size_t bytes = 0;
  jitops_status status = jitops_repeat_backward_workspace_size(c.runtime, &c.in.dl, c.repeats,
                                                               c.count, &c.out.dl, &bytes);
  return jp_finish(mode, status, bytes, jp_tensor_device(&c.in), run_backward, &c);
}

PyMethodDef jp_repeat_methods[] = {
    {"repeat", JP_FASTCALL(repeat), METH_FASTCALL, NULL},
    {"repeat_backward", JP_FASTCALL(repeat_backward), METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL}};
