/* GPU tests of jitops_scan and jitops_scan_backward against a CPU reference in double
 * precision: every op and dtype, ranks 1 to 8, every axis, both directions, contiguous,
 * permuted and sliced views (outputs poisoned, gaps checked for stray writes), sizes 0, 1 and
 * primes, every kernel path (rows and cols, with and without look-back), cummax ties and NaNs,
 * cumprod zeros, -inf in logcumsumexp, in-place calls, a caller workspace, tensors beyond
 * 2^31 bytes, and a bit-identical rerun of every case. The rerun follows
 * jitops_runtime_wait_builds: on an empty cache a kernel's first run may be its quick build and
 * the rerun its full build, so the comparison holds quick builds to the full builds' bits.
 *
 *   test_gpu_scan          everything
 *   test_gpu_scan quick    a small set that still takes every kernel path (for memcheck)
 *   test_gpu_scan race     a smaller one, f32 over each kernel path (for racecheck)
 *   test_gpu_scan race K/N the race cases whose index is K modulo N, so that N sanitized
 *                          processes can share the set
 *   test_gpu_scan group G  the cases of group G only (the first argument of add(): "long",
 *                          "wide", "prefetch", ...)
 *
 * Cases run on several threads, each with its own stream, so that the kernels' first
 * compiles overlap. Exits 77 without a GPU. */
#include <cuda_runtime.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "gpu_tensors.h"
#include "ops/scan/args.h"
#include "ops/scan/plan.h"
#include "testutil.h"

enum { OP_CUMSUM, OP_CUMPROD, OP_CUMMAX, OP_CUMMIN, OP_LCSE, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"cumsum", "cumprod", "cummax", "cummin",
                                               "logcumsumexp"};
enum {
  DATA_NORMAL,
  DATA_TIES_NAN,
  DATA_ZERO_ONE,
  DATA_ZERO_SEVERAL,
  DATA_ZERO_ALL,
  DATA_NEG_INF,
  DATA_INF_NAN,
  DATA_WRAP,
  DATA_RISING,
  DATA_COUNT
};
static const char *const data_names[DATA_COUNT] = {"normal",  "ties+nan",  "one zero",
                                                   "3 zeros", "all zeros", "-inf",
                                                   "inf+nan", "overflow",  "rising"};

typedef struct scase {
  const char *group;
  int op, backward, dt, ndim, axis, reverse, layout_in, layout_out, data;
  int inplace;      /* y is x (forward) or dx is dy (backward) */
  int workspace;    /* pass a caller workspace of the queried size */
  int quick;        /* part of the memcheck set */
  int race;         /* > 0: the racecheck set's case number race (each kernel path, f32) */
  int compile_only; /* only prewarmed (the benchmark's shapes) */
  int64_t shape[8];
} scase;

/* ---- failures, shared by the worker threads ------------------------------------------------ */

static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int failures, cases_run, cases_skipped;

static void describe(const scase *c, char *buf, size_t size) {
  int n = snprintf(buf, size, "[%s] %s%s %s shape [", c->group, op_names[c->op],
                   c->backward ? " backward" : "", gt_dtypes[c->dt].name);
  for (int d = 0; d < c->ndim; ++d)
    n += snprintf(buf + n, size - (size_t)n, d ? ",%lld" : "%lld", (long long)c->shape[d]);
  snprintf(buf + n, size - (size_t)n, "] axis %d%s %s->%s %s%s%s", c->axis,
           c->reverse ? " reverse" : "", gt_layout_names[c->layout_in],
           gt_layout_names[c->layout_out], data_names[c->data], c->inplace ? " in-place" : "",
           c->workspace ? " workspace" : "");
}

static void fail(const scase *c, const char *what) {
  char d[512];
  describe(c, d, sizeof d);
  pthread_mutex_lock(&report_lock);
  if (atomic_fetch_add(&failures, 1) < 60)
    fprintf(stderr, "FAIL %s: %s\n", d, what);
  pthread_mutex_unlock(&report_lock);
}

/* ---- data ------------------------------------------------------------------------------------ */

typedef struct lines {
  int64_t outer, len, inner;
} lines;

static lines lines_of(const scase *c) {
  lines l = {1, c->shape[c->axis], 1};
  for (int d = 0; d < c->axis; ++d)
    l.outer *= c->shape[d];
  for (int d = c->axis + 1; d < c->ndim; ++d)
    l.inner *= c->shape[d];
  return l;
}

/* Element index of scan position p on line (o, i). */
static int64_t at(const lines *l, int reverse, int64_t o, int64_t i, int64_t p) {
  const int64_t k = reverse ? l->len - 1 - p : p;
  return (o * l->len + k) * l->inner + i;
}

static void generate_x(const scase *c, const lines *l, uint64_t *rng, double *x, int64_t *xi) {
  const int dt = c->dt;
  const int64_t n = l->outer * l->len * l->inner;
  const double spread = 2.0 / sqrt((double)(l->len > 0 ? l->len : 1));
  for (int64_t e = 0; e < n; ++e) {
    double v = test_rand_uniform(rng, -1, 1);
    int64_t iv = (int64_t)(test_rand_u64(rng) % 2001) - 1000;
    switch (c->op) {
    case OP_CUMPROD:
      v = exp(test_rand_uniform(rng, -1, 1) * spread) *
          (test_rand_uniform(rng, 0, 1) < 0.2 ? -1 : 1);
      iv = (int64_t)(test_rand_u64(rng) % 4);
      iv = iv < 2 ? iv - 2 : iv - 1; /* -2, -1, 1, 2 */
      if (c->data == DATA_WRAP)      /* odd factors: products wrap but never reach 0 mod 2^n */
        iv = iv < 0 ? 2 * iv + 1 : 2 * iv - 1; /* -3, -1, 1, 3 */
      break;
    case OP_CUMMAX:
    case OP_CUMMIN:
      if (c->data == DATA_TIES_NAN) {
        const double r = test_rand_uniform(rng, 0, 1);
        v = r < 0.04 ? NAN : r < 0.06 ? INFINITY : r < 0.08 ? -INFINITY : floor(r * 4);
      }
      break;
    case OP_LCSE:
      v = test_rand_uniform(rng, -3, 3);
      if (c->data == DATA_NEG_INF && test_rand_uniform(rng, 0, 1) < 0.25)
        v = -INFINITY;
      if (c->data == DATA_RISING) /* a trend of 8 along the axis, in memory order */
        v += 8.0 * (double)((e / l->inner) % l->len) / (double)l->len;
      if (c->data == DATA_INF_NAN) {
        const double r = test_rand_uniform(rng, 0, 1);
        v = r < 0.0003 ? NAN : r < 0.0009 ? INFINITY : r < 0.2 ? -INFINITY : v;
      }
      break;
    default:
      if (c->data == DATA_WRAP)
        iv = (int64_t)(test_rand_u64(rng) % 2000000001ull) - 1000000000;
      break;
    }
    x[e] = gt_dtypes[dt].is_int ? (double)iv : gt_round(dt, v);
    xi[e] = iv;
  }
  /* Zeros for cumprod and whole lines of -inf for logcumsumexp, per line. */
  for (int64_t o = 0; o < l->outer; ++o)
    for (int64_t i = 0; i < l->inner; ++i) {
      int zeros = c->data == DATA_ZERO_ONE ? 1 : c->data == DATA_ZERO_SEVERAL ? 3 : 0;
      if (c->data == DATA_ZERO_ALL)
        zeros = (int)l->len;
      for (int z = 0; z < zeros && l->len > 0; ++z) {
        const int64_t p =
            c->data == DATA_ZERO_ALL ? z : (int64_t)(test_rand_u64(rng) % (uint64_t)l->len);
        x[at(l, 0, o, i, p)] = 0;
        xi[at(l, 0, o, i, p)] = 0;
      }
      if ((c->data == DATA_NEG_INF || c->data == DATA_INF_NAN) && (o * l->inner + i) % 5 == 0)
        for (int64_t p = 0; p < l->len; ++p)
          x[at(l, 0, o, i, p)] = p < l->len / 2 || (o + i) % 2 ? -INFINITY : x[at(l, 0, o, i, p)];
    }
}

/* ---- the reference, in double ---------------------------------------------------------------- */

/* Forward: y (or yi for ints), indices, and a per-element error scale. */
static void reference_forward(const scase *c, const lines *l, const double *x, const int64_t *xi,
                              double *y, int64_t *yi, int64_t *idx, double *scale) {
  const int is_int = gt_dtypes[c->dt].is_int;
  for (int64_t o = 0; o < l->outer; ++o)
    for (int64_t i = 0; i < l->inner; ++i) {
      double acc = c->op == OP_CUMPROD ? 1 : c->op == OP_LCSE ? -INFINITY : 0, mag = 0;
      uint64_t iacc = c->op == OP_CUMPROD ? 1 : 0;
      int64_t best = -1;
      for (int64_t p = 0; p < l->len; ++p) {
        const int64_t e = at(l, c->reverse, o, i, p);
        const int64_t m = c->reverse ? l->len - 1 - p : p;
        const double v = x[e];
        switch (c->op) {
        case OP_CUMSUM:
          acc += v;
          mag += fabs(v);
          iacc += (uint64_t)xi[e];
          scale[e] = mag;
          break;
        case OP_CUMPROD:
          acc *= v;
          iacc *= (uint64_t)xi[e];
          scale[e] = (double)(p + 2) * fabs(acc);
          break;
        case OP_CUMMAX:
        case OP_CUMMIN: {
          const int better = c->op == OP_CUMMAX ? v >= acc : v <= acc;
          if (best < 0 || isnan(v) || (!isnan(acc) && better)) {
            acc = v;
            best = m;
          }
          idx[e] = best;
          scale[e] = 0;
          break;
        }
        default: {
          const double hi = acc > v ? acc : v, lo = acc > v ? v : acc;
          if (isnan(v) || isnan(acc))
            acc = NAN;
          else if (isinf(hi))
            acc = hi;
          else
            acc = hi + log1p(exp(lo - hi));
          scale[e] = 4 * (1 + fabs(acc)) * (2 + log2((double)p + 1));
          break;
        }
        }
        y[e] = acc;
        if (is_int) {
          yi[e] = c->dt == GT_I32 ? (int64_t)(int32_t)(uint32_t)iacc : (int64_t)iacc;
          y[e] = (double)yi[e];
        }
      }
    }
}

/* Backward: dx and two error scales (relative to the output rounding and to the f32 or f64
 * accumulation). y is the exact forward output, idx the forward indices. */
static void reference_backward(const scase *c, const lines *l, const double *x, const double *y,
                               const int64_t *idx, const double *dy, double *dx, double *sa,
                               double *sb) {
  const int64_t n = l->outer * l->len * l->inner;
  for (int64_t e = 0; e < n; ++e)
    dx[e] = sa[e] = sb[e] = 0;
  for (int64_t o = 0; o < l->outer; ++o)
    for (int64_t i = 0; i < l->inner; ++i) {
      const int64_t L = l->len;
      double ymax = 0;
      for (int64_t p = 0; p < L; ++p) {
        const double v = fabs(y[at(l, c->reverse, o, i, p)]);
        if (!isinf(v) && v > ymax)
          ymax = v;
      }
      double s = 0, sabs = 0, r = 0, rabs = 0, lprod = 1;
      switch (c->op) {
      case OP_CUMSUM:
        for (int64_t p = L - 1; p >= 0; --p) {
          const int64_t e = at(l, c->reverse, o, i, p);
          s += dy[e];
          sabs += fabs(dy[e]);
          dx[e] = s;
          sb[e] = sabs;
        }
        break;
      case OP_CUMPROD:
        for (int64_t p = L - 1; p >= 0; --p) {
          const int64_t e = at(l, c->reverse, o, i, p);
          const double xn = p + 1 < L ? x[at(l, c->reverse, o, i, p + 1)] : 0;
          r = dy[e] + xn * r;
          rabs = fabs(dy[e]) + fabs(xn) * rabs;
          dx[e] = r; /* times L_j below */
          sb[e] = rabs;
        }
        for (int64_t p = 0; p < L; ++p) {
          const int64_t e = at(l, c->reverse, o, i, p);
          dx[e] *= lprod;
          const double mag = fabs(lprod) * sb[e];
          sa[e] = 2 * mag;
          sb[e] = (double)(L + 2) * mag;
          lprod *= x[e];
        }
        break;
      case OP_CUMMAX:
      case OP_CUMMIN:
        for (int64_t p = 0; p < L; ++p) {
          const int64_t e = at(l, c->reverse, o, i, p);
          const int64_t target = (o * L + idx[e]) * l->inner + i;
          dx[target] += dy[e];
          sb[target] += fabs(dy[e]);
        }
        break;
      default: /* logcumsumexp */
        for (int64_t p = L - 1; p >= 0; --p) {
          const int64_t e = at(l, c->reverse, o, i, p);
          if (y[e] != -INFINITY) {
            s += dy[e] * exp(-y[e]);
            sabs += fabs(dy[e]) * exp(-y[e]);
          }
          const double ex = x[e] == -INFINITY ? 0 : exp(x[e]);
          dx[e] = ex * s;
          const double mag = ex * sabs;
          sa[e] = (2 + ymax) * mag;
          sb[e] = 8 * (2 + log2((double)L + 1)) * mag;
        }
        break;
      }
    }
}

/* ---- comparing --------------------------------------------------------------------------------
 */

static int close_enough(double got, double ref, double tol) {
  if (isnan(ref))
    return isnan(got);
  if (isinf(ref))
    return got == ref;
  return fabs(got - ref) <= tol;
}

/* Compares a float output; the tolerance is eps_out·(|ref| + sa) + 4·eps_acc·sb. */
static int compare_floats(const scase *c, const char *what, const double *got, const double *ref,
                          const double *sa, const double *sb, int64_t n) {
  const gt_dtype *t = &gt_dtypes[c->dt];
  int64_t bad = 0, first = -1;
  for (int64_t e = 0; e < n; ++e) {
    const double tol = t->eps_out * (fabs(ref[e]) + (sa ? sa[e] : 0)) +
                       4 * t->eps_acc * (sb ? sb[e] : 0) + t->tiny;
    if (!close_enough(got[e], ref[e], tol)) {
      if (first < 0)
        first = e;
      ++bad;
    }
  }
  if (bad) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s: %lld of %lld wrong; first at %lld: got %.9g, want %.9g", what,
             (long long)bad, (long long)n, (long long)first, got[first], ref[first]);
    fail(c, msg);
  }
  return bad == 0;
}

static int compare_ints(const scase *c, const char *what, const int64_t *got, const int64_t *ref,
                        int64_t n) {
  int64_t bad = 0, first = -1;
  for (int64_t e = 0; e < n; ++e)
    if (got[e] != ref[e]) {
      if (first < 0)
        first = e;
      ++bad;
    }
  if (bad) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s: %lld of %lld wrong; first at %lld: got %lld, want %lld", what,
             (long long)bad, (long long)n, (long long)first, (long long)got[first],
             (long long)ref[first]);
    fail(c, msg);
  }
  return bad == 0;
}

/* ---- one case ----------------------------------------------------------------------------------
 */

typedef struct buffers {
  double *x, *y, *scale, *dy, *dx, *sa, *sb, *got;
  int64_t *xi, *yi, *idx, *goti;
} buffers;

/* Allocates the host arrays this case uses (the big cases cannot afford the others). */
static int buffers_alloc(buffers *b, int64_t n, const scase *c) {
  const size_t nn = (size_t)(n > 0 ? n : 1);
  const int is_int = gt_dtypes[c->dt].is_int;
  const int extremum = c->op == OP_CUMMAX || c->op == OP_CUMMIN;
  memset(b, 0, sizeof *b);
  double **d[] = {&b->x, &b->y, &b->scale, &b->got, &b->dy, &b->dx, &b->sa, &b->sb};
  const int need_d[] = {1, 1, 1, 1, c->backward, c->backward, c->backward, c->backward};
  int64_t **i[] = {&b->xi, &b->yi, &b->idx, &b->goti};
  const int need_i[] = {1, is_int, extremum, is_int || (extremum && !c->backward)};
  int ok = 1;
  for (size_t k = 0; k < sizeof d / sizeof d[0]; ++k)
    if (need_d[k])
      ok &= (*d[k] = malloc(nn * sizeof(double))) != NULL;
  for (size_t k = 0; k < sizeof i / sizeof i[0]; ++k)
    if (need_i[k])
      ok &= (*i[k] = malloc(nn * sizeof(int64_t))) != NULL;
  return ok;
}

static void buffers_free(buffers *b) {
  double *d[] = {b->x, b->y, b->scale, b->dy, b->dx, b->sa, b->sb, b->got};
  int64_t *i[] = {b->xi, b->yi, b->idx, b->goti};
  for (size_t k = 0; k < sizeof d / sizeof d[0]; ++k)
    free(d[k]);
  for (size_t k = 0; k < sizeof i / sizeof i[0]; ++k)
    free(i[k]);
}

typedef struct device_set {
  gt_tensor t[5]; /* inputs first; the outputs are listed in `outs` */
  int count;
  int outs[2];
  int nouts;
  int in_y, in_idx; /* saved y and saved indices of a backward, or -1 */
} device_set;

static void device_set_free(device_set *s) {
  for (int k = 0; k < s->count; ++k)
    gt_free(&s->t[k]);
}

/* Calls the op of case c on the set's tensors. */
static jitops_status invoke(jitops_runtime_t *rt, const scase *c, device_set *s,
                            const jitops_workspace *ws, cudaStream_t stream, size_t *query) {
  const int axis = (c->ndim + c->axis) % 2 ? c->axis - c->ndim : c->axis; /* some negative */
  DLTensor *out = &s->t[s->outs[0]].dl;
  DLTensor *idx_out = s->nouts > 1 ? &s->t[s->outs[1]].dl : NULL;
  const DLTensor *x = s->in_y >= 0 ? &s->t[1].dl : NULL;
  const DLTensor *y = s->in_y >= 0 ? &s->t[s->in_y].dl : NULL;
  const DLTensor *idx = s->in_idx >= 0 ? &s->t[s->in_idx].dl : NULL;
  const jitops_scan_op op = (jitops_scan_op)c->op;
  if (query != NULL)
    return c->backward ? jitops_scan_backward_workspace_size(rt, op, &s->t[0].dl, x, y, idx, axis,
                                                             c->reverse, out, query)
                       : jitops_scan_workspace_size(rt, op, &s->t[0].dl, axis, c->reverse, out,
                                                    idx_out, query);
  return c->backward ? jitops_scan_backward(rt, op, &s->t[0].dl, x, y, idx, axis, c->reverse, out,
                                            ws, stream)
                     : jitops_scan(rt, op, &s->t[0].dl, axis, c->reverse, out, idx_out, ws, stream);
}

/* Runs the op once on the device (with a caller workspace when the case asks for one). */
static jitops_status call_op(jitops_runtime_t *rt, const scase *c, device_set *s,
                             cudaStream_t stream, int *ok) {
  jitops_workspace ws = {NULL, 0};
  *ok = 1;
  if (c->workspace) {
    size_t bytes = 0;
    const jitops_status st = invoke(rt, c, s, NULL, stream, &bytes);
    if (st != JITOPS_SUCCESS)
      return st;
    if (bytes == 0 || cudaMalloc(&ws.ptr, bytes) != cudaSuccess) {
      fail(c, bytes == 0 ? "expected this case to need a workspace" : "cudaMalloc(workspace)");
      *ok = 0;
      return JITOPS_SUCCESS;
    }
    ws.bytes = bytes;
  }
  const jitops_status st = invoke(rt, c, s, c->workspace ? &ws : NULL, stream, NULL);
  if (cudaStreamSynchronize(stream) != cudaSuccess) {
    fail(c, "the kernel failed (cudaStreamSynchronize)");
    *ok = 0;
  }
  if (ws.ptr)
    cudaFree(ws.ptr);
  return st;
}

static int add_tensor(device_set *s, int dt, const gt_view *view, int fake) {
  gt_tensor *t = &s->t[s->count++];
  if (fake) {
    gt_fake(t, dt, view);
    return 1;
  }
  return gt_alloc(t, dt, view);
}

/* The case's tensors, in the order the ops take them: forward x [, y] [, indices]; backward
 * dy [, x, y | indices] [, dx]. In place, the output is tensor 0. `fake` describes them over
 * fake addresses without allocating (for compiling on a compile-only runtime). */
static int build_set(const scase *c, device_set *s, int fake) {
  gt_view vin, vout;
  gt_view_make(&vin, c->ndim, c->shape, c->layout_in);
  gt_view_make(&vout, c->ndim, c->shape, c->layout_out);
  memset(s, 0, sizeof *s);
  s->in_y = s->in_idx = -1;
  int ok = 1;
  const int extremum = c->op == OP_CUMMAX || c->op == OP_CUMMIN;
  ok &= add_tensor(s, c->dt, &vin, fake);
  if (!c->backward) {
    s->outs[s->nouts++] = c->inplace ? 0 : s->count;
    if (!c->inplace)
      ok &= add_tensor(s, c->dt, &vout, fake);
    if (extremum) {
      s->outs[s->nouts++] = s->count;
      ok &= add_tensor(s, GT_I64, &vout, fake);
    }
  } else {
    if (c->op == OP_CUMPROD || c->op == OP_LCSE) {
      ok &= add_tensor(s, c->dt, &vin, fake);
      s->in_y = s->count;
      ok &= add_tensor(s, c->dt, &vin, fake);
    } else if (extremum) {
      s->in_idx = s->count;
      ok &= add_tensor(s, GT_I64, &vin, fake);
    }
    s->outs[s->nouts++] = c->inplace ? 0 : s->count;
    if (!c->inplace)
      ok &= add_tensor(s, c->dt, &vout, fake);
  }
  return ok;
}

static void run_case(jitops_runtime_t *rt, const scase *c, uint64_t seed, cudaStream_t stream) {
  const lines l = lines_of(c);
  const int64_t n = l.outer * l.len * l.inner;
  const int dt = c->dt;
  const int extremum = c->op == OP_CUMMAX || c->op == OP_CUMMIN;
  buffers b;
  if (!buffers_alloc(&b, n, c)) {
    fail(c, "host memory");
    buffers_free(&b);
    return;
  }
  uint64_t rng = seed;
  generate_x(c, &l, &rng, b.x, b.xi);
  reference_forward(c, &l, b.x, b.xi, b.y, b.yi, b.idx, b.scale);

  device_set s;
  int ok = build_set(c, &s, 0);
  if (ok && !c->backward) {
    ok &= gt_upload(&s.t[0], b.x, b.xi, stream);
  } else if (ok) {
    for (int64_t e = 0; e < n; ++e)
      b.dy[e] = gt_round(dt, test_rand_uniform(&rng, -1, 1));
    reference_backward(c, &l, b.x, b.y, b.idx, b.dy, b.dx, b.sa, b.sb);
    ok &= gt_upload(&s.t[0], b.dy, NULL, stream);
    if (s.in_y >= 0) {
      for (int64_t e = 0; e < n; ++e)
        b.got[e] = gt_round(dt, b.y[e]); /* the saved y as the forward stores it */
      ok &= gt_upload(&s.t[1], b.x, NULL, stream) && gt_upload(&s.t[s.in_y], b.got, NULL, stream);
    }
    if (s.in_idx >= 0)
      ok &= gt_upload(&s.t[s.in_idx], NULL, b.idx, stream);
  }
  if (!ok) {
    fail(c, "cudaMalloc or upload failed");
    device_set_free(&s);
    buffers_free(&b);
    return;
  }

  /* Two runs: the second must match the first bit for bit. */
  unsigned char *first[2] = {NULL, NULL};
  for (int run = 0; run < 2 && ok; ++run) {
    if (c->inplace && run == 1)
      ok &= gt_upload(&s.t[0], c->backward ? b.dy : b.x, b.xi, stream);
    for (int k = 0; k < s.nouts; ++k)
      if (!(c->inplace && s.outs[k] == 0))
        ok &= gt_poison(&s.t[s.outs[k]], stream);
    int launched;
    const jitops_status st = call_op(rt, c, &s, stream, &launched);
    if (st != JITOPS_SUCCESS) {
      char msg[400];
      snprintf(msg, sizeof msg, "%s: %s", jitops_status_string(st), jitops_last_error());
      fail(c, msg);
      ok = 0;
      break;
    }
    ok &= launched;
    for (int k = 0; k < s.nouts && ok; ++k) {
      gt_tensor *t = &s.t[s.outs[k]];
      const int64_t stray = gt_download(t, b.got, b.goti, stream);
      if (stray != 0 && !(c->inplace && s.outs[k] == 0)) {
        fail(c, stray < 0 ? "download failed" : "wrote outside its output view");
        ok = 0;
        break;
      }
      const size_t bytes = (size_t)t->view.extent * gt_dtypes[t->dt].size;
      if (run == 0) {
        first[k] = malloc(bytes);
        if (first[k])
          memcpy(first[k], t->host, bytes);
        const int is_idx = extremum && !c->backward && k == 1;
        if (is_idx)
          compare_ints(c, "indices", b.goti, b.idx, n);
        else if (gt_dtypes[dt].is_int)
          compare_ints(c, "y", b.goti, b.yi, n);
        else if (!c->backward)
          compare_floats(c, "y", b.got, b.y, NULL, extremum ? NULL : b.scale, n);
        else
          compare_floats(c, "dx", b.got, b.dx, b.sa, b.sb, n);
      } else if (first[k] && memcmp(first[k], t->host, bytes) != 0) {
        fail(c, "the rerun differs: not bit-identical");
      }
    }
    if (run == 0 && jitops_runtime_wait_builds(rt) != JITOPS_SUCCESS)
      fail(c, "jitops_runtime_wait_builds failed"); /* the rerun runs full builds */
  }
  free(first[0]);
  free(first[1]);
  device_set_free(&s);
  buffers_free(&b);
  atomic_fetch_add(&cases_run, 1);
}

/* ---- the case list ------------------------------------------------------------------------------
 */

static scase *cases;
static int ncases, capacity;

static scase *add(const char *group, int op, int backward, int dt, int ndim, const int64_t *shape,
                  int axis, int reverse, int lin, int lout, int data) {
  if (ncases == capacity) {
    capacity = capacity ? 2 * capacity : 1024;
    cases = realloc(cases, (size_t)capacity * sizeof *cases);
  }
  scase *c = &cases[ncases++];
  memset(c, 0, sizeof *c);
  c->group = group;
  c->op = op;
  c->backward = backward;
  c->dt = dt;
  c->ndim = ndim;
  memcpy(c->shape, shape, (size_t)ndim * sizeof *shape);
  c->axis = axis;
  c->reverse = reverse;
  c->layout_in = lin;
  c->layout_out = lout;
  c->data = data;
  return c;
}

static int takes(int op, int backward, int dt) {
  if (gt_dtypes[dt].is_int)
    return !backward && (op == OP_CUMSUM || op == OP_CUMPROD);
  return 1;
}

static void build_cases(void) {
  /* 1. Ranks 1 to 8, every axis, both directions, the three layouts (f32, every op). */
  static const int64_t shapes[8][8] = {{131},
                                       {7, 300},
                                       {3, 5, 131},
                                       {2, 3, 1, 129},
                                       {2, 1, 3, 2, 130},
                                       {1, 2, 3, 2, 2, 67},
                                       {2, 2, 1, 3, 2, 2, 33},
                                       {2, 1, 2, 3, 2, 1, 2, 37}};
  for (int op = 0; op < OP_COUNT; ++op)
    for (int bw = 0; bw < 2; ++bw)
      for (int r = 1; r <= 8; ++r)
        for (int axis = 0; axis < r; ++axis)
          for (int rev = 0; rev < 2; ++rev)
            for (int lay = 0; lay < GT_LAYOUTS; ++lay) {
              scase *c = add("ranks", op, bw, GT_F32, r, shapes[r - 1], axis, rev, lay,
                             (lay + r) % GT_LAYOUTS, DATA_NORMAL);
              c->quick = r == 3 && rev == (axis % 2) && lay == GT_SLICED;
            }
  /* 2. Sizes 0 and 1. */
  static const int64_t edge[][3] = {{0, 0, 0}, {1, 0, 0}, {5, 0, 3},
                                    {1, 1, 0}, {3, 1, 0}, {1, 7, 0}};
  static const int edge_rank[] = {1, 1, 3, 2, 2, 2};
  for (int op = 0; op < OP_COUNT; ++op)
    for (int bw = 0; bw < 2; ++bw)
      for (int e = 0; e < 6; ++e)
        for (int axis = 0; axis < edge_rank[e]; ++axis)
          for (int dt = GT_F32; dt <= GT_F16; dt += 2) {
            scase *c = add("sizes", op, bw, dt, edge_rank[e], edge[e], axis, axis, GT_CONTIGUOUS,
                           GT_SLICED, DATA_NORMAL);
            c->quick = dt == GT_F32 && (op == OP_CUMSUM || op == OP_CUMMAX);
          }
  /* 3. Every dtype on every kernel path: rows, cols, rows look-back, cols look-back (a few
   * tiles per persistent block), and cols walking several tiles of one strip. */
  static const struct {
    int ndim;
    int64_t shape[3];
    int axis, layout;
  } paths[] = {{2, {7, 300}, 1, GT_CONTIGUOUS},   {2, {7, 300}, 0, GT_CONTIGUOUS},
               {3, {131, 2, 3}, 0, GT_PERMUTED},  {2, {3, 5000}, 1, GT_CONTIGUOUS},
               {2, {4099, 33}, 0, GT_CONTIGUOUS}, {2, {4099, 33}, 0, GT_SLICED},
               {2, {5, 3000}, 1, GT_SLICED},      {2, {600, 40}, 0, GT_SLICED}};
  enum { N_PATHS = sizeof paths / sizeof paths[0] };
  for (int op = 0; op < OP_COUNT; ++op)
    for (int bw = 0; bw < 2; ++bw)
      for (int dt = 0; dt < GT_COUNT; ++dt)
        for (int p = 0; p < N_PATHS; ++p)
          for (int rev = 0; rev < 2; ++rev) {
            if (!takes(op, bw, dt))
              continue;
            scase *c = add("dtypes", op, bw, dt, paths[p].ndim, paths[p].shape, paths[p].axis, rev,
                           paths[p].layout, paths[p].layout, DATA_NORMAL);
            c->quick = (dt == GT_F32 || dt == GT_BF16) && rev == p % 2;
          }
  /* 3a. One-tile rows (a narrow look-back tile alone, no scratch): rows that one narrow tile
   * holds but a warp would walk in several chunks, at most one an SM. In f32 and bf16, 4096
   * and 2049 positions are one tile for every op whose tile holds them (cummax, cummin and the
   * three-input backwards hold 2048: several tiles), 1200 for every op but cumsum and cumprod
   * (walked); f64's smaller tiles make most of the f64 cases look-back over several tiles. */
  static const int64_t short_1d[1] = {4096}, short_rows[2] = {132, 2049}, mid_rows[2] = {7, 1200};
  static const int short_dts[3] = {GT_F32, GT_BF16, GT_F64};
  for (int op = 0; op < OP_COUNT; ++op)
    for (int bw = 0; bw < 2; ++bw)
      for (int t = 0; t < 3; ++t)
        for (int rev = 0; rev < 2; ++rev) {
          const int dt = short_dts[t];
          if (!takes(op, bw, dt))
            continue;
          add("one-tile", op, bw, dt, 1, short_1d, 0, rev, GT_CONTIGUOUS, GT_CONTIGUOUS,
              DATA_NORMAL)
              ->quick = dt != GT_F64 && rev == bw;
          add("one-tile", op, bw, dt, 2, short_rows, 1, !rev, GT_SLICED, GT_CONTIGUOUS, DATA_NORMAL)
              ->quick = dt == GT_F32 && rev != bw;
          add("one-tile", op, bw, dt, 2, mid_rows, 1, rev, GT_CONTIGUOUS, GT_CONTIGUOUS,
              DATA_NORMAL)
              ->quick = dt == GT_F32 && rev == bw;
        }
  /* 3c. Short rows in bulk: 4096 rows and more of 32 to 1024 positions, which the forward
   * scans walk in chunks of 4 (up to 768 positions) or 8 positions a lane, and the backwards
   * of 64 to 600 in chunks of 4 (ops/scan/plan.c), whole chunks and a partial last one; f32
   * also with rows apart in memory. */
  static const int64_t bulk[4][2] = {{4096, 37}, {4100, 300}, {4096, 1000}, {4097, 100}};
  static const int bulk_dts[3] = {GT_F32, GT_BF16, GT_F64};
  for (int op = 0; op < OP_COUNT; ++op)
    for (int bw = 0; bw < 2; ++bw)
      for (int t = 0; t < 3; ++t)
        for (int b = 0; b < 4; ++b) {
          const int dt = bulk_dts[t];
          if (!takes(op, bw, dt))
            continue;
          add("bulk-rows", op, bw, dt, 2, bulk[b], 1, (b + bw) % 2, GT_CONTIGUOUS, GT_CONTIGUOUS,
              DATA_NORMAL)
              ->quick = dt == GT_F32 && b != 1;
          if (dt == GT_F32)
            add("bulk-rows", op, bw, dt, 2, bulk[b], 1, (b + bw + 1) % 2, GT_SLICED, GT_CONTIGUOUS,
                DATA_NORMAL);
        }
  /* 3b. The racecheck set: f32 through every kernel path on small shapes (compute-sanitizer's
   * racecheck runs a kernel orders of magnitude slower): rows, rows look-back, cols on one
   * tile, cols walking several tiles of a strip (the backward ops' shorter tiles on {150, 5}),
   * and cols look-back with several tickets per persistent block over two strips. */
  static const struct {
    int ndim;
    int64_t shape[3];
    int axis, layout;
  } race[] = {{2, {3, 300}, 1, GT_CONTIGUOUS},  {2, {2, 4500}, 1, GT_CONTIGUOUS},
              {3, {131, 2, 3}, 0, GT_PERMUTED}, {2, {600, 5}, 0, GT_SLICED},
              {2, {150, 5}, 0, GT_SLICED},      {2, {1100, 40}, 0, GT_SLICED}};
  int race_ordinal = 0;
  for (int op = 0; op < OP_COUNT; ++op)
    for (int bw = 0; bw < 2; ++bw)
      for (size_t p = 0; p < sizeof race / sizeof race[0]; ++p)
        add("race", op, bw, GT_F32, race[p].ndim, race[p].shape, race[p].axis, (int)p % 2,
            race[p].layout, race[p].layout, DATA_NORMAL)
            ->race = ++race_ordinal;
  /* 4. The semantics' corners. */
  static const int64_t s9[2] = {9, 333}, s3[2] = {3, 5000}, s41[2] = {4099, 33};
  for (int dt = GT_F32; dt <= GT_BF16; ++dt)
    for (int op = OP_CUMMAX; op <= OP_CUMMIN; ++op)
      for (int bw = 0; bw < 2; ++bw)
        for (int rev = 0; rev < 2; ++rev) {
          add("ties+nan", op, bw, dt, 2, s9, 1, rev, 0, 0, DATA_TIES_NAN)->quick = dt == GT_F32;
          add("ties+nan", op, bw, dt, 2, s9, 0, rev, 1, 2, DATA_TIES_NAN);
          add("ties+nan", op, bw, dt, 2, s3, 1, rev, 0, 0, DATA_TIES_NAN);
          add("ties+nan", op, bw, dt, 2, s41, 0, rev, 0, 0, DATA_TIES_NAN);
        }
  for (int dt = GT_F32; dt <= GT_F16; ++dt)
    for (int data = DATA_ZERO_ONE; data <= DATA_ZERO_ALL; ++data)
      for (int bw = 0; bw < 2; ++bw)
        for (int rev = 0; rev < 2; ++rev) {
          add("zeros", OP_CUMPROD, bw, dt, 2, s9, 1, rev, 0, 0, data)->quick = dt == GT_F32;
          add("zeros", OP_CUMPROD, bw, dt, 2, s9, 0, rev, 0, 0, data);
          add("zeros", OP_CUMPROD, bw, dt, 2, s3, 1, rev, 0, 0, data);
        }
  for (int dt = GT_F32; dt <= GT_BF16; ++dt)
    for (int bw = 0; bw < 2; ++bw)
      for (int rev = 0; rev < 2; ++rev) {
        add("-inf", OP_LCSE, bw, dt, 2, s9, 1, rev, 0, 0, DATA_NEG_INF)->quick = dt == GT_F32;
        add("-inf", OP_LCSE, bw, dt, 2, s9, 0, rev, 2, 1, DATA_NEG_INF);
        add("-inf", OP_LCSE, bw, dt, 2, s3, 1, rev, 0, 0, DATA_NEG_INF);
        add("-inf", OP_LCSE, bw, dt, 2, s41, 0, rev, 0, 0, DATA_NEG_INF);
      }
  /* +inf and NaN inside whole tiles of every kernel path (the forward: the gradient of an
   * infinite or NaN input has no reference). */
  for (int dt = GT_F32; dt <= GT_BF16; ++dt)
    for (int rev = 0; rev < 2; ++rev) {
      add("inf+nan", OP_LCSE, 0, dt, 2, s9, 1, rev, 0, 0, DATA_INF_NAN)->quick = dt == GT_F32;
      add("inf+nan", OP_LCSE, 0, dt, 2, s3, 1, rev, 0, 0, DATA_INF_NAN);
      add("inf+nan", OP_LCSE, 0, dt, 2, s41, 0, rev, 0, 0, DATA_INF_NAN);
      add("inf+nan", OP_LCSE, 0, dt, 2, s41, 0, rev, 1, 2, DATA_INF_NAN);
    }
  for (int dt = GT_I32; dt <= GT_I64; ++dt)
    for (int axis = 0; axis < 2; ++axis)
      add("overflow", OP_CUMSUM, 0, dt, 2, s41, axis, axis, 0, 0, DATA_WRAP);
  /* 5. Long axes and many chains (f32): look-back over many tiles, and carries over many. */
  static const int64_t r3[2] = {3, 100003}, v1[1] = {1000003}, c20[2] = {20011, 67},
                       cm[2] = {200, 68000}, rm[2] = {2200, 3000}, v16m[1] = {16777259},
                       r8[2] = {8, 1048583};
  for (int op = 0; op < OP_COUNT; ++op)
    for (int bw = 0; bw < 2; ++bw) {
      add("long", op, bw, GT_F32, 2, r3, 1, bw, 0, 0, DATA_NORMAL);
      add("long", op, bw, GT_F32, 1, v1, 0, !bw, 0, 0, DATA_NORMAL);
      add("long", op, bw, GT_F32, 2, c20, 0, bw, 0, 0, DATA_NORMAL);
      add("long", op, bw, GT_F32, 2, c20, 0, !bw, 1, 2, DATA_NORMAL);
      add("long", op, bw, GT_F32, 2, cm, 0, bw, 0, 0, DATA_NORMAL);
      add("long", op, bw, GT_F32, 2, rm, 1, !bw, 0, 0, DATA_NORMAL);
      /* Thousands of tiles on one axis: the look-back walks past many windows of 32. */
      add("long", op, bw, GT_BF16, 1, v1, 0, bw, 0, 0, DATA_NORMAL);
      add("long", op, bw, GT_F32, 1, v16m, 0, !bw, 0, 0, DATA_NORMAL);
      add("long", op, bw, GT_F32, 2, r8, 1, bw, 0, 0, DATA_NORMAL);
    }
  /* Wide tiles (cumsum, cumprod, logcumsumexp), f64, f32 and the 2-byte types staged as 32-bit
   * words: an odd length (a half word at the end forward; narrow tiles for 2-byte elements in
   * reverse), even lengths and rows of an even stride (the last chunk passes the end), and rows
   * of an odd stride (narrow tiles for 2-byte elements). The backward runs the other way: the
   * cumprod and logcumsumexp backwards on the wide tiles of ops not in place (f16 and bf16 in
   * words of every input), the cumsum backward on a cumsum's. Not f64 logcumsumexp: it has no wide
   * tiles, and over 2^23 positions the sequential f64 reference drifts past the f64 tolerance. */
  static const int64_t w_odd[1] = {8388617}, w_even[1] = {8388618}, w_vec[1] = {8388616},
                       w_rows[2] = {8, 1048584};
  static const int wide_dts[4] = {GT_F32, GT_F16, GT_BF16, GT_F64};
  static const int wide_ops[3] = {OP_CUMSUM, OP_CUMPROD, OP_LCSE};
  for (int o = 0; o < 3; ++o)
    for (int t = 0; t < 4; ++t)
      for (int bw = 0; bw < 2; ++bw)
        for (int rev = 0; rev < 2; ++rev) {
          const int op = wide_ops[o], dt = wide_dts[t];
          if (op == OP_LCSE && dt == GT_F64)
            continue;
          const int quick = !bw ? dt == GT_BF16 || (dt == GT_F32 && op != OP_CUMPROD)
                                : op != OP_CUMSUM && rev && (dt == GT_F16 || dt == GT_BF16);
          add("wide", op, bw, dt, 1, w_odd, 0, rev, 0, 0, DATA_NORMAL)->quick = quick;
          add("wide", op, bw, dt, 1, w_vec, 0, rev, 0, 0, DATA_NORMAL)->quick = quick;
          add("wide", op, bw, dt, 2, w_rows, 1, rev, 0, 0, DATA_NORMAL)->quick = quick;
          add("wide", op, bw, dt, 1, w_even, 0, rev, 0, 0, DATA_NORMAL);
          add("wide", op, bw, dt, 2, r8, 1, rev, 0, 0, DATA_NORMAL);
        }
  /* 2-byte rows of an odd length at an even stride (each row padded by one element): every row
   * starts on a word, so the forward takes wide tiles and its last word is half outside the
   * row; the harness fails a case that writes the padding. Reverse, and an input of odd stride
   * feeding a padded output, stay on narrow tiles. */
  for (int o = 0; o < 3; ++o)
    for (int dt = GT_F16; dt <= GT_BF16; ++dt)
      for (int bw = 0; bw < 2; ++bw)
        for (int rev = 0; rev < 2; ++rev) {
          const int op = wide_ops[o];
          add("wide", op, bw, dt, 2, r8, 1, rev, GT_PADDED, GT_PADDED, DATA_NORMAL)->quick =
              !bw && !rev && dt == GT_BF16 && op == OP_CUMSUM;
          add("wide", op, bw, dt, 2, r8, 1, rev, GT_CONTIGUOUS, GT_PADDED, DATA_NORMAL);
        }
  /* Wide tiles of the ops not in place (cummax and cummin; the backwards of cumprod, cummax,
   * cummin and logcumsumexp), output 0 staged over input 0, in f32 and f64: an odd length (the
   * last chunk passes the end), rows of an even and of an odd stride, both directions; cummax
   * and cummin also with ties and NaNs. f64 tiles hold half the positions of f32 ones, so
   * shorter axes take them. */
  static const int64_t b_odd[1] = {1048583}, b_rows[2] = {8, 131076};
  static const struct {
    int op, backward;
  } beside[6] = {{OP_CUMMAX, 0}, {OP_CUMMIN, 0},  {OP_CUMMAX, 1},
                 {OP_CUMMIN, 1}, {OP_CUMPROD, 1}, {OP_LCSE, 1}};
  for (int o = 0; o < 6; ++o)
    for (int rev = 0; rev < 2; ++rev) {
      const int op = beside[o].op, bw = beside[o].backward;
      const int extremum = op == OP_CUMMAX || op == OP_CUMMIN;
      add("wide", op, bw, GT_F32, 1, w_odd, 0, rev, 0, 0, DATA_NORMAL)->quick = !rev;
      add("wide", op, bw, GT_F32, 2, w_rows, 1, rev, 0, 0, DATA_NORMAL);
      add("wide", op, bw, GT_F32, 2, r8, 1, rev, 0, 0, DATA_NORMAL);
      add("wide", op, bw, GT_F64, 1, b_odd, 0, rev, 0, 0, DATA_NORMAL)->quick = rev;
      add("wide", op, bw, GT_F64, 2, b_rows, 1, rev, 0, 0, DATA_NORMAL);
      if (extremum) {
        add("wide", op, bw, GT_F32, 1, w_vec, 0, rev, 0, 0, DATA_TIES_NAN);
        add("wide", op, bw, GT_F64, 2, b_rows, 1, rev, 0, 0, DATA_TIES_NAN);
      }
    }
  /* The same ops in f16 and bf16: every 2-byte tensor staged as words, the int64 indices of
   * cummax, cummin and their backward as 32 bits. An odd length (a half word at the end forward;
   * narrow tiles in reverse), an even one with ties and NaNs, rows of an even stride, and rows of
   * an odd length padded to an even stride (forward wide, reverse narrow). */
  for (int o = 0; o < 4; ++o)
    for (int dt = GT_F16; dt <= GT_BF16; ++dt)
      for (int rev = 0; rev < 2; ++rev) {
        const int op = beside[o].op, bw = beside[o].backward;
        add("wide", op, bw, dt, 1, w_odd, 0, rev, 0, 0, DATA_NORMAL)->quick = dt == GT_BF16;
        add("wide", op, bw, dt, 1, w_vec, 0, rev, 0, 0, DATA_TIES_NAN)->quick = dt == GT_F16;
        add("wide", op, bw, dt, 2, w_rows, 1, rev, 0, 0, DATA_NORMAL);
        add("wide", op, bw, dt, 2, r8, 1, rev, GT_PADDED, GT_PADDED, DATA_NORMAL);
      }
  /* Word-pair tiles (8 warps of 1024 positions) whose rows end inside the last tile's first
   * warp's chunk (500 positions in), inside its second (1100: 76 in), or past its first warps
   * (5001: four whole, the fifth partial; odd, so reverse takes narrow tiles), and the partial
   * rows that take them by being 85% full (265 tiles, the last one nearly empty; 132 rows of 3
   * tiles, 85.4%), for the six ops that take them. */
  static const int64_t p_500[1] = {340 * 8192 + 500}, p_1100[1] = {340 * 8192 + 1100},
                       p_5000[1] = {340 * 8192 + 5001}, p_rows[2] = {8, 48 * 8192 + 3000},
                       p_265[1] = {264 * 8192 + 8}, p_full[2] = {132, 21000};
  for (int o = 0; o < 6; ++o)
    for (int rev = 0; rev < 2; ++rev) {
      const int op = beside[o].op, bw = beside[o].backward, dt = o % 2 ? GT_F16 : GT_BF16;
      add("wide", op, bw, dt, 1, p_500, 0, rev, 0, 0, DATA_NORMAL)->quick = o >= 4 && rev;
      add("wide", op, bw, dt, 1, p_1100, 0, rev, 0, 0, DATA_NORMAL)->quick = o < 2 && !rev;
      add("wide", op, bw, dt, 1, p_5000, 0, rev, 0, 0, DATA_NORMAL);
      add("wide", op, bw, dt, 2, p_rows, 1, rev, 0, 0, DATA_NORMAL)->quick = o == 4;
      add("wide", op, bw, dt, 1, p_265, 0, rev, 0, 0, DATA_NORMAL);
      add("wide", op, bw, dt, 2, p_full, 1, rev, 0, 0, DATA_NORMAL)->quick = o == 2 && rev;
    }
  /* Outputs at another stride than the inputs' (rows of an odd length, the outputs padded: f32
   * and f64 take wide tiles), and output 0 in place of input 0 (y is x, dx is dy) on wide tiles:
   * staged over it, written where it was read. */
  for (int o = 0; o < 6; ++o)
    for (int rev = 0; rev < 2; ++rev) {
      const int op = beside[o].op, bw = beside[o].backward;
      add("wide", op, bw, o % 2 ? GT_F64 : GT_F32, 2, r8, 1, rev, GT_CONTIGUOUS, GT_PADDED,
          DATA_NORMAL);
      add("wide", op, bw, GT_F32, 1, w_odd, 0, rev, 0, 0, DATA_NORMAL)->inplace = 1;
      add("wide", op, bw, GT_BF16, 2, w_rows, 1, rev, 0, 0, DATA_NORMAL)->inplace = 1;
    }
  /* Calls large enough for the wide tiles to prefetch the tiles ahead into L2 (at least 2^27
   * bytes of input 0, scan.cuh's PREFETCH_MIN_BYTES; every other case stays below it): f32 over
   * one row of 2^25 + 37 positions (a partial last tile) with the kernel running each way (a
   * backward runs it against `reverse`), and over three rows, whose tickets interleave, so that
   * the tile 64 tickets ahead lies on another row; i32 cumsum and cumprod (exact), and the
   * 2-byte ops in place with a 4-byte state (bf16 cumsum and cumprod) over 2^26 + 6. */
  static const int64_t pf_row[1] = {33554469}, pf_rows[2] = {3, 11184851}, pf_half[1] = {67108870};
  for (int o = 0; o < 3; ++o)
    for (int bw = 0; bw < 2; ++bw) {
      for (int rev = 0; rev < 2; ++rev)
        add("prefetch", wide_ops[o], bw, GT_F32, 1, pf_row, 0, rev, 0, 0, DATA_NORMAL)->quick =
            o == 0 && !bw && !rev;
      add("prefetch", wide_ops[o], bw, GT_F32, 2, pf_rows, 1, bw ^ (o & 1), 0, 0, DATA_NORMAL);
    }
  for (int op = OP_CUMSUM; op <= OP_CUMPROD; ++op) {
    add("prefetch", op, 0, GT_I32, 1, pf_row, 0, op == OP_CUMSUM, 0, 0, DATA_WRAP);
    add("prefetch", op, 0, GT_BF16, 1, pf_half, 0, op == OP_CUMSUM, 0, 0, DATA_NORMAL);
  }
  /* logcumsumexp's steady pass (scan.cuh, rows_scan_items_steady), forward and backward, f32,
   * f16 and bf16 (the backward takes it in f16 and bf16, on wide tiles only), over rows whose
   * values trend upward in memory order: scanned forward their maximum keeps rising, so that
   * batches switch between the steady combine and the full one (in the walk nearly all take the
   * full one); scanned in reverse it falls, and nearly all take the steady one. Shapes: wide
   * tiles (odd and even lengths, 8 rows of even and odd stride; 2-byte rows of odd stride or odd
   * length in reverse take narrow tiles), narrow look-back tiles and the walk of 16 a lane
   * (forward). +inf and NaN inside wide tiles (forward) send every later batch of their rows to
   * the full one. */
  static const int64_t st_narrow[1] = {100003}, st_walk[2] = {2200, 3000};
  static const int st_dts[3] = {GT_F32, GT_F16, GT_BF16};
  for (int t = 0; t < 3; ++t)
    for (int bw = 0; bw < 2; ++bw)
      for (int rev = 0; rev < 2; ++rev) {
        const int dt = st_dts[t];
        add("steady", OP_LCSE, bw, dt, 1, w_odd, 0, rev, 0, 0, DATA_RISING);
        add("steady", OP_LCSE, bw, dt, 1, w_vec, 0, rev, 0, 0, DATA_RISING)->quick =
            dt == GT_BF16 && bw && !rev;
        add("steady", OP_LCSE, bw, dt, 2, w_rows, 1, rev, 0, 0, DATA_RISING);
        add("steady", OP_LCSE, bw, dt, 2, r8, 1, rev, 0, 0, DATA_RISING);
        add("steady", OP_LCSE, bw, dt, 1, st_narrow, 0, rev, 0, 0, DATA_RISING)->quick =
            dt == GT_BF16 && !bw && !rev;
        add("steady", OP_LCSE, bw, dt, 2, st_walk, 1, rev, 0, 0, DATA_RISING);
        if (!bw)
          add("steady", OP_LCSE, 0, dt, 1, w_odd, 0, rev, 0, 0, DATA_INF_NAN);
      }
  /* Integers on wide tiles (forward: the backward takes floats only), exact. */
  for (int op = OP_CUMSUM; op <= OP_CUMPROD; ++op)
    for (int dt = GT_I32; dt <= GT_I64; ++dt)
      for (int rev = 0; rev < 2; ++rev) {
        add("wide", op, 0, dt, 1, w_odd, 0, rev, 0, 0, DATA_WRAP);
        add("wide", op, 0, dt, 2, w_rows, 1, rev, 0, 0, DATA_WRAP);
      }
  /* 6. In place, and a caller workspace. */
  static const int64_t s7[2] = {7, 300};
  for (int op = 0; op < OP_COUNT; ++op)
    for (int bw = 0; bw < 2; ++bw)
      for (int axis = 0; axis < 2; ++axis)
        add("in-place", op, bw, GT_F32, 2, s7, axis, axis, 0, 0, DATA_NORMAL)->inplace = 1;
  /* 7. The benchmark's shapes, compiled ahead by --prewarm only. */
  static const int64_t s8k[2] = {8192, 8192};
  for (int op = 0; op < OP_COUNT; ++op)
    for (int bw = 0; bw < 2; ++bw)
      for (int axis = 0; axis < 2; ++axis)
        add("bench", op, bw, GT_F32, 2, s8k, axis, 0, 0, 0, DATA_NORMAL)->compile_only = 1;
  for (int op = 0; op < OP_COUNT; ++op) {
    scase *c = add("workspace", op, 0, GT_F32, 2, s41, 0, 1, 0, 0, DATA_NORMAL);
    c->workspace = 1;
    c->quick = 1;
    c = add("workspace", op, 1, GT_F16, 2, s3, 1, 0, 0, 0, DATA_NORMAL);
    c->workspace = 1;
  }
}

/* ---- workers ------------------------------------------------------------------------------------
 */

typedef struct worker {
  jitops_runtime_t *rt;
  int quick;         /* 1: the quick set, 2: the racecheck set, 3: one group */
  int shard, shards; /* race cases counted modulo `shards` must equal `shard` */
  const char *group; /* the group that set 3 runs */
} worker;

/* Whether this process runs case i: its set, and its shard of the race set. */
static int selected(const worker *w, int i) {
  if (cases[i].compile_only || (w->quick == 1 && !cases[i].quick) ||
      (w->quick == 2 && !cases[i].race) || (w->quick == 3 && strcmp(cases[i].group, w->group)))
    return 0;
  if (w->quick != 2)
    return 1;
  return (cases[i].race - 1) % w->shards == w->shard;
}

/* Whether any case belongs to `group` (NULL: none does). */
static int group_exists(const char *group) {
  for (int i = 0; group && i < ncases; ++i)
    if (strcmp(cases[i].group, group) == 0)
      return 1;
  return 0;
}

static atomic_int next_case;

static void *work(void *arg) {
  const worker *w = arg;
  cudaStream_t stream;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess)
    return NULL;
  for (;;) {
    const int i = atomic_fetch_add(&next_case, 1);
    if (i >= ncases)
      break;
    if (!selected(w, i)) {
      atomic_fetch_add(&cases_skipped, 1);
      continue;
    }
    run_case(w->rt, &cases[i], 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1), stream);
    if (w->quick == 2) /* the sanitizer's progress, should a time limit stop it */
      printf("  race case %d done\n", i);
  }
  cudaStreamDestroy(stream);
  return NULL;
}

/* Prints the kernel each kind of problem gets, for the record. */
static void print_plans(jitops_runtime_t *rt) {
  static const struct {
    int op, backward, ndim;
    int64_t shape[2];
    int axis;
  } show[] = {{OP_CUMSUM, 0, 2, {8192, 8192}, 1}, {OP_CUMSUM, 0, 2, {8192, 8192}, 0},
              {OP_CUMSUM, 0, 2, {3, 100003}, 1},  {OP_CUMSUM, 0, 1, {1000003, 0}, 0},
              {OP_CUMSUM, 0, 2, {20011, 67}, 0},  {OP_CUMSUM, 0, 2, {200, 68000}, 0},
              {OP_CUMSUM, 0, 2, {2200, 3000}, 1}, {OP_CUMPROD, 1, 2, {8192, 8192}, 1}};
  for (size_t i = 0; i < sizeof show / sizeof show[0]; ++i) {
    int64_t shape[2] = {show[i].shape[0], show[i].shape[1]};
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = (void *)(uintptr_t)0x100000;
    t.device.device_type = kDLCUDA;
    t.ndim = show[i].ndim;
    t.dtype = gt_dtypes[GT_F32].dl;
    t.shape = shape;
    jitops__scan_call call;
    jitops__scan_geom g;
    jitops__scan_plan p;
    jitops_status st = show[i].backward
                           ? jitops__scan_check_backward("plan", rt, (jitops_scan_op)show[i].op, &t,
                                                         &t, &t, NULL, show[i].axis, 0, &t, &call)
                           : jitops__scan_check_forward("plan", rt, (jitops_scan_op)show[i].op, &t,
                                                        show[i].axis, 0, &t, NULL, &call);
    if (st != JITOPS_SUCCESS)
      continue;
    jitops__scan_geom_build(&g, call.ntens, call.tensors, call.axis, call.kernel_reverse);
    if (jitops__scan_plan_make("plan", &p, call.kop, call.dtype, &g, 0) == JITOPS_SUCCESS)
      printf("  plan %s%s [%lld,%lld] axis %d: %s grid %u\n", op_names[show[i].op],
             show[i].backward ? " bwd" : "", (long long)shape[0],
             (long long)(show[i].ndim > 1 ? shape[1] : 1), show[i].axis, p.name, p.grid);
  }
}

/* ---- beyond 2^31 bytes ------------------------------------------------------------------------
 */

/* f64 cummax over 2^28 + 7 elements (2 GiB + 56 bytes per tensor; rows with look-back) and
 * int64 cumsum over [2, 2^27 + 5] along axis 0 (2^27 chains of the cols kernel): byte offsets
 * past 2^31, results exact. */
static void run_big(jitops_runtime_t *rt, cudaStream_t stream) {
  size_t free_bytes = 0, total = 0;
  cudaMemGetInfo(&free_bytes, &total);
  if (free_bytes < ((size_t)12 << 30)) {
    printf("  big: skipped, %zu MiB of GPU memory free\n", free_bytes >> 20);
    return;
  }
  const int64_t v[1] = {((int64_t)1 << 28) + 7};
  run_case(rt, add("big", OP_CUMMAX, 0, GT_F64, 1, v, 0, 1, 0, 0, DATA_TIES_NAN), 77, stream);
  const int64_t m[2] = {2, ((int64_t)1 << 27) + 5};
  run_case(rt, add("big", OP_CUMSUM, 0, GT_I64, 2, m, 0, 0, 0, 0, DATA_NORMAL), 78, stream);
}

/* --prewarm DIR: compiles every kernel of every case (the benchmark's and the big ones too)
 * into the kernel cache in DIR on a compile-only sm_90 runtime, so that the GPU machine loads
 * them from disk instead of compiling them. */
static atomic_int prewarm_next;

static void *prewarm_work(void *arg) {
  jitops_runtime_t *rt = arg;
  for (;;) {
    const int i = atomic_fetch_add(&prewarm_next, 1);
    if (i >= ncases)
      break;
    device_set s;
    build_set(&cases[i], &s, 1);
    const jitops_status st = invoke(rt, &cases[i], &s, NULL, NULL, NULL);
    if (st != JITOPS_SUCCESS && st != JITOPS_ERR_NO_DEVICE) {
      char msg[400];
      snprintf(msg, sizeof msg, "prewarm: %s: %s", jitops_status_string(st), jitops_last_error());
      fail(&cases[i], msg);
    }
  }
  return NULL;
}

static int prewarm(const char *dir, int nthreads) {
  jitops_runtime_config cfg = test_offline_config("sm_90", dir);
  jitops_runtime_t *rt = NULL;
  if (jitops_runtime_create(&cfg, &rt) != JITOPS_SUCCESS) {
    fprintf(stderr, "prewarm: %s\n", jitops_last_error());
    return 1;
  }
  const int64_t v[1] = {((int64_t)1 << 28) + 7}, m[2] = {2, ((int64_t)1 << 27) + 5};
  add("big", OP_CUMMAX, 0, GT_F64, 1, v, 0, 1, 0, 0, DATA_TIES_NAN);
  add("big", OP_CUMSUM, 0, GT_I64, 2, m, 0, 0, 0, 0, DATA_NORMAL);
  pthread_t threads[64];
  for (int i = 0; i < nthreads; ++i)
    pthread_create(&threads[i], NULL, prewarm_work, rt);
  for (int i = 0; i < nthreads; ++i)
    pthread_join(threads[i], NULL);
  jitops_stats stats;
  jitops_runtime_get_stats(rt, &stats);
  printf("prewarm: %d cases, %llu kernels compiled in %.1f s\n", ncases,
         (unsigned long long)stats.compiles, stats.compile_ms / 1e3);
  jitops_runtime_destroy(rt);
  return atomic_load(&failures) != 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* keep the log when a time limit stops the test */
  const char *env_threads = getenv("TEST_THREADS");
  int nthreads = env_threads ? atoi(env_threads) : 8;
  if (nthreads < 1 || nthreads > 64)
    nthreads = 8;
  build_cases();
  if (argc > 2 && strcmp(argv[1], "--prewarm") == 0) {
    setenv("JITOPS_QUICK_BUILDS", "0", 1); /* the full builds only, for the GPU run to find */
    return prewarm(argv[2], nthreads);
  }
  if (argc > 1 && strcmp(argv[1], "group") == 0 && !group_exists(argc > 2 ? argv[2] : NULL)) {
    fprintf(stderr, "test_gpu_scan: group needs the name of a group of cases (\"%s\" has none)\n",
            argc > 2 ? argv[2] : "");
    free(cases);
    return 2;
  }
  jitops_runtime_t *rt = test_gpu_runtime_or_skip("test_gpu_scan");
  const int quick = argc < 2                                    ? 0
                    : strcmp(argv[1], "quick") == 0             ? 1
                    : strcmp(argv[1], "race") == 0              ? 2
                    : strcmp(argv[1], "group") == 0 && argc > 2 ? 3
                                                                : 0;
  print_plans(rt);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pthread_t threads[64];
  worker w = {rt, quick, 0, 1, quick == 3 ? argv[2] : NULL};
  if (quick == 2 && argc > 2 && sscanf(argv[2], "%d/%d", &w.shard, &w.shards) == 2 &&
      (w.shards < 1 || w.shard < 0 || w.shard >= w.shards)) {
    fprintf(stderr, "test_gpu_scan: bad shard %s (want K/N with 0 <= K < N)\n", argv[2]);
    return 2;
  }
  for (int i = 0; i < nthreads; ++i)
    pthread_create(&threads[i], NULL, work, &w);
  for (int i = 0; i < nthreads; ++i)
    pthread_join(threads[i], NULL);
  const int listed = ncases;
  if (quick == 0) {
    cudaStream_t stream;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    run_big(rt, stream);
    cudaStreamDestroy(stream);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  jitops_stats stats;
  jitops_runtime_get_stats(rt, &stats);
  printf("test_gpu_scan: %d cases run (%d listed, %d skipped), %d failures, %.1f s, %llu kernels "
         "compiled in %.1f s (%llu of them quick builds), %llu from disk\n",
         atomic_load(&cases_run), listed, atomic_load(&cases_skipped), atomic_load(&failures),
         (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
         (unsigned long long)stats.compiles, stats.compile_ms / 1e3,
         (unsigned long long)stats.quick_compiles, (unsigned long long)stats.disk_hits);
  jitops_runtime_destroy(rt);
  free(cases);
  test_failures = atomic_load(&failures);
  return test_finish("test_gpu_scan");
}
