/* Moving a cache between machines: export writes a compact copy, import adds the sound rows
 * of one that are missing here.
 *
 * Invariants:
 *   - An export is a file of its own user's, mode 0600 like the cache, never one that existed.
 *   - Import trusts nothing in the file: every row must be sound (cache/entry.h) or it is
 *     rejected and counted.
 *   - Import holds the write lock for one batch at a time (IMPORT_BATCH_ROWS rows or
 *     IMPORT_BATCH_BYTES of blobs) and pauses between batches, so a runtime that wants to
 *     store a kernel meanwhile gets the lock within its bound. A failure keeps the batches
 *     already committed: importing the file again finishes the job. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/admin_internal.h"
#include "cache/entry.h"
#include "cache/location.h"
#include "common/error.h"

enum { IMPORT_BATCH_ROWS = 256, IMPORT_BATCH_BYTES = 16 << 20, IMPORT_PAUSE_MS = 5 };

/* Creates `path` empty, 0600, failing if anything is there (a symlink included): VACUUM INTO
 * then fills it and keeps its mode. */
static jitops_status create_private(const char *fn, const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST)
    return jitops__fail(JITOPS_ERR_IO, "%s: %s already exists", fn, path);
  if (fd < 0)
    return jitops__fail(JITOPS_ERR_IO, "%s: creating %s: %s", fn, path, strerror(errno));
  close(fd);
  return JITOPS_SUCCESS;
}

jitops_status jitops_cache_export(jitops_cache_t *cache, const char *file) {
  static const char *const fn = "jitops_cache_export";
  JITOPS__REQUIRE_NONNULL(fn, cache);
  JITOPS__REQUIRE_NONNULL(fn, file);
  char path[4096];
  JITOPS__TRY(jitops__real_parent_path(file, path, sizeof path));
  JITOPS__TRY(create_private(fn, path));
  /* VACUUM INTO writes only the new file, but a reader's query_only refuses it too. */
  jitops__db_exec(&cache->db, "PRAGMA query_only=0");
  sqlite3_stmt *stmt = NULL;
  int rc = jitops__db_prepare(cache->db.handle, "VACUUM INTO ?", &stmt);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(stmt, 1, path, -1, SQLITE_STATIC);
    rc = sqlite3_step(stmt);
  }
  jitops_status status = rc == SQLITE_OK || rc == SQLITE_DONE
                             ? JITOPS_SUCCESS
                             : jitops__fail(JITOPS_ERR_IO, "%s: writing %s: %s", fn, file,
                                            sqlite3_errmsg(cache->db.handle));
  sqlite3_finalize(stmt);
  if (cache->db.mode == JITOPS__DB_READONLY)
    jitops__db_exec(&cache->db, "PRAGMA query_only=1");
  if (status != JITOPS_SUCCESS)
    unlink(path);
  return status;
}

/* ---- import ---------------------------------------------------------------------------- */

typedef struct import_batch {
  int64_t rows, bytes; /* in the open transaction */
  int64_t pending;     /* rows inserted in it, not yet committed */
  int open;            /* a transaction is open */
  int64_t imported, rejected;
} import_batch;

static void pause_ms(int ms) {
  struct timespec ts = {0, (long)ms * 1000000L};
  nanosleep(&ts, NULL);
}

/* Opens a batch's transaction when none is, commits it when it is full. */
static jitops_status batch_begin(jitops_cache_t *cache, import_batch *batch) {
  if (batch->open)
    return JITOPS_SUCCESS;
  if (jitops__db_begin_write(&cache->db) != SQLITE_OK)
    return jitops__admin_sql_fail(cache->db.handle, "jitops_cache_import", "starting a batch");
  batch->open = 1;
  batch->rows = batch->bytes = batch->pending = 0;
  return JITOPS_SUCCESS;
}

static jitops_status batch_commit(jitops_cache_t *cache, import_batch *batch) {
  if (!batch->open)
    return JITOPS_SUCCESS;
  if (jitops__db_exec(&cache->db, "COMMIT") != SQLITE_OK)
    return jitops__admin_sql_fail(cache->db.handle, "jitops_cache_import", "committing a batch");
  batch->open = 0;
  batch->imported += batch->pending;
  return JITOPS_SUCCESS;
}

/* Copies the current row of `read` through `write` when it is sound. */
static jitops_status copy_row(jitops_cache_t *cache, sqlite3_stmt *read, sqlite3_stmt *write,
                              import_batch *batch) {
  const char *fault;
  if (!jitops__entry_is_sound(read, &fault)) {
    ++batch->rejected;
    return JITOPS_SUCCESS;
  }
  for (int c = 0; c < JITOPS__ENTRY_COLUMN_COUNT; ++c)
    sqlite3_bind_value(write, c + 1, sqlite3_column_value(read, c));
  int rc = sqlite3_step(write);
  jitops_status status =
      rc == SQLITE_DONE
          ? JITOPS_SUCCESS
          : jitops__admin_sql_fail(cache->db.handle, "jitops_cache_import", "copying entries");
  batch->pending += sqlite3_changes(cache->db.handle);
  batch->rows += 1;
  batch->bytes += sqlite3_column_bytes(read, JITOPS__ENTRY_BLOB);
  sqlite3_reset(write);
  if (status == JITOPS_SUCCESS &&
      (batch->rows >= IMPORT_BATCH_ROWS || batch->bytes >= IMPORT_BATCH_BYTES)) {
    status = batch_commit(cache, batch);
    pause_ms(IMPORT_PAUSE_MS); /* let a waiting writer in */
  }
  return status;
}

static jitops_status copy_rows(jitops_cache_t *cache, jitops__db *source, sqlite3_stmt *read,
                               sqlite3_stmt *write, import_batch *batch) {
  jitops_status status = JITOPS_SUCCESS;
  for (;;) {
    if ((status = batch_begin(cache, batch)) != JITOPS_SUCCESS)
      return status;
    int rc = sqlite3_step(read);
    if (rc == SQLITE_DONE)
      return batch_commit(cache, batch);
    if (rc != SQLITE_ROW)
      return jitops__admin_sql_fail(source->handle, "jitops_cache_import", "reading the export");
    if ((status = copy_row(cache, read, write, batch)) != JITOPS_SUCCESS)
      return status;
  }
}

/* Copies the sound rows of `source` that are missing here. A failure is described before the
 * rollback, from the connection that failed. */
static jitops_status import_rows(jitops_cache_t *cache, jitops__db *source, import_batch *batch) {
  static const char *const fn = "jitops_cache_import";
  sqlite3_stmt *read = NULL, *write = NULL;
  if (jitops__db_prepare(source->handle, "SELECT " JITOPS__ENTRY_COLUMNS " FROM kernels", &read) !=
      SQLITE_OK)
    return jitops__admin_sql_fail(source->handle, fn, "reading the export");
  if (jitops__db_prepare(cache->db.handle,
                         "INSERT OR IGNORE INTO kernels(" JITOPS__ENTRY_COLUMNS ")"
                         " VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         &write) != SQLITE_OK) {
    sqlite3_finalize(read);
    return jitops__admin_sql_fail(cache->db.handle, fn, "preparing the copy");
  }
  jitops_status status = copy_rows(cache, source, read, write, batch);
  sqlite3_finalize(read);
  sqlite3_finalize(write);
  if (status != JITOPS_SUCCESS && batch->open)
    jitops__db_exec(&cache->db, "ROLLBACK");
  return status;
}

jitops_status jitops_cache_import(jitops_cache_t *cache, const char *file, int64_t *imported,
                                  int64_t *rejected) {
  static const char *const fn = "jitops_cache_import";
  JITOPS__REQUIRE_NONNULL(fn, cache);
  JITOPS__REQUIRE_NONNULL(fn, file);
  JITOPS__TRY(jitops__admin_require_writable(cache, fn));
  char path[4096];
  if (access(file, R_OK) != 0)
    return jitops__fail(JITOPS_ERR_IO, "%s: cannot read %s: %s", fn, file, strerror(errno));
  JITOPS__TRY(jitops__real_parent_path(file, path, sizeof path));
  jitops__db source;
  if (jitops__db_open(path, JITOPS__DB_IMMUTABLE, JITOPS__ADMIN_BUSY_MS, &source) != JITOPS_SUCCESS)
    return jitops__fail(JITOPS_ERR_CACHE, "%s: %s is not a jitops cache export: %s", fn, file,
                        jitops_last_error());
  import_batch batch = {0, 0, 0, 0, 0, 0};
  jitops_status status = import_rows(cache, &source, &batch);
  jitops__db_close(&source);
  if (imported != NULL)
    *imported = batch.imported;
  if (rejected != NULL)
    *rejected = batch.rejected;
  return status;
}
