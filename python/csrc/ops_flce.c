/* Fused linear cross-entropy (jitops/flce.h): jitops_flce_forward and jitops_flce_backward, and
 * a vocabulary shard's jitops_flce_shard_stats and jitops_flce_shard_backward. */
#include "binding.h"

typedef struct flce_call {
  jitops_runtime_t *runtime;
  jp_tensor input, weight, bias, target, grad_output, loss, lse, grad_input, grad_weight, grad_bias;
  jitops_flce_tensors tensors;
  jitops_flce_options options;
  void *stream;
  /* The shard entry points: lse_local and linear (statistics), or the combined lse (in lse). */
  jp_tensor lse_local, linear;
  DLTensor *shard_rows[2];
} flce_call;

/* The options, seven arguments from args[first]: reduction, ignore_index, label_smoothing,
 * softcap, z_loss_scale, chunk_rows, scratch_budget_bytes. */
static int read_options(PyObject *const *args, Py_ssize_t first, flce_call *c) {
  int reduction;
  PyObject *const *o = args + first;
  jitops_flce_options_init(&c->options);
  if (jp_arg_int(o[0], "reduction", &reduction) < 0 ||
      jp_arg_int64(o[1], "ignore_index", &c->options.ignore_index) < 0 ||
      jp_arg_double(o[2], "label_smoothing", &c->options.label_smoothing) < 0 ||
      jp_arg_double(o[3], "softcap", &c->options.softcap) < 0 ||
      jp_arg_double(o[4], "z_loss_scale", &c->options.z_loss_scale) < 0 ||
      jp_arg_int64(o[5], "chunk_rows", &c->options.chunk_rows) < 0 ||
      jp_arg_int64(o[6], "scratch_budget_bytes", &c->options.scratch_budget_bytes) < 0)
    return -1;
  c->options.reduction = (jitops_flce_reduction)reduction;
  return 0;
}

/* Reads the ten tensors (args 2..11) into c->tensors; JP_OK, JP_SYMBOLIC or -1. */
static int read_tensors(PyObject *const *args, jp_mode mode, flce_call *c) {
  static const char *const names[] = {"input", "weight", "bias",       "target",      "grad_output",
                                      "loss",  "lse",    "grad_input", "grad_weight", "grad_bias"};
  jp_tensor *slots[] = {&c->input, &c->weight, &c->bias,       &c->target,      &c->grad_output,
                        &c->loss,  &c->lse,    &c->grad_input, &c->grad_weight, &c->grad_bias};
  DLTensor *described[10];
  for (int i = 0; i < 10; ++i) {
    int status = jp_tensor_read_optional(args[2 + i], mode, names[i], slots[i], &described[i]);
    if (status != JP_OK)
      return status;
  }
  c->tensors =
      (jitops_flce_tensors){described[0], described[1], described[2], described[3], described[4],
                            described[5], described[6], described[7], described[8], described[9]};
  return JP_OK;
}

static jitops_status run_forward(void *ctx, const jitops_workspace *workspace) {
  flce_call *c = ctx;
  return jitops_flce_forward(c->runtime, &c->tensors, &c->options, workspace, c->stream);
}

/* flce_forward(mode, runtime, input, weight, bias, target, grad_output, loss, lse, grad_input,
 *              grad_weight, grad_bias, reduction, ignore_index, label_smoothing, softcap,
 *              z_loss_scale, chunk_rows, scratch_budget_bytes, stream); optional tensors may
 *              be None; 0 for chunk_rows and the budget means the defaults. */
static PyObject *flce_forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  flce_call c;
  jp_mode mode;
  if (jp_arg_count("flce_forward", nargs, 20) < 0 ||
      jp_arg_mode_runtime(args, &mode, &c.runtime) < 0 || read_options(args, 12, &c) < 0 ||
      jp_arg_pointer(args[19], "stream", &c.stream) < 0)
    return NULL;
  int read = read_tensors(args, mode, &c);
  if (read != JP_OK)
    return read < 0 ? NULL : jp_done(mode, 0);
  if (c.tensors.input == NULL) {
    PyErr_SetString(PyExc_TypeError, "input must be a tensor");
    return NULL;
  }
  size_t bytes = 0;
  jitops_status status = jitops_flce_workspace_size(c.runtime, &c.tensors, &c.options, &bytes);
  return jp_finish(mode, status, bytes, jp_tensor_device(&c.input), run_forward, &c);
}

static jitops_status run_backward(void *ctx, const jitops_workspace *workspace) {
  flce_call *c = ctx;
  return jitops_flce_backward(c->runtime, c->tensors.grad_output, c->tensors.grad_input,
                              c->tensors.grad_weight, c->tensors.grad_bias, c->stream);
}

/* flce_backward(mode, runtime, grad_output, grad_input, grad_weight, grad_bias, stream): scales
 * the saved gradients in place. It has no size function: in validation mode it runs on the
 * compile-only runtime, which validates and then refuses to launch (JITOPS_ERR_NO_DEVICE). */
static PyObject *flce_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  flce_call c;
  jp_mode mode;
  DLTensor *grads[3];
  if (jp_arg_count("flce_backward", nargs, 7) < 0 ||
      jp_arg_mode_runtime(args, &mode, &c.runtime) < 0 ||
      jp_arg_pointer(args[6], "stream", &c.stream) < 0)
    return NULL;
  JP_READ(args[2], mode, "grad_output", &c.grad_output);
  JP_READ_OPTIONAL(args[3], mode, "grad_input", &c.grad_input, &grads[0]);
  JP_READ_OPTIONAL(args[4], mode, "grad_weight", &c.grad_weight, &grads[1]);
  JP_READ_OPTIONAL(args[5], mode, "grad_bias", &c.grad_bias, &grads[2]);
  c.tensors = (jitops_flce_tensors){.grad_output = &c.grad_output.dl,
                                    .grad_input = grads[0],
                                    .grad_weight = grads[1],
                                    .grad_bias = grads[2]};
  if (mode == JP_VALIDATE) { /* the compile-only runtime may compile: other threads run */
    PyThreadState *save = PyEval_SaveThread();
    jitops_status status = run_backward(&c, NULL);
    PyEval_RestoreThread(save);
    return status == JITOPS_SUCCESS || status == JITOPS_ERR_NO_DEVICE ? jp_done(mode, 1)
                                                                      : jp_raise(status);
  }
  return jp_finish(mode, JITOPS_SUCCESS, 0, jp_tensor_device(&c.grad_output), run_backward, &c);
}

/* ---- vocabulary shards ------------------------------------------------------------------------
 */

/* The arguments of both shard functions: (mode, runtime, `ntensors` tensors or None named by
 * `names` into `slots` and `described` (NULL for None), the seven options of read_options,
 * vocab_start, vocab_size, stream). JP_OK, JP_SYMBOLIC or -1. */
static int read_shard_call(PyObject *const *args, Py_ssize_t nargs, const char *fn,
                           const char *const *names, jp_tensor *const *slots, int ntensors,
                           DLTensor **described, jp_mode *mode, flce_call *c) {
  Py_ssize_t first = 2 + ntensors;
  if (jp_arg_count(fn, nargs, first + 10) < 0 || jp_arg_mode_runtime(args, mode, &c->runtime) < 0 ||
      read_options(args, first, c) < 0 ||
      jp_arg_int64(args[first + 7], "vocab_start", &c->options.vocab_start) < 0 ||
      jp_arg_int64(args[first + 8], "vocab_size", &c->options.vocab_size) < 0 ||
      jp_arg_pointer(args[first + 9], "stream", &c->stream) < 0)
    return -1;
  for (int i = 0; i < ntensors; ++i) {
    int status = jp_tensor_read_optional(args[2 + i], *mode, names[i], slots[i], &described[i]);
    if (status != JP_OK)
      return status;
    /* Fake tensors share one address, but the shard entry points refuse outputs that overlap
     * anything: each gets its own, 1 TiB apart. */
    if (*mode == JP_VALIDATE && described[i] != NULL)
      described[i]->data = (void *)((uintptr_t)(i + 1) << 40);
  }
  if (described[0] == NULL) {
    PyErr_SetString(PyExc_TypeError, "input must be a tensor");
    return -1;
  }
  return JP_OK;
}

static jitops_status run_shard_stats(void *ctx, const jitops_workspace *workspace) {
  flce_call *c = ctx;
  return jitops_flce_shard_stats(c->runtime, &c->tensors, &c->options, c->shard_rows[0],
                                 c->shard_rows[1], workspace, c->stream);
}

/* flce_shard_stats(mode, runtime, input, weight, bias, target, lse_local, linear, reduction,
 *                  ignore_index, label_smoothing, softcap, z_loss_scale, chunk_rows,
 *                  scratch_budget_bytes, vocab_start, vocab_size, stream): phase 1 of a
 *                  vocabulary shard; bias may be None; reduction and z_loss_scale do not matter. */
static PyObject *flce_shard_stats(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  static const char *const names[] = {"input", "weight", "bias", "target", "lse_local", "linear"};
  flce_call c;
  jp_mode mode;
  jp_tensor *const slots[] = {&c.input, &c.weight, &c.bias, &c.target, &c.lse_local, &c.linear};
  DLTensor *d[6];
  int read = read_shard_call(args, nargs, "flce_shard_stats", names, slots, 6, d, &mode, &c);
  if (read != JP_OK)
    return read < 0 ? NULL : jp_done(mode, 0);
  c.tensors = (jitops_flce_tensors){.input = d[0], .weight = d[1], .bias = d[2], .target = d[3]};
  c.shard_rows[0] = d[4];
  c.shard_rows[1] = d[5];
  size_t bytes = 0;
  jitops_status status =
      jitops_flce_shard_stats_workspace_size(c.runtime, &c.tensors, &c.options, d[4], d[5], &bytes);
  return jp_finish(mode, status, bytes, jp_tensor_device(&c.input), run_shard_stats, &c);
}

static jitops_status run_shard_backward(void *ctx, const jitops_workspace *workspace) {
  flce_call *c = ctx;
  return jitops_flce_shard_backward(c->runtime, &c->tensors, &c->options, c->shard_rows[0],
                                    workspace, c->stream);
}

/* flce_shard_backward(mode, runtime, input, weight, bias, target, grad_output, lse, grad_input,
 *                     grad_weight, grad_bias, reduction, ignore_index, label_smoothing, softcap,
 *                     z_loss_scale, chunk_rows, scratch_budget_bytes, vocab_start, vocab_size,
 *                     stream): phase 3 of a vocabulary shard, from the combined lse; bias,
 *                     grad_output and the gradients may be None. */
static PyObject *flce_shard_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  static const char *const names[] = {"input",      "weight",      "bias",
                                      "target",     "grad_output", "lse",
                                      "grad_input", "grad_weight", "grad_bias"};
  flce_call c;
  jp_mode mode;
  jp_tensor *const slots[] = {&c.input, &c.weight,     &c.bias,        &c.target,   &c.grad_output,
                              &c.lse,   &c.grad_input, &c.grad_weight, &c.grad_bias};
  DLTensor *d[9];
  int read = read_shard_call(args, nargs, "flce_shard_backward", names, slots, 9, d, &mode, &c);
  if (read != JP_OK)
    return read < 0 ? NULL : jp_done(mode, 0);
  c.tensors = (jitops_flce_tensors){.input = d[0],
                                    .weight = d[1],
                                    .bias = d[2],
                                    .target = d[3],
                                    .grad_output = d[4],
                                    .grad_input = d[6],
                                    .grad_weight = d[7],
                                    .grad_bias = d[8]};
  c.shard_rows[0] = d[5];
  size_t bytes = 0;
  jitops_status status =
      jitops_flce_shard_backward_workspace_size(c.runtime, &c.tensors, &c.options, d[5], &bytes);
  return jp_finish(mode, status, bytes, jp_tensor_device(&c.input), run_shard_backward, &c);
}

PyMethodDef jp_flce_methods[] = {
    {"flce_forward", JP_FASTCALL(flce_forward), METH_FASTCALL, NULL},
    {"flce_backward", JP_FASTCALL(flce_backward), METH_FASTCALL, NULL},
    {"flce_shard_stats", JP_FASTCALL(flce_shard_stats), METH_FASTCALL, NULL},
    {"flce_shard_backward", JP_FASTCALL(flce_shard_backward), METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL}};
