/* Symlinks on the way to the cache are followed, once: a cache directory that is a symlink,
 * or that lies below one (a cluster's $HOME often is), works, and the library reports and uses
 * the real path; so do a shipped tier and an import file reached through a symlinked
 * directory. Symlinks inside the cache directory stay refused: a database or -wal that is a
 * symlink turns the disk tier off, and the link's target is never touched. */
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static const char *const expr = "jitops::example_axpy<float, 1>";

static jitops_stats request(const char *dir, const char *shipped, jitops_runtime_info *info) {
  jitops_runtime_config cfg = test_offline_config("sm_90", dir);
  cfg.shipped_cache = shipped;
  return test_request_examples(&cfg, &expr, 1, 1, info);
}

/* The directory `dir` resolves to, with a trailing slash, for prefix comparisons. */
static void real_dir(const char *dir, char *out, size_t size) {
  char real[4096];
  CHECK(realpath(dir, real) != NULL);
  snprintf(out, size, "%s/", real);
}

static void symlinked_cache_directory(const char *root) {
  char real[1100], link[1100], expected[4200];
  snprintf(real, sizeof real, "%s/real-cache", root);
  snprintf(link, sizeof link, "%s/cache-link", root);
  CHECK(mkdir(real, 0700) == 0 && symlink(real, link) == 0);
  jitops_runtime_info info;
  jitops_stats s = request(link, "", &info);
  CHECK(s.compiles == 1 && info.cache_writable == 1);
  real_dir(real, expected, sizeof expected);
  CHECK(strncmp(info.cache_path, expected, strlen(expected)) == 0);
  s = request(link, "", NULL);
  CHECK(s.disk_hits == 1 && s.compiles == 0);

  jitops_cache_t *cache = NULL;
  CHECK_OK(jitops_cache_open(link, 0, &cache));
  if (cache != NULL)
    CHECK(strncmp(jitops_cache_path(cache), expected, strlen(expected)) == 0);
  jitops_cache_close(cache);
}

/* $HOME is a symlink and the cache is created below it. */
static void symlinked_parent(const char *root) {
  char home_real[1100], home[1100], dir[1200], shipped[1200], other[1100];
  snprintf(home_real, sizeof home_real, "%s/home-real", root);
  snprintf(home, sizeof home, "%s/home", root);
  CHECK(mkdir(home_real, 0700) == 0 && symlink(home_real, home) == 0);
  snprintf(dir, sizeof dir, "%s/.cache/jitops", home);
  jitops_runtime_info info;
  jitops_stats s = request(dir, "", &info);
  CHECK(s.compiles == 1 && info.cache_writable == 1 && info.cache_path[0] != 0);
  s = request(dir, "", NULL);
  CHECK(s.disk_hits == 1 && s.compiles == 0);

  /* An export written and read back through the symlinked directory. */
  snprintf(shipped, sizeof shipped, "%s/shipped.db", home);
  jitops_cache_t *cache = NULL;
  CHECK_OK(jitops_cache_open(dir, 0, &cache));
  if (cache != NULL)
    CHECK_OK(jitops_cache_export(cache, shipped));
  jitops_cache_close(cache);
  snprintf(other, sizeof other, "%s/other", root);
  CHECK(mkdir(other, 0700) == 0);
  s = request(other, shipped, NULL);
  CHECK(s.disk_hits == 1 && s.compiles == 0); /* served by the shipped tier */
  snprintf(other, sizeof other, "%s/imported", root);
  CHECK(mkdir(other, 0700) == 0);
  CHECK_OK(jitops_cache_open(other, 1, &cache));
  int64_t imported = 0, rejected = 0;
  if (cache != NULL)
    CHECK_OK(jitops_cache_import(cache, shipped, &imported, &rejected));
  jitops_cache_close(cache);
  CHECK(imported == 1 && rejected == 0);
}

/* A companion file that is a symlink is refused like the database itself. */
static void symlink_inside_is_refused(const char *root) {
  char dir[1100], target[1200], path[1200];
  snprintf(dir, sizeof dir, "%s/inside", root);
  CHECK(mkdir(dir, 0700) == 0);
  snprintf(target, sizeof target, "%s/elsewhere", dir);
  FILE *f = fopen(target, "w");
  if (f)
    fclose(f);
  snprintf(path, sizeof path, "%s/kernels.db-wal", dir);
  CHECK(symlink(target, path) == 0);
  jitops_runtime_info info;
  jitops_stats s = request(dir, "", &info);
  CHECK(s.compiles == 1 && info.cache_path[0] == 0);
  struct stat st;
  CHECK(stat(target, &st) == 0 && st.st_size == 0);
  jitops_cache_t *cache = NULL;
  CHECK_FAILS(jitops_cache_open(dir, 1, &cache), JITOPS_ERR_CACHE, "symbolic link");
}

int main(void) {
  char root[1024];
  test_fresh_dir("links", root, sizeof root);
  symlinked_cache_directory(root);
  symlinked_parent(root);
  symlink_inside_is_refused(root);
  return test_finish("test_cache_symlinked_paths");
}
