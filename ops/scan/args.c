#include "ops/scan/args.h"

#include <stdio.h>

static const char *const op_names[] = {"cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"};

static jitops_status check_op(const char *fn, jitops_scan_op op) {
  if ((int)op < 0 || (int)op > (int)JITOPS_SCAN_LOGCUMSUMEXP)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: op %d is not a jitops_scan_op (0 cumsum .. 4 logcumsumexp)", fn,
                        (int)op);
  return JITOPS_SUCCESS;
}

/* The tensor that defines the call's shape: present, on the device, rank 1..8. */
static jitops_status check_lead(const char *fn, const char *arg, const DLTensor *t,
                                const jitops_runtime_t *rt) {
  JITOPS__TRY(jitops__tensor_check(fn, arg, t, rt, 8));
  if (t->ndim == 0)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: %s has rank 0; scans take rank 1 to 8", fn,
                        arg);
  return jitops__check_numel(fn, arg, t);
}

static jitops_status check_axis(const char *fn, int axis, int ndim, int *out) {
  if (axis < -ndim || axis >= ndim)
    return jitops__fail(JITOPS_ERR_OUT_OF_RANGE,
                        "%s: axis %d is out of range for a tensor of rank %d (expected %d..%d)", fn,
                        axis, ndim, -ndim, ndim - 1);
  *out = axis < 0 ? axis + ndim : axis;
  return JITOPS_SUCCESS;
}

/* A tensor that must match `lead` (named lead_arg) in shape, with dtype `want`. */
static jitops_status check_peer(const char *fn, const char *arg, const DLTensor *t,
                                const char *lead_arg, const DLTensor *lead, jitops__dtype want,
                                const jitops_runtime_t *rt) {
  JITOPS__TRY(jitops__tensor_check(fn, arg, t, rt, 8));
  if (!jitops__same_shape(t, lead)) {
    char a[160], b[160];
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: %s has shape %s but %s has %s", fn, arg,
                        jitops__shape_text(t->shape, t->ndim, a, sizeof a), lead_arg,
                        jitops__shape_text(lead->shape, lead->ndim, b, sizeof b));
  }
  const jitops__dtype got = jitops__dtype_of(t->dtype);
  if (got != want)
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE, "%s: %s has dtype %s; expected %s%s%s", fn, arg,
                        jitops__dtype_name(got), jitops__dtype_name(want),
                        want == JITOPS__DTYPE_I64 ? "" : ", like ",
                        want == JITOPS__DTYPE_I64 ? "" : lead_arg);
  return JITOPS_SUCCESS;
}

/* Before its strides or pointer are used, every tensor passes the core's addressability rule
 * (element count, byte extent and addresses that fit), which bounds the plan's arithmetic. */
static jitops_status check_layout(const char *fn, const char *arg, const DLTensor *t, int output) {
  JITOPS__TRY(jitops__check_addressable(fn, arg, t));
  JITOPS__TRY(jitops__check_aligned(fn, arg, t));
  if (output)
    JITOPS__TRY(jitops__check_no_self_overlap(fn, arg, t));
  return JITOPS_SUCCESS;
}

/* What both directions check first: the runtime, the op, the tensor that sets the shape
 * (x or dy, named lead_arg) and the axis. */
static jitops_status check_call(const char *fn, const jitops_runtime_t *runtime, jitops_scan_op op,
                                const char *lead_arg, const DLTensor *lead, int axis,
                                jitops__scan_call *call) {
  JITOPS__REQUIRE_NONNULL(fn, runtime); /* names "runtime" in the message */
  JITOPS__TRY(check_op(fn, op));
  JITOPS__TRY(check_lead(fn, lead_arg, lead, runtime));
  return check_axis(fn, axis, lead->ndim, &call->axis);
}

static const jitops__scan_kop forward_kops[] = {JITOPS__SCAN_K_CUMSUM, JITOPS__SCAN_K_CUMPROD,
                                                JITOPS__SCAN_K_CUMMAX, JITOPS__SCAN_K_CUMMIN,
                                                JITOPS__SCAN_K_LCSE};

jitops_status jitops__scan_check_forward(const char *fn, jitops_runtime_t *runtime,
                                         jitops_scan_op op, const DLTensor *x, int axis,
                                         int reverse, const DLTensor *y, const DLTensor *indices,
                                         jitops__scan_call *call) {
  const jitops_runtime_t *rt = runtime;
  JITOPS__TRY(check_call(fn, rt, op, "x", x, axis, call));
  call->kop = forward_kops[op];
  call->dtype = jitops__dtype_of(x->dtype);
  if (!jitops__scan_kop_takes(call->kop, call->dtype))
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE, "%s: x has dtype %s, which %s does not take (%s)",
                        fn, jitops__dtype_name(call->dtype), op_names[op],
                        jitops__scan_kop_takes(call->kop, JITOPS__DTYPE_I32)
                            ? "f32, f64, f16, bf16, i32, i64"
                            : "f32, f64, f16, bf16");
  JITOPS__TRY(check_peer(fn, "y", y, "x", x, call->dtype, rt));
  const int extremum = op == JITOPS_SCAN_CUMMAX || op == JITOPS_SCAN_CUMMIN;
  if (extremum && indices == NULL)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: indices is NULL; %s writes its int64 indices there", fn, op_names[op]);
  if (!extremum && indices != NULL)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: indices must be NULL for %s, which has no indices", fn, op_names[op]);
  if (extremum)
    JITOPS__TRY(check_peer(fn, "indices", indices, "x", x, JITOPS__DTYPE_I64, rt));
  JITOPS__TRY(check_layout(fn, "x", x, 0));
  JITOPS__TRY(check_layout(fn, "y", y, 1));
  if (extremum)
    JITOPS__TRY(check_layout(fn, "indices", indices, 1));

  call->kernel_reverse = reverse != 0;
  call->ntens = 0;
  call->tensors[call->ntens++] = x;
  call->tensors[call->ntens++] = y;
  if (extremum)
    call->tensors[call->ntens++] = indices;
  return JITOPS_SUCCESS;
}

/* A saved forward tensor the backward op needs. */
static jitops_status check_saved(const char *fn, const char *arg, const DLTensor *t,
                                 jitops_scan_op op, const DLTensor *dy, jitops__dtype want,
                                 const jitops_runtime_t *rt) {
  if (t == NULL)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: %s is NULL; the %s backward needs the saved forward %s", fn, arg,
                        op_names[op],
                        want == JITOPS__DTYPE_I64 ? "indices"
                        : arg[0] == 'x'           ? "input x"
                                                  : "output y");
  JITOPS__TRY(check_peer(fn, arg, t, "dy", dy, want, rt));
  return check_layout(fn, arg, t, 0);
}

jitops_status jitops__scan_check_backward(const char *fn, jitops_runtime_t *runtime,
                                          jitops_scan_op op, const DLTensor *dy, const DLTensor *x,
                                          const DLTensor *y, const DLTensor *indices, int axis,
                                          int reverse, const DLTensor *dx,
                                          jitops__scan_call *call) {
  const jitops_runtime_t *rt = runtime;
  JITOPS__TRY(check_call(fn, rt, op, "dy", dy, axis, call));
  call->dtype = jitops__dtype_of(dy->dtype);
  if (!jitops__scan_kop_takes(JITOPS__SCAN_K_LCSE, call->dtype))
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE,
                        "%s: dy has dtype %s; scan backward takes f32, f64, f16 and bf16", fn,
                        jitops__dtype_name(call->dtype));
  JITOPS__TRY(check_peer(fn, "dx", dx, "dy", dy, call->dtype, rt));
  JITOPS__TRY(check_layout(fn, "dy", dy, 0));
  JITOPS__TRY(check_layout(fn, "dx", dx, 1));

  call->kernel_reverse = reverse == 0; /* against the forward */
  call->ntens = 0;
  call->tensors[call->ntens++] = dy;
  switch (op) {
  case JITOPS_SCAN_CUMSUM:
    call->kop = JITOPS__SCAN_K_CUMSUM;
    break;
  case JITOPS_SCAN_CUMPROD:
  case JITOPS_SCAN_LOGCUMSUMEXP:
    JITOPS__TRY(check_saved(fn, "x", x, op, dy, call->dtype, rt));
    JITOPS__TRY(check_saved(fn, "y", y, op, dy, call->dtype, rt));
    call->kop = op == JITOPS_SCAN_CUMPROD ? JITOPS__SCAN_K_CUMPROD_BWD : JITOPS__SCAN_K_LCSE_BWD;
    call->tensors[call->ntens++] = x;
    call->tensors[call->ntens++] = y;
    break;
  default: /* cummax, cummin */
    JITOPS__TRY(check_saved(fn, "indices", indices, op, dy, JITOPS__DTYPE_I64, rt));
    call->kop = JITOPS__SCAN_K_EXTREMUM_BWD;
    call->tensors[call->ntens++] = indices;
    break;
  }
  call->tensors[call->ntens++] = dx;
  return JITOPS_SUCCESS;
}
