/* A kernel compiled once is found on disk by the next runtime (no recompile, checked through
 * the counters); usage is flushed to the rows and the per-op totals; an exported cache
 * serves as a shipped read-only tier for an empty cache. */
#include "testutil.h"

static const char *const exprs[] = {"jitops::example_axpy<float, 1>",
                                    "jitops::example_axpy<double, 2>",
                                    "jitops::example_axpy<jitops::half, 4>"};
enum { KERNELS = 3 };

static jitops_stats request_all(const char *dir, const char *shipped, int rounds) {
  jitops_runtime_config cfg = test_offline_config("sm_90", dir);
  cfg.shipped_cache = shipped;
  return test_request_examples(&cfg, exprs, KERNELS, rounds, NULL);
}

static int sum_use(const jitops_cache_entry *e, void *user) {
  ((int64_t *)user)[0] += e->use_count;
  ((int64_t *)user)[1] += 1;
  return 0;
}

static int sum_groups(const jitops_cache_group_stats *g, void *user) {
  int64_t *t = user;
  t[0] += g->entries, t[1] += g->memory_hits, t[2] += g->disk_hits, t[3] += g->misses;
  t[4] += g->compiles;
  return 0;
}

int main(void) {
  char dir[1024], empty[1024], exported[1100];
  test_fresh_dir("main", dir, sizeof dir);
  jitops_stats first = request_all(dir, NULL, 2);
  CHECK(first.misses == KERNELS && first.compiles == KERNELS && first.disk_hits == 0);
  CHECK(first.memory_hits == KERNELS);
  jitops_stats second = request_all(dir, NULL, 2);
  CHECK(second.compiles == 0 && second.misses == 0 && second.disk_hits == KERNELS);
  CHECK(second.memory_hits == KERNELS && second.disk_errors == 0);

  jitops_cache_t *cache = NULL;
  int64_t use[2] = {0, 0}, totals[5] = {0};
  CHECK_OK(jitops_cache_open(dir, 1, &cache));
  if (cache) {
    CHECK_OK(jitops_cache_list(cache, NULL, NULL, sum_use, use));
    CHECK_OK(jitops_cache_stats(cache, sum_groups, totals));
  }
  CHECK(use[1] == KERNELS);
  CHECK(use[0] == 4 * KERNELS); /* two runtimes, each a first use and a memory hit */
  CHECK(totals[0] == KERNELS && totals[1] == 2 * KERNELS && totals[2] == KERNELS);
  CHECK(totals[3] == KERNELS && totals[4] == KERNELS);

  snprintf(exported, sizeof exported, "%s/../shipped.db", dir);
  remove(exported);
  if (cache)
    CHECK_OK(jitops_cache_export(cache, exported));
  jitops_cache_close(cache);
  test_fresh_dir("empty", empty, sizeof empty);
  jitops_stats shipped = request_all(empty, exported, 1);
  CHECK(shipped.compiles == 0 && shipped.disk_hits == KERNELS);
  /* The shipped tier is never written: the empty cache stays empty of these rows. */
  use[0] = use[1] = 0;
  CHECK_OK(jitops_cache_open(empty, 0, &cache));
  if (cache)
    CHECK_OK(jitops_cache_list(cache, NULL, NULL, sum_use, use));
  jitops_cache_close(cache);
  CHECK(use[1] == 0);
  return test_finish("test_cache_roundtrip");
}
