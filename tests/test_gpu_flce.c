/* Fused linear cross-entropy on the GPU against a CPU reference in double precision: every
 * reduction and option, ignored rows, all rows ignored, an empty batch, out-of-range targets,
 * V not a multiple of any tile, batches smaller than a chunk, the three algorithms (one
 * chunk; several chunks with an f32 accumulator; vocabulary groups), every dtype, strided
 * tensors, dy in the forward and the scalar backward, bit-identical reruns (also by a fresh
 * runtime, which finds the timed GEMM algorithms in the cache), and (unless
 * --small, which compute-sanitizer runs use) a problem with BT * V > 2^31. With --shards, only
 * the vocabulary-parallel phases instead: each case split into 2 and 3 uneven shards, compared
 * with the unsharded forward.
 *
 * The reference rounds the logits to T as the GEMM does, then works in double; tolerances
 * are relative to the largest reference value and reflect T's precision. */
#include <math.h>
#include <stdbool.h>

#include <cuda_runtime.h>

#include "testutil.h"

static jitops_runtime_t *rt;
static cudaStream_t stream;

static const DLDataType BF16 = {kDLBfloat, 16, 1}, F16 = {kDLFloat, 16, 1}, F32 = {kDLFloat, 32, 1},
                        F64 = {kDLFloat, 64, 1}, I64 = {kDLInt, 64, 1};

/* ---- host storage of each dtype ------------------------------------------------------- */

static uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static float bf16_to_f32(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);
  } else if (exp == 0) {
    float f = ldexpf((float)man, -24);
    return sign ? -f : f;
  } else {
    u = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Round to nearest even through the exact value: pick the nearer of the two neighbours. */
static uint16_t f32_to_f16(float f) {
  if (isnan(f))
    return 0x7e00;
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  float a = fabsf(f);
  if (a >= 65520.0f)
    return sign | 0x7c00;
  int e;
  frexpf(a, &e);                       /* a = m * 2^e, m in [0.5, 1) */
  int q = e - 11 < -24 ? -24 : e - 11; /* the quantum 2^q: 11 significant bits */
  float scaled = ldexpf(a, -q);
  float r = nearbyintf(scaled); /* ties to even under the default rounding mode */
  double v = ldexp((double)r, q);
  /* Re-encode v. */
  if (v == 0)
    return sign;
  int ve;
  double vm = frexp(v, &ve);
  if (ve - 1 < -14) /* subnormal */
    return sign | (uint16_t)(v / ldexp(1.0, -24));
  uint16_t exp = (uint16_t)(ve - 1 + 15);
  uint16_t man = (uint16_t)((vm * 2 - 1) * 1024.0 + 0.5);
  return sign | (uint16_t)(exp << 10) | man;
}

static size_t dsize(DLDataType d) {
  return d.bits / 8;
}

static int same_dtype(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits;
}

static double round_to(DLDataType d, double v) {
  if (same_dtype(d, BF16))
    return bf16_to_f32(f32_to_bf16((float)v));
  if (same_dtype(d, F16))
    return f16_to_f32(f32_to_f16((float)v));
  if (same_dtype(d, F32))
    return (float)v;
  return v;
}

static void put(DLDataType d, void *base, int64_t i, double v) {
  if (same_dtype(d, BF16)) {
    uint16_t b = f32_to_bf16((float)v);
    memcpy((char *)base + i * 2, &b, 2);
  } else if (same_dtype(d, F16)) {
    uint16_t h = f32_to_f16((float)v);
    memcpy((char *)base + i * 2, &h, 2);
  } else if (same_dtype(d, F32)) {
    float f = (float)v;
    memcpy((char *)base + i * 4, &f, 4);
  } else if (same_dtype(d, F64)) {
    memcpy((char *)base + i * 8, &v, 8);
  } else {
    int64_t n = (int64_t)v;
    memcpy((char *)base + i * 8, &n, 8);
  }
}

static double get(DLDataType d, const void *base, int64_t i) {
  if (same_dtype(d, BF16)) {
    uint16_t b;
    memcpy(&b, (const char *)base + i * 2, 2);
    return bf16_to_f32(b);
  }
  if (same_dtype(d, F16)) {
    uint16_t h;
    memcpy(&h, (const char *)base + i * 2, 2);
    return f16_to_f32(h);
  }
  if (same_dtype(d, F32)) {
    float f;
    memcpy(&f, (const char *)base + i * 4, 4);
    return f;
  }
  double v;
  memcpy(&v, (const char *)base + i * 8, 8);
  return v;
}

/* ---- device tensors ------------------------------------------------------------------- */

/* A device tensor of logical [rows, cols] (cols 0: a vector of rows; rows -1: a scalar)
 * whose consecutive rows are `stride` elements apart. */
typedef struct dev {
  DLTensor t;
  int64_t shape[2], strides[2];
  void *ptr;
  void *host; /* staging: the same layout */
  size_t bytes;
  int64_t rows, cols, stride;
} dev;

static void dev_make(dev *x, DLDataType dtype, int64_t rows, int64_t cols, int64_t stride) {
  memset(x, 0, sizeof *x);
  x->rows = rows;
  x->cols = cols;
  int64_t n_rows = rows < 0 ? 1 : rows, n_cols = cols > 0 ? cols : 1;
  x->stride = stride > 0 ? stride : n_cols;
  int64_t span = n_rows > 0 ? (n_rows - 1) * x->stride + n_cols : 0;
  x->bytes = (size_t)(span > 0 ? span : 1) * dsize(dtype);
  CHECK(cudaMalloc(&x->ptr, x->bytes) == cudaSuccess);
  x->host = calloc(1, x->bytes);
  x->t.data = x->ptr;
  x->t.device.device_type = kDLCUDA;
  x->t.device.device_id = 0;
  x->t.dtype = dtype;
  x->t.shape = x->shape;
  if (rows < 0) {
    x->t.ndim = 0;
  } else if (cols == 0) {
    x->t.ndim = 1;
    x->shape[0] = rows;
    x->strides[0] = x->stride;
    x->t.strides = x->strides;
  } else {
    x->t.ndim = 2;
    x->shape[0] = rows;
    x->shape[1] = cols;
    x->strides[0] = x->stride;
    x->strides[1] = 1;
    x->t.strides = x->strides;
  }
}

static void dev_free(dev *x) {
  if (x->ptr != NULL)
    cudaFree(x->ptr);
  free(x->host);
  memset(x, 0, sizeof *x);
}

static int64_t dev_index(const dev *x, int64_t r, int64_t c) {
  return (x->rows < 0 ? 0 : r * x->stride) + c;
}

static void dev_upload(dev *x) {
  CHECK(cudaMemcpy(x->ptr, x->host, x->bytes, cudaMemcpyHostToDevice) == cudaSuccess);
  /* A pageable copy may still be in flight, unordered with the non-blocking test stream. */
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

static void dev_download(dev *x) {
  CHECK(cudaMemcpy(x->host, x->ptr, x->bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
}

/* 0xff bytes: NaN in every float dtype, so an element never written shows. */
static void dev_poison(dev *x) {
  CHECK(cudaMemset(x->ptr, 0xff, x->bytes) == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess); /* the test stream does not wait for it */
}

/* ---- a case --------------------------------------------------------------------------- */

typedef struct flce_case {
  const char *name;
  DLDataType t;
  int64_t bt, h, v;
  jitops_flce_options opt;
  int bias, gi, gw, gb, lse;
  int dy;           /* pass grad_output to the forward */
  int via_backward; /* forward without dy, then jitops_flce_backward(dy) */
  DLDataType gw_dtype, loss_dtype, dy_dtype;
  double ignore_frac; /* share of rows whose target is ignore_index */
  int all_ignored, bad_target;
  int64_t x_pad, gw_pad, target_stride, out_stride; /* layout variations */
  double logit_scale;
  int rerun; /* run twice and require identical bytes */
} flce_case;

typedef struct problem {
  const flce_case *k;
  double *x, *w, *b, *dy; /* values as stored (rounded to their dtypes) */
  int64_t *target;
  double dy_scalar;
  /* the reference */
  double *loss_rows, *lse, *gi, *gw, *gb, loss;
  int64_t count;
} problem;

static void make_inputs(problem *p, uint64_t seed) {
  const flce_case *k = p->k;
  p->x = malloc(sizeof(double) * (size_t)(k->bt * k->h + 1));
  p->w = malloc(sizeof(double) * (size_t)(k->v * k->h));
  p->b = malloc(sizeof(double) * (size_t)k->v);
  p->dy = malloc(sizeof(double) * (size_t)(k->bt + 1));
  p->target = malloc(sizeof(int64_t) * (size_t)(k->bt + 1));
  double ws = k->logit_scale / sqrt((double)k->h) * sqrt(3.0);
  for (int64_t i = 0; i < k->bt * k->h; ++i)
    p->x[i] = round_to(k->t, test_rand_uniform(&seed, -1, 1));
  for (int64_t i = 0; i < k->v * k->h; ++i)
    p->w[i] = round_to(k->t, test_rand_uniform(&seed, -ws, ws));
  for (int64_t i = 0; i < k->v; ++i)
    p->b[i] = k->bias ? round_to(k->t, test_rand_uniform(&seed, -0.5, 0.5)) : 0.0;
  for (int64_t i = 0; i < k->bt; ++i) {
    p->dy[i] = round_to(k->dy_dtype, test_rand_uniform(&seed, 0.5, 2.0));
    p->target[i] = (int64_t)(test_rand_u64(&seed) % (uint64_t)k->v);
    if (k->all_ignored || test_rand_uniform(&seed, 0, 1) < k->ignore_frac)
      p->target[i] = k->opt.ignore_index;
  }
  if (k->bad_target && k->bt > 1)
    p->target[1] = k->v + 5;
  p->dy_scalar = round_to(k->dy_dtype, 1.75);
}

static int ignored(const problem *p, int64_t t) {
  return p->target[t] == p->k->opt.ignore_index;
}

/* The row's scale of d loss / d logits. */
static double row_scale(const problem *p, int64_t t) {
  const flce_case *k = p->k;
  double s = 1.0;
  if (k->dy || k->via_backward)
    s = k->opt.reduction == JITOPS_FLCE_REDUCTION_NONE ? p->dy[t] : p->dy_scalar;
  if (k->opt.reduction == JITOPS_FLCE_REDUCTION_MEAN)
    s /= (double)p->count;
  return s;
}

/* One row: logits rounded to T as the GEMM writes them, then everything in double. */
static void reference_row(problem *p, int64_t t, double *z, double *g) {
  const flce_case *k = p->k;
  const jitops_flce_options *o = &k->opt;
  for (int64_t j = 0; j < k->v; ++j) {
    double s = 0;
    for (int64_t c = 0; c < k->h; ++c)
      s += p->x[t * k->h + c] * p->w[j * k->h + c];
    z[j] = round_to(k->t, s) + p->b[j];
    if (o->softcap > 0)
      z[j] = o->softcap * tanh(z[j] / o->softcap);
  }
  double m = -INFINITY, sum = 0, zsum = 0;
  for (int64_t j = 0; j < k->v; ++j)
    m = fmax(m, z[j]);
  for (int64_t j = 0; j < k->v; ++j) {
    sum += exp(z[j] - m);
    zsum += z[j];
  }
  double lse = m + log(sum), eps = o->label_smoothing;
  int64_t y = p->target[t];
  double zy = y >= 0 && y < k->v ? z[y] : NAN;
  p->lse[t] = lse;
  p->loss_rows[t] = lse - (1 - eps) * zy - eps / (double)k->v * zsum + o->z_loss_scale * lse * lse;
  double scale = row_scale(p, t);
  for (int64_t j = 0; j < k->v; ++j) {
    double gj = exp(z[j] - lse) * (1 + 2 * o->z_loss_scale * lse) - eps / (double)k->v;
    if (j == y)
      gj -= 1 - eps;
    if (o->softcap > 0)
      gj *= 1 - (z[j] / o->softcap) * (z[j] / o->softcap);
    g[j] = gj * scale;
  }
}

static void reference(problem *p) {
  const flce_case *k = p->k;
  size_t bt = (size_t)k->bt + 1, vh = (size_t)(k->v * k->h);
  p->loss_rows = calloc(bt, sizeof(double));
  p->lse = calloc(bt, sizeof(double));
  p->gi = calloc((size_t)(k->bt * k->h) + 1, sizeof(double));
  p->gw = calloc(vh, sizeof(double));
  p->gb = calloc((size_t)k->v, sizeof(double));
  p->count = 0;
  for (int64_t t = 0; t < k->bt; ++t)
    p->count += !ignored(p, t);
  double *z = malloc(sizeof(double) * (size_t)k->v), *g = malloc(sizeof(double) * (size_t)k->v);
  double total = 0;
  for (int64_t t = 0; t < k->bt; ++t) {
    if (ignored(p, t))
      continue;
    reference_row(p, t, z, g);
    total += p->loss_rows[t];
    for (int64_t j = 0; j < k->v; ++j) {
      for (int64_t c = 0; c < k->h; ++c) {
        p->gi[t * k->h + c] += g[j] * p->w[j * k->h + c];
        p->gw[j * k->h + c] += g[j] * p->x[t * k->h + c];
      }
      p->gb[j] += g[j];
    }
  }
  p->loss = k->opt.reduction == JITOPS_FLCE_REDUCTION_MEAN ? total / (double)p->count : total;
  free(z);
  free(g);
}

static void problem_free(problem *p) {
  free(p->x);
  free(p->w);
  free(p->b);
  free(p->dy);
  free(p->target);
  free(p->loss_rows);
  free(p->lse);
  free(p->gi);
  free(p->gw);
  free(p->gb);
}

/* ---- running and comparing ------------------------------------------------------------ */

typedef struct tensors {
  dev x, w, b, target, dy, loss, lse, gi, gw, gb, dy_bwd;
} tensors;

static void upload_inputs(const problem *p, tensors *d) {
  const flce_case *k = p->k;
  dev_make(&d->x, k->t, k->bt, k->h, k->h + k->x_pad);
  for (int64_t r = 0; r < k->bt; ++r)
    for (int64_t c = 0; c < k->h; ++c)
      put(k->t, d->x.host, dev_index(&d->x, r, c), p->x[r * k->h + c]);
  dev_upload(&d->x);
  dev_make(&d->w, k->t, k->v, k->h, 0);
  for (int64_t i = 0; i < k->v * k->h; ++i)
    put(k->t, d->w.host, i, p->w[i]);
  dev_upload(&d->w);
  if (k->bias) {
    dev_make(&d->b, k->t, k->v, 0, 0);
    for (int64_t i = 0; i < k->v; ++i)
      put(k->t, d->b.host, i, p->b[i]);
    dev_upload(&d->b);
  }
  dev_make(&d->target, I64, k->bt, 0, k->target_stride);
  for (int64_t i = 0; i < k->bt; ++i)
    put(I64, d->target.host, dev_index(&d->target, i, 0), (double)p->target[i]);
  dev_upload(&d->target);
  bool none = k->opt.reduction == JITOPS_FLCE_REDUCTION_NONE;
  if (k->dy) {
    dev_make(&d->dy, k->dy_dtype, none ? k->bt : -1, 0, 0);
    for (int64_t i = 0; i < (none ? k->bt : 1); ++i)
      put(k->dy_dtype, d->dy.host, i, none ? p->dy[i] : p->dy_scalar);
    dev_upload(&d->dy);
  }
  if (k->via_backward) {
    dev_make(&d->dy_bwd, k->dy_dtype, 1, 0, 0);
    put(k->dy_dtype, d->dy_bwd.host, 0, p->dy_scalar);
    dev_upload(&d->dy_bwd);
  }
}

static void make_outputs(const flce_case *k, tensors *d) {
  bool none = k->opt.reduction == JITOPS_FLCE_REDUCTION_NONE;
  dev_make(&d->loss, k->loss_dtype, none ? k->bt : -1, 0, none ? k->out_stride : 0);
  if (k->lse)
    dev_make(&d->lse, same_dtype(k->t, F64) ? F64 : F32, k->bt, 0, k->out_stride);
  if (k->gi)
    dev_make(&d->gi, k->t, k->bt, k->h, 0);
  if (k->gw)
    dev_make(&d->gw, k->gw_dtype, k->v, k->h, k->gw_pad ? k->h + k->gw_pad : 0);
  if (k->gb)
    dev_make(&d->gb, k->gw_dtype, k->v, 0, k->out_stride);
}

static void poison_outputs(tensors *d) {
  dev *outs[] = {&d->loss, &d->lse, &d->gi, &d->gw, &d->gb};
  for (size_t i = 0; i < 5; ++i)
    if (outs[i]->ptr != NULL)
      dev_poison(outs[i]);
}

static jitops_status run(const flce_case *k, tensors *d) {
  jitops_flce_tensors ts;
  memset(&ts, 0, sizeof ts);
  ts.input = &d->x.t;
  ts.weight = &d->w.t;
  ts.bias = k->bias ? &d->b.t : NULL;
  ts.target = &d->target.t;
  ts.grad_output = k->dy ? &d->dy.t : NULL;
  ts.loss = &d->loss.t;
  ts.lse = k->lse ? &d->lse.t : NULL;
  ts.grad_input = k->gi ? &d->gi.t : NULL;
  ts.grad_weight = k->gw ? &d->gw.t : NULL;
  ts.grad_bias = k->gb ? &d->gb.t : NULL;
  jitops_status s = jitops_flce_forward(rt, &ts, &k->opt, NULL, stream);
  if (s == JITOPS_SUCCESS && k->via_backward)
    s = jitops_flce_backward(rt, &d->dy_bwd.t, ts.grad_input, ts.grad_weight, ts.grad_bias, stream);
  cudaError_t e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) {
    fprintf(stderr, "%s: cudaStreamSynchronize: %s\n", k->name, cudaGetErrorString(e));
    ++test_failures;
  }
  return s;
}

/* Largest |got - want| over n values, against tol * max(|want|, floor). NaN must match NaN.
 * Prints the first offender (row r = i / cols, column i % cols). */
static void compare_values(const char *cname, const char *what, const double *got,
                           const double *want, int64_t n, int64_t cols, double tol, double floor) {
  double scale = floor;
  for (int64_t i = 0; i < n; ++i)
    if (isfinite(want[i]))
      scale = fmax(scale, fabs(want[i]));
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    double w = want[i], g = got[i];
    int ok = isnan(w) ? isnan(g) : (isfinite(g) && fabs(g - w) <= tol * scale);
    if (!ok && bad++ == 0)
      fprintf(stderr, "%s: %s[%lld, %lld] = %.9g, want %.9g (tol %.3g)\n", cname, what,
              (long long)(i / cols), (long long)(i % cols), g, w, tol * scale);
  }
  if (bad > 0) {
    fprintf(stderr, "%s: %s: %lld of %lld elements off\n", cname, what, (long long)bad,
            (long long)n);
    ++test_failures;
  }
}

/* The logical values of a downloaded device tensor (rows x cols; cols 0: a vector; rows < 0:
 * a scalar), row-major, into a new array. */
static double *dev_values(const dev *x, int64_t rows, int64_t cols) {
  int64_t n_rows = x->rows < 0 ? 1 : rows, n_cols = cols ? cols : 1;
  double *v = malloc(sizeof(double) * (size_t)(n_rows * n_cols + 1));
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t c = 0; c < n_cols; ++c)
      v[r * n_cols + c] = get(x->t.dtype, x->host, dev_index(x, r, c));
  return v;
}

/* compare_values over a downloaded device tensor. */
static void compare(const char *cname, const char *what, const dev *x, const double *want,
                    int64_t rows, int64_t cols, double tol, double floor) {
  double *got = dev_values(x, rows, cols);
  int64_t n = (x->rows < 0 ? 1 : rows) * (cols ? cols : 1);
  compare_values(cname, what, got, want, n, cols ? cols : 1, tol, floor);
  free(got);
}

static double grad_tol(DLDataType t) {
  if (same_dtype(t, BF16))
    return 2e-2;
  if (same_dtype(t, F16))
    return 5e-3;
  if (same_dtype(t, F32))
    return 1e-4;
  return 1e-10;
}

static void check_outputs(const problem *p, tensors *d) {
  const flce_case *k = p->k;
  bool none = k->opt.reduction == JITOPS_FLCE_REDUCTION_NONE;
  double tol = grad_tol(k->t);
  /* Losses: the logits are the reference's (rounded alike), so f32 arithmetic, a 16-bit
   * loss's final rounding and rare disagreements in rounding one logit remain. */
  double ltol = same_dtype(k->t, F64)             ? 1e-10
                : same_dtype(k->t, F32)           ? 1e-5
                : same_dtype(k->loss_dtype, k->t) ? 5e-3
                                                  : 2e-3;
  dev_download(&d->loss);
  if (none) {
    compare(k->name, "loss", &d->loss, p->loss_rows, k->bt, 0, ltol, 1.0);
  } else {
    double want = p->loss;
    compare(k->name, "loss", &d->loss, &want, 1, 0, ltol, 1.0);
  }
  if (k->lse) {
    dev_download(&d->lse);
    compare(k->name, "lse", &d->lse, p->lse, k->bt, 0, same_dtype(k->t, F64) ? 1e-10 : 1e-5, 1.0);
  }
  double gtol = same_dtype(k->gw_dtype, F32) && !same_dtype(k->t, F32) ? tol * 0.5 : tol;
  if (k->gi) {
    dev_download(&d->gi);
    compare(k->name, "grad_input", &d->gi, p->gi, k->bt, k->h, tol, 1e-6);
  }
  if (k->gw) {
    dev_download(&d->gw);
    compare(k->name, "grad_weight", &d->gw, p->gw, k->v, k->h, gtol, 1e-6);
  }
  if (k->gb) {
    dev_download(&d->gb);
    compare(k->name, "grad_bias", &d->gb, p->gb, k->v, 0, gtol, 1e-6);
  }
}

/* The bytes of n device tensors (those allocated), for rerun comparisons. */
static void snapshot_devs(dev *const *outs, size_t n, char **out, size_t *bytes) {
  *bytes = 0;
  for (size_t i = 0; i < n; ++i)
    *bytes += outs[i]->ptr != NULL ? outs[i]->bytes : 0;
  *out = malloc(*bytes + 1);
  size_t off = 0;
  for (size_t i = 0; i < n; ++i)
    if (outs[i]->ptr != NULL) {
      dev_download(outs[i]);
      memcpy(*out + off, outs[i]->host, outs[i]->bytes);
      off += outs[i]->bytes;
    }
}

/* Every output's bytes, for the rerun comparison. */
static void snapshot(tensors *d, char **out, size_t *bytes) {
  dev *const outs[] = {&d->loss, &d->lse, &d->gi, &d->gw, &d->gb};
  snapshot_devs(outs, 5, out, bytes);
}

/* Runs the case again, then again on a fresh runtime (as the next process would: it finds
 * the GEMM algorithms the first one timed in the cache); both must give the same bits. */
static void rerun_and_compare(const flce_case *k, tensors *d, const char *first, size_t n1,
                              const char *what) {
  char *again;
  size_t n2;
  poison_outputs(d);
  CHECK(run(k, d) == JITOPS_SUCCESS);
  snapshot(d, &again, &n2);
  if (n1 != n2 || memcmp(first, again, n1) != 0) {
    fprintf(stderr, "%s: %s is not bit-identical\n", k->name, what);
    ++test_failures;
  }
  free(again);
}

static void check_reruns(const flce_case *k, tensors *d) {
  char *first;
  size_t n1;
  snapshot(d, &first, &n1);
  rerun_and_compare(k, d, first, n1, "the rerun");
  jitops_runtime_destroy(rt);
  rt = test_gpu_runtime_or_skip("test_gpu_flce");
  rerun_and_compare(k, d, first, n1, "a fresh runtime's run");
  free(first);
}

/* Inputs from `seed`, the reference, the device tensors, and a first run checked against the
 * reference; false (a failure counted) when the run fails. */
static bool case_start(const flce_case *k, uint64_t seed, problem *p, tensors *d) {
  memset(p, 0, sizeof *p);
  p->k = k;
  make_inputs(p, seed + (uint64_t)k->bt * 31 + (uint64_t)k->v);
  reference(p);
  memset(d, 0, sizeof *d);
  upload_inputs(p, d);
  make_outputs(k, d);
  poison_outputs(d);
  jitops_status s = run(k, d);
  if (s != JITOPS_SUCCESS) {
    fprintf(stderr, "%s: %s: %s\n", k->name, jitops_status_string(s), jitops_last_error());
    ++test_failures;
    return false;
  }
  check_outputs(p, d);
  return true;
}

static void case_free(problem *p, tensors *d) {
  dev *all[] = {&d->x,   &d->w,  &d->b,  &d->target, &d->dy,    &d->loss,
                &d->lse, &d->gi, &d->gw, &d->gb,     &d->dy_bwd};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
    dev_free(all[i]);
  problem_free(p);
}

static void run_case(const flce_case *k) {
  problem p;
  tensors d;
  if (case_start(k, 0x5eed0000u, &p, &d) && k->rerun)
    check_reruns(k, &d);
  case_free(&p, &d);
  printf("  %s: done\n", k->name);
}

/* ---- the cases ------------------------------------------------------------------------ */

static flce_case base(const char *name, DLDataType t, int64_t bt, int64_t h, int64_t v) {
  flce_case k;
  memset(&k, 0, sizeof k);
  k.name = name;
  k.t = t;
  k.bt = bt;
  k.h = h;
  k.v = v;
  jitops_flce_options_init(&k.opt);
  k.bias = k.gi = k.gw = k.gb = k.lse = 1;
  k.gw_dtype = t;
  k.loss_dtype = same_dtype(t, F64) ? F64 : F32;
  k.dy_dtype = F32;
  k.ignore_frac = 0.2;
  k.logit_scale = 3.0;
  return k;
}

/* A budget that leaves no room for the rows algorithm's f32 accumulator. */
static int64_t tight_budget(int64_t v, int64_t h) {
  return (int64_t)(32 << 20) + 64 * 1024 + v * h * 2;
}

static void small_cases(void) {
  flce_case k;
  /* bf16, one chunk, every output, mean. */
  k = base("bf16 one chunk mean", BF16, 37, 64, 1000);
  k.rerun = 1;
  run_case(&k);
  /* Several chunks: grad_weight accumulated in f32 scratch. */
  k = base("bf16 chunks f32-acc", BF16, 37, 64, 1000);
  k.opt.chunk_rows = 8;
  k.rerun = 1;
  run_case(&k);
  /* The vocab algorithm: vocabulary groups for grad_weight. */
  k = base("bf16 vocab groups", BF16, 37, 64, 1000);
  k.opt.chunk_rows = 8;
  k.opt.scratch_budget_bytes = tight_budget(1000, 64);
  k.rerun = 1;
  run_case(&k);
  /* ... without grad_input: a statistics-only first pass, grad_bias from the groups. */
  k.name = "bf16 vocab groups, no grad_input";
  k.gi = 0;
  k.rerun = 0;
  run_case(&k);
  /* Each reduction and option, alone and together, in several chunks. */
  static const char *const names[] = {"sum", "none", "smoothing", "softcap", "z-loss", "all"};
  for (int i = 0; i < 6; ++i) {
    k = base(names[i], BF16, 45, 48, 777);
    k.opt.chunk_rows = 16;
    k.opt.reduction = i == 0             ? JITOPS_FLCE_REDUCTION_SUM
                      : i == 1 || i == 5 ? JITOPS_FLCE_REDUCTION_NONE
                                         : JITOPS_FLCE_REDUCTION_MEAN;
    if (i == 2 || i == 5)
      k.opt.label_smoothing = 0.1;
    if (i == 3 || i == 5)
      k.opt.softcap = 2.5;
    if (i == 4 || i == 5)
      k.opt.z_loss_scale = 0.02;
    run_case(&k);
  }
  /* dy in the forward: a scalar for mean, per token for none. */
  k = base("dy scalar mean", BF16, 29, 32, 300);
  k.dy = 1;
  k.dy_dtype = BF16;
  run_case(&k);
  k = base("dy per-token none", BF16, 29, 32, 300);
  k.opt.reduction = JITOPS_FLCE_REDUCTION_NONE;
  k.opt.chunk_rows = 7;
  k.dy = 1;
  k.opt.label_smoothing = 0.05;
  run_case(&k);
  k.name = "dy per-token none, vocab";
  k.opt.scratch_budget_bytes = tight_budget(300, 32);
  run_case(&k);
  /* The Liger-style backward: saved gradients times a scalar dy. */
  k = base("backward scales", BF16, 29, 32, 300);
  k.opt.chunk_rows = 8;
  k.via_backward = 1;
  run_case(&k);
  k.opt.reduction = JITOPS_FLCE_REDUCTION_SUM;
  k.name = "backward scales, sum";
  run_case(&k);
  /* dtypes. */
  k = base("f16", F16, 33, 40, 513);
  k.opt.chunk_rows = 8;
  k.opt.softcap = 4.0;
  run_case(&k);
  k = base("f32", F32, 33, 40, 513);
  k.opt.chunk_rows = 8;
  k.opt.label_smoothing = 0.2;
  run_case(&k);
  k = base("f64", F64, 21, 24, 129);
  k.opt.chunk_rows = 8;
  k.opt.z_loss_scale = 0.01;
  k.opt.reduction = JITOPS_FLCE_REDUCTION_SUM;
  run_case(&k);
  /* f32 gradients for bf16 weights (no accumulator needed), bf16 loss. */
  k = base("bf16 with f32 grad_weight", BF16, 40, 32, 640);
  k.opt.chunk_rows = 16;
  k.gw_dtype = F32;
  k.loss_dtype = BF16;
  run_case(&k);
  /* Layouts: padded input rows, strided target and outputs. */
  k = base("strided", BF16, 31, 24, 200);
  k.opt.reduction = JITOPS_FLCE_REDUCTION_NONE;
  k.x_pad = 8;
  k.target_stride = 3;
  k.out_stride = 2;
  run_case(&k);
  k.name = "strided, chunks f32-acc";
  k.gw_pad = 8;
  k.opt.chunk_rows = 8;
  run_case(&k);
  k.name = "strided, backward scales";
  k.opt.reduction = JITOPS_FLCE_REDUCTION_MEAN;
  k.via_backward = 1;
  run_case(&k);
  /* Edge cases. */
  k = base("all ignored, mean is NaN", BF16, 16, 32, 100);
  k.all_ignored = 1;
  run_case(&k);
  k.name = "all ignored, sum is 0";
  k.opt.reduction = JITOPS_FLCE_REDUCTION_SUM;
  run_case(&k);
  k = base("empty batch", BF16, 0, 32, 100);
  run_case(&k);
  k = base("BT below a chunk", BF16, 3, 32, 100);
  k.opt.chunk_rows = 64;
  run_case(&k);
  k = base("V = 1", F32, 5, 8, 1);
  k.ignore_frac = 0;
  run_case(&k);
  k = base("target out of range", BF16, 9, 16, 50);
  k.opt.reduction = JITOPS_FLCE_REDUCTION_NONE;
  k.bad_target = 1;
  k.gw = k.gb = 0; /* the bad row's gradient lacks its target term; the reference agrees */
  run_case(&k);
  k = base("ignore_index 0", BF16, 20, 16, 64);
  k.opt.ignore_index = 0;
  k.ignore_frac = 0.3;
  run_case(&k);
}

/* BT * V > 2^31: int64 offsets everywhere. The reference checks sampled rows (loss, lse,
 * grad_input) and sampled vocabulary rows of grad_weight and grad_bias, the latter built from
 * the GPU's lse of every row once the sampled lse agree. */
static void large_case(int64_t chunk_rows, int64_t budget, const char *name) {
  const int64_t bt = 16500, h = 32, v = 131072 + 77; /* bt * v = 2.16e9 */
  flce_case k = base(name, BF16, bt, h, v);
  k.opt.reduction = JITOPS_FLCE_REDUCTION_NONE;
  k.opt.chunk_rows = chunk_rows;
  k.opt.scratch_budget_bytes = budget;
  k.opt.label_smoothing = 0.1;
  problem p;
  memset(&p, 0, sizeof p);
  p.k = &k;
  make_inputs(&p, 0xb16);
  p.loss_rows = calloc((size_t)bt, sizeof(double));
  p.lse = calloc((size_t)bt, sizeof(double));
  p.count = 0;
  for (int64_t t = 0; t < bt; ++t)
    p.count += !ignored(&p, t);
  tensors d;
  memset(&d, 0, sizeof d);
  upload_inputs(&p, &d);
  make_outputs(&k, &d);
  poison_outputs(&d);
  jitops_status s = run(&k, &d);
  if (s != JITOPS_SUCCESS) {
    fprintf(stderr, "%s: %s: %s\n", name, jitops_status_string(s), jitops_last_error());
    ++test_failures;
  } else {
    dev_download(&d.lse);
    dev_download(&d.gi);
    dev_download(&d.gw);
    dev_download(&d.gb);
    dev_download(&d.loss);
    double *z = malloc(sizeof(double) * (size_t)v), *g = malloc(sizeof(double) * (size_t)v);
    const int64_t sample_rows[] = {0, 1, 777, 8191, 8192, 12345, 16383, 16384, bt - 1};
    double lse_err = 0, loss_err = 0, gi_err = 0, gi_max = 0;
    for (size_t i = 0; i < sizeof sample_rows / sizeof sample_rows[0]; ++i) {
      int64_t t = sample_rows[i];
      if (ignored(&p, t))
        continue;
      reference_row(&p, t, z, g);
      lse_err = fmax(lse_err, fabs(get(F32, d.lse.host, t) - p.lse[t]));
      loss_err = fmax(loss_err, fabs(get(F32, d.loss.host, t) - p.loss_rows[t]));
      for (int64_t c = 0; c < h; ++c) {
        double want = 0;
        for (int64_t j = 0; j < v; ++j)
          want += g[j] * p.w[j * h + c];
        gi_err = fmax(gi_err, fabs(get(BF16, d.gi.host, t * h + c) - want));
        gi_max = fmax(gi_max, fabs(want));
      }
    }
    CHECK(lse_err < 1e-4);
    CHECK(loss_err < 1e-3);
    CHECK(gi_err <= 2e-2 * gi_max);
    /* grad_weight and grad_bias rows from the device lse of every row. */
    const int64_t sample_cols[] = {0, 5, 65535, 65536, 131071, v - 1};
    double gw_err = 0, gw_max = 0, gb_err = 0, gb_max = 0;
    for (size_t i = 0; i < sizeof sample_cols / sizeof sample_cols[0]; ++i) {
      int64_t j = sample_cols[i];
      double want[64] = {0}, want_b = 0;
      for (int64_t t = 0; t < bt; ++t) {
        if (ignored(&p, t))
          continue;
        double dot = 0;
        for (int64_t c = 0; c < h; ++c)
          dot += p.x[t * h + c] * p.w[j * h + c];
        double zj = round_to(BF16, dot) + p.b[j], lse = get(F32, d.lse.host, t);
        double gj = exp(zj - lse) - 0.1 / (double)v - (j == p.target[t] ? 0.9 : 0.0);
        for (int64_t c = 0; c < h; ++c)
          want[c] += gj * p.x[t * h + c];
        want_b += gj;
      }
      for (int64_t c = 0; c < h; ++c) {
        gw_err = fmax(gw_err, fabs(get(BF16, d.gw.host, j * h + c) - want[c]));
        gw_max = fmax(gw_max, fabs(want[c]));
      }
      gb_err = fmax(gb_err, fabs(get(BF16, d.gb.host, j) - want_b));
      gb_max = fmax(gb_max, fabs(want_b));
    }
    CHECK(gw_err <= 2e-2 * gw_max);
    CHECK(gb_err <= 2e-2 * gb_max + 1e-9);
    /* Every grad_weight element was written (no NaN poison left). */
    int64_t nan_count = 0;
    for (int64_t i = 0; i < v * h; ++i)
      nan_count += isnan(get(BF16, d.gw.host, i));
    CHECK(nan_count == 0);
    printf("  %s: lse err %.2g, loss err %.2g, grad_input %.2g of %.2g, grad_weight %.2g of %.2g, "
           "grad_bias "
           "%.2g of %.2g\n",
           name, lse_err, loss_err, gi_err, gi_max, gw_err, gw_max, gb_err, gb_max);
    free(z);
    free(g);
  }
  dev *all[] = {&d.x, &d.w, &d.b, &d.target, &d.loss, &d.lse, &d.gi, &d.gw, &d.gb};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
    dev_free(all[i]);
  problem_free(&p);
}

/* ---- vocabulary shards ---------------------------------------------------------------- */

/* A case split into shards of the weight's rows: phase 1 on each, the statistics combined on
 * the host as the all-reduces would (max, then a sum of exp; a sum), phase 2 on each from the
 * combined lse, the grad_input partials summed; everything compared with the unsharded
 * forward on the same device tensors. */
enum { MAX_SHARDS = 4 };

typedef struct shard_run {
  int n;
  int64_t start[MAX_SHARDS], rows[MAX_SHARDS];
  dev lse_local[MAX_SHARDS], linear[MAX_SHARDS], gi[MAX_SHARDS];
  dev lse;    /* the combined lse, phase 2's input */
  dev gw, gb; /* the shards' gradients, concatenated */
  double *loss_rows;
  double loss;
} shard_run;

/* Rows [r0, r0 + n) of a device matrix or vector, as its own tensor (shape storage: `shape`). */
static DLTensor rows_view(const dev *x, int64_t r0, int64_t n, int64_t shape[2]) {
  DLTensor t = x->t;
  shape[0] = n;
  shape[1] = x->cols;
  t.shape = shape;
  t.byte_offset = (uint64_t)(r0 * x->stride) * dsize(x->t.dtype);
  return t;
}

static jitops_flce_options shard_options(const flce_case *k, const shard_run *s, int r) {
  jitops_flce_options o = k->opt;
  o.vocab_start = s->start[r];
  o.vocab_size = k->v;
  return o;
}

/* Phase 1 on every shard. */
static jitops_status shard_stats(const flce_case *k, tensors *d, shard_run *s) {
  for (int r = 0; r < s->n; ++r) {
    int64_t ws[2], bs[2];
    DLTensor w = rows_view(&d->w, s->start[r], s->rows[r], ws);
    DLTensor b = k->bias ? rows_view(&d->b, s->start[r], s->rows[r], bs) : w;
    jitops_flce_tensors ts = {
        .input = &d->x.t, .weight = &w, .bias = k->bias ? &b : NULL, .target = &d->target.t};
    jitops_flce_options o = shard_options(k, s, r);
    jitops_status st =
        jitops_flce_shard_stats(rt, &ts, &o, &s->lse_local[r].t, &s->linear[r].t, NULL, stream);
    if (st != JITOPS_SUCCESS)
      return st;
  }
  return JITOPS_SUCCESS;
}

/* What the caller does between the phases, in the accumulation type: lse = m + log(sum over
 * shards of exp(lse_local - m)) with m their max, linear = their sum, the loss from those
 * (0 for ignored rows), reduced; the combined lse uploaded. */
static void shard_combine(const problem *p, shard_run *s) {
  const flce_case *k = p->k;
  bool f64 = same_dtype(k->t, F64);
  double total = 0;
  for (int r = 0; r < s->n; ++r) {
    dev_download(&s->lse_local[r]);
    dev_download(&s->linear[r]);
  }
  for (int64_t t = 0; t < k->bt; ++t) {
    double m = -INFINITY, sum = 0, linear = 0;
    for (int r = 0; r < s->n; ++r)
      m = fmax(
          m, get(s->lse_local[r].t.dtype, s->lse_local[r].host, dev_index(&s->lse_local[r], t, 0)));
    for (int r = 0; r < s->n; ++r) {
      double l =
          get(s->lse_local[r].t.dtype, s->lse_local[r].host, dev_index(&s->lse_local[r], t, 0));
      double lin = get(s->linear[r].t.dtype, s->linear[r].host, dev_index(&s->linear[r], t, 0));
      sum = f64 ? sum + exp(l - m) : (double)((float)sum + expf((float)(l - m)));
      linear = f64 ? linear + lin : (double)((float)linear + (float)lin);
    }
    double lse = f64 ? m + log(sum) : (double)((float)m + logf((float)sum));
    double zl = k->opt.z_loss_scale;
    double loss = f64 ? lse - linear + zl * lse * lse
                      : (double)((float)lse - (float)linear + (float)zl * (float)lse * (float)lse);
    s->loss_rows[t] = ignored(p, t) ? 0.0 : loss;
    total += s->loss_rows[t];
    put(s->lse.t.dtype, s->lse.host, dev_index(&s->lse, t, 0), lse);
  }
  s->loss = k->opt.reduction == JITOPS_FLCE_REDUCTION_MEAN ? total / (double)p->count : total;
  dev_upload(&s->lse);
}

/* Phase 2 on every shard. */
static jitops_status shard_backward(const flce_case *k, tensors *d, shard_run *s) {
  for (int r = 0; r < s->n; ++r) {
    int64_t ws[2], bs[2], gws[2], gbs[2];
    DLTensor w = rows_view(&d->w, s->start[r], s->rows[r], ws);
    DLTensor b = k->bias ? rows_view(&d->b, s->start[r], s->rows[r], bs) : w;
    DLTensor gw = k->gw ? rows_view(&s->gw, s->start[r], s->rows[r], gws) : w;
    DLTensor gb = k->gb ? rows_view(&s->gb, s->start[r], s->rows[r], gbs) : w;
    jitops_flce_tensors ts = {.input = &d->x.t,
                              .weight = &w,
                              .bias = k->bias ? &b : NULL,
                              .target = &d->target.t,
                              .grad_output = k->dy ? &d->dy.t : NULL,
                              .grad_input = k->gi ? &s->gi[r].t : NULL,
                              .grad_weight = k->gw ? &gw : NULL,
                              .grad_bias = k->gb ? &gb : NULL};
    jitops_flce_options o = shard_options(k, s, r);
    jitops_status st = jitops_flce_shard_backward(rt, &ts, &o, &s->lse.t, NULL, stream);
    if (st != JITOPS_SUCCESS)
      return st;
  }
  return JITOPS_SUCCESS;
}

/* The outputs of both phases, NULL-terminated; their count. */
static size_t shard_outputs(shard_run *s, dev **outs) {
  size_t n = 0;
  for (int r = 0; r < s->n; ++r) {
    outs[n++] = &s->lse_local[r];
    outs[n++] = &s->linear[r];
    outs[n++] = &s->gi[r];
  }
  outs[n++] = &s->gw;
  outs[n++] = &s->gb;
  outs[n] = NULL;
  return n;
}

/* Both phases, every output poisoned first; false (a failure counted) when a call fails. */
static bool shard_run_all(const problem *p, tensors *d, shard_run *s) {
  const flce_case *k = p->k;
  dev *outs[3 * MAX_SHARDS + 3];
  shard_outputs(s, outs);
  for (size_t i = 0; outs[i] != NULL; ++i)
    if (outs[i]->ptr != NULL)
      dev_poison(outs[i]);
  jitops_status st = shard_stats(k, d, s);
  CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
  if (st == JITOPS_SUCCESS) {
    shard_combine(p, s);
    st = shard_backward(k, d, s);
    CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
  }
  if (st != JITOPS_SUCCESS) {
    fprintf(stderr, "%s (shards): %s: %s\n", k->name, jitops_status_string(st),
            jitops_last_error());
    ++test_failures;
  }
  return st == JITOPS_SUCCESS;
}

/* Shard vs unsharded: a few f32 (f64) roundings apart, or for 16-bit T, T's rounding of the
 * gradients (grad_input is a sum of rounded partials). */
static void shard_compare(const problem *p, tensors *d, shard_run *s) {
  const flce_case *k = p->k;
  bool none = k->opt.reduction == JITOPS_FLCE_REDUCTION_NONE;
  double tol = same_dtype(k->t, F64) ? 1e-10 : same_dtype(k->t, F32) ? 1e-5 : grad_tol(k->t);
  double ltol = same_dtype(k->t, F64) ? 1e-10 : same_dtype(k->t, F32) ? 1e-5 : 1e-4;
  char name[160];
  snprintf(name, sizeof name, "%s (%d shards)", k->name, s->n);
  dev_download(&d->loss);
  double *want = dev_values(&d->loss, none ? k->bt : 1, 0);
  compare_values(name, "loss", none ? s->loss_rows : &s->loss, want, none ? k->bt : 1, 1, ltol,
                 1.0);
  free(want);
  if (k->lse) { /* the rows that are not ignored */
    dev_download(&d->lse);
    dev_download(&s->lse);
    double *got = dev_values(&s->lse, k->bt, 0);
    want = dev_values(&d->lse, k->bt, 0);
    for (int64_t t = 0; t < k->bt; ++t)
      if (ignored(p, t))
        got[t] = want[t];
    compare_values(name, "lse", got, want, k->bt, 1, ltol, 1.0);
    free(got);
    free(want);
  }
  if (k->gi) {
    double *sum = calloc((size_t)(k->bt * k->h) + 1, sizeof(double));
    for (int r = 0; r < s->n; ++r) {
      dev_download(&s->gi[r]);
      double *part = dev_values(&s->gi[r], k->bt, k->h);
      for (int64_t i = 0; i < k->bt * k->h; ++i)
        sum[i] += part[i];
      free(part);
    }
    dev_download(&d->gi);
    want = dev_values(&d->gi, k->bt, k->h);
    compare_values(name, "grad_input", sum, want, k->bt * k->h, k->h, tol * s->n, 1e-6);
    free(sum);
    free(want);
  }
  dev *const pairs[][2] = {{&s->gw, &d->gw}, {&s->gb, &d->gb}};
  const char *const what[] = {"grad_weight", "grad_bias"};
  for (int i = 0; i < 2; ++i) {
    if (pairs[i][1]->ptr == NULL)
      continue;
    dev_download(pairs[i][0]);
    dev_download(pairs[i][1]);
    int64_t cols = i == 0 ? k->h : 0;
    double *got = dev_values(pairs[i][0], k->v, cols);
    want = dev_values(pairs[i][1], k->v, cols);
    compare_values(name, what[i], got, want, k->v * (cols ? cols : 1), cols ? cols : 1, tol, 1e-6);
    free(got);
    free(want);
  }
}

static void shard_alloc(const flce_case *k, shard_run *s) {
  DLDataType acc = same_dtype(k->t, F64) ? F64 : F32;
  for (int r = 0; r < s->n; ++r) {
    dev_make(&s->lse_local[r], acc, k->bt, 0, k->out_stride);
    dev_make(&s->linear[r], acc, k->bt, 0, 0);
    if (k->gi)
      dev_make(&s->gi[r], k->t, k->bt, k->h, 0);
  }
  dev_make(&s->lse, acc, k->bt, 0, k->target_stride);
  if (k->gw)
    dev_make(&s->gw, k->gw_dtype, k->v, k->h, 0);
  if (k->gb)
    dev_make(&s->gb, k->gw_dtype, k->v, 0, 0);
  s->loss_rows = calloc((size_t)k->bt + 1, sizeof(double));
}

static void shard_free(shard_run *s) {
  dev *outs[3 * MAX_SHARDS + 3];
  shard_outputs(s, outs);
  for (size_t i = 0; outs[i] != NULL; ++i)
    dev_free(outs[i]);
  dev_free(&s->lse);
  free(s->loss_rows);
}

/* The case unsharded (checked against the reference), then split into shards of `sizes`
 * rows (summing to V), for each split. */
static void run_shard_case(const flce_case *k, int nsplits, const int64_t sizes[][MAX_SHARDS + 1]) {
  problem p;
  tensors d;
  bool ok = case_start(k, 0x5aad0000u, &p, &d);
  for (int split = 0; split < nsplits && ok; ++split) {
    shard_run s;
    memset(&s, 0, sizeof s);
    int64_t start = 0;
    for (s.n = 0; sizes[split][s.n] > 0; ++s.n) {
      s.start[s.n] = start;
      s.rows[s.n] = sizes[split][s.n];
      start += s.rows[s.n];
    }
    CHECK(start == k->v);
    shard_alloc(k, &s);
    if (shard_run_all(&p, &d, &s)) {
      shard_compare(&p, &d, &s);
      if (k->rerun) { /* the same bits again */
        dev *outs[3 * MAX_SHARDS + 3];
        size_t n = shard_outputs(&s, outs), n1, n2;
        char *first, *again;
        snapshot_devs(outs, n, &first, &n1);
        if (shard_run_all(&p, &d, &s)) {
          snapshot_devs(outs, n, &again, &n2);
          if (n1 != n2 || memcmp(first, again, n1) != 0) {
            fprintf(stderr, "%s (%d shards): the rerun is not bit-identical\n", k->name, s.n);
            ++test_failures;
          }
          free(again);
        }
        free(first);
      }
    }
    shard_free(&s);
    printf("  %s, %d shards: done\n", k->name, s.n);
  }
  case_free(&p, &d);
}

static void shard_cases(void) {
  flce_case k;
  /* f32, every option, mean; V = 513 in 2 and 3 uneven shards. */
  static const int64_t v513[][MAX_SHARDS + 1] = {{200, 313, 0}, {64, 300, 149, 0}};
  k = base("shard f32 mean, every option", F32, 33, 40, 513);
  k.opt.label_smoothing = 0.1;
  k.opt.softcap = 4.0;
  k.opt.z_loss_scale = 0.01;
  k.rerun = 1;
  run_shard_case(&k, 2, v513);
  k = base("shard f32 sum, no bias, dy", F32, 33, 40, 513);
  k.opt.reduction = JITOPS_FLCE_REDUCTION_SUM;
  k.bias = k.gb = 0;
  k.dy = 1;
  k.opt.label_smoothing = 0.2;
  run_shard_case(&k, 2, v513);
  k = base("shard f32 none, per-token dy, chunks", F32, 45, 48, 513);
  k.opt.reduction = JITOPS_FLCE_REDUCTION_NONE;
  k.opt.chunk_rows = 8;
  k.dy = 1;
  k.opt.softcap = 2.5;
  k.opt.z_loss_scale = 0.02;
  k.x_pad = 8;
  k.target_stride = 3;
  k.out_stride = 2;
  run_shard_case(&k, 2, v513);
  /* bf16: one chunk; several (grad_weight in f32 scratch); the vocab algorithm (a tight
   * budget); f32 gradients. */
  static const int64_t v777[][MAX_SHARDS + 1] = {{400, 377, 0}, {100, 500, 177, 0}};
  k = base("shard bf16 mean, every option", BF16, 45, 48, 777);
  k.opt.label_smoothing = 0.1;
  k.opt.softcap = 30.0;
  k.opt.z_loss_scale = 1e-3;
  k.rerun = 1;
  run_shard_case(&k, 2, v777);
  k.name = "shard bf16 mean, chunks f32-acc";
  k.opt.chunk_rows = 16;
  run_shard_case(&k, 2, v777);
  k = base("shard bf16 none, vocab groups", BF16, 45, 48, 777);
  k.opt.reduction = JITOPS_FLCE_REDUCTION_NONE;
  k.opt.chunk_rows = 8;
  k.opt.scratch_budget_bytes = tight_budget(777, 48);
  k.opt.label_smoothing = 0.05;
  k.dy = 1;
  k.rerun = 1;
  run_shard_case(&k, 2, v777);
  k.name = "shard bf16 none, vocab groups, no grad_input";
  k.gi = 0;
  k.rerun = 0;
  run_shard_case(&k, 2, v777);
  k = base("shard bf16 sum, f32 gradients", BF16, 40, 32, 777);
  k.opt.reduction = JITOPS_FLCE_REDUCTION_SUM;
  k.opt.chunk_rows = 16;
  k.gw_dtype = F32;
  run_shard_case(&k, 2, v777);
  /* f64; edge cases. */
  static const int64_t v129[][MAX_SHARDS + 1] = {{1, 128, 0}, {50, 50, 29, 0}};
  k = base("shard f64 sum, z-loss", F64, 21, 24, 129);
  k.opt.reduction = JITOPS_FLCE_REDUCTION_SUM;
  k.opt.z_loss_scale = 0.01;
  k.opt.chunk_rows = 8;
  run_shard_case(&k, 2, v129);
  static const int64_t v100[][MAX_SHARDS + 1] = {{37, 63, 0}, {10, 80, 10, 0}};
  k = base("shard all ignored, mean is NaN", F32, 16, 32, 100);
  k.all_ignored = 1;
  run_shard_case(&k, 2, v100);
  k = base("shard empty batch", BF16, 0, 32, 100);
  run_shard_case(&k, 2, v100);
  k = base("shard ignore_index 0", BF16, 20, 16, 100);
  k.opt.ignore_index = 0;
  k.ignore_frac = 0.3;
  run_shard_case(&k, 2, v100);
  k = base("shard target out of range", F32, 9, 16, 100);
  k.opt.reduction = JITOPS_FLCE_REDUCTION_NONE;
  k.bad_target = 1;
  k.gw = k.gb = 0; /* as unsharded: the bad row's gradient lacks its target term */
  run_shard_case(&k, 2, v100);
}

int main(int argc, char **argv) {
  rt = test_gpu_runtime_or_skip("test_gpu_flce");
  int small = argc > 1 && strcmp(argv[1], "--small") == 0;
  int shards = argc > 1 && strcmp(argv[1], "--shards") == 0;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  if (shards)
    shard_cases();
  else
    small_cases();
  if (!small && !shards) {
    /* One chunk of all 16500 rows: the logits buffer alone has 2.16e9 elements. */
    large_case(16500, (int64_t)6 << 30, "BT*V > 2^31, one chunk");
    /* The default plan for it. */
    large_case(0, 0, "BT*V > 2^31, default plan");
  }
  cudaStreamDestroy(stream);
  jitops_runtime_destroy(rt);
  return test_finish("test_gpu_flce");
}
