/* Every kind of damage heals: a database whose header SQLite refuses in different ways (an
 * unsupported schema format, a write version that makes it read-only, a read version that
 * makes it unreadable) and a database with our table names but a foreign schema are each set
 * aside and rebuilt, by the runtime and by the administration calls, so that the next
 * runtime finds a working cache instead of running without one forever. */
#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include "cache/schema.h"
#include "testutil.h"

static const char *const exprs[] = {"jitops::example_axpy<float, 1>",
                                    "jitops::example_axpy<float, 2>"};
enum { KERNELS = 2 };

static jitops_stats request_all(const char *dir) {
  jitops_runtime_config cfg = test_offline_config("sm_90", dir);
  return test_request_examples(&cfg, exprs, KERNELS, 1, NULL);
}

static void db_path(const char *dir, char *out, size_t size) {
  snprintf(out, size, "%s/kernels.db", dir);
}

/* A populated cache whose WAL is folded into the database, so the header on disk is live. */
static void populate(const char *tag, char *dir, size_t size) {
  test_fresh_dir(tag, dir, size);
  CHECK(request_all(dir).compiles == KERNELS);
  jitops_cache_t *cache = NULL;
  CHECK_OK(jitops_cache_open(dir, 1, &cache));
  jitops_cache_close(cache);
}

static void poke(const char *dir, off_t offset, unsigned char value) {
  char path[1100];
  db_path(dir, path, sizeof path);
  int fd = open(path, O_WRONLY);
  CHECK(fd >= 0 && pwrite(fd, &value, 1, offset) == 1);
  close(fd);
}

/* The first runtime after the damage compiles (no call fails); the one after it finds every
 * kernel on disk; one damaged copy was set aside. */
static void expect_healed(const char *dir, const char *what) {
  jitops_stats s = request_all(dir);
  CHECK(s.disk_hits + s.compiles == KERNELS);
  jitops_stats after = request_all(dir);
  if (after.disk_hits != KERNELS)
    fprintf(stderr, "%s: the cache did not heal (%llu disk hits)\n", what,
            (unsigned long long)after.disk_hits);
  CHECK(after.disk_hits == KERNELS && after.compiles == 0);
  CHECK(test_count_set_aside(dir) == 1);
}

static void damaged_header_bytes(void) {
  static const struct {
    const char *what;
    off_t offset;
    unsigned char value;
  } damage[] = {{"schema format 9", 47, 9},
                {"write version 3", 18, 3},
                {"read version 3", 19, 3},
                {"page size 3", 16, 0}};
  for (size_t i = 0; i < sizeof damage / sizeof damage[0]; ++i) {
    char dir[1024];
    populate(damage[i].what, dir, sizeof dir);
    poke(dir, damage[i].offset, damage[i].value);
    expect_healed(dir, damage[i].what);
  }
}

/* A database of another program that uses our table names. */
static void write_foreign(const char *dir, const char *sql) {
  char path[1100];
  db_path(dir, path, sizeof path);
  sqlite3 *db = NULL;
  CHECK(sqlite3_open(path, &db) == SQLITE_OK);
  CHECK(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK);
  sqlite3_close(db);
}

static const char *const foreign_without_meta =
    "CREATE TABLE kernels(id INTEGER PRIMARY KEY, payload TEXT);"
    "CREATE TABLE claims(x);";

static void foreign_schema_in_runtime(void) {
  char dir[1024];
  test_fresh_dir("foreign-runtime", dir, sizeof dir);
  write_foreign(dir, foreign_without_meta);
  expect_healed(dir, "a foreign schema without meta");

  /* The same, with a meta row that claims our current version. */
  test_fresh_dir("foreign-version", dir, sizeof dir);
  char sql[1024];
  snprintf(sql, sizeof sql,
           "CREATE TABLE meta(name TEXT PRIMARY KEY, value TEXT NOT NULL);"
           "INSERT INTO meta VALUES('schema_version', '%d');"
           "CREATE TABLE kernels(id INTEGER PRIMARY KEY, payload TEXT);",
           JITOPS__SCHEMA_VERSION);
  write_foreign(dir, sql);
  expect_healed(dir, "a foreign schema with our version");
}

/* The administration calls set a damaged database aside too: a read-only open reports that
 * there is no cache any more, a writable one starts a new database and says what it set
 * aside. */
static void damage_in_administration(void) {
  char dir[1024];
  populate("admin", dir, sizeof dir);
  poke(dir, 47, 9);
  jitops_cache_t *cache = NULL;
  CHECK_FAILS(jitops_cache_open(dir, 0, &cache), JITOPS_ERR_NOT_FOUND, "set aside");
  CHECK(test_count_set_aside(dir) == 1);

  populate("admin-write", dir, sizeof dir);
  poke(dir, 18, 3);
  CHECK_OK(jitops_cache_open(dir, 1, &cache));
  if (cache != NULL) {
    CHECK(strstr(jitops_cache_recovered_from(cache), "kernels.db.corrupt-") != NULL);
    int64_t checked = -1, dropped = -1;
    CHECK_OK(jitops_cache_verify(cache, &checked, &dropped));
    CHECK(checked == 0 && dropped == 0);
  }
  jitops_cache_close(cache);
  CHECK(test_count_set_aside(dir) == 1);
  CHECK(request_all(dir).compiles == KERNELS);

  test_fresh_dir("admin-foreign", dir, sizeof dir);
  write_foreign(dir, foreign_without_meta);
  CHECK_OK(jitops_cache_open(dir, 1, &cache));
  if (cache != NULL)
    CHECK(jitops_cache_recovered_from(cache)[0] != 0);
  jitops_cache_close(cache);
}

int main(void) {
  damaged_header_bytes();
  foreign_schema_in_runtime();
  damage_in_administration();
  return test_finish("test_cache_damaged_header_and_foreign_schema");
}
