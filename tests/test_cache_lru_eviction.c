/* The size limit evicts least recently used kernels first: with room for two of three
 * kernels, storing the third evicts the one used longest ago, not the one just reused. */
#include "testutil.h"

static const char *const A = "jitops::example_axpy<float, 1>";
static const char *const B = "jitops::example_axpy<float, 2>";
static const char *const C = "jitops::example_axpy<float, 3>";

typedef struct sizes {
  int count;
  int64_t total;
  char names[8][64];
} sizes;

static int collect(const jitops_cache_entry *e, void *user) {
  sizes *s = user;
  if (s->count < 8)
    snprintf(s->names[s->count], sizeof s->names[0], "%s", e->name_expression);
  ++s->count;
  s->total += e->bytes;
  return 0;
}

static sizes listing(const char *dir) {
  sizes s = {0};
  jitops_cache_t *cache = NULL;
  CHECK_OK(jitops_cache_open(dir, 0, &cache));
  if (cache)
    CHECK_OK(jitops_cache_list(cache, NULL, NULL, collect, &s));
  jitops_cache_close(cache);
  return s;
}

static int holds(const sizes *s, const char *expr) {
  for (int i = 0; i < s->count && i < 8; ++i)
    if (strcmp(s->names[i], expr) == 0)
      return 1;
  return 0;
}

static void request(const char *dir, int64_t max_bytes, const char *expr) {
  jitops_runtime_config cfg = test_offline_config("sm_90", dir);
  cfg.cache_max_bytes = max_bytes;
  test_request_examples(&cfg, &expr, 1, 1, NULL);
}

int main(void) {
  char probe[1024], dir[1024];
  /* Measure the three kernels' sizes in an unbounded cache. */
  test_fresh_dir("probe", probe, sizeof probe);
  request(probe, -1, A);
  request(probe, -1, B);
  request(probe, -1, C);
  sizes all = listing(probe);
  CHECK(all.count == 3 && all.total > 0);
  /* Room for any two, not three (the kernels differ by a few bytes at most). */
  int64_t limit = all.total - all.total / 6;

  test_fresh_dir("lru", dir, sizeof dir);
  request(dir, limit, A);
  request(dir, limit, B);
  request(dir, limit, A); /* A is now more recently used than B */
  sizes before = listing(dir);
  CHECK(before.count == 2);
  request(dir, limit, C);
  sizes after = listing(dir);
  CHECK(after.count == 2 && after.total <= limit);
  CHECK(holds(&after, A) && holds(&after, C) && !holds(&after, B));
  /* A limit smaller than one kernel keeps just the newest. */
  request(dir, 1, B);
  sizes tiny = listing(dir);
  CHECK(tiny.count == 1 && holds(&tiny, B));
  return test_finish("test_cache_lru_eviction");
}
