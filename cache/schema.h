/* The database's schema: creating it, rebuilding it, and recognizing one that is not ours.
 *
 * Invariants:
 *   - The schema version lives in meta('schema_version'). A database of another version (an
 *     older or newer libjitops) is dropped and rebuilt by a writer, never trusted.
 *   - A database is ours only when its objects (tables, columns, constraints, indexes) are
 *     exactly the ones schema_sql creates, compared as SQLite stores them. Our table names
 *     with another schema (another program's file) is damage: it is set aside, not used. */
#ifndef JITOPS_CACHE_SCHEMA_H
#define JITOPS_CACHE_SCHEMA_H

#include "cache/db.h"

/* Bump whenever the tables change or a stored value changes meaning: every database of
 * another version is rebuilt. 2: blob_hash covers the key, kind, target and lowered name
 * (cache/entry.h); claims record the holder's identity (cache/claims.c). 3: usage counts the
 * remote tier's hits, misses and errors. */
#define JITOPS__SCHEMA_VERSION 3

/* For a writable database: creates the schema in a new one, rebuilds one of another version,
 * and checks the rest. JITOPS_ERR_CACHE on failure, with db->damaged set for a foreign
 * schema. */
jitops_status jitops__schema_ensure(jitops__db *db);

/* For a database opened read-only: succeeds only on our current schema. JITOPS_ERR_NOT_FOUND
 * for an empty database or one of another version (nothing to read); JITOPS_ERR_CACHE
 * otherwise, with db->damaged set for a foreign schema. */
jitops_status jitops__schema_check(jitops__db *db);

#endif
