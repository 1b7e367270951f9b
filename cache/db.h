/* The SQLite database behind the disk cache: opening it safely, its schema, and setting a
 * corrupt file aside. Shared by the runtime's tier (store.c) and administration (admin.c).
 *
 * Invariants:
 *   - The schema version lives in meta('schema_version'). A database with another version
 *     is dropped and rebuilt, never trusted.
 *   - Every kernels row's blob_hash is the XXH3-128 of its blob; a row that does not verify
 *     is deleted, never loaded.
 *   - Writers use BEGIN IMMEDIATE, so a transaction never fails midway on a lock upgrade,
 *     and a busy timeout, so lock waits stay inside SQLite. */
#ifndef JITOPS_CACHE_DB_H
#define JITOPS_CACHE_DB_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "jitops/jitops.h"

#define JITOPS__SCHEMA_VERSION 1

typedef enum jitops__db_mode {
  JITOPS__DB_READWRITE = 0,
  JITOPS__DB_READONLY = 1, /* reads, sharing the WAL with writers */
  JITOPS__DB_IMMUTABLE = 2 /* reads a file nobody writes (a shipped tier, a read-only dir) */
} jitops__db_mode;

typedef struct jitops__db {
  sqlite3 *handle;
  jitops__db_mode mode;
  ino_t inode; /* of the file when opened: tells whether someone already replaced it */
  int last_rc; /* the SQLite result behind the latest failure */
  char path[4096];
} jitops__db;

/* Opens `path`, sets WAL, the busy timeout and the schema (creating or rebuilding it when
 * writable; checking it otherwise). JITOPS_ERR_CACHE with the reason on failure; a corrupt
 * file is reported as such (see jitops__db_is_corruption). */
jitops_status jitops__db_open(const char *path, jitops__db_mode mode, jitops__db *out);
void jitops__db_close(jitops__db *db);

/* 1 for SQLITE_CORRUPT and SQLITE_NOTADB, the results that mean the file is damaged. */
int jitops__db_is_corruption(int rc);

/* Renames a damaged database to "<path>.corrupt-<time>-<pid>-<n>" and removes its -wal and
 * -shm, unless the file at `path` is no longer the one `db` opened (another process already
 * set it aside). Keeps the 2 newest set-aside copies and deletes older ones. Closes `db`. */
void jitops__db_set_aside(jitops__db *db);

/* Deletes all but the `keep` newest set-aside copies of `path`; returns how many went. */
int64_t jitops__db_prune_set_aside(const char *path, size_t keep);

/* BEGIN IMMEDIATE, retried while SQLite reports the database busy beyond the busy timeout,
 * up to about a minute in all. */
int jitops__db_begin_write(jitops__db *db);
int jitops__db_exec(jitops__db *db, const char *sql);

/* XXH3-128 of a blob, as stored in blob_hash. */
void jitops__blob_hash(const void *data, size_t size, uint8_t out[16]);

#endif
