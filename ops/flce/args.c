/* Validation of fused linear cross-entropy calls: every argument is checked on the host
 * before any device work, and each failure names the argument and what was expected. Every
 * tensor passes jitops__check_addressable before its strides or data pointer are used, so
 * that no offset computed from them here, in plan.c or in the kernels overflows. */
#include <math.h>
#include <string.h>

#include "ops/flce/args.h"

/* The defaults live beside the checks of the options they fill in. */
void jitops_flce_options_init(jitops_flce_options *options) {
  if (options == NULL)
    return;
  memset(options, 0, sizeof *options);
  options->reduction = JITOPS_FLCE_REDUCTION_MEAN;
  options->ignore_index = -100;
}

/* A matrix for cuBLASLt: rank 2, contiguous rows, row stride >= columns. */
static jitops_status check_matrix(const char *fn, const char *arg, const DLTensor *t,
                                  jitops_runtime_t *runtime, void **ptr, int64_t *ld) {
  JITOPS__TRY(jitops__tensor_check(fn, arg, t, runtime, 2));
  if (t->ndim != 2)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: %s must have rank 2, got rank %d", fn, arg,
                        t->ndim);
  JITOPS__TRY(jitops__check_addressable(fn, arg, t));
  int64_t s[2];
  jitops__tensor_strides(t, s);
  int64_t rows = t->shape[0], cols = t->shape[1];
  if (rows > 0 && cols > 1 && s[1] != 1)
    return jitops__fail(JITOPS_ERR_INVALID_LAYOUT,
                        "%s: %s must have contiguous rows (strides[1] == 1), got strides [%lld, "
                        "%lld]",
                        fn, arg, (long long)s[0], (long long)s[1]);
  if (rows > 1 && s[0] < cols)
    return jitops__fail(JITOPS_ERR_INVALID_LAYOUT,
                        "%s: %s's row stride %lld is below its %lld columns (rows would overlap)",
                        fn, arg, (long long)s[0], (long long)cols);
  JITOPS__TRY(jitops__check_aligned(fn, arg, t));
  *ptr = jitops__tensor_ptr(t);
  *ld = rows > 1 ? s[0] : (cols > 0 ? cols : 1);
  return JITOPS_SUCCESS;
}

static jitops_status check_matrix_shape(const char *fn, const char *arg, const DLTensor *t,
                                        int64_t rows, int64_t cols, const char *dims) {
  if (t->shape[0] != rows || t->shape[1] != cols)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: %s must have shape %s = [%lld, %lld], got [%lld, %lld]", fn, arg, dims,
                        (long long)rows, (long long)cols, (long long)t->shape[0],
                        (long long)t->shape[1]);
  return JITOPS_SUCCESS;
}

/* A vector of n elements with any stride; an output's stride must not be 0. */
static jitops_status check_vector(const char *fn, const char *arg, const DLTensor *t,
                                  jitops_runtime_t *runtime, int64_t n, const char *dim,
                                  bool output, void **ptr, int64_t *stride) {
  JITOPS__TRY(jitops__tensor_check(fn, arg, t, runtime, 1));
  if (t->ndim != 1)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: %s must have rank 1 ([%s]), got rank %d", fn,
                        arg, dim, t->ndim);
  if (t->shape[0] != n)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: %s must have shape [%s] = [%lld], got [%lld]", fn, arg, dim,
                        (long long)n, (long long)t->shape[0]);
  JITOPS__TRY(jitops__check_addressable(fn, arg, t));
  int64_t s;
  jitops__tensor_strides(t, &s);
  if (output && n > 1 && s == 0)
    return jitops__fail(JITOPS_ERR_INVALID_LAYOUT,
                        "%s: %s has stride 0, but an output needs one element per row", fn, arg);
  JITOPS__TRY(jitops__check_aligned(fn, arg, t));
  *ptr = jitops__tensor_ptr(t);
  *stride = s;
  return JITOPS_SUCCESS;
}

/* Where a scalar's one element lies (its shape checked: rank 0, or [1]). */
static jitops_status check_scalar_address(const char *fn, const char *arg, const DLTensor *t) {
  JITOPS__TRY(jitops__check_addressable(fn, arg, t));
  return jitops__check_aligned(fn, arg, t);
}

/* A scalar: rank 0, or rank 1 with one element; `why` says why in the message. */
static jitops_status check_scalar(const char *fn, const char *arg, const DLTensor *t,
                                  jitops_runtime_t *runtime, const char *why, void **ptr) {
  JITOPS__TRY(jitops__tensor_check(fn, arg, t, runtime, 1));
  if (t->ndim == 1 && t->shape[0] != 1)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: %s must be a scalar (%s), got shape [%lld]",
                        fn, arg, why, (long long)t->shape[0]);
  JITOPS__TRY(check_scalar_address(fn, arg, t));
  *ptr = jitops__tensor_ptr(t);
  return JITOPS_SUCCESS;
}

static jitops_status check_float_dtype(const char *fn, const char *arg, const DLTensor *t,
                                       jitops__dtype *out) {
  *out = jitops__dtype_of(t->dtype);
  if (!jitops__dtype_is_float(*out))
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE, "%s: %s must be f16, bf16, f32 or f64, got %s",
                        fn, arg, jitops__dtype_name(*out));
  return JITOPS_SUCCESS;
}

/* An output of dtype `want`, or f32 in place of a 16-bit `want` (f32 accumulation kept). */
static jitops_status check_wide_dtype(const char *fn, const char *arg, const DLTensor *t,
                                      jitops__dtype want, jitops__dtype *out) {
  *out = jitops__dtype_of(t->dtype);
  if (*out == want || (jitops__dtype_is_half(want) && *out == JITOPS__DTYPE_F32))
    return JITOPS_SUCCESS;
  return jitops__fail(JITOPS_ERR_INVALID_DTYPE, "%s: %s must be %s%s, got %s", fn, arg,
                      jitops__dtype_name(want), jitops__dtype_is_half(want) ? " or f32" : "",
                      jitops__dtype_name(*out));
}

static jitops_status check_options(const char *fn, const jitops_flce_options *o) {
  if ((unsigned)o->reduction > (unsigned)JITOPS_FLCE_REDUCTION_SUM)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: options->reduction %d is not a jitops_flce_reduction", fn,
                        (int)o->reduction);
  if (!(o->label_smoothing >= 0.0 && o->label_smoothing <= 1.0))
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: options->label_smoothing %g must be in [0, 1]", fn,
                        o->label_smoothing);
  if (!(isfinite(o->softcap) && o->softcap >= 0.0))
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: options->softcap %g must be finite and >= 0 (0 turns it off)", fn,
                        o->softcap);
  if (!(isfinite(o->z_loss_scale) && o->z_loss_scale >= 0.0))
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: options->z_loss_scale %g must be finite and >= 0", fn,
                        o->z_loss_scale);
  if (o->chunk_rows < 0)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: options->chunk_rows %lld is negative", fn,
                        (long long)o->chunk_rows);
  if (o->scratch_budget_bytes < 0)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: options->scratch_budget_bytes %lld is negative", fn,
                        (long long)o->scratch_budget_bytes);
  return JITOPS_SUCCESS;
}

/* jitops_flce_forward takes a whole vocabulary. */
static jitops_status check_unsharded(const char *fn, const jitops_flce_options *o) {
  if (o->vocab_start == 0 && o->vocab_size == 0)
    return JITOPS_SUCCESS;
  bool start = o->vocab_start != 0;
  return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                      "%s: options->%s is %lld, but only the jitops_flce_shard_* entry points take "
                      "a vocabulary shard; set vocab_start and vocab_size to 0",
                      fn, start ? "vocab_start" : "vocab_size",
                      (long long)(start ? o->vocab_start : o->vocab_size));
}

/* A shard's rows [vocab_start, vocab_start + V_r) within the vocabulary's vocab_size. */
static jitops_status check_shard_range(const char *fn, jitops__flce_call *c) {
  const jitops_flce_options *o = &c->opt;
  int64_t end;
  if (o->vocab_start < 0)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: options->vocab_start %lld is negative",
                        fn, (long long)o->vocab_start);
  if (!jitops__add_i64(o->vocab_start, c->v, &end) || o->vocab_size < end)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: options->vocab_size %lld is below vocab_start + V_r = %lld + %lld "
                        "(weight's rows must lie within the vocabulary)",
                        fn, (long long)o->vocab_size, (long long)o->vocab_start, (long long)c->v);
  c->vocab0 = o->vocab_start;
  c->vocab = o->vocab_size;
  return JITOPS_SUCCESS;
}

/* input, weight, bias and target: the problem's sizes and T. */
static jitops_status check_operands(const char *fn, jitops_runtime_t *runtime,
                                    const jitops_flce_tensors *ts, jitops__flce_call *c) {
  void *p;
  JITOPS__TRY(check_matrix(fn, "input", ts->input, runtime, &p, &c->ldx));
  c->x = p;
  JITOPS__TRY(check_float_dtype(fn, "input", ts->input, &c->t));
  c->acc = jitops__dtype_accumulator(c->t);
  c->bt = ts->input->shape[0];
  c->h = ts->input->shape[1];
  if (c->bt > 2147483647)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: input has BT = %lld rows; at most 2^31 - 1 are supported", fn,
                        (long long)c->bt);
  if (c->h < 1)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: input has H = 0 columns; H must be >= 1",
                        fn);
  JITOPS__TRY(check_matrix(fn, "weight", ts->weight, runtime, &p, &c->ldw));
  c->w = p;
  c->v = ts->weight->shape[0];
  if (ts->weight->shape[1] != c->h)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: weight must have shape [V, H] with H = %lld (input's columns), got "
                        "[%lld, %lld]",
                        fn, (long long)c->h, (long long)c->v, (long long)ts->weight->shape[1]);
  if (c->v < 1)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: weight has V = 0 rows; the vocabulary V must be >= 1", fn);
  if (jitops__dtype_of(ts->weight->dtype) != c->t)
    return jitops__fail(
        JITOPS_ERR_INVALID_DTYPE, "%s: weight is %s but input is %s; they must match", fn,
        jitops__dtype_name(jitops__dtype_of(ts->weight->dtype)), jitops__dtype_name(c->t));
  if (ts->bias != NULL) {
    JITOPS__TRY(check_vector(fn, "bias", ts->bias, runtime, c->v, "V", false, &p, &c->bias_stride));
    c->bias = p;
    if (jitops__dtype_of(ts->bias->dtype) != c->t)
      return jitops__fail(
          JITOPS_ERR_INVALID_DTYPE, "%s: bias is %s but input is %s; they must match", fn,
          jitops__dtype_name(jitops__dtype_of(ts->bias->dtype)), jitops__dtype_name(c->t));
  }
  JITOPS__TRY(
      check_vector(fn, "target", ts->target, runtime, c->bt, "BT", false, &p, &c->target_stride));
  c->target = p;
  if (jitops__dtype_of(ts->target->dtype) != JITOPS__DTYPE_I64)
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE, "%s: target must be int64, got %s", fn,
                        jitops__dtype_name(jitops__dtype_of(ts->target->dtype)));
  return JITOPS_SUCCESS;
}

/* A [BT] vector of the accumulation type: lse, or a shard's lse_local, linear or lse. */
static jitops_status check_acc_rows(const char *fn, const char *arg, const DLTensor *t,
                                    jitops_runtime_t *runtime, const jitops__flce_call *c,
                                    bool output, void **ptr, int64_t *stride) {
  JITOPS__TRY(check_vector(fn, arg, t, runtime, c->bt, "BT", output, ptr, stride));
  if (jitops__dtype_of(t->dtype) != c->acc)
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE, "%s: %s must be %s, got %s", fn, arg,
                        jitops__dtype_name(c->acc), jitops__dtype_name(jitops__dtype_of(t->dtype)));
  return JITOPS_SUCCESS;
}

/* grad_output (dy): [BT] for reduction none, else a scalar; NULL means 1. */
static jitops_status check_grad_output(const char *fn, jitops_runtime_t *runtime,
                                       const jitops_flce_tensors *ts, jitops__flce_call *c) {
  void *p;
  c->dy_dtype = JITOPS__DTYPE_F32;
  if (ts->grad_output == NULL)
    return JITOPS_SUCCESS;
  if (c->opt.reduction == JITOPS_FLCE_REDUCTION_NONE)
    JITOPS__TRY(check_vector(fn, "grad_output", ts->grad_output, runtime, c->bt, "BT", false, &p,
                             &c->dy_stride));
  else
    JITOPS__TRY(check_scalar(fn, "grad_output", ts->grad_output, runtime,
                             "the loss is reduced to one value", &p));
  JITOPS__TRY(check_float_dtype(fn, "grad_output", ts->grad_output, &c->dy_dtype));
  c->dy = p;
  return JITOPS_SUCCESS;
}

/* grad_output, loss and lse: their shapes follow the reduction. */
static jitops_status check_loss_side(const char *fn, jitops_runtime_t *runtime,
                                     const jitops_flce_tensors *ts, jitops__flce_call *c) {
  bool none = c->opt.reduction == JITOPS_FLCE_REDUCTION_NONE;
  JITOPS__TRY(check_grad_output(fn, runtime, ts, c));
  if (none)
    JITOPS__TRY(
        check_vector(fn, "loss", ts->loss, runtime, c->bt, "BT", true, &c->loss, &c->loss_stride));
  else
    JITOPS__TRY(check_scalar(fn, "loss", ts->loss, runtime, "reduction mean or sum", &c->loss));
  c->loss_dtype = jitops__dtype_of(ts->loss->dtype);
  if (c->loss_dtype != c->t && c->loss_dtype != c->acc)
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE, "%s: loss must be %s or %s, got %s", fn,
                        jitops__dtype_name(c->t), jitops__dtype_name(c->acc),
                        jitops__dtype_name(c->loss_dtype));
  if (ts->lse != NULL)
    JITOPS__TRY(check_acc_rows(fn, "lse", ts->lse, runtime, c, true, &c->lse, &c->lse_stride));
  return JITOPS_SUCCESS;
}

static jitops_status check_grads(const char *fn, jitops_runtime_t *runtime,
                                 const jitops_flce_tensors *ts, jitops__flce_call *c) {
  if (ts->grad_input != NULL) {
    JITOPS__TRY(check_matrix(fn, "grad_input", ts->grad_input, runtime, &c->gi, &c->ldgi));
    JITOPS__TRY(check_matrix_shape(fn, "grad_input", ts->grad_input, c->bt, c->h, "[BT, H]"));
    if (jitops__dtype_of(ts->grad_input->dtype) != c->t)
      return jitops__fail(JITOPS_ERR_INVALID_DTYPE, "%s: grad_input must be %s (input's), got %s",
                          fn, jitops__dtype_name(c->t),
                          jitops__dtype_name(jitops__dtype_of(ts->grad_input->dtype)));
  }
  if (ts->grad_weight != NULL) {
    JITOPS__TRY(check_matrix(fn, "grad_weight", ts->grad_weight, runtime, &c->gw, &c->ldgw));
    JITOPS__TRY(check_matrix_shape(fn, "grad_weight", ts->grad_weight, c->v, c->h, "[V, H]"));
    JITOPS__TRY(check_wide_dtype(fn, "grad_weight", ts->grad_weight, c->t, &c->gw_dtype));
  }
  if (ts->grad_bias != NULL) {
    if (ts->bias == NULL)
      return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                          "%s: grad_bias is given but bias is NULL (no bias, no gradient)", fn);
    JITOPS__TRY(check_vector(fn, "grad_bias", ts->grad_bias, runtime, c->v, "V", true, &c->gb,
                             &c->gb_stride));
    JITOPS__TRY(check_wide_dtype(fn, "grad_bias", ts->grad_bias, c->t, &c->gb_dtype));
  }
  return JITOPS_SUCCESS;
}

/* What every entry point checks first: the runtime, the options, and the operands. */
static jitops_status check_start(const char *fn, jitops__flce_kind kind, jitops_runtime_t *runtime,
                                 const jitops_flce_tensors *tensors,
                                 const jitops_flce_options *options, jitops__flce_call *call) {
  JITOPS__REQUIRE_NONNULL(fn, runtime);
  JITOPS__REQUIRE_NONNULL(fn, tensors);
  memset(call, 0, sizeof *call);
  call->kind = kind;
  if (options != NULL)
    call->opt = *options;
  else
    jitops_flce_options_init(&call->opt);
  JITOPS__TRY(check_options(fn, &call->opt));
  if (kind == JITOPS__FLCE_FORWARD)
    JITOPS__TRY(check_unsharded(fn, &call->opt));
  JITOPS__TRY(check_operands(fn, runtime, tensors, call));
  if (kind == JITOPS__FLCE_FORWARD) {
    call->vocab = call->v;
    return JITOPS_SUCCESS;
  }
  return check_shard_range(fn, call);
}

jitops_status jitops__flce_check_forward(const char *fn, jitops_runtime_t *runtime,
                                         const jitops_flce_tensors *tensors,
                                         const jitops_flce_options *options,
                                         jitops__flce_call *call) {
  JITOPS__TRY(check_start(fn, JITOPS__FLCE_FORWARD, runtime, tensors, options, call));
  JITOPS__TRY(check_loss_side(fn, runtime, tensors, call));
  return check_grads(fn, runtime, tensors, call);
}

/* ---- the shard entry points ------------------------------------------------------------------ */

typedef struct named_tensor {
  const char *arg;
  const DLTensor *t;
} named_tensor;

/* Members of jitops_flce_tensors that an entry point does not take must be NULL. */
static jitops_status require_null(const char *fn, const named_tensor *unused, size_t n,
                                  const char *why) {
  for (size_t i = 0; i < n; ++i)
    if (unused[i].t != NULL)
      return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: tensors->%s must be NULL: %s", fn,
                          unused[i].arg, why);
  return JITOPS_SUCCESS;
}

/* Whether two validated, addressable tensors may share a byte: their spans intersect, unless
 * both are vectors of one stride whose elements interleave (two columns of one matrix). */
static bool may_overlap(const DLTensor *a, const DLTensor *b) {
  int64_t alo, ahi, blo, bhi;
  if (jitops__tensor_numel(a) == 0 || jitops__tensor_numel(b) == 0)
    return false;
  if (!jitops__tensor_byte_extent(a, &alo, &ahi) || !jitops__tensor_byte_extent(b, &blo, &bhi))
    return true;
  /* Inside the address space (jitops__check_addressable): no sum below wraps. */
  uintptr_t a0 = (uintptr_t)jitops__tensor_ptr(a) + (uintptr_t)alo,
            a1 = (uintptr_t)jitops__tensor_ptr(a) + (uintptr_t)ahi,
            b0 = (uintptr_t)jitops__tensor_ptr(b) + (uintptr_t)blo,
            b1 = (uintptr_t)jitops__tensor_ptr(b) + (uintptr_t)bhi;
  if (a1 <= b0 || b1 <= a0)
    return false;
  size_t elem = jitops__dtype_size(jitops__dtype_of(a->dtype));
  if (a->ndim != 1 || b->ndim != 1 || a->shape[0] < 2 || b->shape[0] < 2 ||
      elem != jitops__dtype_size(jitops__dtype_of(b->dtype)))
    return true;
  int64_t sa, sb;
  jitops__tensor_strides(a, &sa);
  jitops__tensor_strides(b, &sb);
  if (sa != sb || sa == 0)
    return true;
  /* One grid of period |stride| bytes each (the span fits int64): apart by less than an
   * element modulo the period, or never. */
  uintptr_t period = (uintptr_t)(sa < 0 ? -(uint64_t)sa : (uint64_t)sa) * elem;
  uintptr_t r = (b0 > a0 ? b0 - a0 : a0 - b0) % period;
  return r < elem || period - r < elem;
}

/* Outputs must not overlap each other or the inputs (NULL entries are absent). */
static jitops_status check_disjoint(const char *fn, const named_tensor *outs, size_t nouts,
                                    const named_tensor *ins, size_t nins) {
  for (size_t i = 0; i < nouts; ++i) {
    if (outs[i].t == NULL)
      continue;
    for (size_t j = 0; j < nouts + nins; ++j) {
      const named_tensor *o = j < nouts ? &outs[j] : &ins[j - nouts];
      if ((j < nouts && j <= i) || o->t == NULL || !may_overlap(outs[i].t, o->t))
        continue;
      return jitops__fail(JITOPS_ERR_INVALID_LAYOUT,
                          "%s: %s overlaps %s: outputs must not share memory with each other or "
                          "the inputs",
                          fn, outs[i].arg, o->arg);
    }
  }
  return JITOPS_SUCCESS;
}

jitops_status jitops__flce_check_shard_stats(const char *fn, jitops_runtime_t *runtime,
                                             const jitops_flce_tensors *tensors,
                                             const jitops_flce_options *options,
                                             const DLTensor *lse_local, const DLTensor *linear,
                                             jitops__flce_call *call) {
  JITOPS__TRY(check_start(fn, JITOPS__FLCE_SHARD_STATS, runtime, tensors, options, call));
  const named_tensor unused[] = {{"grad_output", tensors->grad_output},
                                 {"loss", tensors->loss},
                                 {"lse", tensors->lse},
                                 {"grad_input", tensors->grad_input},
                                 {"grad_weight", tensors->grad_weight},
                                 {"grad_bias", tensors->grad_bias}};
  JITOPS__TRY(require_null(fn, unused, sizeof unused / sizeof unused[0],
                           "the statistics' outputs are lse_local and linear"));
  JITOPS__TRY(check_acc_rows(fn, "lse_local", lse_local, runtime, call, true, &call->lse,
                             &call->lse_stride));
  JITOPS__TRY(
      check_acc_rows(fn, "linear", linear, runtime, call, true, &call->loss, &call->loss_stride));
  call->loss_dtype = call->acc;
  const named_tensor outs[] = {{"lse_local", lse_local}, {"linear", linear}};
  const named_tensor ins[] = {{"input", tensors->input},
                              {"weight", tensors->weight},
                              {"bias", tensors->bias},
                              {"target", tensors->target}};
  return check_disjoint(fn, outs, 2, ins, sizeof ins / sizeof ins[0]);
}

jitops_status jitops__flce_check_shard_backward(const char *fn, jitops_runtime_t *runtime,
                                                const jitops_flce_tensors *tensors,
                                                const jitops_flce_options *options,
                                                const DLTensor *lse, jitops__flce_call *call) {
  JITOPS__TRY(check_start(fn, JITOPS__FLCE_SHARD_BACKWARD, runtime, tensors, options, call));
  const named_tensor unused[] = {{"loss", tensors->loss}, {"lse", tensors->lse}};
  JITOPS__TRY(require_null(fn, unused, sizeof unused / sizeof unused[0],
                           "the backward reads the combined lse from its lse argument"));
  JITOPS__TRY(check_grad_output(fn, runtime, tensors, call));
  void *p;
  JITOPS__TRY(check_acc_rows(fn, "lse", lse, runtime, call, false, &p, &call->saved_lse_stride));
  call->saved_lse = p;
  JITOPS__TRY(check_grads(fn, runtime, tensors, call));
  const named_tensor outs[] = {{"grad_input", tensors->grad_input},
                               {"grad_weight", tensors->grad_weight},
                               {"grad_bias", tensors->grad_bias}};
  const named_tensor ins[] = {
      {"input", tensors->input},   {"weight", tensors->weight},           {"bias", tensors->bias},
      {"target", tensors->target}, {"grad_output", tensors->grad_output}, {"lse", lse}};
  return check_disjoint(fn, outs, 3, ins, sizeof ins / sizeof ins[0]);
}

void jitops__flce_problem_of(const jitops__flce_call *c, jitops__flce_problem *p) {
  memset(p, 0, sizeof *p);
  p->bt = c->bt;
  p->h = c->h;
  p->v = c->v;
  p->elem = jitops__dtype_size(c->t);
  p->acc_elem = jitops__dtype_size(c->acc);
  p->grad_input = c->gi != NULL;
  p->grad_weight = c->gw != NULL;
  p->grad_bias = c->gb != NULL;
  p->grad_weight_16bit = c->gw != NULL && jitops__dtype_size(c->gw_dtype) == 2;
  p->chunk_rows = c->opt.chunk_rows;
  p->budget = c->opt.scratch_budget_bytes > 0 ? c->opt.scratch_budget_bytes
                                              : JITOPS_FLCE_DEFAULT_SCRATCH_BUDGET;
}

/* One gradient of the backward: any float dtype, a matrix or (grad_bias) a vector. */
static jitops_status check_backward_grad(const char *fn, const char *arg, DLTensor *t,
                                         jitops_runtime_t *runtime, bool vector,
                                         jitops__flce_grad *g) {
  memset(g, 0, sizeof *g);
  if (t == NULL)
    return JITOPS_SUCCESS;
  if (vector) {
    JITOPS__TRY(jitops__tensor_check(fn, arg, t, runtime, 1));
    if (t->ndim != 1)
      return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: %s must have rank 1, got rank %d", fn, arg,
                          t->ndim);
    JITOPS__TRY(check_vector(fn, arg, t, runtime, t->shape[0], "V", true, &g->data, &g->ld));
    g->rows = t->shape[0];
    g->cols = 1;
  } else {
    JITOPS__TRY(check_matrix(fn, arg, t, runtime, &g->data, &g->ld));
    g->rows = t->shape[0];
    g->cols = t->shape[1];
  }
  return check_float_dtype(fn, arg, t, &g->dtype);
}

jitops_status jitops__flce_check_backward(const char *fn, jitops_runtime_t *runtime,
                                          const DLTensor *grad_output, DLTensor *grad_input,
                                          DLTensor *grad_weight, DLTensor *grad_bias,
                                          jitops__dtype *dy_dtype, jitops__flce_grad grads[3]) {
  JITOPS__REQUIRE_NONNULL(fn, runtime);
  JITOPS__TRY(jitops__tensor_check(fn, "grad_output", grad_output, runtime, 1));
  if (grad_output->ndim == 1 && grad_output->shape[0] != 1)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: grad_output has %lld elements but must be a scalar: saved gradients "
                        "are already summed over rows, so a per-token dy (reduction none) must "
                        "be passed to jitops_flce_forward as tensors->grad_output",
                        fn, (long long)grad_output->shape[0]);
  JITOPS__TRY(check_scalar_address(fn, "grad_output", grad_output));
  JITOPS__TRY(check_float_dtype(fn, "grad_output", grad_output, dy_dtype));
  JITOPS__TRY(check_backward_grad(fn, "grad_input", grad_input, runtime, false, &grads[0]));
  JITOPS__TRY(check_backward_grad(fn, "grad_weight", grad_weight, runtime, false, &grads[1]));
  return check_backward_grad(fn, "grad_bias", grad_bias, runtime, true, &grads[2]);
}
