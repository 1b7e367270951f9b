/* Validation of the CTC arguments. Each tensor is checked in one order: where it lives and its
 * rank (tensor_checks.h), dtype, extents, then its element count, reach and address
 * (check_addressable), and only then anything that reads its strides or data pointer. That
 * order is what keeps the arithmetic here, in plan.c and in the kernels inside int64: once a
 * tensor passes check_addressable, every element offset and byte offset of it fits. */
#include "ops/ctc/args.h"

#include <stdlib.h>
#include <string.h>

#include "ops/ctc/host_data.h"

/* ---- every tensor: count, reach, address, alignment -------------------------------------- */

/* What every tensor of a call passes before its strides or its data pointer are used: the
 * core's addressability rule (an element count and byte extent that fit int64, addresses that
 * fit the address space) and, when it has elements, an aligned first one (an empty tensor is
 * never read). */
static jitops_status check_addressable(const char *fn, const char *arg, const DLTensor *t) {
  JITOPS__TRY(jitops__check_addressable(fn, arg, t));
  return jitops__tensor_numel(t) == 0 ? JITOPS_SUCCESS : jitops__check_aligned(fn, arg, t);
}

/* An output's layout: addressable, and no element written twice. */
static jitops_status check_output_layout(const char *fn, const char *arg, const DLTensor *t) {
  JITOPS__TRY(check_addressable(fn, arg, t));
  return jitops__check_no_self_overlap(fn, arg, t);
}

/* A tensor that lives in host or in device memory (the lengths, the targets), of rank
 * `ndim`. */
static jitops_status check_host_or_device(const char *fn, const char *arg, const DLTensor *t,
                                          const jitops_runtime_t *rt, int ndim) {
  if (t == NULL)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, arg);
  if (jitops__tensor_in_host_memory(t))
    return jitops__host_tensor_check(fn, arg, t, ndim);
  return jitops__tensor_check(fn, arg, t, rt, ndim);
}

/* i32 or i64, for targets and lengths. */
static jitops_status check_index_dtype(const char *fn, const char *arg, jitops__dtype d) {
  if (!jitops__dtype_is_int(d))
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE, "%s: %s must be i32 or i64, not %s", fn, arg,
                        d ? jitops__dtype_name(d) : "an unsupported dtype");
  return JITOPS_SUCCESS;
}

/* ---- the inputs ---------------------------------------------------------------------------- */

/* The defaults jitops/ctc.h documents. */
void jitops_ctc_options_init(jitops_ctc_options *options) {
  static const jitops_ctc_options defaults = {
      .blank = 0,
      .reduction = JITOPS_CTC_REDUCTION_MEAN,
      .zero_infinity = 0,
      .gradient = JITOPS_CTC_GRADIENT_EXACT,
      .max_target_length = 0,
      .storage = JITOPS_CTC_STORAGE_AUTO,
  };
  if (options != NULL)
    memcpy(options, &defaults, sizeof defaults); /* padding included: zero */
}

static jitops_status check_options(const char *fn, const jitops_ctc_options *o, int64_t C) {
  if (o->blank < 0 || o->blank >= C)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: options.blank = %lld is outside [0, C) with C = %lld", fn,
                        (long long)o->blank, (long long)C);
  if (o->reduction < JITOPS_CTC_REDUCTION_NONE || o->reduction > JITOPS_CTC_REDUCTION_MEAN)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: options.reduction %d is not a %s", fn,
                        (int)o->reduction, "jitops_ctc_reduction");
  if (o->gradient < JITOPS_CTC_GRADIENT_EXACT || o->gradient > JITOPS_CTC_GRADIENT_PYTORCH)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: options.gradient %d is not a %s", fn,
                        (int)o->gradient, "jitops_ctc_gradient");
  if (o->storage < JITOPS_CTC_STORAGE_AUTO || o->storage > JITOPS_CTC_STORAGE_GLOBAL)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: options.storage %d is not a %s", fn,
                        (int)o->storage, "jitops_ctc_storage");
  if (o->max_target_length < 0)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: options.max_target_length = %lld is negative", fn,
                        (long long)o->max_target_length);
  return JITOPS_SUCCESS;
}

static jitops_status check_log_probs(jitops__ctc_call *call, const jitops_runtime_t *rt,
                                     const DLTensor *lp) {
  const char *fn = call->fn;
  JITOPS__TRY(jitops__tensor_check(fn, "log_probs", lp, rt, 3));
  if (lp->ndim != 3)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: log_probs must have rank 3 [T, N, C], not %d", fn, lp->ndim);
  call->f = jitops__dtype_of(lp->dtype);
  if (!jitops__dtype_is_float(call->f))
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE,
                        "%s: log_probs must be f16, bf16, f32 or f64, not %s", fn,
                        call->f ? jitops__dtype_name(call->f) : "an unsupported dtype");
  call->acc = jitops__dtype_accumulator(call->f);
  call->T = lp->shape[0];
  call->N = lp->shape[1];
  call->C = lp->shape[2];
  if (call->T > INT32_MAX || call->N > INT32_MAX || call->C > INT32_MAX)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: log_probs' shape [%lld, %lld, %lld] has an extent above 2^31 - 1", fn,
                        (long long)call->T, (long long)call->N, (long long)call->C);
  if (call->C < 1)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: log_probs has no classes (C = 0)", fn);
  JITOPS__TRY(check_addressable(fn, "log_probs", lp));
  call->lp = jitops__tensor_ptr(lp);
  jitops__tensor_strides(lp, call->lp_st);
  return JITOPS_SUCCESS;
}

static jitops_status check_targets(jitops__ctc_call *call, const jitops_runtime_t *rt,
                                   const DLTensor *t) {
  const char *fn = call->fn;
  JITOPS__TRY(check_host_or_device(fn, "targets", t, rt, t != NULL && t->ndim == 1 ? 1 : 2));
  if (t->ndim != 1 && t->ndim != 2)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: targets must be padded [N, S] or concatenated 1-D, not rank %d", fn,
                        t->ndim);
  call->ti = jitops__dtype_of(t->dtype);
  JITOPS__TRY(check_index_dtype(fn, "targets", call->ti));
  JITOPS__TRY(check_addressable(fn, "targets", t));
  int64_t st[2];
  jitops__tensor_strides(t, st);
  call->concat = t->ndim == 1;
  call->tgt_numel = jitops__tensor_numel(t);
  if (call->concat) {
    call->S = t->shape[0];
    call->tgt_st[0] = 0;
    call->tgt_st[1] = st[0];
  } else {
    if (t->shape[0] != call->N)
      return jitops__fail(
          JITOPS_ERR_INVALID_SHAPE,
          "%s: padded targets must have shape [N, S] with N = %lld, not [%lld, %lld]", fn,
          (long long)call->N, (long long)t->shape[0], (long long)t->shape[1]);
    call->S = t->shape[1];
    call->tgt_st[0] = st[0];
    call->tgt_st[1] = st[1];
  }
  call->tgt = jitops__tensor_ptr(t);
  call->host_targets = jitops__tensor_in_host_memory(t);
  return JITOPS_SUCCESS;
}

static jitops_status check_lengths(const jitops__ctc_call *call, const jitops_runtime_t *rt,
                                   const char *arg, const DLTensor *t) {
  const char *fn = call->fn;
  JITOPS__TRY(check_host_or_device(fn, arg, t, rt, 1));
  if (t->ndim != 1 || t->shape[0] != call->N)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: %s must have shape [N] = [%lld]", fn, arg,
                        (long long)call->N);
  JITOPS__TRY(check_index_dtype(fn, arg, jitops__dtype_of(t->dtype)));
  return check_addressable(fn, arg, t);
}

/* Both lengths of one dtype and in one kind of memory, and host targets only with host
 * lengths (they are read together). */
static jitops_status check_lengths_agree(jitops__ctc_call *call, const DLTensor *il,
                                         const DLTensor *tl) {
  const char *fn = call->fn;
  call->li = jitops__dtype_of(il->dtype);
  if (jitops__dtype_of(tl->dtype) != call->li)
    return jitops__fail(
        JITOPS_ERR_INVALID_DTYPE, "%s: target_lengths (%s) must have input_lengths' dtype (%s)", fn,
        jitops__dtype_name(jitops__dtype_of(tl->dtype)), jitops__dtype_name(call->li));
  call->host_lengths = jitops__tensor_in_host_memory(il);
  if (call->host_lengths != jitops__tensor_in_host_memory(tl))
    return jitops__fail(JITOPS_ERR_INVALID_DEVICE,
                        "%s: input_lengths and target_lengths must both be in host memory or "
                        "both in device memory",
                        fn);
  if (call->host_targets && !call->host_lengths)
    return jitops__fail(JITOPS_ERR_INVALID_DEVICE,
                        "%s: targets in host memory need input_lengths and target_lengths in "
                        "host memory too",
                        fn);
  return JITOPS_SUCCESS;
}

/* Device lengths are read by the kernels, which check them; the longest target they accept is
 * S, or options.max_target_length when that is shorter (concatenated targets). */
static void use_device_lengths(jitops__ctc_call *call, const DLTensor *il, const DLTensor *tl) {
  int64_t st[1];
  call->il = jitops__tensor_ptr(il);
  call->tl = jitops__tensor_ptr(tl);
  jitops__tensor_strides(il, st);
  call->il_st = st[0];
  jitops__tensor_strides(tl, st);
  call->tl_st = st[0];
  call->s_max = call->S;
  if (call->concat && call->opt.max_target_length > 0 && call->opt.max_target_length < call->S)
    call->s_max = call->opt.max_target_length;
}

jitops_status jitops__ctc_check_inputs(const char *fn, jitops_runtime_t *runtime,
                                       const jitops__ctc_inputs *in, jitops__ctc_call *call) {
  memset(call, 0, sizeof *call);
  call->fn = fn;
  JITOPS__REQUIRE_NONNULL(fn, runtime); /* names "runtime" in the message */
  if (in->options)
    call->opt = *in->options;
  else
    jitops_ctc_options_init(&call->opt);
  JITOPS__TRY(check_log_probs(call, runtime, in->log_probs));
  JITOPS__TRY(check_options(fn, &call->opt, call->C));
  JITOPS__TRY(check_targets(call, runtime, in->targets));
  JITOPS__TRY(check_lengths(call, runtime, "input_lengths", in->input_lengths));
  JITOPS__TRY(check_lengths(call, runtime, "target_lengths", in->target_lengths));
  JITOPS__TRY(check_lengths_agree(call, in->input_lengths, in->target_lengths));
  if (call->host_lengths)
    JITOPS__TRY(jitops__ctc_stage_host_data(call, in->input_lengths, in->target_lengths));
  else
    use_device_lengths(call, in->input_lengths, in->target_lengths);
  if (call->s_max > JITOPS__CTC_MAX_S)
    return jitops__fail(JITOPS_ERR_UNSUPPORTED, "%s: targets of length %lld are too long", fn,
                        (long long)call->s_max);
  return JITOPS_SUCCESS;
}

void jitops__ctc_call_release(jitops__ctc_call *call) {
  free(call->stage.bytes);
  call->stage.bytes = NULL;
}

/* ---- the outputs --------------------------------------------------------------------------- */

jitops_status jitops__ctc_check_loss(const jitops__ctc_call *call, const jitops_runtime_t *rt,
                                     const char *arg, const DLTensor *t, bool output) {
  const char *fn = call->fn;
  JITOPS__TRY(jitops__tensor_check(fn, arg, t, rt, 1));
  const jitops__dtype d = jitops__dtype_of(t->dtype);
  if (d != call->f && !(d == JITOPS__DTYPE_F32 && call->acc == JITOPS__DTYPE_F32))
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE, "%s: %s must be %s (log_probs' dtype)%s, not %s",
                        fn, arg, jitops__dtype_name(call->f), call->acc == call->f ? "" : " or f32",
                        d ? jitops__dtype_name(d) : "an unsupported dtype");
  if (call->opt.reduction == JITOPS_CTC_REDUCTION_NONE) {
    if (t->ndim != 1 || t->shape[0] != call->N)
      return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                          "%s: %s must have shape [N] = [%lld] with reduction none", fn, arg,
                          (long long)call->N);
  } else if (!(t->ndim == 0 || (t->ndim == 1 && t->shape[0] == 1))) {
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: %s must be a scalar (shape [] or [1]) with reduction sum or mean", fn,
                        arg);
  }
  return output ? check_output_layout(fn, arg, t) : check_addressable(fn, arg, t);
}

/* The addresses [lo, hi) that addressable `t` touches. */
static void address_range(const DLTensor *t, uintptr_t *lo, uintptr_t *hi) {
  int64_t below = 0, above = 0;
  jitops__tensor_byte_extent(t, &below, &above);
  const uintptr_t first = (uintptr_t)jitops__tensor_ptr(t);
  *lo = first - (uintptr_t)(0 - (uint64_t)below);
  *hi = first + (uintptr_t)above;
}

jitops_status jitops__ctc_check_grad(const jitops__ctc_call *call, const jitops_runtime_t *rt,
                                     const DLTensor *lp, const DLTensor *g) {
  const char *fn = call->fn;
  JITOPS__TRY(jitops__tensor_check(fn, "grad_log_probs", g, rt, 3));
  if (!jitops__same_shape(g, lp))
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: grad_log_probs must have log_probs' shape [%lld, %lld, %lld]", fn,
                        (long long)call->T, (long long)call->N, (long long)call->C);
  if (jitops__dtype_of(g->dtype) != call->f)
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE, "%s: grad_log_probs must be %s, as log_probs", fn,
                        jitops__dtype_name(call->f));
  JITOPS__TRY(check_output_layout(fn, "grad_log_probs", g));
  if (jitops__tensor_numel(g) > 0) {
    uintptr_t glo, ghi, llo, lhi;
    address_range(g, &glo, &ghi);
    address_range(lp, &llo, &lhi);
    if (glo < lhi && llo < ghi)
      return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                          "%s: grad_log_probs overlaps log_probs (no in-place gradient)", fn);
  }
  return JITOPS_SUCCESS;
}

/* log_alpha, or log_beta (`like` = log_alpha, whose shape and strides it must have). */
static jitops_status check_alpha_or_beta(const jitops__ctc_call *call, const jitops_runtime_t *rt,
                                         const char *arg, const DLTensor *t, const DLTensor *like) {
  const char *fn = call->fn;
  JITOPS__TRY(jitops__tensor_check(fn, arg, t, rt, 3));
  const int64_t states = 2 * call->s_max + 1;
  if (t->ndim != 3 || t->shape[0] != call->N || t->shape[1] != call->T || t->shape[2] < states)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: %s must have shape [N, T, L] = [%lld, %lld, >= %lld]", fn, arg,
                        (long long)call->N, (long long)call->T, (long long)states);
  if (t->shape[2] > INT32_MAX)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: %s's last extent is above 2^31 - 1", fn,
                        arg);
  if (like) {
    int64_t a[3], b[3];
    if (!jitops__same_shape(t, like))
      return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: %s must have log_alpha's shape", fn, arg);
    jitops__tensor_strides(t, a);
    jitops__tensor_strides(like, b);
    if (a[0] != b[0] || a[1] != b[1] || a[2] != b[2])
      return jitops__fail(JITOPS_ERR_INVALID_LAYOUT, "%s: %s must have log_alpha's strides", fn,
                          arg);
  }
  if (jitops__dtype_of(t->dtype) != call->acc)
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE, "%s: %s must be %s (the accumulation dtype)", fn,
                        arg, jitops__dtype_name(call->acc));
  return check_output_layout(fn, arg, t);
}

static jitops_status check_nll(const jitops__ctc_call *call, const jitops_runtime_t *rt,
                               const DLTensor *t) {
  const char *fn = call->fn;
  JITOPS__TRY(jitops__tensor_check(fn, "nll", t, rt, 1));
  if (t->ndim != 1 || t->shape[0] != call->N)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: nll must have shape [N] = [%lld]", fn,
                        (long long)call->N);
  if (jitops__dtype_of(t->dtype) != call->acc)
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE, "%s: nll must be %s (the accumulation dtype)", fn,
                        jitops__dtype_name(call->acc));
  return check_output_layout(fn, "nll", t);
}

jitops_status jitops__ctc_check_alpha_beta(const jitops__ctc_call *call, const jitops_runtime_t *rt,
                                           const DLTensor *log_alpha, const DLTensor *log_beta,
                                           const DLTensor *nll) {
  JITOPS__TRY(check_alpha_or_beta(call, rt, "log_alpha", log_alpha, NULL));
  JITOPS__TRY(check_alpha_or_beta(call, rt, "log_beta", log_beta, log_alpha));
  return check_nll(call, rt, nll);
}
