/* A row can never point a key at another kernel: the stored hash covers the blob and all that
 * selects code from it (key, kind, target, lowered name), so a row whose lowered name was
 * changed, or whose key was swapped with another row's, fails its check in the main
 * database (it is recompiled), in the shipped tier (it is not served), in `verify` (it is
 * dropped) and in `import` (it is rejected). Import also rejects rows whose other columns
 * are not sane (size other than the blob's length, unknown kind, overlong text, negative
 * counts, a key that is not 16 bytes), and imports the rest. */
#include <sqlite3.h>
#include <unistd.h>

#include "testutil.h"

static const char *const exprs[] = {"jitops::example_axpy<float, 1>",
                                    "jitops::example_axpy<float, 2>",
                                    "jitops::example_axpy<float, 3>"};
enum { KERNELS = 3 };

static jitops_stats request_one(const char *dir, const char *shipped, const char *expr,
                                char *lowered, size_t size) {
  jitops_runtime_config cfg = test_offline_config("sm_90", dir);
  cfg.shipped_cache = shipped;
  jitops_stats stats;
  memset(&stats, 0, sizeof stats);
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(&cfg, &rt));
  jitops_kernel_t *k = NULL;
  if (rt != NULL)
    CHECK_OK(jitops_kernel_get(rt, "jitops/example.cuh", expr, NULL, 0, &k));
  if (k != NULL)
    snprintf(lowered, size, "%s", jitops_kernel_lowered_name(k));
  if (rt != NULL)
    CHECK_OK(jitops_runtime_get_stats(rt, &stats));
  jitops_runtime_destroy(rt);
  return stats;
}

static void sql(const char *path, const char *statement) {
  sqlite3 *db = NULL;
  CHECK(sqlite3_open(path, &db) == SQLITE_OK);
  int rc = sqlite3_exec(db, statement, NULL, NULL, NULL);
  if (rc != SQLITE_OK)
    fprintf(stderr, "%s: %s\n", statement, sqlite3_errmsg(db));
  CHECK(rc == SQLITE_OK);
  sqlite3_close(db);
}

/* The rows of exprs[0] and exprs[1] are told apart by their lowered names' instance. */
static const char *const first_row =
    "(SELECT rowid FROM kernels WHERE name_expr LIKE '%float, 1>')";
static const char *const second_row =
    "(SELECT rowid FROM kernels WHERE name_expr LIKE '%float, 2>')";

static void swap_keys(const char *path) {
  char statement[1024];
  snprintf(statement, sizeof statement,
           "CREATE TEMP TABLE k AS SELECT rowid AS r, key FROM kernels;"
           "UPDATE kernels SET key = zeroblob(16) WHERE rowid = %s;"
           "UPDATE kernels SET key = (SELECT key FROM k WHERE r = %s) WHERE rowid = %s;"
           "UPDATE kernels SET key = (SELECT key FROM k WHERE r = %s) WHERE rowid = %s;",
           first_row, first_row, second_row, second_row, first_row);
  sql(path, statement);
}

static void export_to(const char *dir, const char *file) {
  jitops_cache_t *cache = NULL;
  unlink(file);
  CHECK_OK(jitops_cache_open(dir, 0, &cache));
  if (cache != NULL)
    CHECK_OK(jitops_cache_export(cache, file));
  jitops_cache_close(cache);
}

static void import_into(const char *dir, const char *file, int64_t *imported, int64_t *rejected) {
  jitops_cache_t *cache = NULL;
  *imported = *rejected = -1;
  CHECK_OK(jitops_cache_open(dir, 1, &cache));
  if (cache != NULL)
    CHECK_OK(jitops_cache_import(cache, file, imported, rejected));
  jitops_cache_close(cache);
}

static void tampered_lowered_name(const char *good_lowered) {
  char dir[1024], path[1100], statement[512], lowered[512];
  test_fresh_dir("tampered", dir, sizeof dir);
  jitops_runtime_config cfg = test_offline_config("sm_90", dir);
  CHECK(test_request_examples(&cfg, exprs, KERNELS, 1, NULL).compiles == KERNELS);
  snprintf(path, sizeof path, "%s/kernels.db", dir);
  snprintf(statement, sizeof statement,
           "UPDATE kernels SET lowered_name = (SELECT lowered_name FROM kernels WHERE rowid = %s)"
           " WHERE rowid = %s",
           second_row, first_row);
  sql(path, statement);

  /* verify drops exactly the tampered row */
  jitops_cache_t *cache = NULL;
  int64_t checked = 0, dropped = 0;
  CHECK_OK(jitops_cache_open(dir, 1, &cache));
  if (cache != NULL)
    CHECK_OK(jitops_cache_verify(cache, &checked, &dropped));
  jitops_cache_close(cache);
  CHECK(checked == KERNELS && dropped == 1);

  /* the runtime recompiles it (tampered again, since verify removed it) */
  sql(path, "DELETE FROM kernels");
  CHECK(test_request_examples(&cfg, exprs, KERNELS, 1, NULL).compiles == KERNELS);
  sql(path, statement);
  jitops_stats s = request_one(dir, "", exprs[0], lowered, sizeof lowered);
  CHECK(s.compiles == 1 && s.disk_hits == 0 && s.disk_errors == 1);
  CHECK(strcmp(lowered, good_lowered) == 0);
}

static void swapped_keys_in_shipped_tier_and_import(const char *source, const char *good) {
  char dir[1024], file[1100], lowered[512];
  test_fresh_dir("swapped", dir, sizeof dir);
  snprintf(file, sizeof file, "%s/swapped.db", dir);
  export_to(source, file);
  swap_keys(file);
  char empty[1024];
  test_fresh_dir("shipped-empty", empty, sizeof empty);
  jitops_stats s = request_one(empty, file, exprs[0], lowered, sizeof lowered);
  CHECK(s.compiles == 1 && s.disk_hits == 0); /* not served from the shipped tier */
  CHECK(strcmp(lowered, good) == 0);
  s = request_one(empty, file, exprs[2], lowered, sizeof lowered);
  CHECK(s.compiles == 0 && s.disk_hits == 1); /* an untouched row still is */

  test_fresh_dir("import-swapped", empty, sizeof empty);
  int64_t imported, rejected;
  import_into(empty, file, &imported, &rejected);
  CHECK(imported == KERNELS - 2 && rejected == 2);
}

/* Each statement spoils one row of a fresh copy of the export; import must reject it alone. */
static void insane_columns_rejected(const char *source) {
  static const char *const spoil[] = {
      "UPDATE kernels SET size = -1000000000000000000 WHERE rowid = %s",
      "UPDATE kernels SET size = size + 1 WHERE rowid = %s",
      "UPDATE kernels SET kind = 7 WHERE rowid = %s",
      "UPDATE kernels SET name_expr = hex(zeroblob(60000)) WHERE rowid = %s",
      "UPDATE kernels SET op = '' WHERE rowid = %s",
      "UPDATE kernels SET options = hex(zeroblob(60000)) WHERE rowid = %s",
      "UPDATE kernels SET nvrtc_version = -5 WHERE rowid = %s",
      "UPDATE kernels SET use_count = -1 WHERE rowid = %s",
      "UPDATE kernels SET target = 'sm_90; x' WHERE rowid = %s",
      "UPDATE kernels SET key = hex(key) WHERE rowid = %s",
      "UPDATE kernels SET blob = CAST(blob AS TEXT) WHERE rowid = %s",
  };
  char dir[1024], file[1100], statement[512];
  for (size_t i = 0; i < sizeof spoil / sizeof spoil[0]; ++i) {
    test_fresh_dir("spoiled", dir, sizeof dir);
    snprintf(file, sizeof file, "%s/spoiled.db", dir);
    export_to(source, file);
    snprintf(statement, sizeof statement, spoil[i], first_row);
    sql(file, statement);
    int64_t imported, rejected;
    import_into(dir, file, &imported, &rejected);
    if (imported != KERNELS - 1 || rejected != 1)
      fprintf(stderr, "\"%s\": imported %lld, rejected %lld\n", spoil[i], (long long)imported,
              (long long)rejected);
    CHECK(imported == KERNELS - 1 && rejected == 1);
  }
}

int main(void) {
  char source[1024], good[512];
  test_fresh_dir("source", source, sizeof source);
  jitops_runtime_config cfg = test_offline_config("sm_90", source);
  CHECK(test_request_examples(&cfg, exprs, KERNELS, 1, NULL).compiles == KERNELS);
  request_one(source, "", exprs[0], good, sizeof good);
  tampered_lowered_name(good);
  swapped_keys_in_shipped_tier_and_import(source, good);
  insane_columns_rejected(source);
  return test_finish("test_cache_entry_integrity");
}
