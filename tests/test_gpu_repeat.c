/* GPU tests of jitops_repeat and jitops_repeat_backward against a CPU reference in double:
 * every dtype, ranks 0 to 8 with padded repeats, zero repeats, contiguous, permuted and sliced
 * views (outputs poisoned, gaps checked for stray writes), the vectorized and scalar paths,
 * the split backward (few dx elements, many copies), and a bit-identical rerun of each case.
 *   test_gpu_repeat [quick]   (quick: a subset for the sanitizers). Exits 77 without a GPU. */
#include <cuda_runtime.h>
#include <math.h>

#include "gpu_tensors.h"
#include "testutil.h"

typedef struct rcase {
  int backward, dt, ndim, nrep, lin, lout, quick;
  int64_t shape[8];
  int64_t rep[8];
} rcase;

static int failures;

static void describe(const rcase *c, char *buf, size_t size) {
  int n =
      snprintf(buf, size, "repeat%s %s x [", c->backward ? " backward" : "", gt_dtypes[c->dt].name);
  for (int d = 0; d < c->ndim; ++d)
    n += snprintf(buf + n, size - (size_t)n, d ? ",%lld" : "%lld", (long long)c->shape[d]);
  n += snprintf(buf + n, size - (size_t)n, "] repeats (");
  for (int d = 0; d < c->nrep; ++d)
    n += snprintf(buf + n, size - (size_t)n, d ? ",%lld" : "%lld", (long long)c->rep[d]);
  snprintf(buf + n, size - (size_t)n, ") %s->%s", gt_layout_names[c->lin],
           gt_layout_names[c->lout]);
}

static void fail(const rcase *c, const char *what) {
  char d[512];
  describe(c, d, sizeof d);
  if (failures++ < 60)
    fprintf(stderr, "FAIL %s: %s\n", d, what);
}

/* Maps every output element (row-major over the repeated shape) to its input element. */
static void source_index(const rcase *c, const int64_t *oshape, int64_t onumel, int64_t *src) {
  const int pad = c->nrep - c->ndim;
  int64_t o[8] = {0};
  for (int64_t e = 0; e < onumel; ++e) {
    int64_t s = 0;
    for (int d = pad; d < c->nrep; ++d)
      s = s * c->shape[d - pad] + o[d] % c->shape[d - pad];
    src[e] = s;
    for (int d = c->nrep - 1; d >= 0; --d) {
      if (++o[d] < oshape[d])
        break;
      o[d] = 0;
    }
  }
}

static void output_shape(const rcase *c, int64_t *oshape) {
  const int pad = c->nrep - c->ndim;
  for (int d = 0; d < c->nrep; ++d)
    oshape[d] = (d < pad ? 1 : c->shape[d - pad]) * c->rep[d];
}

/* Compiles the case's kernels on a compile-only runtime (over fake addresses). */
static void prewarm_case(jitops_runtime_t *rt, const rcase *c) {
  int64_t oshape[8];
  output_shape(c, oshape);
  gt_view vsmall, vbig;
  gt_view_make(&vsmall, c->ndim, c->shape, c->backward ? c->lout : c->lin);
  gt_view_make(&vbig, c->nrep, oshape, c->backward ? c->lin : c->lout);
  gt_tensor in, out;
  gt_fake(&in, c->dt, c->backward ? &vbig : &vsmall);
  gt_fake(&out, c->dt, c->backward ? &vsmall : &vbig);
  const jitops_status st =
      c->backward ? jitops_repeat_backward(rt, &in.dl, c->rep, c->nrep, &out.dl, NULL, NULL)
                  : jitops_repeat(rt, &in.dl, c->rep, c->nrep, &out.dl, NULL);
  if (st != JITOPS_SUCCESS && st != JITOPS_ERR_NO_DEVICE) {
    char msg[400];
    snprintf(msg, sizeof msg, "prewarm: %s: %s", jitops_status_string(st), jitops_last_error());
    fail(c, msg);
  }
}

static void run_case(jitops_runtime_t *rt, const rcase *c, uint64_t seed) {
  const int dt = c->dt;
  int64_t oshape[8], inumel = 1, onumel = 1;
  output_shape(c, oshape);
  for (int d = 0; d < c->ndim; ++d)
    inumel *= c->shape[d];
  for (int d = 0; d < c->nrep; ++d)
    onumel *= oshape[d];
  const size_t ni = (size_t)(inumel > 0 ? inumel : 1), no = (size_t)(onumel > 0 ? onumel : 1);
  double *xv = malloc(ni * sizeof(double)), *yv = malloc(no * sizeof(double));
  double *ref = malloc((c->backward ? ni : no) * sizeof(double));
  double *mag = calloc(ni, sizeof(double)), *got = malloc((c->backward ? ni : no) * sizeof(double));
  int64_t *xi = malloc(ni * sizeof(int64_t)), *yi = malloc(no * sizeof(int64_t));
  int64_t *refi = malloc(no * sizeof(int64_t)), *goti = malloc(no * sizeof(int64_t));
  int64_t *src = malloc(no * sizeof(int64_t));
  uint64_t rng = seed;
  source_index(c, oshape, onumel, src);
  gt_view vsmall, vbig;
  gt_view_make(&vsmall, c->ndim, c->shape, c->backward ? c->lout : c->lin);
  gt_view_make(&vbig, c->nrep, oshape, c->backward ? c->lin : c->lout);
  gt_tensor in, out;
  int ok = gt_alloc(&in, dt, c->backward ? &vbig : &vsmall) &&
           gt_alloc(&out, dt, c->backward ? &vsmall : &vbig);
  if (!c->backward) {
    for (int64_t e = 0; e < inumel; ++e) {
      xi[e] = (int64_t)(test_rand_u64(&rng) >> 1);
      xv[e] = gt_round(dt, test_rand_uniform(&rng, -4, 4));
    }
    for (int64_t e = 0; e < onumel; ++e) {
      ref[e] = xv[src[e]];
      refi[e] = gt_dtypes[dt].is_int && dt == GT_I32 ? (int32_t)(uint32_t)(uint64_t)xi[src[e]]
                                                     : xi[src[e]];
    }
    ok = ok && gt_upload(&in, xv, xi, NULL);
  } else {
    for (size_t e = 0; e < ni; ++e)
      ref[e] = 0;
    for (int64_t e = 0; e < onumel; ++e) {
      yv[e] = gt_round(dt, test_rand_uniform(&rng, -1, 1));
      ref[src[e]] += yv[e];
      mag[src[e]] += fabs(yv[e]);
    }
    ok = ok && gt_upload(&in, yv, NULL, NULL);
  }
  if (!ok) {
    fail(c, "cudaMalloc or upload");
  }
  unsigned char *first = NULL;
  for (int run = 0; run < 2 && ok; ++run) {
    ok &= gt_poison(&out, NULL);
    jitops_status st =
        c->backward ? jitops_repeat_backward(rt, &in.dl, c->rep, c->nrep, &out.dl, NULL, NULL)
                    : jitops_repeat(rt, &in.dl, c->rep, c->nrep, &out.dl, NULL);
    if (st != JITOPS_SUCCESS || cudaDeviceSynchronize() != cudaSuccess) {
      char msg[400];
      snprintf(msg, sizeof msg, "%s: %s", jitops_status_string(st), jitops_last_error());
      fail(c, msg);
      break;
    }
    const int64_t stray = gt_download(&out, got, goti, NULL);
    if (stray != 0) {
      fail(c, stray < 0 ? "download failed" : "wrote outside its output view");
      break;
    }
    const size_t bytes = (size_t)out.view.extent * gt_dtypes[dt].size;
    if (run == 1) {
      if (memcmp(first, out.host, bytes) != 0)
        fail(c, "the rerun differs: not bit-identical");
      break;
    }
    first = malloc(bytes);
    memcpy(first, out.host, bytes);
    const int64_t n = c->backward ? inumel : onumel;
    int64_t bad = 0, at = -1;
    for (int64_t e = 0; e < n; ++e) {
      int good;
      if (gt_dtypes[dt].is_int)
        good = goti[e] == refi[e];
      else if (!c->backward)
        good = memcmp(&got[e], &ref[e], sizeof(double)) == 0 || (isnan(got[e]) && isnan(ref[e]));
      else
        good = fabs(got[e] - ref[e]) <= gt_dtypes[dt].eps_out * fabs(ref[e]) +
                                            4 * gt_dtypes[dt].eps_acc * mag[e] + gt_dtypes[dt].tiny;
      if (!good) {
        if (at < 0)
          at = e;
        ++bad;
      }
    }
    if (bad) {
      char msg[200];
      snprintf(msg, sizeof msg, "%lld of %lld wrong, first at %lld: got %.9g want %.9g",
               (long long)bad, (long long)n, (long long)at,
               gt_dtypes[dt].is_int ? (double)goti[at] : got[at],
               gt_dtypes[dt].is_int ? (double)refi[at] : ref[at]);
      fail(c, msg);
    }
  }
  free(first);
  gt_free(&in);
  gt_free(&out);
  free(xv);
  free(yv);
  free(ref);
  free(mag);
  free(got);
  free(xi);
  free(yi);
  free(refi);
  free(goti);
  free(src);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* --prewarm DIR: compile every case's kernels into the cache in DIR, for sm_90, no GPU. */
  const int prewarm = argc > 2 && strcmp(argv[1], "--prewarm") == 0;
  jitops_runtime_t *rt = NULL;
  if (prewarm) {
    jitops_runtime_config cfg = test_offline_config("sm_90", argv[2]);
    if (jitops_runtime_create(&cfg, &rt) != JITOPS_SUCCESS) {
      fprintf(stderr, "prewarm: %s\n", jitops_last_error());
      return 1;
    }
  } else {
    rt = test_gpu_runtime_or_skip("test_gpu_repeat");
  }
  const int quick = argc > 1 && strcmp(argv[1], "quick") == 0;
  static const struct {
    int ndim, nrep;
    int64_t shape[8], rep[8];
  } shapes[] = {
      {0, 0, {0}, {0}},
      {0, 2, {0}, {3, 2}},
      {1, 1, {7}, {3}},
      {1, 2, {8}, {2, 5}},
      {2, 2, {1024, 1024}, {4, 4}},
      {2, 2, {33, 64}, {3, 1}},
      {2, 3, {5, 12}, {2, 1, 4}},
      {2, 2, {6, 5}, {0, 3}},
      {3, 3, {3, 1, 4}, {1, 5, 2}},
      {3, 4, {2, 3, 8}, {2, 2, 1, 3}},
      {4, 4, {2, 3, 2, 5}, {1, 2, 3, 1}},
      {5, 6, {2, 1, 3, 1, 4}, {2, 1, 2, 3, 1, 2}},
      {6, 6, {2, 2, 1, 3, 2, 2}, {1, 2, 2, 1, 1, 3}},
      {7, 8, {2, 1, 2, 3, 1, 2, 2}, {2, 1, 1, 2, 3, 1, 1, 2}},
      {8, 8, {2, 1, 2, 1, 3, 1, 2, 2}, {1, 2, 1, 3, 1, 2, 1, 2}},
      {1, 1, {16}, {100000}}, /* backward: split copies */
      {2, 3, {3, 5}, {7, 900, 3}},
      {2, 2, {4, 0}, {3, 2}},
  };
  int ran = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
    for (int bw = 0; bw < 2; ++bw)
      for (int dt = 0; dt < GT_COUNT; ++dt)
        for (int lay = 0; lay < GT_LAYOUTS; ++lay) {
          if (bw && gt_dtypes[dt].is_int)
            continue;
          /* The 16M-element case only where it measures something: two dtypes, dense. */
          const int large = shapes[s].shape[0] == 1024;
          if (large && (quick || lay != GT_CONTIGUOUS || (dt != GT_F32 && dt != GT_BF16)) &&
              !(prewarm && dt == GT_F32 && lay == GT_CONTIGUOUS))
            continue;
          rcase c;
          memset(&c, 0, sizeof c);
          c.backward = bw;
          c.dt = dt;
          c.ndim = shapes[s].ndim;
          c.nrep = shapes[s].nrep;
          memcpy(c.shape, shapes[s].shape, sizeof c.shape);
          memcpy(c.rep, shapes[s].rep, sizeof c.rep);
          c.lin = lay;
          c.lout = (lay + (int)s) % GT_LAYOUTS;
          c.quick = (dt == GT_F32 || dt == GT_F16) && lay != GT_PERMUTED;
          if (quick && !c.quick)
            continue;
          if (prewarm)
            prewarm_case(rt, &c);
          else
            run_case(rt, &c, 1000 + s * 97 + (size_t)bw * 13 + (size_t)dt * 5 + (size_t)lay);
          ++ran;
        }
  printf("test_gpu_repeat: %d cases%s, %d failures\n", ran, prewarm ? " prewarmed" : "", failures);
  jitops_runtime_destroy(rt);
  test_failures = failures;
  return test_finish("test_gpu_repeat");
}
