/* The runtime's disk tier, writing: kernels (with least-recently-used eviction over the size
 * bound) and usage counts. A write that cannot get the database's lock within the store's
 * bound is given up: the kernel stays in memory. */
#include <string.h>

#include "cache/entry.h"
#include "cache/store_internal.h"
#include "common/log.h"

static int64_t total_bytes(jitops__store *store) {
  sqlite3_stmt *stmt = NULL;
  int64_t total = 0;
  if (jitops__db_prepare(store->main.handle, "SELECT COALESCE(SUM(size), 0) FROM kernels", &stmt) ==
          SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW)
    total = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  return total;
}

/* Deletes least recently used rows (oldest last use, then oldest insert) until the total
 * fits, sparing `keep`. Runs inside the caller's write transaction. */
static int evict(jitops__store *store, const uint8_t keep[16]) {
  if (store->max_bytes < 0)
    return SQLITE_OK;
  int64_t excess = total_bytes(store) - store->max_bytes;
  if (excess <= 0)
    return SQLITE_OK;
  sqlite3_stmt *pick = NULL;
  int rc = jitops__db_prepare(store->main.handle,
                              "SELECT rowid, size FROM kernels WHERE key != ?"
                              " ORDER BY last_used ASC, rowid ASC",
                              &pick);
  if (rc != SQLITE_OK)
    return rc;
  sqlite3_bind_blob(pick, 1, keep, 16, SQLITE_STATIC);
  int64_t last_rowid = -1, evicted = 0;
  while (excess > 0 && sqlite3_step(pick) == SQLITE_ROW) {
    last_rowid = sqlite3_column_int64(pick, 0);
    excess -= sqlite3_column_int64(pick, 1);
    ++evicted;
  }
  sqlite3_finalize(pick);
  if (last_rowid < 0)
    return SQLITE_OK;
  sqlite3_stmt *del = NULL;
  rc = jitops__db_prepare(store->main.handle,
                          "DELETE FROM kernels WHERE rowid IN (SELECT rowid FROM kernels"
                          " WHERE key != ? ORDER BY last_used ASC, rowid ASC LIMIT ?)",
                          &del);
  if (rc != SQLITE_OK)
    return rc;
  sqlite3_bind_blob(del, 1, keep, 16, SQLITE_STATIC);
  sqlite3_bind_int64(del, 2, evicted);
  rc = sqlite3_step(del);
  sqlite3_finalize(del);
  jitops__log(JITOPS__LOG_DEBUG, "disk cache: evicted %lld least recently used kernel(s)",
              (long long)evicted);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

void jitops__store_put(jitops__store *store, const jitops__store_row *row) {
  if (store == NULL)
    return;
  pthread_mutex_lock(&store->lock);
  if (store->writable && store->main.handle != NULL) {
    int rc = jitops__db_begin_write(&store->main);
    if (rc == SQLITE_OK)
      rc = jitops__entry_insert(store->main.handle, row, 1);
    if (rc == SQLITE_OK)
      rc = evict(store, row->key);
    if (rc == SQLITE_OK)
      rc = jitops__claim_delete(store, row->key);
    if (rc == SQLITE_OK)
      rc = jitops__db_exec(&store->main, "COMMIT");
    if (rc != SQLITE_OK) {
      jitops__db_exec(&store->main, "ROLLBACK");
      jitops__store_failed(store, rc, "storing a kernel");
      /* Waiters compile it themselves: drop the claim, unless the database is busy (it would
       * be busy again; the released lock below tells them just as well). */
      if (store->main.handle != NULL && (rc & 0xff) != SQLITE_BUSY)
        jitops__claim_delete(store, row->key);
    }
  }
  jitops__claim_lock_release(&store->claim_locks, row->key);
  pthread_mutex_unlock(&store->lock);
}

/* ---- usage ----------------------------------------------------------------------------- */

static int flush_one(jitops__store *store, const jitops__usage *u, int64_t now) {
  sqlite3_stmt *stmt = NULL;
  int rc = jitops__db_prepare(store->main.handle,
                              "UPDATE kernels SET use_count = use_count + ?,"
                              " last_used = max(last_used, ?) WHERE key = ?",
                              &stmt);
  if (rc != SQLITE_OK)
    return rc;
  sqlite3_bind_int64(stmt, 1,
                     (int64_t)(u->memory_hits + u->disk_hits + u->remote_hits + u->misses));
  sqlite3_bind_int64(stmt, 2, now);
  sqlite3_bind_blob(stmt, 3, u->key, 16, SQLITE_STATIC);
  rc = sqlite3_step(stmt);
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE)
    return rc;
  rc = jitops__db_prepare(store->main.handle,
                          "INSERT INTO usage(op, target, memory_hits, disk_hits, misses, compiles,"
                          " remote_hits, remote_misses, remote_errors)"
                          " VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(op, target) DO UPDATE SET"
                          " memory_hits = memory_hits + excluded.memory_hits,"
                          " disk_hits = disk_hits + excluded.disk_hits,"
                          " misses = misses + excluded.misses,"
                          " compiles = compiles + excluded.compiles,"
                          " remote_hits = remote_hits + excluded.remote_hits,"
                          " remote_misses = remote_misses + excluded.remote_misses,"
                          " remote_errors = remote_errors + excluded.remote_errors",
                          &stmt);
  if (rc != SQLITE_OK)
    return rc;
  sqlite3_bind_text(stmt, 1, u->op, -1, SQLITE_STATIC);
  sqlite3_bind_text(stmt, 2, u->target, -1, SQLITE_STATIC);
  sqlite3_bind_int64(stmt, 3, (int64_t)u->memory_hits);
  sqlite3_bind_int64(stmt, 4, (int64_t)u->disk_hits);
  sqlite3_bind_int64(stmt, 5, (int64_t)u->misses);
  sqlite3_bind_int64(stmt, 6, (int64_t)u->compiles);
  sqlite3_bind_int64(stmt, 7, (int64_t)u->remote_hits);
  sqlite3_bind_int64(stmt, 8, (int64_t)u->remote_misses);
  sqlite3_bind_int64(stmt, 9, (int64_t)u->remote_errors);
  rc = sqlite3_step(stmt);
  sqlite3_finalize(stmt);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

void jitops__store_flush(jitops__store *store, const jitops__usage *usage, size_t count) {
  if (store == NULL || count == 0)
    return;
  pthread_mutex_lock(&store->lock);
  if (store->writable && store->main.handle != NULL) {
    int64_t now = jitops__store_now_ms();
    int rc = jitops__db_begin_write(&store->main);
    for (size_t i = 0; i < count && rc == SQLITE_OK; ++i)
      rc = flush_one(store, &usage[i], now);
    if (rc == SQLITE_OK)
      rc = jitops__db_exec(&store->main, "COMMIT");
    if (rc != SQLITE_OK) {
      jitops__db_exec(&store->main, "ROLLBACK");
      jitops__store_failed(store, rc, "recording usage");
    }
  }
  pthread_mutex_unlock(&store->lock);
}
