/* The disk tier's modes and safety rules never fail a call: a read-only directory (as its
 * mode bits say, even for root) serves what it has and keeps new kernels in memory;
 * JITOPS_CACHE=readonly and =off, an unsafe directory (writable by others), and a
 * symlinked database are each handled without an error. The runtime info and
 * jitops_cache_settings_get report each state, whether the library chose it, and why. */
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static const char *const cached = "jitops::example_axpy<float, 1>";
static const char *const fresh = "jitops::example_axpy<float, 2>";

static jitops_stats request(const char *dir, jitops_cache_mode mode, const char *expr,
                            jitops_runtime_info *info) {
  jitops_runtime_config cfg = test_offline_config("sm_90", dir);
  cfg.cache_mode = mode;
  return test_request_examples(&cfg, &expr, 1, 1, info);
}

static int visit(const jitops_cache_entry *e, void *user) {
  (void)e;
  ++*(int *)user;
  return 0;
}

/* Entries on disk, or -1 when there is no readable cache. */
static int count(const char *dir) {
  jitops_cache_t *cache = NULL;
  int n = 0;
  if (jitops_cache_open(dir, 0, &cache) != JITOPS_SUCCESS)
    return -1;
  jitops_cache_list(cache, NULL, NULL, visit, &n);
  jitops_cache_close(cache);
  return n;
}

static void read_only_directory(void) {
  char dir[1024];
  test_fresh_dir("readonly-dir", dir, sizeof dir);
  CHECK(request(dir, JITOPS_CACHE_MODE_READWRITE, cached, NULL).compiles == 1);
  CHECK(chmod(dir, 0500) == 0);
  jitops_runtime_info info;
  jitops_stats s = request(dir, JITOPS_CACHE_MODE_READWRITE, cached, &info);
  CHECK(s.disk_hits == 1 && s.compiles == 0 && info.cache_writable == 0);
  s = request(dir, JITOPS_CACHE_MODE_READWRITE, fresh, NULL);
  CHECK(s.compiles == 1 && s.misses == 1);
  CHECK(chmod(dir, 0700) == 0);
  CHECK(count(dir) == 1); /* the fresh kernel stayed in memory */

  char empty[1024];
  test_fresh_dir("readonly-empty", empty, sizeof empty);
  CHECK(chmod(empty, 0500) == 0);
  s = request(empty, JITOPS_CACHE_MODE_READWRITE, fresh, &info);
  CHECK(s.compiles == 1 && info.cache_path[0] == 0);
  CHECK(chmod(empty, 0700) == 0);
}

static void modes(void) {
  char dir[1024];
  jitops_runtime_info info;
  test_fresh_dir("modes", dir, sizeof dir);
  CHECK(request(dir, JITOPS_CACHE_MODE_READWRITE, cached, NULL).compiles == 1);
  jitops_stats s = request(dir, JITOPS_CACHE_MODE_READONLY, cached, &info);
  CHECK(s.disk_hits == 1 && info.cache_writable == 0);
  s = request(dir, JITOPS_CACHE_MODE_READONLY, fresh, NULL);
  CHECK(s.compiles == 1);
  CHECK(count(dir) == 1);
  s = request(dir, JITOPS_CACHE_MODE_OFF, cached, &info);
  CHECK(s.compiles == 1 && s.disk_hits == 0 && info.cache_path[0] == 0);
  /* The environment decides when the config says DEFAULT. */
  setenv("JITOPS_CACHE", "off", 1);
  s = request(dir, JITOPS_CACHE_MODE_DEFAULT, cached, NULL);
  CHECK(s.compiles == 1);
  setenv("JITOPS_CACHE", "readonly", 1);
  s = request(dir, JITOPS_CACHE_MODE_DEFAULT, fresh, NULL);
  CHECK(s.compiles == 1 && count(dir) == 1);
  unsetenv("JITOPS_CACHE");
  s = request(dir, JITOPS_CACHE_MODE_DEFAULT, fresh, NULL);
  CHECK(s.compiles == 1 && count(dir) == 2);
  /* JITOPS_CACHE_DIR is the default location. */
  char env_dir[1024];
  test_fresh_dir("env-dir", env_dir, sizeof env_dir);
  setenv("JITOPS_CACHE_DIR", env_dir, 1);
  jitops_runtime_config cfg = test_offline_config("sm_90", NULL);
  cfg.cache_mode = JITOPS_CACHE_MODE_DEFAULT;
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(&cfg, &rt));
  if (rt) {
    CHECK_OK(jitops_runtime_get_info(rt, &info));
    CHECK(strncmp(info.cache_path, env_dir, strlen(env_dir)) == 0);
  }
  jitops_runtime_destroy(rt);
}

static void unsafe_locations(void) {
  char dir[1024], path[1100], target[1100];
  jitops_runtime_info info;
  test_fresh_dir("shared-tmp", dir, sizeof dir);
  CHECK(chmod(dir, 0777) == 0);
  jitops_stats s = request(dir, JITOPS_CACHE_MODE_READWRITE, cached, &info);
  CHECK(s.compiles == 1 && info.cache_path[0] == 0);
  snprintf(path, sizeof path, "%s/kernels.db", dir);
  CHECK(access(path, F_OK) != 0); /* nothing was written there */
  CHECK(chmod(dir, 0700) == 0);

  test_fresh_dir("symlink", dir, sizeof dir);
  snprintf(target, sizeof target, "%s/elsewhere.db", dir);
  FILE *f = fopen(target, "w");
  if (f)
    fclose(f);
  snprintf(path, sizeof path, "%s/kernels.db", dir);
  CHECK(symlink(target, path) == 0);
  s = request(dir, JITOPS_CACHE_MODE_READWRITE, cached, &info);
  CHECK(s.compiles == 1 && info.cache_path[0] == 0);
  struct stat st;
  CHECK(stat(target, &st) == 0 && st.st_size == 0); /* the link's target was not touched */
}

/* The runtime info and jitops_cache_settings_get say what the tier is, whether the library
 * lowered it itself, and why. */
static void states_reported(void) {
  char dir[1024];
  jitops_runtime_info info;
  jitops_cache_settings settings;
  test_fresh_dir("states", dir, sizeof dir);
  CHECK_OK(jitops_cache_settings_get(dir, &settings));
  CHECK(settings.state == JITOPS_CACHE_STATE_READWRITE && !settings.degraded);
  CHECK(settings.reason[0] == 0 && settings.max_bytes == (int64_t)1 << 30);
  request(dir, JITOPS_CACHE_MODE_READWRITE, cached, &info);
  CHECK(info.cache_state == JITOPS_CACHE_STATE_READWRITE && !info.cache_degraded);
  CHECK(info.cache_reason[0] == 0 && info.cache_max_bytes == (int64_t)1 << 30);

  request(dir, JITOPS_CACHE_MODE_OFF, cached, &info);
  CHECK(info.cache_state == JITOPS_CACHE_STATE_OFF && !info.cache_degraded);
  CHECK(strstr(info.cache_reason, "config.cache_mode") != NULL);
  setenv("JITOPS_CACHE", "off", 1);
  setenv("JITOPS_CACHE_MAX_BYTES", "512M", 1);
  request(dir, JITOPS_CACHE_MODE_DEFAULT, cached, &info);
  CHECK(info.cache_state == JITOPS_CACHE_STATE_OFF && !info.cache_degraded);
  CHECK(strstr(info.cache_reason, "JITOPS_CACHE") != NULL);
  CHECK(info.cache_max_bytes == (int64_t)512 << 20);
  CHECK_OK(jitops_cache_settings_get(dir, &settings));
  CHECK(settings.state == JITOPS_CACHE_STATE_OFF && !settings.degraded);
  CHECK(settings.max_bytes == (int64_t)512 << 20);
  unsetenv("JITOPS_CACHE");
  unsetenv("JITOPS_CACHE_MAX_BYTES");
  request(dir, JITOPS_CACHE_MODE_READONLY, cached, &info);
  CHECK(info.cache_state == JITOPS_CACHE_STATE_READONLY && !info.cache_degraded);

  CHECK(chmod(dir, 0500) == 0);
  request(dir, JITOPS_CACHE_MODE_READWRITE, cached, &info);
  CHECK(info.cache_state == JITOPS_CACHE_STATE_READONLY && info.cache_degraded);
  CHECK(strstr(info.cache_reason, "read-only") != NULL);
  CHECK(chmod(dir, 0777) == 0);
  request(dir, JITOPS_CACHE_MODE_READWRITE, cached, &info);
  CHECK(info.cache_state == JITOPS_CACHE_STATE_OFF && info.cache_degraded);
  CHECK(strstr(info.cache_reason, "writable by others") != NULL);
  CHECK_OK(jitops_cache_settings_get(dir, &settings));
  CHECK(settings.state == JITOPS_CACHE_STATE_OFF && settings.degraded);
  CHECK(strstr(settings.reason, "writable by others") != NULL);
  CHECK(chmod(dir, 0700) == 0);
}

int main(void) {
  read_only_directory();
  modes();
  unsafe_locations();
  states_reported();
  return test_finish("test_cache_readonly_and_modes");
}
