/* The SQLite database behind the disk cache: opening it safely and configuring it. Shared by
 * the runtime's tier (store.c) and administration (admin.c); its schema is in schema.h, and
 * damage and setting a damaged file aside in damage.h.
 *
 * Invariants:
 *   - A kernels row that does not verify (cache/entry.h) is deleted, never loaded.
 *   - Opening takes no write lock unless the file needs one (a new database to switch to
 *     WAL and give a schema, an old schema to rebuild): a busy writer elsewhere never delays
 *     an open of a database in use.
 *   - Writers use BEGIN IMMEDIATE, so a transaction never fails midway on a lock upgrade.
 *   - Every wait for another connection's lock ends after the connection's bound (busy_ms),
 *     with SQLITE_BUSY: a busy database makes a caller go on without it, never stall. */
#ifndef JITOPS_CACHE_DB_H
#define JITOPS_CACHE_DB_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "jitops/jitops.h"

typedef enum jitops__db_mode {
  JITOPS__DB_READWRITE = 0,
  JITOPS__DB_READONLY = 1, /* reads, sharing the WAL with writers; leaves no -wal or -shm */
  JITOPS__DB_IMMUTABLE = 2 /* reads a file nobody writes (a shipped tier, a read-only dir) */
} jitops__db_mode;

typedef struct jitops__db {
  sqlite3 *handle;
  jitops__db_mode mode;
  ino_t inode; /* of the file when opened: tells whether someone already replaced it */
  int last_rc; /* the SQLite result behind the latest failure */
  int damaged; /* the latest failure means the file is damaged (see damage.h) */
  int busy_ms; /* the longest wait for another connection's lock */
  /* The kernel-row SELECT (store_read.c), prepared at the first read and kept until close:
   * preparing it took a third of a warm lookup. Reset after every use, so it never holds a
   * read transaction open between lookups. */
  sqlite3_stmt *read_row;
  int64_t busy_since_ms;
  char path[4096];
} jitops__db;

/* Opens `path`, checks its header, sets WAL and the bound of lock waits (`busy_ms`), and
 * checks the schema (creating or rebuilding it when writable). JITOPS_ERR_CACHE with the
 * reason on failure (db->damaged set when the file is damaged); JITOPS_ERR_NOT_FOUND for an
 * empty file opened read-only. `out` must stay where it is while open (the busy handler
 * holds its address). */
jitops_status jitops__db_open(const char *path, jitops__db_mode mode, int busy_ms, jitops__db *out);
void jitops__db_close(jitops__db *db);

/* Describes the failure of the latest statement (`rc`) as JITOPS_ERR_CACHE, records rc, and
 * sets db->damaged when rc means damage. Call it before anything else runs on the
 * connection: a ROLLBACK would replace SQLite's message with "not an error". */
jitops_status jitops__db_fail(jitops__db *db, int rc, const char *what);

/* BEGIN IMMEDIATE, waiting at most the connection's bound for another's write lock. */
int jitops__db_begin_write(jitops__db *db);
int jitops__db_exec(jitops__db *db, const char *sql);
/* sqlite3_prepare_v2 of a whole NUL-terminated statement. */
int jitops__db_prepare(sqlite3 *handle, const char *sql, sqlite3_stmt **stmt);

#endif
