/* The promise behind quick builds (runtime/kernel_batch.h): a QUICK kernel computes the same
 * bits at NVRTC's quick level as in full. Without fast-math, the one freedom NVRTC has over
 * the source's IEEE roundings is contracting a product into the sum it feeds (--fmad, on by
 * default), and how it does so may change with the optimization level. A build whose machine
 * code is byte for byte the same with --fmad=false contracted nothing, so it computes its
 * source's own roundings; when that holds both in full and at the quick level, the two builds
 * compute the same bits.
 *
 * So: the ops' cold calls on a compile-only sm_90 runtime (fake tensors) for the shapes that
 * reach their kernels' layouts (scans of every op along both axes in f32 and bf16, the f64 and
 * long-axis and short-row variants, their backwards, and the segment reductions' paths), then
 * every kernel they asked for as a quick build is built again with --fmad=false in full and at
 * the quick level, and each pair's code (the CUBINs' .text sections) must be the same. The f64
 * logcumsumexp, whose math library calls (exp, log1p) do contract, must not be a quick build,
 * and its full build must change under --fmad=false: the check can see a contraction. Needs no
 * GPU; skipped with an NVRTC older than 12.8, which has no quick builds. */
#include <elf.h>
#include <pthread.h>
#include <stdint.h>

#include "jitops/ctc.h"
#include "jitops/scan.h"
#include "jitops/segment.h"
#include "runtime/embedded.h"
#include "runtime/images.h"
#include "runtime/kernel_batch.h"
#include "runtime/kernel_object.h"
#include "testutil.h"

#define NO_FMAD "--fmad=false"

static const DLDataType F32 = {kDLFloat, 32, 1}, BF16 = {kDLBfloat, 16, 1}, F64 = {kDLFloat, 64, 1},
                        I64 = {kDLInt, 64, 1};

/* ---- the ops' cold calls ---------------------------------------------------------------- */

/* A call that got its kernels and then found no GPU to launch on. */
static void got_kernels(jitops_status status, const char *what) {
  if (status != JITOPS_ERR_NO_DEVICE)
    fprintf(stderr, "%s: %s: %s\n", what, jitops_status_string(status), jitops_last_error());
  CHECK(status == JITOPS_ERR_NO_DEVICE);
}

static const jitops_scan_op SCAN_OPS[] = {JITOPS_SCAN_CUMSUM, JITOPS_SCAN_CUMPROD,
                                          JITOPS_SCAN_CUMMAX, JITOPS_SCAN_CUMMIN,
                                          JITOPS_SCAN_LOGCUMSUMEXP};

/* One op forward and backward along `axis` of a tensor of `shape`. */
static void scan_both_ways(jitops_runtime_t *rt, jitops_scan_op op, DLDataType dtype, int ndim,
                           int64_t *shape, int axis) {
  const int extremum = op == JITOPS_SCAN_CUMMAX || op == JITOPS_SCAN_CUMMIN;
  DLTensor x = test_fake_tensor(0, dtype, ndim, shape), y = test_fake_tensor(1, dtype, ndim, shape);
  DLTensor dy = test_fake_tensor(2, dtype, ndim, shape),
           dx = test_fake_tensor(3, dtype, ndim, shape);
  DLTensor idx = test_fake_tensor(4, I64, ndim, shape);
  got_kernels(jitops_scan(rt, op, &x, axis, 0, &y, extremum ? &idx : NULL, NULL, NULL), "scan");
  got_kernels(
      jitops_scan_backward(rt, op, &dy, &x, &y, extremum ? &idx : NULL, axis, 0, &dx, NULL, NULL),
      "scan backward");
}

static void scans(jitops_runtime_t *rt) {
  int64_t square[2] = {256, 4096}, long_axis[1] = {(int64_t)1 << 24},
          short_rows[2] = {1 << 17, 100};
  for (size_t i = 0; i < sizeof SCAN_OPS / sizeof SCAN_OPS[0]; ++i) {
    for (int axis = 0; axis < 2; ++axis) {
      scan_both_ways(rt, SCAN_OPS[i], F32, 2, square, axis);
      scan_both_ways(rt, SCAN_OPS[i], BF16, 2, square, axis);
    }
    scan_both_ways(rt, SCAN_OPS[i], F32, 1, long_axis, 0);
    scan_both_ways(rt, SCAN_OPS[i], F32, 2, short_rows, 1);
  }
  scan_both_ways(rt, JITOPS_SCAN_CUMSUM, F64, 2, square, 1);
  scan_both_ways(rt, JITOPS_SCAN_CUMPROD, F64, 2, square, 1);
}

/* One reduction forward and backward over `rows` x `cols` f32 rows into `segments`. */
static void segment_both_ways(jitops_runtime_t *rt, jitops_segment_reduction reduction,
                              int64_t rows, int64_t cols, int64_t segments, int sorted) {
  int64_t data_shape[2] = {rows, cols}, ids_shape[1] = {rows}, out_shape[2] = {segments, cols};
  DLTensor data = test_fake_tensor(0, F32, 2, data_shape),
           ids = test_fake_tensor(1, I64, 1, ids_shape);
  DLTensor out = test_fake_tensor(2, F32, 2, out_shape),
           grad_out = test_fake_tensor(3, F32, 2, out_shape);
  DLTensor grad_data = test_fake_tensor(4, F32, 2, data_shape);
  jitops_segment_options options;
  jitops_segment_options_init(&options);
  options.sorted = sorted;
  got_kernels(
      jitops_segment_reduce(rt, reduction, &data, &ids, segments, &out, &options, NULL, NULL),
      "segment");
  got_kernels(jitops_segment_reduce_backward(rt, reduction, &grad_out, &data, &out, &ids, segments,
                                             &grad_data, &options, NULL, NULL),
              "segment backward");
}

static void segments(jitops_runtime_t *rt) {
  static const jitops_segment_reduction all[] = {JITOPS_SEGMENT_SUM, JITOPS_SEGMENT_MEAN,
                                                 JITOPS_SEGMENT_MAX, JITOPS_SEGMENT_MIN};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
    segment_both_ways(rt, all[i], 1 << 20, 64, 10000, 0);   /* the sort, buckets */
    segment_both_ways(rt, all[i], 1 << 20, 64, 10000, 1);   /* sorted ids */
    segment_both_ways(rt, all[i], 1 << 20, 64, 100, 0);     /* a table in shared memory */
    segment_both_ways(rt, all[i], 1 << 20, 3, 1000000, 0);  /* narrow rows */
    segment_both_ways(rt, all[i], 1 << 20, 64, 1000000, 0); /* the digit path */
    segment_both_ways(rt, all[i], 4096, 8, 64, 0);          /* a small call */
  }
  segment_both_ways(rt, JITOPS_SEGMENT_MAX, 1 << 20, 1024, 10000, 0); /* the runs backward */
}

/* CTC's loss and its backward (with the loss) for T x N x C log_probs and padded targets of S
 * labels, lengths on the device. */
static void ctc_both_ways(jitops_runtime_t *rt, DLDataType dtype, int64_t T, int64_t N, int64_t C,
                          int64_t S, jitops_ctc_gradient gradient, jitops_ctc_reduction reduction) {
  int64_t lp_shape[3] = {T, N, C}, targets_shape[2] = {N, S}, n_shape[1] = {N};
  const DLDataType loss_type = dtype.bits == 64 ? dtype : F32;
  const int none = reduction == JITOPS_CTC_REDUCTION_NONE;
  DLTensor lp = test_fake_tensor(0, dtype, 3, lp_shape),
           grad = test_fake_tensor(1, dtype, 3, lp_shape);
  DLTensor targets = test_fake_tensor(2, I64, 2, targets_shape);
  DLTensor in_len = test_fake_tensor(3, I64, 1, n_shape),
           tg_len = test_fake_tensor(4, I64, 1, n_shape);
  DLTensor loss = test_fake_tensor(5, loss_type, none ? 1 : 0, n_shape);
  DLTensor grad_loss = test_fake_tensor(6, loss_type, none ? 1 : 0, n_shape);
  jitops_ctc_options options;
  jitops_ctc_options_init(&options);
  options.gradient = gradient;
  options.reduction = reduction;
  got_kernels(jitops_ctc_loss(rt, &lp, &targets, &in_len, &tg_len, &options, &loss, NULL, NULL),
              "ctc");
  got_kernels(jitops_ctc_loss_backward(rt, &lp, &targets, &in_len, &tg_len, &grad_loss, &options,
                                       &grad, &loss, NULL, NULL),
              "ctc backward");
}

static void ctcs(jitops_runtime_t *rt) {
  ctc_both_ways(rt, F32, 500, 64, 64, 100, JITOPS_CTC_GRADIENT_EXACT, JITOPS_CTC_REDUCTION_MEAN);
  ctc_both_ways(rt, F32, 500, 64, 64, 100, JITOPS_CTC_GRADIENT_PYTORCH, JITOPS_CTC_REDUCTION_NONE);
  ctc_both_ways(rt, BF16, 500, 64, 64, 100, JITOPS_CTC_GRADIENT_PYTORCH, JITOPS_CTC_REDUCTION_SUM);
  ctc_both_ways(rt, F32, 2400, 4, 64, 2000, JITOPS_CTC_GRADIENT_EXACT, JITOPS_CTC_REDUCTION_MEAN);
  ctc_both_ways(rt, F32, 100, 2, 50000, 50, JITOPS_CTC_GRADIENT_PYTORCH, JITOPS_CTC_REDUCTION_MEAN);
}

/* ---- the quick builds they asked for ---------------------------------------------------- */

typedef struct request {
  const char *source;
  char *expr;
  int same_full, same_quick; /* the pair's code matched; -1 until built */
} request;

typedef struct requests {
  request item[512];
  size_t count;
} requests;

/* The built-in source that defines the kernel template of `expr` ("ns::name<...>"): the one
 * source of its op family with "name(" after a blank. */
static const char *source_of(const char *op, const char *expr) {
  const char *end = strchr(expr, '<') ? strchr(expr, '<') : expr + strlen(expr);
  const char *start = end;
  while (start > expr && start[-1] != ':')
    --start;
  char needle[160], family[64];
  snprintf(needle, sizeof needle, " %.*s(", (int)(end - start), start);
  snprintf(family, sizeof family, "jitops/%s", op);
  const char *found = NULL;
  int matches = 0;
  for (size_t i = 0; i < jitops__embedded_source_count; ++i) {
    const jitops__embedded_source *s = &jitops__embedded_sources[i];
    if (strncmp(s->name, family, strlen(family)) == 0 && strstr(s->text, needle) != NULL)
      found = s->name, ++matches;
  }
  if (matches != 1)
    fprintf(stderr, "%s: %d sources define it\n", expr, matches);
  CHECK(matches == 1);
  return matches == 1 ? found : NULL;
}

static int collect_quick(const jitops_cache_entry *e, void *user) {
  requests *r = user;
  if (strstr(e->options, JITOPS__QUICK_OPTION) == NULL)
    return 0;
  const char *source = source_of(e->op, e->name_expression);
  CHECK(r->count < sizeof r->item / sizeof r->item[0]);
  if (source != NULL && r->count < sizeof r->item / sizeof r->item[0])
    r->item[r->count++] = (request){source, strdup(e->name_expression), -1, -1};
  return 0;
}

/* ---- comparing builds --------------------------------------------------------------------- */

/* Whether two CUBINs hold the same machine code: their .text sections, in order. */
static int same_code(const jitops__image *a, const jitops__image *b) {
  const jitops__image *img[2] = {a, b};
  const unsigned char *text[2][16];
  size_t size[2][16], n[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    const unsigned char *bytes = img[k]->bytes;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)bytes;
    if (img[k]->size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0)
      return 0;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(bytes + eh->e_shoff);
    const char *names = (const char *)bytes + sh[eh->e_shstrndx].sh_offset;
    for (unsigned i = 0; i < eh->e_shnum && n[k] < 16; ++i)
      if (strncmp(names + sh[i].sh_name, ".text", 5) == 0) {
        text[k][n[k]] = bytes + sh[i].sh_offset;
        size[k][n[k]++] = sh[i].sh_size;
      }
  }
  if (n[0] == 0 || n[0] != n[1])
    return 0;
  for (size_t i = 0; i < n[0]; ++i)
    if (size[0][i] != size[1][i] || memcmp(text[0][i], text[1][i], size[0][i]) != 0)
      return 0;
  return 1;
}

static jitops_kernel_t *build(jitops_runtime_t *rt, const request *q, int quick, int no_fmad) {
  const char *options[2];
  size_t n = 0;
  if (quick)
    options[n++] = JITOPS__QUICK_OPTION;
  if (no_fmad)
    options[n++] = NO_FMAD;
  jitops_kernel_t *k = NULL;
  CHECK_OK(jitops_kernel_get(rt, q->source, q->expr, options, n, &k));
  CHECK(k == NULL || k->image != NULL);
  return k;
}

static int pair_is_same(jitops_runtime_t *rt, const request *q, int quick) {
  jitops_kernel_t *a = build(rt, q, quick, 0), *b = build(rt, q, quick, 1);
  return a != NULL && b != NULL && a->image != NULL && b->image != NULL &&
         same_code(a->image, b->image);
}

typedef struct work {
  jitops_runtime_t *rt;
  requests *r;
  size_t next; /* taken with an atomic fetch-add */
} work;

static void *compare_some(void *arg) {
  work *w = arg;
  for (;;) {
    size_t i = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED);
    if (i >= w->r->count)
      return NULL;
    request *q = &w->r->item[i];
    q->same_full = pair_is_same(w->rt, q, 0);
    q->same_quick = pair_is_same(w->rt, q, 1);
  }
}

/* Compares every request's pairs on two threads. */
static void compare_all(jitops_runtime_t *rt, requests *r) {
  work w = {rt, r, 0};
  pthread_t other;
  const int started = pthread_create(&other, NULL, compare_some, &w) == 0;
  compare_some(&w);
  if (started)
    pthread_join(other, NULL);
}

/* ---- the checks --------------------------------------------------------------------------- */

static jitops_runtime_t *runtime_on(const char *dir) {
  jitops_runtime_config cfg = test_offline_config("sm_90", dir);
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(&cfg, &rt));
  return rt;
}

/* Calls `visit` for each entry of the cache in `dir`. */
static void list_cache(const char *dir, int (*visit)(const jitops_cache_entry *, void *),
                       void *user) {
  jitops_cache_t *cache = NULL;
  CHECK_OK(jitops_cache_open(dir, 0, &cache));
  if (cache != NULL)
    CHECK_OK(jitops_cache_list(cache, NULL, NULL, visit, user));
  jitops_cache_close(cache);
}

static void quick_kernels_contract_nothing(const char *dir) {
  jitops_runtime_t *rt = runtime_on(dir);
  if (rt == NULL)
    return;
  scans(rt);
  segments(rt);
  ctcs(rt);
  CHECK_OK(jitops_runtime_wait_builds(rt));
  jitops_stats stats;
  CHECK_OK(jitops_runtime_get_stats(rt, &stats));

  static requests r;
  list_cache(dir, collect_quick, &r);
  CHECK(r.count == stats.quick_compiles);
  CHECK(r.count >= 100); /* the calls above reach at least this many quick kernels */
  compare_all(rt, &r);
  size_t scans_seen = 0, segments_seen = 0, ctcs_seen = 0;
  for (size_t i = 0; i < r.count; ++i) {
    const request *q = &r.item[i];
    if (q->same_full != 1 || q->same_quick != 1)
      fprintf(stderr, "%s: --fmad=false changes its code (full: %s, quick: %s)\n", q->expr,
              q->same_full == 1 ? "no" : "yes", q->same_quick == 1 ? "no" : "yes");
    CHECK(q->same_full == 1 && q->same_quick == 1);
    scans_seen += strstr(q->source, "scan") != NULL;
    segments_seen += strstr(q->source, "segment") != NULL;
    ctcs_seen += strstr(q->source, "ctc") != NULL;
    free(q->expr);
  }
  printf("%zu quick kernels compared (%zu scan, %zu segment, %zu ctc), %llu compiles in all\n",
         r.count, scans_seen, segments_seen, ctcs_seen, (unsigned long long)stats.compiles);
  CHECK(scans_seen > 0 && segments_seen > 0 && ctcs_seen > 0);
  jitops_runtime_destroy(rt);
}

static int take_first(const jitops_cache_entry *e, void *user) {
  snprintf(user, 256, "%s", e->name_expression);
  return 1;
}

/* The f64 logcumsumexp: built in full, and its code does change under --fmad=false. */
static void a_contracting_kernel_is_seen_and_not_quick(const char *dir) {
  jitops_runtime_t *rt = runtime_on(dir);
  if (rt == NULL)
    return;
  int64_t shape[2] = {256, 4096};
  DLTensor x = test_fake_tensor(0, F64, 2, shape), y = test_fake_tensor(1, F64, 2, shape);
  got_kernels(jitops_scan(rt, JITOPS_SCAN_LOGCUMSUMEXP, &x, 1, 0, &y, NULL, NULL, NULL), "lcse");
  jitops_stats stats;
  CHECK_OK(jitops_runtime_get_stats(rt, &stats));
  CHECK(stats.compiles == 1 && stats.quick_compiles == 0);
  char expr[256] = "";
  list_cache(dir, take_first, expr);
  CHECK(strstr(expr, "Lcse<double>") != NULL);
  request q = {source_of("scan", expr), expr, -1, -1};
  CHECK(!pair_is_same(rt, &q, 0));
  jitops_runtime_destroy(rt);
}

int main(void) {
  if (!test_quick_builds_available("test_quick_kernels_contract_nothing"))
    return TEST_SKIP;
  char dir[1024];
  test_fresh_dir("contracting", dir, sizeof dir);
  a_contracting_kernel_is_seen_and_not_quick(dir);
  test_fresh_dir("contract-nothing", dir, sizeof dir);
  quick_kernels_contract_nothing(dir);
  return test_finish("test_quick_kernels_contract_nothing");
}
