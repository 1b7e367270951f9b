/* CTC loss (jitops/ctc.h): jitops_ctc_loss and jitops_ctc_loss_backward. */
#include "binding.h"

typedef struct ctc_call {
  jitops_runtime_t *runtime;
  jp_tensor log_probs, targets, input_lengths, target_lengths, grad_loss, out, loss, beta, nll;
  DLTensor *loss_ptr;
  jitops_ctc_options options;
  void *stream;
} ctc_call;

/* The arguments both functions share: (mode, runtime, log_probs, targets, input_lengths,
 * target_lengths, blank, reduction, zero_infinity, max_target_length, ...). */
static int read_options(PyObject *const *args, ctc_call *c, jp_mode *mode) {
  int reduction, zero_infinity;
  jitops_ctc_options_init(&c->options);
  if (jp_arg_mode_runtime(args, mode, &c->runtime) < 0 ||
      jp_arg_int64(args[6], "blank", &c->options.blank) < 0 ||
      jp_arg_int(args[7], "reduction", &reduction) < 0 ||
      jp_arg_int(args[8], "zero_infinity", &zero_infinity) < 0 ||
      jp_arg_int64(args[9], "max_target_length", &c->options.max_target_length) < 0)
    return -1;
  c->options.reduction = (jitops_ctc_reduction)reduction;
  c->options.zero_infinity = zero_infinity;
  return 0;
}

/* Reads the four input tensors; JP_OK, JP_SYMBOLIC or -1. */
static int read_inputs(PyObject *const *args, jp_mode mode, ctc_call *c) {
  int status = jp_tensor_read(args[2], mode, "log_probs", &c->log_probs);
  if (status == JP_OK)
    status = jp_tensor_read(args[3], mode, "targets", &c->targets);
  if (status == JP_OK)
    status = jp_tensor_read(args[4], mode, "input_lengths", &c->input_lengths);
  if (status == JP_OK)
    status = jp_tensor_read(args[5], mode, "target_lengths", &c->target_lengths);
  return status;
}

static jitops_status run_loss(void *ctx, const jitops_workspace *workspace) {
  ctc_call *c = ctx;
  return jitops_ctc_loss(c->runtime, &c->log_probs.dl, &c->targets.dl, &c->input_lengths.dl,
                         &c->target_lengths.dl, &c->options, &c->out.dl, workspace, c->stream);
}

/* ctc_loss(mode, runtime, log_probs, targets, input_lengths, target_lengths, blank, reduction,
 *          zero_infinity, max_target_length, loss, stream) */
static PyObject *ctc_loss(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  ctc_call c;
  jp_mode mode;
  if (jp_arg_count("ctc_loss", nargs, 12) < 0 || read_options(args, &c, &mode) < 0 ||
      jp_arg_pointer(args[11], "stream", &c.stream) < 0)
    return NULL;
  int read = read_inputs(args, mode, &c);
  if (read != JP_OK)
    return read < 0 ? NULL : jp_done(mode, 0);
  JP_READ(args[10], mode, "loss", &c.out);
  size_t bytes = 0;
  jitops_status status =
      jitops_ctc_workspace_size(c.runtime, &c.log_probs.dl, &c.targets.dl, &c.input_lengths.dl,
                                &c.target_lengths.dl, &c.options, JITOPS_CTC_PASS_LOSS, &bytes);
  return jp_finish(mode, status, bytes, jp_tensor_device(&c.log_probs), run_loss, &c);
}

static jitops_status run_backward(void *ctx, const jitops_workspace *workspace) {
  ctc_call *c = ctx;
  return jitops_ctc_loss_backward(c->runtime, &c->log_probs.dl, &c->targets.dl,
                                  &c->input_lengths.dl, &c->target_lengths.dl, &c->grad_loss.dl,
                                  &c->options, &c->out.dl, c->loss_ptr, workspace, c->stream);
}

/* ctc_loss_backward(mode, runtime, log_probs, targets, input_lengths, target_lengths, blank,
 *                   reduction, zero_infinity, max_target_length, gradient, grad_loss,
 *                   grad_log_probs, loss, stream): loss None, or what jitops_ctc_loss would
 *                   write, from the same pass. */
static PyObject *ctc_loss_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  ctc_call c;
  jp_mode mode;
  int gradient;
  if (jp_arg_count("ctc_loss_backward", nargs, 15) < 0 || read_options(args, &c, &mode) < 0 ||
      jp_arg_int(args[10], "gradient", &gradient) < 0 ||
      jp_arg_pointer(args[14], "stream", &c.stream) < 0)
    return NULL;
  c.options.gradient = (jitops_ctc_gradient)gradient;
  int read = read_inputs(args, mode, &c);
  if (read != JP_OK)
    return read < 0 ? NULL : jp_done(mode, 0);
  JP_READ(args[11], mode, "grad_loss", &c.grad_loss);
  JP_READ(args[12], mode, "grad_log_probs", &c.out);
  JP_READ_OPTIONAL(args[13], mode, "loss", &c.loss, &c.loss_ptr);
  size_t bytes = 0;
  jitops_status status =
      jitops_ctc_workspace_size(c.runtime, &c.log_probs.dl, &c.targets.dl, &c.input_lengths.dl,
                                &c.target_lengths.dl, &c.options, JITOPS_CTC_PASS_BACKWARD, &bytes);
  return jp_finish(mode, status, bytes, jp_tensor_device(&c.log_probs), run_backward, &c);
}

static jitops_status run_alpha_beta(void *ctx, const jitops_workspace *workspace) {
  ctc_call *c = ctx;
  return jitops_ctc_alpha_beta(c->runtime, &c->log_probs.dl, &c->targets.dl, &c->input_lengths.dl,
                               &c->target_lengths.dl, &c->options, &c->out.dl, &c->beta.dl,
                               &c->nll.dl, workspace, c->stream);
}

/* ctc_alpha_beta(mode, runtime, log_probs, targets, input_lengths, target_lengths, blank,
 *                max_target_length, log_alpha, log_beta, nll, stream) */
static PyObject *ctc_alpha_beta(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  ctc_call c;
  jp_mode mode;
  jitops_ctc_options_init(&c.options);
  if (jp_arg_count("ctc_alpha_beta", nargs, 12) < 0 ||
      jp_arg_mode_runtime(args, &mode, &c.runtime) < 0 ||
      jp_arg_int64(args[6], "blank", &c.options.blank) < 0 ||
      jp_arg_int64(args[7], "max_target_length", &c.options.max_target_length) < 0 ||
      jp_arg_pointer(args[11], "stream", &c.stream) < 0)
    return NULL;
  int read = read_inputs(args, mode, &c);
  if (read != JP_OK)
    return read < 0 ? NULL : jp_done(mode, 0);
  JP_READ(args[8], mode, "log_alpha", &c.out);
  JP_READ(args[9], mode, "log_beta", &c.beta);
  JP_READ(args[10], mode, "nll", &c.nll);
  size_t bytes = 0;
  jitops_status status = jitops_ctc_workspace_size(c.runtime, &c.log_probs.dl, &c.targets.dl,
                                                   &c.input_lengths.dl, &c.target_lengths.dl,
                                                   &c.options, JITOPS_CTC_PASS_ALPHA_BETA, &bytes);
  return jp_finish(mode, status, bytes, jp_tensor_device(&c.log_probs), run_alpha_beta, &c);
}

PyMethodDef jp_ctc_methods[] = {
    {"ctc_alpha_beta", JP_FASTCALL(ctc_alpha_beta), METH_FASTCALL, NULL},
    {"ctc_loss", JP_FASTCALL(ctc_loss), METH_FASTCALL, NULL},
    {"ctc_loss_backward", JP_FASTCALL(ctc_loss_backward), METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL}};
