/* CTC loss: host side. Validates every argument, picks the capacity bucket and the storage
 * tier, stages host lengths and targets, and launches the kernels of templates/ctc.cuh:
 *   jitops_ctc_loss           alpha_kernel (MODE_LOSS, or MODE_VALUES + reduce_kernel)
 *   jitops_ctc_loss_backward  alpha_kernel (MODE_AB: alpha, beta, label grouping) + grad_kernel
 *                             (+ reduce_kernel when the loss is requested)
 *   jitops_ctc_alpha_beta     alpha_kernel (MODE_AB into the caller's tensors)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jitops/ctc.h"
#include "ops/catalogue_family.h"
#include "runtime/op_support.h"

/* ---- mirrors of the template's argument structs (templates/ctc.cuh) ----------------------- */

typedef struct ctc_alpha_args {
  const void *lp;
  long long lp_st_t, lp_st_n, lp_st_c;
  const void *tgt;
  long long tgt_st_n, tgt_st_s;
  long long tgt_numel;
  const void *in_len, *tgt_len;
  long long in_len_st, tgt_len_st;
  const long long *offsets;
  void *loss;
  long long loss_st;
  void *values;
  void *alpha, *beta;
  long long ab_st_n, ab_st_t, ab_st_s;
  void *nll;
  long long nll_st;
  int *info;
  int *link;
  long long link_st;
  void *mem;
  long long mem_block_bytes;
  int T, N, C, blank;
  int s_max;
  int reduction;
  int zero_infinity;
  int ab_len;
  int fill;
  int pad_;
} ctc_alpha_args;

typedef struct ctc_grad_args {
  const void *lp;
  long long lp_st_t, lp_st_n, lp_st_c;
  void *grad;
  long long g_st_t, g_st_n, g_st_c;
  void *alpha;
  const void *beta;
  long long ab_st_n, ab_st_t;
  const void *nll;
  const int *info;
  const int *link;
  long long link_st;
  const void *grad_loss;
  long long grad_loss_st;
  int T, N, C, blank;
  int reduction, zero_infinity;
  int chunks;
  int link_smem;
} ctc_grad_args;

typedef struct ctc_reduce_args {
  const void *values;
  void *out;
  long long out_st;
  int N, reduction;
} ctc_reduce_args;

enum { MODE_LOSS = 0, MODE_VALUES = 1, MODE_AB = 2 };
enum { STORE_REG = 0, STORE_SHARED = 1, STORE_GLOBAL = 2 };
enum { OFFS_PADDED = 0, OFFS_HOST = 1, OFFS_DEVICE = 2 };

#define CTC_SOURCE         "jitops/ctc.cuh"
#define CTC_MIN_CAP        32
#define CTC_REG_MAX_CAP    8192
#define CTC_MAX_CAP        (1 << 30)
#define CTC_GRAD_THREADS   256
#define CTC_GRAD_ROWS      32 /* rows of one sample per gradient block: 8 warps x 4 */
#define CTC_REDUCE_THREADS 256

/* ---- the validated problem --------------------------------------------------------------- */

typedef struct ctc_problem {
  const char *fn;
  jitops_ctc_options opt;
  jitops__dtype f, acc, ti, li;
  int64_t T, N, C;
  const void *lp;
  int64_t lp_st[3];
  int concat;
  int64_t S;         /* padded: targets' second extent; concatenated: its length */
  int64_t tgt_numel; /* elements of the targets tensor */
  const void *tgt;
  int64_t tgt_st[2]; /* padded: (n, s); concatenated: (0, stride) */
  int host_lengths, host_targets;
  const void *il, *tl; /* device lengths */
  int64_t il_st, tl_st;
  int64_t s_max; /* longest target the kernels accept */
  /* host staging: [in_len N][tgt_len N][offset N] int64, then the compact targets */
  void *stage;
  size_t stage_bytes, stage_targets_at;
  /* plan */
  int64_t cap;
  int store, k, nt;
  size_t dyn_smem, mem_block_bytes;
} ctc_problem;

static void problem_free(ctc_problem *p) {
  free(p->stage);
  p->stage = NULL;
}

/* ---- small helpers ----------------------------------------------------------------------- */

static int mul_ok(size_t a, size_t b, size_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}

static size_t align256(size_t x) {
  return (x + 255) & ~(size_t)255;
}

static int64_t read_host_int(const DLTensor *t, const int64_t *strides, int64_t i) {
  const char *base = (const char *)jitops__tensor_ptr(t);
  if (jitops__dtype_of(t->dtype) == JITOPS__DTYPE_I32)
    return ((const int32_t *)base)[i * strides[0]];
  return ((const int64_t *)base)[i * strides[0]];
}

/* An empty tensor is never read, so only a non-empty one must be element-aligned. */
static jitops_status check_aligned(const char *fn, const char *arg, const DLTensor *t) {
  return jitops__tensor_numel(t) > 0 ? jitops__check_aligned(fn, arg, t) : JITOPS_SUCCESS;
}

/* An output's layout: element-aligned, and no element written twice. */
static jitops_status check_output_layout(const char *fn, const char *arg, const DLTensor *t) {
  JITOPS__TRY(check_aligned(fn, arg, t));
  return jitops__check_no_self_overlap(fn, arg, t);
}

/* Byte range [lo, hi) that `t` touches. */
static void byte_range(const DLTensor *t, uintptr_t *lo, uintptr_t *hi) {
  int64_t strides[8], min_off = 0, max_off = 0;
  jitops__tensor_strides(t, strides);
  for (int d = 0; d < t->ndim; ++d) {
    int64_t span = strides[d] * (t->shape[d] - 1);
    if (span < 0)
      min_off += span;
    else
      max_off += span;
  }
  size_t size = jitops__dtype_size(jitops__dtype_of(t->dtype));
  uintptr_t base = (uintptr_t)jitops__tensor_ptr(t);
  *lo = base + (uintptr_t)(min_off * (int64_t)size);
  *hi = base + (uintptr_t)(max_off * (int64_t)size) + size;
}

/* ---- validation of the inputs ------------------------------------------------------------ */

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

static jitops_status check_log_probs(ctc_problem *p, jitops_runtime_t *rt, const DLTensor *lp) {
  const char *fn = p->fn;
  JITOPS__TRY(jitops__tensor_check(fn, "log_probs", lp, rt, 3));
  if (lp->ndim != 3)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: log_probs must have rank 3 [T, N, C], not %d", fn, lp->ndim);
  p->f = jitops__dtype_of(lp->dtype);
  if (!jitops__dtype_is_float(p->f))
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE,
                        "%s: log_probs must be f16, bf16, f32 or f64, not %s", fn,
                        p->f ? jitops__dtype_name(p->f) : "an unsupported dtype");
  p->acc = jitops__dtype_accumulator(p->f);
  JITOPS__TRY(check_aligned(fn, "log_probs", lp));
  p->T = lp->shape[0];
  p->N = lp->shape[1];
  p->C = lp->shape[2];
  if (p->T > INT32_MAX || p->N > INT32_MAX || p->C > INT32_MAX)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: log_probs' shape [%lld, %lld, %lld] has an extent above 2^31 - 1", fn,
                        (long long)p->T, (long long)p->N, (long long)p->C);
  if (p->C < 1)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: log_probs has no classes (C = 0)", fn);
  p->lp = jitops__tensor_ptr(lp);
  jitops__tensor_strides(lp, p->lp_st);
  return JITOPS_SUCCESS;
}

static jitops_status check_lengths_tensor(ctc_problem *p, jitops_runtime_t *rt, const char *arg,
                                          const DLTensor *t) {
  const char *fn = p->fn;
  if (t == NULL)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, arg);
  if (jitops__tensor_in_host_memory(t))
    JITOPS__TRY(jitops__host_tensor_check(fn, arg, t, 1));
  else
    JITOPS__TRY(jitops__tensor_check(fn, arg, t, rt, 1));
  if (t->ndim != 1 || t->shape[0] != p->N)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: %s must have shape [N] = [%lld]", fn, arg,
                        (long long)p->N);
  jitops__dtype d = jitops__dtype_of(t->dtype);
  if (!jitops__dtype_is_int(d))
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE, "%s: %s must be i32 or i64, not %s", fn, arg,
                        d ? jitops__dtype_name(d) : "an unsupported dtype");
  return check_aligned(fn, arg, t);
}

static jitops_status check_targets_tensor(ctc_problem *p, jitops_runtime_t *rt, const DLTensor *t) {
  const char *fn = p->fn;
  if (t == NULL)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: targets is NULL", fn);
  if (jitops__tensor_in_host_memory(t))
    JITOPS__TRY(jitops__host_tensor_check(fn, "targets", t, t->ndim == 1 ? 1 : 2));
  else
    JITOPS__TRY(jitops__tensor_check(fn, "targets", t, rt, 2));
  if (t->ndim != 1 && t->ndim != 2)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: targets must be padded [N, S] or concatenated 1-D, not rank %d", fn,
                        t->ndim);
  p->ti = jitops__dtype_of(t->dtype);
  if (!jitops__dtype_is_int(p->ti))
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE, "%s: targets must be i32 or i64, not %s", fn,
                        p->ti ? jitops__dtype_name(p->ti) : "an unsupported dtype");
  JITOPS__TRY(check_aligned(fn, "targets", t));
  int64_t st[2];
  jitops__tensor_strides(t, st);
  p->concat = t->ndim == 1;
  p->tgt_numel = jitops__tensor_numel(t);
  if (p->concat) {
    p->S = t->shape[0];
    p->tgt_st[0] = 0;
    p->tgt_st[1] = st[0];
  } else {
    if (t->shape[0] != p->N)
      return jitops__fail(
          JITOPS_ERR_INVALID_SHAPE,
          "%s: padded targets must have shape [N, S] with N = %lld, not [%lld, %lld]", fn,
          (long long)p->N, (long long)t->shape[0], (long long)t->shape[1]);
    p->S = t->shape[1];
    p->tgt_st[0] = st[0];
    p->tgt_st[1] = st[1];
  }
  p->tgt = jitops__tensor_ptr(t);
  p->host_targets = jitops__tensor_in_host_memory(t);
  return JITOPS_SUCCESS;
}

/* Reads the host lengths into the staging buffer, checking each; then the host targets. */
static jitops_status stage_host_data(ctc_problem *p, const DLTensor *targets, const DLTensor *il,
                                     const DLTensor *tl) {
  const char *fn = p->fn;
  int64_t N = p->N, ils[1], tls[1];
  jitops__tensor_strides(il, ils);
  jitops__tensor_strides(tl, tls);
  size_t tsize = jitops__dtype_size(p->ti);
  size_t desc_bytes = (size_t)N * 3 * sizeof(int64_t);
  size_t tgt_bytes = 0;
  if (p->host_targets && !mul_ok((size_t)p->tgt_numel, tsize, &tgt_bytes))
    return jitops__fail(JITOPS_ERR_OUT_OF_MEMORY, "%s: targets are too large to stage", fn);
  p->stage_targets_at = align256(desc_bytes);
  p->stage_bytes = p->stage_targets_at + tgt_bytes;
  p->stage = malloc(p->stage_bytes ? p->stage_bytes : 1);
  if (p->stage == NULL)
    return jitops__fail(JITOPS_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes of staging", fn,
                        p->stage_bytes);
  int64_t *in_len = (int64_t *)p->stage, *tgt_len = in_len + N, *offset = in_len + 2 * N;
  int64_t total = 0, longest = 0;
  for (int64_t n = 0; n < N; ++n) {
    int64_t a = read_host_int(il, ils, n), b = read_host_int(tl, tls, n);
    if (a < 0 || a > p->T)
      return jitops__fail(JITOPS_ERR_OUT_OF_RANGE,
                          "%s: input_lengths[%lld] = %lld is outside [0, T] with T = %lld", fn,
                          (long long)n, (long long)a, (long long)p->T);
    if (b < 0 || (!p->concat && b > p->S))
      return jitops__fail(JITOPS_ERR_OUT_OF_RANGE,
                          "%s: target_lengths[%lld] = %lld is outside [0, S] with S = %lld", fn,
                          (long long)n, (long long)b, (long long)p->S);
    if (p->concat && b > p->S - total)
      return jitops__fail(JITOPS_ERR_OUT_OF_RANGE,
                          "%s: target_lengths[0..%lld] add up past the %lld concatenated targets",
                          fn, (long long)n, (long long)p->S);
    in_len[n] = a;
    tgt_len[n] = b;
    offset[n] = total;
    if (p->concat)
      total += b;
    if (b > longest)
      longest = b;
  }
  p->s_max = longest;
  if (!p->host_targets)
    return JITOPS_SUCCESS;
  /* Check the used targets, and copy the whole tensor compactly. */
  const char *src = (const char *)p->tgt;
  char *dst = (char *)p->stage + p->stage_targets_at;
  int64_t rows = p->concat ? 1 : N, cols = p->S;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      int64_t at = r * p->tgt_st[0] + c * p->tgt_st[1];
      memcpy(dst + (size_t)(r * cols + c) * tsize, src + at * (int64_t)tsize, tsize);
    }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < tgt_len[n]; ++j) {
      int64_t idx = p->concat ? offset[n] + j : n * cols + j;
      int64_t v = tsize == 4 ? ((const int32_t *)dst)[idx] : ((const int64_t *)dst)[idx];
      if (v < 0 || v >= p->C || v == p->opt.blank)
        return jitops__fail(JITOPS_ERR_OUT_OF_RANGE,
                            "%s: targets of sample %lld, position %lld, is %lld: labels must lie "
                            "in [0, C) with C = %lld and differ from blank = %lld",
                            fn, (long long)n, (long long)j, (long long)v, (long long)p->C,
                            (long long)p->opt.blank);
    }
  p->tgt_st[0] = p->concat ? 0 : cols;
  p->tgt_st[1] = 1;
  return JITOPS_SUCCESS;
}

/* Chooses the capacity bucket, the storage tier and the launch shape. */
static jitops_status plan(ctc_problem *p, jitops_runtime_t *rt) {
  const char *fn = p->fn;
  int64_t states = 2 * p->s_max + 1;
  int64_t cap = CTC_MIN_CAP;
  while (cap < states && cap < CTC_MAX_CAP)
    cap *= 2;
  if (cap < states)
    return jitops__fail(JITOPS_ERR_UNSUPPORTED,
                        "%s: targets of length %lld need %lld states, more than 2^30", fn,
                        (long long)p->s_max, (long long)states);
  p->cap = cap;
  const jitops__device_props *props = jitops__runtime_props(rt);
  size_t acc = jitops__dtype_size(p->acc);
  jitops_ctc_storage want = p->opt.storage;

  int mk = (int)(cap / 1024 < 2 ? 2 : cap / 1024);
  int mnt = (int)(((states + mk - 1) / mk + 31) / 32 * 32);
  size_t dyn = (size_t)mk * (size_t)mnt * acc + (size_t)(mk / 2) * (size_t)mnt * sizeof(int);
  size_t static_smem = 2 * 1024 * acc + 2 * acc + 32 * sizeof(long long) + 64;
  int shared_fits = dyn + static_smem <= props->smem_per_block_optin;

  if (want == JITOPS_CTC_STORAGE_REGISTERS && cap > CTC_REG_MAX_CAP)
    return jitops__fail(JITOPS_ERR_UNSUPPORTED,
                        "%s: options.storage REGISTERS holds up to %d states; these targets need "
                        "a capacity of %lld",
                        fn, CTC_REG_MAX_CAP, (long long)cap);
  if (want == JITOPS_CTC_STORAGE_SHARED && !shared_fits)
    return jitops__fail(JITOPS_ERR_UNSUPPORTED,
                        "%s: options.storage SHARED needs %zu bytes of shared memory; the device "
                        "allows %zu",
                        fn, dyn + static_smem, props->smem_per_block_optin);
  if (want == JITOPS_CTC_STORAGE_REGISTERS ||
      (want == JITOPS_CTC_STORAGE_AUTO && cap <= CTC_REG_MAX_CAP)) {
    p->store = STORE_REG;
    p->k = cap <= 256 ? 2 : cap <= 512 ? 4 : 8; /* as config<CAP, STORE_REG>::K */
    p->nt = (int)(((states + p->k - 1) / p->k + 31) / 32 * 32);
    p->dyn_smem = 0;
    p->mem_block_bytes = 0;
  } else {
    p->store =
        (want == JITOPS_CTC_STORAGE_SHARED || (want == JITOPS_CTC_STORAGE_AUTO && shared_fits))
            ? STORE_SHARED
            : STORE_GLOBAL;
    p->k = mk;
    p->nt = mnt;
    p->dyn_smem = p->store == STORE_SHARED ? dyn : 0;
    p->mem_block_bytes = p->store == STORE_GLOBAL ? align256(dyn) : 0;
  }
  return JITOPS_SUCCESS;
}

/* Everything about the inputs, shared by the entry points. */
static jitops_status validate_inputs(ctc_problem *p, const char *fn, jitops_runtime_t *rt,
                                     const DLTensor *log_probs, const DLTensor *targets,
                                     const DLTensor *input_lengths, const DLTensor *target_lengths,
                                     const jitops_ctc_options *options) {
  memset(p, 0, sizeof *p);
  p->fn = fn;
  JITOPS__REQUIRE_NONNULL(fn, rt);
  if (options)
    p->opt = *options;
  else
    jitops_ctc_options_init(&p->opt);
  JITOPS__TRY(check_log_probs(p, rt, log_probs));
  JITOPS__TRY(check_options(fn, &p->opt, p->C));
  JITOPS__TRY(check_targets_tensor(p, rt, targets));
  JITOPS__TRY(check_lengths_tensor(p, rt, "input_lengths", input_lengths));
  JITOPS__TRY(check_lengths_tensor(p, rt, "target_lengths", target_lengths));
  p->li = jitops__dtype_of(input_lengths->dtype);
  if (jitops__dtype_of(target_lengths->dtype) != p->li)
    return jitops__fail(
        JITOPS_ERR_INVALID_DTYPE, "%s: target_lengths (%s) must have input_lengths' dtype (%s)", fn,
        jitops__dtype_name(jitops__dtype_of(target_lengths->dtype)), jitops__dtype_name(p->li));
  int il_host = jitops__tensor_in_host_memory(input_lengths),
      tl_host = jitops__tensor_in_host_memory(target_lengths);
  if (il_host != tl_host)
    return jitops__fail(JITOPS_ERR_INVALID_DEVICE,
                        "%s: input_lengths and target_lengths must both be in host memory or "
                        "both in device memory",
                        fn);
  p->host_lengths = il_host;
  if (p->host_targets && !p->host_lengths)
    return jitops__fail(JITOPS_ERR_INVALID_DEVICE,
                        "%s: targets in host memory need input_lengths and target_lengths in "
                        "host memory too",
                        fn);
  if (p->host_lengths) {
    JITOPS__TRY(stage_host_data(p, targets, input_lengths, target_lengths));
  } else {
    p->il = jitops__tensor_ptr(input_lengths);
    p->tl = jitops__tensor_ptr(target_lengths);
    int64_t st[1];
    jitops__tensor_strides(input_lengths, st);
    p->il_st = st[0];
    jitops__tensor_strides(target_lengths, st);
    p->tl_st = st[0];
    p->s_max = p->S;
    if (p->concat && p->opt.max_target_length > 0 && p->opt.max_target_length < p->S)
      p->s_max = p->opt.max_target_length;
  }
  if (p->s_max > INT32_MAX / 4)
    return jitops__fail(JITOPS_ERR_UNSUPPORTED, "%s: targets of length %lld are too long", fn,
                        (long long)p->s_max);
  return plan(p, rt);
}

/* ---- outputs ----------------------------------------------------------------------------- */

/* loss and grad_loss: log_probs' dtype, or f32 for f16/bf16. */
static jitops_status check_loss_like(const ctc_problem *p, jitops_runtime_t *rt, const char *arg,
                                     const DLTensor *t, int output) {
  const char *fn = p->fn;
  JITOPS__TRY(jitops__tensor_check(fn, arg, t, rt, 1));
  jitops__dtype d = jitops__dtype_of(t->dtype);
  if (d != p->f && !(d == JITOPS__DTYPE_F32 && p->acc == JITOPS__DTYPE_F32))
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE, "%s: %s must be %s (log_probs' dtype)%s, not %s",
                        fn, arg, jitops__dtype_name(p->f), p->acc == p->f ? "" : " or f32",
                        d ? jitops__dtype_name(d) : "an unsupported dtype");
  if (p->opt.reduction == JITOPS_CTC_REDUCTION_NONE) {
    if (t->ndim != 1 || t->shape[0] != p->N)
      return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                          "%s: %s must have shape [N] = [%lld] with reduction none", fn, arg,
                          (long long)p->N);
  } else if (!(t->ndim == 0 || (t->ndim == 1 && t->shape[0] == 1))) {
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: %s must be a scalar (shape [] or [1]) with reduction sum or mean", fn,
                        arg);
  }
  return output ? check_output_layout(fn, arg, t) : check_aligned(fn, arg, t);
}

static jitops_status check_grad_output(const ctc_problem *p, jitops_runtime_t *rt,
                                       const DLTensor *lp, const DLTensor *g) {
  const char *fn = p->fn;
  JITOPS__TRY(jitops__tensor_check(fn, "grad_log_probs", g, rt, 3));
  if (!jitops__same_shape(g, lp))
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: grad_log_probs must have log_probs' shape [%lld, %lld, %lld]", fn,
                        (long long)p->T, (long long)p->N, (long long)p->C);
  if (jitops__dtype_of(g->dtype) != p->f)
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE, "%s: grad_log_probs must be %s, as log_probs", fn,
                        jitops__dtype_name(p->f));
  JITOPS__TRY(check_output_layout(fn, "grad_log_probs", g));
  if (jitops__tensor_numel(g) > 0) {
    uintptr_t glo, ghi, llo, lhi;
    byte_range(g, &glo, &ghi);
    byte_range(lp, &llo, &lhi);
    if (glo < lhi && llo < ghi)
      return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                          "%s: grad_log_probs overlaps log_probs (no in-place gradient)", fn);
  }
  return JITOPS_SUCCESS;
}

static jitops_status check_alpha_beta_output(const ctc_problem *p, jitops_runtime_t *rt,
                                             const char *arg, const DLTensor *t,
                                             const DLTensor *like) {
  const char *fn = p->fn;
  JITOPS__TRY(jitops__tensor_check(fn, arg, t, rt, 3));
  if (t->ndim != 3 || t->shape[0] != p->N || t->shape[1] != p->T || t->shape[2] < 2 * p->s_max + 1)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: %s must have shape [N, T, L] = [%lld, %lld, >= %lld]", fn, arg,
                        (long long)p->N, (long long)p->T, (long long)(2 * p->s_max + 1));
  if (like) {
    int64_t a[3], b[3];
    jitops__tensor_strides(t, a);
    jitops__tensor_strides(like, b);
    if (!jitops__same_shape(t, like))
      return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: %s must have log_alpha's shape", fn, arg);
    if (a[0] != b[0] || a[1] != b[1] || a[2] != b[2])
      return jitops__fail(JITOPS_ERR_INVALID_LAYOUT, "%s: %s must have log_alpha's strides", fn,
                          arg);
  }
  if (t->shape[2] > INT32_MAX)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: %s's last extent is above 2^31 - 1", fn,
                        arg);
  if (jitops__dtype_of(t->dtype) != p->acc)
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE, "%s: %s must be %s (the accumulation dtype)", fn,
                        arg, jitops__dtype_name(p->acc));
  return check_output_layout(fn, arg, t);
}

static jitops_status check_nll_output(const ctc_problem *p, jitops_runtime_t *rt,
                                      const DLTensor *t) {
  const char *fn = p->fn;
  JITOPS__TRY(jitops__tensor_check(fn, "nll", t, rt, 1));
  if (t->ndim != 1 || t->shape[0] != p->N)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: nll must have shape [N] = [%lld]", fn,
                        (long long)p->N);
  if (jitops__dtype_of(t->dtype) != p->acc)
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE, "%s: nll must be %s (the accumulation dtype)", fn,
                        jitops__dtype_name(p->acc));
  return check_output_layout(fn, "nll", t);
}

/* ---- scratch layout ---------------------------------------------------------------------- */

typedef struct ctc_layout {
  size_t stage, nll, info, link, values, alpha, beta, mem, total;
  size_t lp_row; /* alpha/beta: accumulation values per (n, t) row */
  int64_t link_st;
  int ok;
} ctc_layout;

static size_t take(ctc_layout *l, size_t a, size_t b) {
  size_t bytes, at = l->total;
  if (!mul_ok(a, b, &bytes) || l->total + align256(bytes) < l->total) {
    l->ok = 0;
    return 0;
  }
  l->total += align256(bytes);
  return at;
}

static ctc_layout layout_for(const ctc_problem *p, jitops_ctc_pass pass, int with_values) {
  ctc_layout l;
  memset(&l, 0, sizeof l);
  l.ok = 1;
  size_t acc = jitops__dtype_size(p->acc), N = (size_t)p->N, T = (size_t)p->T;
  l.stage = take(&l, p->stage_bytes, 1);
  if (with_values)
    l.values = take(&l, N, acc);
  if (pass == JITOPS_CTC_PASS_BACKWARD) {
    l.nll = take(&l, N, acc);
    l.info = take(&l, N, 2 * sizeof(int));
    l.link_st = 2 * (p->s_max > 0 ? p->s_max : 1);
    l.link = take(&l, N, (size_t)l.link_st * sizeof(int));
    l.lp_row = (size_t)(2 * p->s_max + 1);
    size_t rows;
    if (!mul_ok(N, T, &rows))
      l.ok = 0;
    l.alpha = take(&l, rows, l.lp_row * acc);
    l.beta = take(&l, rows, l.lp_row * acc);
  }
  if (p->store == STORE_GLOBAL)
    l.mem = take(&l, N * 2, p->mem_block_bytes); /* one block per (sample, direction) */
  return l;
}

static jitops_status layout_checked(const ctc_problem *p, const ctc_layout *l) {
  if (!l->ok)
    return jitops__fail(JITOPS_ERR_OUT_OF_MEMORY, "%s: the workspace size overflows", p->fn);
  return JITOPS_SUCCESS;
}

/* ---- name expressions (shared with the catalogue) ---------------------------------------- */

static void alpha_name(char *out, size_t size, jitops__dtype f, jitops__dtype ti, jitops__dtype li,
                       int offs, int64_t cap, int store, int mode, jitops__dtype o) {
  snprintf(out, size, "jitops::ctc::alpha_kernel<%s, %s, %s, %d, %lld, %d, %d, %s>",
           jitops__dtype_cname(f), jitops__dtype_cname(ti), jitops__dtype_cname(li), offs,
           (long long)cap, store, mode, jitops__dtype_cname(o));
}

static void grad_name(char *out, size_t size, jitops__dtype f, jitops__dtype g, int torch) {
  snprintf(out, size, "jitops::ctc::grad_kernel<%s, %s, %s>", jitops__dtype_cname(f),
           jitops__dtype_cname(g), torch ? "true" : "false");
}

static void reduce_name(char *out, size_t size, jitops__dtype acc, jitops__dtype o) {
  snprintf(out, size, "jitops::ctc::reduce_kernel<%s, %s>", jitops__dtype_cname(acc),
           jitops__dtype_cname(o));
}

static jitops_status get_kernel(jitops_runtime_t *rt, const char *name, jitops_kernel_t **k) {
  return jitops_kernel_get(rt, CTC_SOURCE, name, NULL, 0, k);
}

/* ---- launches ---------------------------------------------------------------------------- */

static int offs_mode(const ctc_problem *p) {
  if (!p->concat)
    return OFFS_PADDED;
  return p->host_lengths ? OFFS_HOST : OFFS_DEVICE;
}

/* The alpha-kernel arguments common to every mode. */
static ctc_alpha_args alpha_args_for(const ctc_problem *p, char *scratch, const ctc_layout *l) {
  ctc_alpha_args a;
  memset(&a, 0, sizeof a);
  a.lp = p->lp;
  a.lp_st_t = p->lp_st[0];
  a.lp_st_n = p->lp_st[1];
  a.lp_st_c = p->lp_st[2];
  a.tgt = p->host_targets ? (const void *)(scratch + l->stage + p->stage_targets_at) : p->tgt;
  a.tgt_st_n = p->tgt_st[0];
  a.tgt_st_s = p->tgt_st[1];
  a.tgt_numel = p->tgt_numel;
  if (p->host_lengths) {
    const long long *desc = (const long long *)(scratch + l->stage);
    a.in_len = desc;
    a.tgt_len = desc + p->N;
    a.offsets = desc + 2 * p->N;
    a.in_len_st = 1;
    a.tgt_len_st = 1;
  } else {
    a.in_len = p->il;
    a.tgt_len = p->tl;
    a.in_len_st = p->il_st;
    a.tgt_len_st = p->tl_st;
  }
  a.mem = p->store == STORE_GLOBAL ? scratch + l->mem : NULL;
  a.mem_block_bytes = (long long)p->mem_block_bytes;
  a.T = (int)p->T;
  a.N = (int)p->N;
  a.C = (int)p->C;
  a.blank = (int)p->opt.blank;
  a.s_max = (int)p->s_max;
  a.reduction = (int)p->opt.reduction;
  a.zero_infinity = p->opt.zero_infinity != 0;
  return a;
}

/* Kernels are fetched (compiled) before any scratch is taken or data moved. */
static jitops_status get_alpha(const ctc_problem *p, jitops_runtime_t *rt, int mode,
                               jitops__dtype o, jitops_kernel_t **k) {
  char name[256];
  jitops__dtype li = p->host_lengths ? JITOPS__DTYPE_I64 : p->li;
  alpha_name(name, sizeof name, p->f, p->ti, li, offs_mode(p), p->cap, p->store, mode, o);
  return get_kernel(rt, name, k);
}

static jitops_status get_reduce(const ctc_problem *p, jitops_runtime_t *rt, const DLTensor *out,
                                jitops_kernel_t **k) {
  char name[128];
  reduce_name(name, sizeof name, p->acc, jitops__dtype_of(out->dtype));
  return get_kernel(rt, name, k);
}

static jitops_status get_grad(const ctc_problem *p, jitops_runtime_t *rt, const DLTensor *grad_loss,
                              jitops_kernel_t **k) {
  char name[128];
  grad_name(name, sizeof name, p->f, jitops__dtype_of(grad_loss->dtype),
            p->opt.gradient == JITOPS_CTC_GRADIENT_PYTORCH);
  return get_kernel(rt, name, k);
}

/* Dynamic shared memory of an alpha-kernel launch: the states (shared tier), or the two row
 * buffers that coalesce the alpha/beta stores (register tier, MODE_AB; see staged()). */
static size_t alpha_smem(const ctc_problem *p, int mode) {
  if (p->store == STORE_SHARED)
    return p->dyn_smem;
  if (p->store == STORE_REG && mode == MODE_AB) {
    size_t words = (size_t)p->nt * (size_t)p->k;
    return 2 * (words + words / 32 + 1) * jitops__dtype_size(p->acc);
  }
  return 0;
}

static jitops_status launch_alpha(const ctc_problem *p, const jitops_kernel_t *k, int mode,
                                  int dirs, ctc_alpha_args *a, void *stream) {
  if (p->N == 0)
    return JITOPS_SUCCESS;
  void *args[] = {a};
  return jitops__launch(k, (uint32_t)p->N, (uint32_t)dirs, 1, (uint32_t)p->nt, 1, 1,
                        (uint32_t)alpha_smem(p, mode), stream, args);
}

static jitops_status launch_reduce(const ctc_problem *p, const jitops_kernel_t *k,
                                   const void *values, const DLTensor *out, void *stream) {
  ctc_reduce_args r;
  memset(&r, 0, sizeof r);
  int64_t st[1] = {1};
  if (out->ndim == 1)
    jitops__tensor_strides(out, st);
  r.values = values;
  r.out = jitops__tensor_ptr(out);
  r.out_st = st[0];
  r.N = (int)p->N;
  r.reduction = (int)p->opt.reduction;
  void *args[] = {&r};
  return jitops__launch(k, 1, 1, 1, CTC_REDUCE_THREADS, 1, 1, 0, stream, args);
}

/* Scratch, and the upload of the host lengths and targets into it. */
static jitops_status acquire(const ctc_problem *p, jitops_runtime_t *rt, const ctc_layout *l,
                             const jitops_workspace *ws, void *stream, jitops__scratch *s) {
  memset(s, 0, sizeof *s);
  if (l->total == 0)
    return JITOPS_SUCCESS;
  JITOPS__TRY(jitops__scratch_acquire(rt, stream, ws, l->total, s));
  if (p->stage_bytes > 0) {
    jitops_status st =
        jitops__memcpy_async(rt, (char *)s->ptr + l->stage, p->stage, p->stage_bytes, stream);
    if (st != JITOPS_SUCCESS) {
      jitops__scratch_release(rt, stream, s);
      return st;
    }
  }
  return JITOPS_SUCCESS;
}

/* ---- entry points ------------------------------------------------------------------------ */

void jitops_ctc_options_init(jitops_ctc_options *options) {
  if (options == NULL)
    return;
  memset(options, 0, sizeof *options);
  options->blank = 0;
  options->reduction = JITOPS_CTC_REDUCTION_MEAN;
  options->zero_infinity = 0;
  options->gradient = JITOPS_CTC_GRADIENT_EXACT;
  options->max_target_length = 0;
  options->storage = JITOPS_CTC_STORAGE_AUTO;
}

jitops_status jitops_ctc_workspace_size(jitops_runtime_t *runtime, const DLTensor *log_probs,
                                        const DLTensor *targets, const DLTensor *input_lengths,
                                        const DLTensor *target_lengths,
                                        const jitops_ctc_options *options, jitops_ctc_pass pass,
                                        size_t *bytes) {
  static const char fn[] = "jitops_ctc_workspace_size";
  JITOPS__REQUIRE_NONNULL(fn, bytes);
  if (pass < JITOPS_CTC_PASS_LOSS || pass > JITOPS_CTC_PASS_ALPHA_BETA)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: pass %d is not a jitops_ctc_pass", fn,
                        (int)pass);
  ctc_problem p;
  jitops_status st =
      validate_inputs(&p, fn, runtime, log_probs, targets, input_lengths, target_lengths, options);
  if (st == JITOPS_SUCCESS) {
    /* The backward pass may also produce the loss: count its values. */
    int values = pass != JITOPS_CTC_PASS_ALPHA_BETA;
    ctc_layout l = layout_for(&p, pass, values);
    st = layout_checked(&p, &l);
    if (st == JITOPS_SUCCESS)
      *bytes = l.total;
  }
  problem_free(&p);
  return st;
}

static jitops_status ctc_loss_run(ctc_problem *p, jitops_runtime_t *rt, DLTensor *loss,
                                  const jitops_workspace *ws, void *stream) {
  int none = p->opt.reduction == JITOPS_CTC_REDUCTION_NONE;
  ctc_layout l = layout_for(p, JITOPS_CTC_PASS_LOSS, !none);
  JITOPS__TRY(layout_checked(p, &l));
  jitops_kernel_t *ka, *kr = NULL;
  JITOPS__TRY(get_alpha(p, rt, none ? MODE_LOSS : MODE_VALUES,
                        none ? jitops__dtype_of(loss->dtype) : p->acc, &ka));
  if (!none)
    JITOPS__TRY(get_reduce(p, rt, loss, &kr));
  jitops__scratch s;
  JITOPS__TRY(acquire(p, rt, &l, ws, stream, &s));
  char *scratch = (char *)s.ptr;
  ctc_alpha_args a = alpha_args_for(p, scratch, &l);
  jitops_status st;
  if (none) {
    int64_t lst[1];
    jitops__tensor_strides(loss, lst);
    a.loss = jitops__tensor_ptr(loss);
    a.loss_st = lst[0];
    st = launch_alpha(p, ka, MODE_LOSS, 1, &a, stream);
  } else {
    a.values = scratch + l.values;
    st = launch_alpha(p, ka, MODE_VALUES, 1, &a, stream);
    if (st == JITOPS_SUCCESS)
      st = launch_reduce(p, kr, scratch + l.values, loss, stream);
  }
  jitops__scratch_release(rt, stream, &s);
  return st;
}

jitops_status jitops_ctc_loss(jitops_runtime_t *runtime, const DLTensor *log_probs,
                              const DLTensor *targets, const DLTensor *input_lengths,
                              const DLTensor *target_lengths, const jitops_ctc_options *options,
                              DLTensor *loss, const jitops_workspace *workspace, void *stream) {
  static const char fn[] = "jitops_ctc_loss";
  ctc_problem p;
  jitops_status st =
      validate_inputs(&p, fn, runtime, log_probs, targets, input_lengths, target_lengths, options);
  if (st == JITOPS_SUCCESS)
    st = check_loss_like(&p, runtime, "loss", loss, 1);
  if (st == JITOPS_SUCCESS)
    st = ctc_loss_run(&p, runtime, loss, workspace, stream);
  problem_free(&p);
  return st;
}

static jitops_status launch_grad(const ctc_problem *p, const jitops_kernel_t *k, char *scratch,
                                 const ctc_layout *l, const DLTensor *grad_loss, DLTensor *grad,
                                 void *stream) {
  if (p->T == 0 || p->N == 0)
    return JITOPS_SUCCESS;
  ctc_grad_args a;
  memset(&a, 0, sizeof a);
  int64_t gst[3], glst[1] = {1};
  jitops__tensor_strides(grad, gst);
  if (grad_loss->ndim == 1)
    jitops__tensor_strides(grad_loss, glst);
  a.lp = p->lp;
  a.lp_st_t = p->lp_st[0];
  a.lp_st_n = p->lp_st[1];
  a.lp_st_c = p->lp_st[2];
  a.grad = jitops__tensor_ptr(grad);
  a.g_st_t = gst[0];
  a.g_st_n = gst[1];
  a.g_st_c = gst[2];
  a.alpha = scratch + l->alpha;
  a.beta = scratch + l->beta;
  a.ab_st_n = (long long)(l->lp_row * (size_t)p->T);
  a.ab_st_t = (long long)l->lp_row;
  a.nll = scratch + l->nll;
  a.info = (const int *)(scratch + l->info);
  a.link = (const int *)(scratch + l->link);
  a.link_st = l->link_st;
  a.grad_loss = jitops__tensor_ptr(grad_loss);
  a.grad_loss_st = glst[0];
  a.T = (int)p->T;
  a.N = (int)p->N;
  a.C = (int)p->C;
  a.blank = (int)p->opt.blank;
  a.reduction = (int)p->opt.reduction;
  a.zero_infinity = p->opt.zero_infinity != 0;
  a.chunks = (int)((p->T + CTC_GRAD_ROWS - 1) / CTC_GRAD_ROWS);
  uint64_t blocks = (uint64_t)a.chunks * (uint64_t)p->N;
  if (blocks > INT32_MAX)
    return jitops__fail(JITOPS_ERR_UNSUPPORTED, "%s: T * N is too large for one launch", p->fn);
  /* The links of one sample in shared memory when they fit the default 48 KiB. */
  size_t link_bytes = (size_t)l->link_st * sizeof(int);
  a.link_smem = link_bytes <= 48 * 1024;
  void *args[] = {&a};
  return jitops__launch(k, (uint32_t)blocks, 1, 1, CTC_GRAD_THREADS, 1, 1,
                        a.link_smem ? (uint32_t)link_bytes : 0, stream, args);
}

static jitops_status ctc_backward_run(ctc_problem *p, jitops_runtime_t *rt,
                                      const DLTensor *grad_loss, DLTensor *grad, DLTensor *loss,
                                      const jitops_workspace *ws, void *stream) {
  ctc_layout l = layout_for(p, JITOPS_CTC_PASS_BACKWARD, loss != NULL);
  JITOPS__TRY(layout_checked(p, &l));
  jitops_kernel_t *ka, *kg, *kr = NULL;
  JITOPS__TRY(get_alpha(p, rt, MODE_AB, p->acc, &ka));
  JITOPS__TRY(get_grad(p, rt, grad_loss, &kg));
  if (loss != NULL)
    JITOPS__TRY(get_reduce(p, rt, loss, &kr));
  jitops__scratch s;
  JITOPS__TRY(acquire(p, rt, &l, ws, stream, &s));
  char *scratch = (char *)s.ptr;
  ctc_alpha_args a = alpha_args_for(p, scratch, &l);
  a.values = loss ? scratch + l.values : NULL;
  a.alpha = scratch + l.alpha;
  a.beta = scratch + l.beta;
  a.ab_st_n = (long long)(l.lp_row * (size_t)p->T);
  a.ab_st_t = (long long)l.lp_row;
  a.ab_st_s = 1;
  a.ab_len = (int)l.lp_row;
  a.nll = scratch + l.nll;
  a.nll_st = 1;
  a.info = (int *)(scratch + l.info);
  a.link = (int *)(scratch + l.link);
  a.link_st = l.link_st;
  a.fill = 0;
  jitops_status st = launch_alpha(p, ka, MODE_AB, 3, &a, stream);
  if (st == JITOPS_SUCCESS)
    st = launch_grad(p, kg, scratch, &l, grad_loss, grad, stream);
  if (st == JITOPS_SUCCESS && loss != NULL)
    st = launch_reduce(p, kr, scratch + l.values, loss, stream);
  jitops__scratch_release(rt, stream, &s);
  return st;
}

jitops_status jitops_ctc_loss_backward(jitops_runtime_t *runtime, const DLTensor *log_probs,
                                       const DLTensor *targets, const DLTensor *input_lengths,
                                       const DLTensor *target_lengths, const DLTensor *grad_loss,
                                       const jitops_ctc_options *options, DLTensor *grad_log_probs,
                                       DLTensor *loss, const jitops_workspace *workspace,
                                       void *stream) {
  static const char fn[] = "jitops_ctc_loss_backward";
  ctc_problem p;
  jitops_status st =
      validate_inputs(&p, fn, runtime, log_probs, targets, input_lengths, target_lengths, options);
  if (st == JITOPS_SUCCESS)
    st = check_loss_like(&p, runtime, "grad_loss", grad_loss, 0);
  if (st == JITOPS_SUCCESS)
    st = check_grad_output(&p, runtime, log_probs, grad_log_probs);
  if (st == JITOPS_SUCCESS && loss != NULL)
    st = check_loss_like(&p, runtime, "loss", loss, 1);
  if (st == JITOPS_SUCCESS)
    st = ctc_backward_run(&p, runtime, grad_loss, grad_log_probs, loss, workspace, stream);
  problem_free(&p);
  return st;
}

static jitops_status ctc_alpha_beta_run(ctc_problem *p, jitops_runtime_t *rt, DLTensor *la,
                                        DLTensor *lb, DLTensor *nll, const jitops_workspace *ws,
                                        void *stream) {
  ctc_layout l = layout_for(p, JITOPS_CTC_PASS_ALPHA_BETA, 0);
  JITOPS__TRY(layout_checked(p, &l));
  jitops_kernel_t *ka;
  JITOPS__TRY(get_alpha(p, rt, MODE_AB, p->acc, &ka));
  jitops__scratch s;
  JITOPS__TRY(acquire(p, rt, &l, ws, stream, &s));
  ctc_alpha_args a = alpha_args_for(p, (char *)s.ptr, &l);
  int64_t ast[3], bst[3], nst[1];
  jitops__tensor_strides(la, ast);
  jitops__tensor_strides(lb, bst);
  jitops__tensor_strides(nll, nst);
  a.alpha = jitops__tensor_ptr(la);
  a.beta = jitops__tensor_ptr(lb);
  a.ab_st_n = ast[0];
  a.ab_st_t = ast[1];
  a.ab_st_s = ast[2];
  a.ab_len = (int)la->shape[2];
  a.nll = jitops__tensor_ptr(nll);
  a.nll_st = nst[0];
  a.fill = 1;
  jitops_status st = launch_alpha(p, ka, MODE_AB, 2, &a, stream);
  jitops__scratch_release(rt, stream, &s);
  return st;
}

jitops_status jitops_ctc_alpha_beta(jitops_runtime_t *runtime, const DLTensor *log_probs,
                                    const DLTensor *targets, const DLTensor *input_lengths,
                                    const DLTensor *target_lengths,
                                    const jitops_ctc_options *options, DLTensor *log_alpha,
                                    DLTensor *log_beta, DLTensor *nll,
                                    const jitops_workspace *workspace, void *stream) {
  static const char fn[] = "jitops_ctc_alpha_beta";
  ctc_problem p;
  jitops_status st =
      validate_inputs(&p, fn, runtime, log_probs, targets, input_lengths, target_lengths, options);
  if (st == JITOPS_SUCCESS)
    st = check_alpha_beta_output(&p, runtime, "log_alpha", log_alpha, NULL);
  if (st == JITOPS_SUCCESS)
    st = check_alpha_beta_output(&p, runtime, "log_beta", log_beta, log_alpha);
  if (st == JITOPS_SUCCESS)
    st = check_nll_output(&p, runtime, nll);
  if (st == JITOPS_SUCCESS)
    st = ctc_alpha_beta_run(&p, runtime, log_alpha, log_beta, nll, workspace, stream);
  problem_free(&p);
  return st;
}

/* ---- prewarm catalogue ------------------------------------------------------------------- */

/* The kernels a typical training run asks for: f32/f16/bf16 log_probs, int64 padded targets
 * with int64 (or host) lengths, capacities 32..4096 (targets up to 2047 labels), the loss with
 * the default mean reduction and with none, the fused alpha/beta pass, both gradient
 * conventions (upstream gradient in log_probs' dtype, and f32 for half types), and the batch
 * reductions. */
enum { CAT_ALPHA = 0, CAT_GRAD = 1, CAT_REDUCE = 2 };

typedef struct ctc_entry {
  int kind;
  jitops__dtype f, ti, li, o;
  int offs, store, mode, torch;
  int64_t cap;
} ctc_entry;

#define CAT_CAPS 8 /* 32 .. 4096 */
#define CAT_MAX  96

static ctc_entry cat_entries[CAT_MAX];
static char cat_desc[CAT_MAX][256];
static size_t cat_count;
static pthread_once_t cat_once = PTHREAD_ONCE_INIT;

static void cat_add(ctc_entry e) {
  if (cat_count >= CAT_MAX)
    return;
  char name[256];
  if (e.kind == CAT_ALPHA)
    alpha_name(name, sizeof name, e.f, e.ti, e.li, e.offs, e.cap, e.store, e.mode, e.o);
  else if (e.kind == CAT_GRAD)
    grad_name(name, sizeof name, e.f, e.o, e.torch);
  else
    reduce_name(name, sizeof name, e.f, e.o);
  snprintf(cat_desc[cat_count], sizeof cat_desc[0], "%s", name + strlen("jitops::ctc::"));
  cat_entries[cat_count++] = e;
}

static void cat_build(void) {
  static const jitops__dtype floats[3] = {JITOPS__DTYPE_F32, JITOPS__DTYPE_F16, JITOPS__DTYPE_BF16};
  for (int fi = 0; fi < 3; ++fi) {
    jitops__dtype f = floats[fi];
    for (int c = 0; c < CAT_CAPS; ++c) {
      int64_t cap = (int64_t)CTC_MIN_CAP << c;
      ctc_entry e = {CAT_ALPHA,
                     f,
                     JITOPS__DTYPE_I64,
                     JITOPS__DTYPE_I64,
                     JITOPS__DTYPE_F32,
                     OFFS_PADDED,
                     STORE_REG,
                     MODE_VALUES,
                     0,
                     cap};
      cat_add(e);
      e.mode = MODE_AB;
      cat_add(e);
      if (f == JITOPS__DTYPE_F32) {
        e.mode = MODE_LOSS;
        cat_add(e);
      }
    }
    for (int torch = 0; torch < 2; ++torch) {
      ctc_entry g = {CAT_GRAD, f, JITOPS__DTYPE_I64, JITOPS__DTYPE_I64, f, 0, 0, 0, torch, 0};
      cat_add(g);
      if (f != JITOPS__DTYPE_F32) {
        g.o = JITOPS__DTYPE_F32;
        cat_add(g);
      }
    }
    ctc_entry r = {
        CAT_REDUCE, JITOPS__DTYPE_F32, JITOPS__DTYPE_I64, JITOPS__DTYPE_I64, f, 0, 0, 0, 0, 0};
    cat_add(r);
  }
  ctc_entry r64 = {CAT_REDUCE,
                   JITOPS__DTYPE_F64,
                   JITOPS__DTYPE_I64,
                   JITOPS__DTYPE_I64,
                   JITOPS__DTYPE_F64,
                   0,
                   0,
                   0,
                   0,
                   0};
  cat_add(r64);
}

static size_t cat_size(void) {
  pthread_once(&cat_once, cat_build);
  return cat_count;
}

static const char *cat_describe(size_t index) {
  pthread_once(&cat_once, cat_build);
  return index < cat_count ? cat_desc[index] : "";
}

static jitops_status cat_compile(jitops_runtime_t *rt, size_t index) {
  pthread_once(&cat_once, cat_build);
  if (index >= cat_count)
    return jitops__fail(JITOPS_ERR_NOT_FOUND, "jitops_catalogue_compile: no ctc entry %zu", index);
  const ctc_entry *e = &cat_entries[index];
  char name[256];
  if (e->kind == CAT_ALPHA)
    alpha_name(name, sizeof name, e->f, e->ti, e->li, e->offs, e->cap, e->store, e->mode, e->o);
  else if (e->kind == CAT_GRAD)
    grad_name(name, sizeof name, e->f, e->o, e->torch);
  else
    reduce_name(name, sizeof name, e->f, e->o);
  jitops_kernel_t *k;
  return get_kernel(rt, name, &k);
}

const jitops__catalogue_family jitops__catalogue_ctc = {"ctc",       cat_size, cat_describe,
                                                        cat_compile, NULL,     NULL};
