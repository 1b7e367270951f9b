/* A choice made by timing (jitops__tuned_*) is stored once and found again: by the same
 * runtime, by the next runtime on the same cache directory, never under another kind of
 * choice or another id, never with a different size; it shows in `jitops_cache_list`
 * under its op and survives `jitops_cache_verify`. */
#include "runtime/op_support.h"
#include "testutil.h"

static jitops_runtime_t *open_runtime(const char *dir) {
  jitops_runtime_config cfg = test_offline_config("sm_90", dir);
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(&cfg, &rt));
  return rt;
}

typedef struct choice {
  uint64_t words[8];
} choice;

static int count_entry(const jitops_cache_entry *e, void *user) {
  int *found = user;
  if (strncmp(e->name_expression, "test choice", 11) == 0 && e->lowered_name[0] == '\0')
    ++*found;
  return 0;
}

static void stored_then_found(const char *dir, const uint64_t id[4], const choice *made) {
  jitops_runtime_t *rt = open_runtime(dir);
  if (rt == NULL)
    return;
  choice got;
  jitops__tuned tuned;
  CHECK(jitops__tuned_get(rt, "test-choice", id, 4 * sizeof id[0], &got, sizeof got, &tuned) == 0);
  CHECK(tuned.claimed);
  jitops__tuned_put(rt, &tuned, "testop", "test choice 1", made, sizeof *made);
  memset(&got, 0, sizeof got);
  CHECK(jitops__tuned_get(rt, "test-choice", id, 4 * sizeof id[0], &got, sizeof got, &tuned) == 1);
  CHECK(memcmp(&got, made, sizeof got) == 0);
  jitops_runtime_destroy(rt);
}

static void found_by_next_runtime_only_under_its_key(const char *dir, const uint64_t id[4],
                                                     const choice *made) {
  jitops_runtime_t *rt = open_runtime(dir);
  if (rt == NULL)
    return;
  choice got;
  memset(&got, 0, sizeof got);
  jitops__tuned tuned;
  CHECK(jitops__tuned_get(rt, "test-choice", id, 4 * sizeof id[0], &got, sizeof got, &tuned) == 1);
  CHECK(memcmp(&got, made, sizeof got) == 0);
  CHECK(!tuned.claimed);
  /* Another kind of choice, another id, a shorter id, another size: all misses. */
  CHECK(jitops__tuned_get(rt, "other-choice", id, 4 * sizeof id[0], &got, sizeof got, &tuned) == 0);
  jitops__tuned_abandon(rt, &tuned);
  uint64_t other[4] = {id[0], id[1], id[2], id[3] + 1};
  CHECK(jitops__tuned_get(rt, "test-choice", other, sizeof other, &got, sizeof got, &tuned) == 0);
  jitops__tuned_abandon(rt, &tuned);
  CHECK(jitops__tuned_get(rt, "test-choice", id, 3 * sizeof id[0], &got, sizeof got, &tuned) == 0);
  jitops__tuned_abandon(rt, &tuned);
  CHECK(jitops__tuned_get(rt, "test-choice", id, 4 * sizeof id[0], &got, sizeof got - 8, &tuned) ==
        0);
  jitops_runtime_destroy(rt);
}

static void listed_and_verified(const char *dir) {
  jitops_cache_t *cache = NULL;
  CHECK_OK(jitops_cache_open(dir, 1, &cache));
  if (cache == NULL)
    return;
  int found = 0;
  CHECK_OK(jitops_cache_list(cache, "testop", NULL, count_entry, &found));
  CHECK(found == 1);
  int64_t checked = 0, dropped = -1;
  CHECK_OK(jitops_cache_verify(cache, &checked, &dropped));
  CHECK(checked >= 1 && dropped == 0);
  jitops_cache_close(cache);
}

int main(void) {
  char dir[1024];
  test_fresh_dir("tuned", dir, sizeof dir);
  uint64_t seed = 0x7e57c0de, id[4];
  choice made;
  for (int i = 0; i < 4; ++i)
    id[i] = test_rand_u64(&seed);
  for (int i = 0; i < 8; ++i)
    made.words[i] = test_rand_u64(&seed);
  stored_then_found(dir, id, &made);
  found_by_next_runtime_only_under_its_key(dir, id, &made);
  listed_and_verified(dir);
  return test_finish("test_tuned_choices_persist");
}
