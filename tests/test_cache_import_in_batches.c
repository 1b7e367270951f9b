/* An import never holds the database's write lock for long: it commits in batches, so a
 * runtime that wants to store a kernel meanwhile gets the lock within its bound, and sees
 * the import part-way (some rows in, not all). One transaction for the whole file made
 * every writer wait for all of it. */
#include <sqlite3.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache/store.h"
#include "testutil.h"

enum { ROWS = 6000, BLOB_BYTES = 512, WAIT_BOUND_MS = 2000 };

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Fills `dir` with ROWS small rows through the store, as runtimes would. */
static void fill(const char *dir) {
  jitops__store_options options = {dir, JITOPS_CACHE_MODE_READWRITE, -1, ""};
  jitops__store *store = jitops__store_open(&options);
  CHECK(store != NULL);
  if (store == NULL)
    return;
  unsigned char image[BLOB_BYTES];
  for (int i = 0; i < ROWS; ++i) {
    for (int b = 0; b < BLOB_BYTES; ++b)
      image[b] = (unsigned char)(i * 7 + b);
    jitops__store_row row = {{0},     "bulk",       "k<i>", "_Z1kv",
                             "sm_90", 1300,         "",     JITOPS__BLOB_CUBIN,
                             image,   sizeof image, 1.0};
    memcpy(row.key, &i, sizeof i);
    row.key[15] = 0x5a;
    jitops__store_put(store, &row);
  }
  jitops__store_close(store);
}

static int busy_poll(void *user, int count) {
  (void)count;
  double *since = user;
  if (now_ms() - *since > WAIT_BOUND_MS)
    return 0;
  struct timespec pause = {0, 1000 * 1000};
  nanosleep(&pause, NULL);
  return 1;
}

/* Takes the write lock over and over while the import runs in `importer`; returns how many
 * times it saw the import part-way, and the longest wait in *longest_ms. */
static int watch_import(const char *db_path, pid_t importer, double *longest_ms) {
  sqlite3 *db = NULL;
  CHECK(sqlite3_open(db_path, &db) == SQLITE_OK);
  double since = 0;
  sqlite3_busy_handler(db, busy_poll, &since);
  int partway = 0;
  *longest_ms = 0;
  for (;;) {
    int status = 0, finished = waitpid(importer, &status, WNOHANG) == importer;
    if (finished)
      CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    since = now_ms();
    int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    double waited = now_ms() - since;
    *longest_ms = waited > *longest_ms ? waited : *longest_ms;
    sqlite3_stmt *stmt = NULL;
    int rows = -1;
    if (rc == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT count(*) FROM kernels", -1, &stmt, NULL) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW)
      rows = sqlite3_column_int(stmt, 0);
    sqlite3_finalize(stmt);
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    partway += rows > 0 && rows < ROWS;
    if (finished)
      break;
    struct timespec pause = {0, 2 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  sqlite3_close(db);
  return partway;
}

int main(void) {
  char source[1024], target[1024], exported[1100], db_path[1100];
  test_fresh_dir("source", source, sizeof source);
  test_fresh_dir("target", target, sizeof target);
  fill(source);
  snprintf(exported, sizeof exported, "%s/export.db", target);
  snprintf(db_path, sizeof db_path, "%s/kernels.db", target);
  jitops_cache_t *cache = NULL;
  CHECK_OK(jitops_cache_open(source, 0, &cache));
  if (cache != NULL)
    CHECK_OK(jitops_cache_export(cache, exported));
  jitops_cache_close(cache);
  CHECK_OK(jitops_cache_open(target, 1, &cache));
  jitops_cache_close(cache);

  pid_t importer = fork();
  if (importer == 0) {
    jitops_cache_t *c = NULL;
    int64_t imported = 0, rejected = 0;
    int ok = jitops_cache_open(target, 1, &c) == JITOPS_SUCCESS &&
             jitops_cache_import(c, exported, &imported, &rejected) == JITOPS_SUCCESS &&
             imported == ROWS && rejected == 0;
    if (!ok)
      fprintf(stderr, "import: %s (%lld imported)\n", jitops_last_error(), (long long)imported);
    jitops_cache_close(c);
    _exit(ok ? 0 : 1);
  }
  double longest = 0;
  int partway = watch_import(db_path, importer, &longest);
  printf("%d rows imported; a writer saw the import part-way %d times, waited at most %.0f ms\n",
         ROWS, partway, longest);
  CHECK(partway > 0);
  CHECK(longest < WAIT_BOUND_MS);
  return test_finish("test_cache_import_in_batches");
}
