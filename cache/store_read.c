/* The runtime's disk tier, reading: the main database, then the shipped tier. A row that fails
 * its check (cache/entry.h) is never loaded: it is deleted from the main database (and recompiled
 * by the caller) and skipped in the shipped tier. */
#include <stdlib.h>
#include <string.h>

#include "cache/entry.h"
#include "cache/store_internal.h"
#include "common/log.h"

void jitops__blob_free(jitops__blob *blob) {
  free(blob->image);
  free(blob->lowered_name);
  memset(blob, 0, sizeof *blob);
}

/* Copies a row's blob and lowered name out if the row is sound (its hash verifies: see
 * cache/entry.h). Returns 1 on success, 0 on a bad row. */
static int take_verified(sqlite3_stmt *stmt, jitops__blob *out) {
  const char *fault = NULL;
  if (!jitops__entry_is_sound(stmt, &fault)) {
    jitops__log(JITOPS__LOG_DEBUG, "disk cache: a row is not sound: %s", fault);
    return 0;
  }
  const void *image = sqlite3_column_blob(stmt, JITOPS__ENTRY_BLOB);
  size_t size = (size_t)sqlite3_column_bytes(stmt, JITOPS__ENTRY_BLOB);
  out->image = malloc(size);
  out->lowered_name = strdup((const char *)sqlite3_column_text(stmt, JITOPS__ENTRY_LOWERED_NAME));
  if (out->image == NULL || out->lowered_name == NULL) {
    jitops__blob_free(out);
    return 0;
  }
  memcpy(out->image, image, size);
  out->size = size;
  return 1;
}

/* The connection's kernel-row SELECT, prepared once (see jitops__db.read_row). */
static int read_row_statement(jitops__db *db, sqlite3_stmt **stmt) {
  int rc = SQLITE_OK;
  if (db->read_row == NULL)
    rc = jitops__db_prepare(
        db->handle, "SELECT " JITOPS__ENTRY_COLUMNS " FROM kernels WHERE key = ?", &db->read_row);
  *stmt = db->read_row;
  return rc;
}

jitops__row_result jitops__store_read_row(jitops__db *db, const uint8_t key[16], jitops__blob *out,
                                          int *rc) {
  sqlite3_stmt *stmt = NULL;
  *rc = read_row_statement(db, &stmt);
  if (*rc != SQLITE_OK)
    return JITOPS__ROW_ERROR;
  sqlite3_bind_blob(stmt, 1, key, 16, SQLITE_STATIC);
  jitops__row_result result = JITOPS__ROW_ABSENT;
  *rc = sqlite3_step(stmt);
  if (*rc == SQLITE_ROW)
    result = take_verified(stmt, out) ? JITOPS__ROW_FOUND : JITOPS__ROW_BAD;
  else if (*rc != SQLITE_DONE)
    result = JITOPS__ROW_ERROR;
  /* Ends the statement's read; its result repeats a failed step's, already in *rc. */
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  if (result != JITOPS__ROW_ERROR)
    *rc = SQLITE_OK;
  return result;
}

static void delete_row(jitops__store *store, const uint8_t key[16]) {
  sqlite3_stmt *stmt = NULL;
  if (jitops__db_prepare(store->main.handle, "DELETE FROM kernels WHERE key = ?", &stmt) !=
      SQLITE_OK)
    return;
  sqlite3_bind_blob(stmt, 1, key, 16, SQLITE_STATIC);
  int rc = sqlite3_step(stmt);
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE)
    jitops__store_failed(store, rc, "deleting a damaged row");
}

/* Reads the main tier; bad rows are deleted. The caller holds the lock. */
static int get_main(jitops__store *store, const uint8_t key[16], jitops__blob *out) {
  if (store->main.handle == NULL)
    return 0;
  int rc;
  switch (jitops__store_read_row(&store->main, key, out, &rc)) {
  case JITOPS__ROW_FOUND:
    return 1;
  case JITOPS__ROW_BAD:
    ++store->errors;
    jitops__log(JITOPS__LOG_WARN, "disk cache: a blob failed its hash check; recompiling it");
    if (store->writable)
      delete_row(store, key);
    return 0;
  case JITOPS__ROW_ERROR:
    jitops__store_failed(store, rc, "reading a kernel");
    return 0;
  case JITOPS__ROW_ABSENT:
    return 0;
  }
  return 0;
}

int jitops__store_get(jitops__store *store, const uint8_t key[16], jitops__blob *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&store->lock);
  int found = get_main(store, key, out);
  if (!found && store->shipped.handle != NULL) {
    int rc;
    found = jitops__store_read_row(&store->shipped, key, out, &rc) == JITOPS__ROW_FOUND;
  }
  pthread_mutex_unlock(&store->lock);
  return found;
}
