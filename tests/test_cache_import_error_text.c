/* A failed import says why, once: the message of a file that is no export names the file
 * and SQLite's reason exactly once (it was formatted into the very buffer it quoted, and came
 * out twice or garbled), and the reason of a failure inside the import's transaction is read
 * before the rollback (after it, SQLite says "not an error"). */
#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include "testutil.h"

static const char *const exprs[] = {"jitops::example_axpy<float, 1>",
                                    "jitops::example_axpy<double, 2>",
                                    "jitops::example_axpy<float, 3>"};
enum { KERNELS = 3 };

static int occurrences(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
    ++n;
  return n;
}

static void write_garbage(const char *path, size_t bytes) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CHECK(fd >= 0);
  for (size_t i = 0; i < bytes; ++i) {
    char c = (char)(i * 131 + 7);
    CHECK(write(fd, &c, 1) == 1);
  }
  close(fd);
}

/* Overwrites the root page of `table` in the SQLite file at `path` with garbage, so that the
 * schema still reads but the table does not. */
static void damage_table(const char *path, const char *table) {
  sqlite3 *db = NULL;
  sqlite3_stmt *stmt = NULL;
  int root = 0, page_size = 0;
  CHECK(sqlite3_open(path, &db) == SQLITE_OK);
  CHECK(sqlite3_prepare_v2(db, "SELECT rootpage FROM sqlite_schema WHERE name = ?", -1, &stmt,
                           NULL) == SQLITE_OK);
  sqlite3_bind_text(stmt, 1, table, -1, SQLITE_STATIC);
  if (sqlite3_step(stmt) == SQLITE_ROW)
    root = sqlite3_column_int(stmt, 0);
  sqlite3_finalize(stmt);
  CHECK(sqlite3_prepare_v2(db, "PRAGMA page_size", -1, &stmt, NULL) == SQLITE_OK);
  if (sqlite3_step(stmt) == SQLITE_ROW)
    page_size = sqlite3_column_int(stmt, 0);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  CHECK(root > 1 && page_size >= 512);
  char junk[65536];
  for (int i = 0; i < page_size; ++i)
    junk[i] = (char)(i * 37 + 11);
  int fd = open(path, O_WRONLY);
  CHECK(fd >= 0 &&
        pwrite(fd, junk, (size_t)page_size, (off_t)(root - 1) * page_size) == (ssize_t)page_size);
  close(fd);
}

int main(void) {
  char dir[1024], target[1024], exported[1100], garbage[1100];
  test_fresh_dir("source", dir, sizeof dir);
  test_fresh_dir("target", target, sizeof target);
  jitops_runtime_config cfg = test_offline_config("sm_90", dir);
  CHECK(test_request_examples(&cfg, exprs, KERNELS, 1, NULL).compiles == KERNELS);
  snprintf(exported, sizeof exported, "%s/export.db", target);
  snprintf(garbage, sizeof garbage, "%s/garbage.db", target);

  jitops_cache_t *source = NULL, *cache = NULL;
  CHECK_OK(jitops_cache_open(dir, 0, &source));
  if (source != NULL)
    CHECK_OK(jitops_cache_export(source, exported));
  jitops_cache_close(source);
  CHECK_OK(jitops_cache_open(target, 1, &cache));
  if (cache == NULL)
    return test_finish("test_cache_import_error_text");

  /* A file that is no database at all. */
  write_garbage(garbage, 8192);
  int64_t imported = -1, rejected = -1;
  CHECK_FAILS(jitops_cache_import(cache, garbage, &imported, &rejected), JITOPS_ERR_CACHE,
              "not an SQLite database");
  const char *message = jitops_last_error();
  CHECK(occurrences(message, "is not a jitops cache export") == 1);
  CHECK(occurrences(message, garbage) >= 1);
  CHECK(strncmp(message, "jitops_cache_import: ", 21) == 0);

  /* An export whose table of kernels is damaged: the failure comes inside the transaction. */
  damage_table(exported, "kernels");
  CHECK_FAILS(jitops_cache_import(cache, exported, &imported, &rejected), JITOPS_ERR_CACHE,
              "malformed");
  CHECK(strstr(jitops_last_error(), "not an error") == NULL);
  jitops_cache_close(cache);
  return test_finish("test_cache_import_error_text");
}
