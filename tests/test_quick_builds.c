/* Quick builds (runtime/kernel_batch.h), on compile-only sm_90 runtimes: a launching call's
 * cold QUICK kernel is its quick build, and after jitops_runtime_wait_builds the same call gets
 * the full build, built once however often it was asked for; a later process finds the full
 * build on disk and builds nothing; one that finds only the quick build on disk uses it and
 * builds the full one in the background; a prewarm batch, a kernel without the flag, a
 * runtime under JITOPS_QUICK_BUILDS=0 and one with a remote tier build in full; a kernel that
 * does not compile fails as before and leaves quick builds on; the segment and scan ops ask
 * for quick builds exactly where their arithmetic allows; a DEFERRED kernel is left to the
 * background unless its full build failed there; and the segment digit path defers its
 * fallback's kernels. Needs no GPU; skipped with an
 * NVRTC older than 12.8, which has no quick builds. */
#include <stdint.h>

#include "jitops/scan.h"
#include "jitops/segment.h"
#include "runtime/kernel_batch.h"
#include "testutil.h"

static const char *const SOURCE = "jitops/example.cuh";

static jitops_stats stats_of(jitops_runtime_t *rt) {
  jitops_stats s;
  memset(&s, 0, sizeof s);
  CHECK_OK(jitops_runtime_get_stats(rt, &s));
  return s;
}

static jitops_runtime_t *runtime_on(const char *dir) {
  jitops_runtime_config cfg = test_offline_config("sm_90", dir);
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(&cfg, &rt));
  return rt;
}

/* One kernel got as a launching call gets it (`launches`) or as the catalogue does. */
static jitops_kernel_t *get_one(jitops_runtime_t *rt, const char *expr, unsigned flags,
                                int launches) {
  jitops__kernel_batch batch;
  jitops__kernel_batch_init(&batch);
  if (launches)
    jitops__kernel_batch_for_launch(&batch, NULL);
  jitops_kernel_t *k = NULL;
  CHECK_OK(jitops__kernel_batch_add_flagged(&batch, SOURCE, expr, &k, flags));
  CHECK_OK(jitops__kernel_batch_get(rt, &batch));
  return k;
}

static jitops_kernel_t *in_memory(jitops_runtime_t *rt, const char *expr, int quick) {
  return jitops__kernel_find_ready(rt, SOURCE, expr, quick ? jitops__quick_options : NULL,
                                   quick ? JITOPS__QUICK_OPTION_COUNT : 0);
}

static void a_cold_kernel_runs_quick_then_full(const char *dir) {
  static const char *const EXPR = "jitops::example_axpy<float, 3>";
  static const char *const PLAIN = "jitops::example_axpy<double, 3>";
  jitops_runtime_t *rt = runtime_on(dir);
  if (rt == NULL)
    return;
  jitops__kernel_batch batch;
  jitops__kernel_batch_init(&batch);
  jitops__kernel_batch_for_launch(&batch, NULL);
  jitops_kernel_t *quick = NULL, *plain = NULL;
  CHECK_OK(jitops__kernel_batch_add_flagged(&batch, SOURCE, EXPR, &quick, JITOPS__KERNEL_QUICK));
  CHECK_OK(jitops__kernel_batch_add(&batch, SOURCE, PLAIN, &plain));
  CHECK_OK(jitops__kernel_batch_get(rt, &batch));
  CHECK(stats_of(rt).quick_compiles == 1); /* the QUICK one; the other is a full build */
  CHECK(quick != NULL && quick == in_memory(rt, EXPR, 1));
  CHECK(plain != NULL && plain == in_memory(rt, PLAIN, 0));

  /* Asked again, the background done or not: the quick build or the full one, never a new
   * compile but the one full build. */
  CHECK(get_one(rt, EXPR, JITOPS__KERNEL_QUICK, 1) != NULL);
  CHECK_OK(jitops_runtime_wait_builds(rt));
  jitops_stats s = stats_of(rt);
  CHECK(s.compiles == 3 && s.quick_compiles == 1 && s.compile_errors == 0);
  jitops_kernel_t *full = get_one(rt, EXPR, JITOPS__KERNEL_QUICK, 1);
  CHECK(full != NULL && full != quick && full == in_memory(rt, EXPR, 0));
  CHECK(stats_of(rt).compiles == 3);
  jitops_runtime_destroy(rt);
}

static void a_later_process_finds_the_full_build(const char *dir) {
  jitops_runtime_t *rt = runtime_on(dir);
  if (rt == NULL)
    return;
  jitops_kernel_t *k = get_one(rt, "jitops::example_axpy<float, 3>", JITOPS__KERNEL_QUICK, 1);
  CHECK_OK(jitops_runtime_wait_builds(rt));
  jitops_stats s = stats_of(rt);
  CHECK(k != NULL && k == in_memory(rt, "jitops::example_axpy<float, 3>", 0));
  CHECK(s.compiles == 0 && s.disk_hits == 1);
  jitops_runtime_destroy(rt);
}

/* A process stopped before its full build was done left only the quick one on disk. */
static void only_a_stored_quick_build_is_used_while_the_full_one_builds(void) {
  static const char *const EXPR = "jitops::example_axpy<float, 4>";
  char dir[1024];
  test_fresh_dir("quick-builds-stored", dir, sizeof dir);
  jitops_runtime_t *first = runtime_on(dir);
  jitops_kernel_t *k = NULL;
  if (first != NULL)
    CHECK_OK(jitops_kernel_get(first, SOURCE, EXPR, jitops__quick_options,
                               JITOPS__QUICK_OPTION_COUNT, &k));
  jitops_runtime_destroy(first);

  jitops_runtime_t *rt = runtime_on(dir);
  if (rt == NULL)
    return;
  k = get_one(rt, EXPR, JITOPS__KERNEL_QUICK, 1);
  CHECK(k != NULL && k == in_memory(rt, EXPR, 1));
  CHECK(stats_of(rt).disk_hits == 1);
  CHECK_OK(jitops_runtime_wait_builds(rt));
  jitops_stats s = stats_of(rt);
  CHECK(s.compiles == 1 && s.quick_compiles == 0 && in_memory(rt, EXPR, 0) != NULL);
  jitops_runtime_destroy(rt);
}

static void prewarms_and_plain_kernels_build_in_full(void) {
  jitops_runtime_t *rt = runtime_on(NULL);
  if (rt == NULL)
    return;
  jitops_kernel_t *prewarmed =
      get_one(rt, "jitops::example_axpy<float, 5>", JITOPS__KERNEL_QUICK, 0);
  jitops_kernel_t *plain = get_one(rt, "jitops::example_axpy<float, 6>", 0, 1);
  CHECK(prewarmed != NULL && prewarmed == in_memory(rt, "jitops::example_axpy<float, 5>", 0));
  CHECK(plain != NULL && plain == in_memory(rt, "jitops::example_axpy<float, 6>", 0));
  jitops_stats s = stats_of(rt);
  CHECK(s.compiles == 2 && s.quick_compiles == 0);
  jitops_runtime_destroy(rt);
}

/* A launching call's cold QUICK kernel on `rt` is a full build; destroys `rt`. */
static void builds_in_full(jitops_runtime_t *rt) {
  if (rt == NULL)
    return;
  jitops_kernel_t *k = get_one(rt, "jitops::example_axpy<float, 5>", JITOPS__KERNEL_QUICK, 1);
  CHECK(k != NULL && k == in_memory(rt, "jitops::example_axpy<float, 5>", 0));
  CHECK(stats_of(rt).quick_compiles == 0);
  jitops_runtime_destroy(rt);
}

static void the_environment_turns_them_off(void) {
  setenv("JITOPS_QUICK_BUILDS", "0", 1);
  jitops_runtime_t *rt = runtime_on(NULL);
  unsetenv("JITOPS_QUICK_BUILDS");
  builds_in_full(rt);
}

static void a_remote_tier_turns_them_off(void) {
  jitops_runtime_config cfg = test_offline_config("sm_90", NULL);
  cfg.remote_cache = "redis://127.0.0.1:1"; /* refused at once: every request compiles */
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(&cfg, &rt));
  builds_in_full(rt);
}

static void a_kernel_that_does_not_compile_fails_as_before(void) {
  jitops_runtime_t *rt = runtime_on(NULL);
  if (rt == NULL)
    return;
  jitops__kernel_batch batch;
  jitops__kernel_batch_init(&batch);
  jitops__kernel_batch_for_launch(&batch, NULL);
  jitops_kernel_t *bad = NULL;
  CHECK_OK(jitops__kernel_batch_add_flagged(&batch, SOURCE, "jitops::no_such_kernel<float>", &bad,
                                            JITOPS__KERNEL_QUICK));
  CHECK_FAILS(jitops__kernel_batch_get(rt, &batch), JITOPS_ERR_COMPILE, "no_such_kernel");
  CHECK(bad == NULL);
  CHECK(get_one(rt, "jitops::example_axpy<float, 5>", JITOPS__KERNEL_QUICK, 1) != NULL);
  CHECK(stats_of(rt).quick_compiles == 1); /* the failure did not turn them off */
  jitops_runtime_destroy(rt);
}

/* A DEFERRED kernel (kernel_batch.h): a launching batch leaves it NULL and the background
 * builds it in full, which the same batch then finds; a prewarm batch builds it at once; and
 * one whose full build failed is built by the batch, whose error the caller then gets, rather
 * than deferred for ever. */
static void a_deferred_kernel_is_left_to_the_background(void) {
  static const char *const EXPR = "jitops::example_axpy<float, 7>";
  static const char *const BAD = "jitops::no_such_kernel<double>";
  jitops_runtime_t *rt = runtime_on(NULL);
  if (rt == NULL)
    return;
  CHECK(get_one(rt, EXPR, JITOPS__KERNEL_DEFERRED | JITOPS__KERNEL_QUICK, 1) == NULL);
  CHECK(stats_of(rt).quick_compiles == 0);
  CHECK_OK(jitops_runtime_wait_builds(rt));
  jitops_kernel_t *full = get_one(rt, EXPR, JITOPS__KERNEL_DEFERRED | JITOPS__KERNEL_QUICK, 1);
  CHECK(full != NULL && full == in_memory(rt, EXPR, 0));
  CHECK(get_one(rt, "jitops::example_axpy<float, 8>", JITOPS__KERNEL_DEFERRED, 0) != NULL);
  jitops_stats s = stats_of(rt);
  CHECK(s.compiles == 2 && s.quick_compiles == 0);

  jitops__kernel_batch batch;
  jitops_kernel_t *bad = NULL;
  for (int round = 0; round < 2; ++round) {
    jitops__kernel_batch_init(&batch);
    jitops__kernel_batch_for_launch(&batch, NULL);
    CHECK_OK(jitops__kernel_batch_add_flagged(&batch, SOURCE, BAD, &bad, JITOPS__KERNEL_DEFERRED));
    if (round == 0) { /* deferred; its full build then fails in the background */
      CHECK_OK(jitops__kernel_batch_get(rt, &batch));
      CHECK(bad == NULL);
      CHECK_OK(jitops_runtime_wait_builds(rt));
    } else { /* built by the batch, which reports the failure */
      CHECK_FAILS(jitops__kernel_batch_get(rt, &batch), JITOPS_ERR_COMPILE, "no_such_kernel");
    }
  }
  jitops_runtime_destroy(rt);
}

/* ---- the ops' requests, through their public entry points ------------------------------- */

static const DLDataType F32 = {kDLFloat, 32, 1}, F64 = {kDLFloat, 64, 1}, I64 = {kDLInt, 64, 1};

/* The counters an op call moved, with its kernels' full builds done. */
typedef struct moved {
  uint64_t compiles, quick_compiles;
} moved;

static moved after(jitops_runtime_t *rt, jitops_status status, jitops_stats before) {
  CHECK(status == JITOPS_ERR_NO_DEVICE); /* got its kernels, then found no GPU to launch on */
  jitops_stats s = stats_of(rt);
  moved m = {s.compiles - before.compiles, s.quick_compiles - before.quick_compiles};
  CHECK_OK(jitops_runtime_wait_builds(rt));
  CHECK(stats_of(rt).compiles - before.compiles ==
        2 * m.quick_compiles + (m.compiles - m.quick_compiles));
  return m;
}

/* A segment sum of 2^20 rows of 64 f32 over `segments` segments, int64 ids. */
static jitops_status segment_sum_over(jitops_runtime_t *rt, int64_t segments) {
  int64_t data_shape[2] = {1 << 20, 64}, ids_shape[1] = {1 << 20}, out_shape[2] = {segments, 64};
  DLTensor data = test_fake_tensor(0, F32, 2, data_shape),
           ids = test_fake_tensor(1, I64, 1, ids_shape);
  DLTensor out = test_fake_tensor(2, F32, 2, out_shape);
  return jitops_segment_reduce(rt, JITOPS_SEGMENT_SUM, &data, &ids, segments, &out, NULL, NULL,
                               NULL);
}

static moved segment_sum(jitops_runtime_t *rt) {
  jitops_stats before = stats_of(rt);
  return after(rt, segment_sum_over(rt, 10000), before);
}

static moved scan(jitops_runtime_t *rt, jitops_scan_op op, DLDataType dtype) {
  int64_t shape[2] = {256, 4096};
  DLTensor x = test_fake_tensor(0, dtype, 2, shape), y = test_fake_tensor(1, dtype, 2, shape);
  jitops_stats before = stats_of(rt);
  return after(rt, jitops_scan(rt, op, &x, 1, 0, &y, NULL, NULL, NULL), before);
}

static void the_ops_ask_where_their_arithmetic_allows(void) {
  jitops_runtime_t *rt = runtime_on(NULL);
  if (rt == NULL)
    return;
  moved m = segment_sum(rt); /* the radix sort's path: four kernels, every one quick */
  CHECK(m.compiles == 4 && m.quick_compiles == 4);
  m = scan(rt, JITOPS_SCAN_CUMSUM, F32);
  CHECK(m.compiles == 1 && m.quick_compiles == 1);
  m = scan(rt, JITOPS_SCAN_LOGCUMSUMEXP, F32); /* its fmas spelled out */
  CHECK(m.compiles == 1 && m.quick_compiles == 1);
  m = scan(rt, JITOPS_SCAN_LOGCUMSUMEXP, F64); /* the math library's exp and log1p: in full */
  CHECK(m.compiles == 1 && m.quick_compiles == 0);
  m = segment_sum(rt); /* every kernel now a full build in memory */
  CHECK(m.compiles == 0 && m.quick_compiles == 0);
  jitops_runtime_destroy(rt);
}

/* The digit path (10^6 segments) defers its fallback's four kernels (kernel_batch.h): a cold
 * call builds the scatter and the digit reduction alone, as quick builds, and the background
 * then builds all six in full; with quick builds off, the call builds all six itself. */
static void the_digit_path_defers_its_fallback(void) {
  jitops_runtime_t *rt = runtime_on(NULL);
  if (rt == NULL)
    return;
  CHECK(segment_sum_over(rt, 1000000) == JITOPS_ERR_NO_DEVICE);
  jitops_stats s = stats_of(rt); /* the background may have landed a full build already */
  CHECK(s.quick_compiles == 2);
  CHECK_OK(jitops_runtime_wait_builds(rt));
  CHECK(stats_of(rt).compiles == 2 + 6);
  CHECK(segment_sum_over(rt, 1000000) == JITOPS_ERR_NO_DEVICE);
  s = stats_of(rt);
  CHECK(s.compiles == 8 && s.quick_compiles == 2);
  jitops_runtime_destroy(rt);

  setenv("JITOPS_QUICK_BUILDS", "0", 1);
  rt = runtime_on(NULL);
  unsetenv("JITOPS_QUICK_BUILDS");
  if (rt == NULL)
    return;
  CHECK(segment_sum_over(rt, 1000000) == JITOPS_ERR_NO_DEVICE);
  s = stats_of(rt);
  CHECK(s.compiles == 6 && s.quick_compiles == 0);
  jitops_runtime_destroy(rt);
}

int main(void) {
  if (!test_quick_builds_available("test_quick_builds"))
    return TEST_SKIP;
  char dir[1024];
  test_fresh_dir("quick-builds", dir, sizeof dir);
  a_cold_kernel_runs_quick_then_full(dir);
  a_later_process_finds_the_full_build(dir);
  only_a_stored_quick_build_is_used_while_the_full_one_builds();
  prewarms_and_plain_kernels_build_in_full();
  the_environment_turns_them_off();
  a_remote_tier_turns_them_off();
  a_kernel_that_does_not_compile_fails_as_before();
  a_deferred_kernel_is_left_to_the_background();
  the_ops_ask_where_their_arithmetic_allows();
  the_digit_path_defers_its_fallback();
  return test_finish("test_quick_builds");
}
