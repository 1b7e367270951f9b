/* Damaged databases: recognizing one, and setting it aside so that a new one can take its
 * place. A database is damaged when SQLite says so (CORRUPT, NOTADB, FORMAT), when its header
 * holds values SQLite refuses or that make it read-only (an unsupported schema format, a
 * write or read version it does not know), or when it holds our table names with a schema
 * that is not ours (cache/schema.h). Damage is never repaired in place: the file is renamed
 * for a post-mortem and the cache starts afresh, since a cache is only ever a speed-up. */
#ifndef JITOPS_CACHE_DAMAGE_H
#define JITOPS_CACHE_DAMAGE_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/db.h"

/* 1 for the SQLite results that mean the file is damaged. */
int jitops__db_rc_is_damage(int rc);

/* Checks the database file's header through SQLite's own file handle (another descriptor on
 * the file, once closed, would drop the locks SQLite holds on it). 1 and the reason in
 * `reason` when the header is damaged; 0 when it is sound or the file is empty (new). */
int jitops__db_header_is_damaged(sqlite3 *handle, char *reason, size_t size);

/* Closes `db` and renames its file to "<path>.corrupt-<time>-<pid>-<n>" (written to `aside`,
 * "" when nothing was moved), removing its -wal and -shm, unless the file at the path is no
 * longer the one `db` opened (another process set it aside first). Keeps the 2 newest
 * set-aside copies and deletes older ones. Warns, with `reason`. */
void jitops__db_set_aside(jitops__db *db, const char *reason, char *aside, size_t size);

/* Deletes all but the `keep` newest set-aside copies of `path`; returns how many went. */
int64_t jitops__db_prune_set_aside(const char *path, size_t keep);

#endif
