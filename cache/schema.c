#include "cache/schema.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"

static const char *const schema_sql =
    "CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS kernels("
    "  key BLOB PRIMARY KEY NOT NULL, op TEXT NOT NULL, name_expr TEXT NOT NULL,"
    "  lowered_name TEXT NOT NULL, target TEXT NOT NULL, nvrtc_version INTEGER NOT NULL,"
    "  options TEXT NOT NULL, kind INTEGER NOT NULL, blob BLOB NOT NULL,"
    "  blob_hash BLOB NOT NULL, size INTEGER NOT NULL, compile_ms REAL NOT NULL,"
    "  created INTEGER NOT NULL, last_used INTEGER NOT NULL, use_count INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS kernels_by_last_use ON kernels(last_used);"
    "CREATE TABLE IF NOT EXISTS claims(key BLOB PRIMARY KEY NOT NULL, pid INTEGER NOT NULL,"
    "  start_ticks INTEGER NOT NULL, boot_id TEXT NOT NULL, pid_namespace TEXT NOT NULL,"
    "  host TEXT NOT NULL, claimed_at INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS usage(op TEXT NOT NULL, target TEXT NOT NULL,"
    "  memory_hits INTEGER NOT NULL DEFAULT 0, disk_hits INTEGER NOT NULL DEFAULT 0,"
    "  misses INTEGER NOT NULL DEFAULT 0, compiles INTEGER NOT NULL DEFAULT 0,"
    "  remote_hits INTEGER NOT NULL DEFAULT 0, remote_misses INTEGER NOT NULL DEFAULT 0,"
    "  remote_errors INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(op, target));";

static const char *const drop_sql = "DROP TABLE IF EXISTS kernels; DROP TABLE IF EXISTS claims;"
                                    "DROP TABLE IF EXISTS usage; DROP TABLE IF EXISTS meta;";

/* ---- what a database holds ------------------------------------------------------------- */

/* The database's objects as SQLite stores them, one "type name table sql" line each, by
 * name, SQLite's own (sqlite_*) left out, in *out (sqlite3_free it; NULL when there are
 * none). Returns SQLite's result. */
static int schema_dump(sqlite3 *handle, char **out) {
  sqlite3_stmt *stmt = NULL;
  *out = NULL;
  int rc = jitops__db_prepare(handle,
                              "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master"
                              " WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
                              &stmt);
  if (rc != SQLITE_OK)
    return rc;
  sqlite3_str *dump = sqlite3_str_new(handle);
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
    sqlite3_str_appendf(dump, "%s %s %s %s\n", sqlite3_column_text(stmt, 0),
                        sqlite3_column_text(stmt, 1), sqlite3_column_text(stmt, 2),
                        sqlite3_column_text(stmt, 3));
  sqlite3_finalize(stmt);
  if (rc == SQLITE_DONE)
    rc = sqlite3_str_errcode(dump);
  *out = sqlite3_str_finish(dump); /* NULL for an empty dump */
  if (rc != SQLITE_OK) {
    sqlite3_free(*out);
    *out = NULL;
  }
  return rc;
}

/* The dump of a database that holds exactly our schema, made once from an in-memory one, so
 * that the comparison needs no second copy of the schema kept in step by hand. NULL when it
 * could not be made (no memory): then no database is called foreign. */
static char *expected_dump;

static void make_expected_dump(void) {
  sqlite3 *handle = NULL;
  if (sqlite3_open_v2(":memory:", &handle, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
      sqlite3_exec(handle, schema_sql, NULL, NULL, NULL) == SQLITE_OK)
    schema_dump(handle, &expected_dump);
  sqlite3_close(handle);
}

static const char *expected(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, make_expected_dump);
  return expected_dump;
}

/* ---- classifying ----------------------------------------------------------------------- */

typedef enum schema_kind {
  SCHEMA_OURS,          /* our current schema */
  SCHEMA_EMPTY,         /* no objects: a new database */
  SCHEMA_OTHER_VERSION, /* ours, from another libjitops: rebuild it */
  SCHEMA_FOREIGN,       /* our table names, or other objects, not ours: damage */
  SCHEMA_UNREADABLE     /* a read failed: rc says why */
} schema_kind;

/* meta's schema_version, or 0 when there is none or it cannot be read. */
static int stored_version(sqlite3 *handle) {
  sqlite3_stmt *stmt = NULL;
  int version = 0;
  if (jitops__db_prepare(handle, "SELECT value FROM meta WHERE name = 'schema_version'", &stmt) ==
          SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW)
    version = sqlite3_column_int(stmt, 0);
  sqlite3_finalize(stmt);
  return version;
}

static schema_kind classify(jitops__db *db, int *version, int *rc) {
  char *dump = NULL;
  *version = 0;
  if ((*rc = schema_dump(db->handle, &dump)) != SQLITE_OK)
    return SCHEMA_UNREADABLE;
  if (dump == NULL)
    return SCHEMA_EMPTY;
  const char *ours = expected();
  int same = ours == NULL || strcmp(dump, ours) == 0;
  sqlite3_free(dump);
  *version = stored_version(db->handle);
  if (*version == JITOPS__SCHEMA_VERSION)
    return same ? SCHEMA_OURS : SCHEMA_FOREIGN;
  return *version > 0 ? SCHEMA_OTHER_VERSION : SCHEMA_FOREIGN;
}

static jitops_status foreign(jitops__db *db) {
  db->damaged = 1;
  return jitops__fail(JITOPS_ERR_CACHE,
                      "cache database %s holds a schema that is not libjitops's (another "
                      "program's tables under our names)",
                      db->path);
}

/* ---- writing --------------------------------------------------------------------------- */

/* Creates the schema (after dropping our tables when `rebuild`). Inside the caller's write
 * transaction. */
static int create_schema(jitops__db *db, int rebuild) {
  int rc = rebuild ? jitops__db_exec(db, drop_sql) : SQLITE_OK;
  if (rc == SQLITE_OK)
    rc = jitops__db_exec(db, schema_sql);
  char sql[128];
  snprintf(sql, sizeof sql,
           "INSERT OR REPLACE INTO meta(name, value) VALUES('schema_version', '%d')",
           JITOPS__SCHEMA_VERSION);
  return rc == SQLITE_OK ? jitops__db_exec(db, sql) : rc;
}

/* Rolls back after a failure was described (the rollback replaces SQLite's message). */
static jitops_status rollback_after(jitops__db *db, jitops_status status) {
  jitops__db_exec(db, "ROLLBACK");
  return status;
}

jitops_status jitops__schema_ensure(jitops__db *db) {
  /* The usual case, a database in use, is settled by reading: no write lock. */
  int version = 0, rc = SQLITE_OK;
  schema_kind kind = classify(db, &version, &rc);
  if (kind == SCHEMA_OURS)
    return JITOPS_SUCCESS;
  if (kind == SCHEMA_FOREIGN)
    return foreign(db);
  if ((rc = jitops__db_begin_write(db)) != SQLITE_OK)
    return jitops__db_fail(db, rc, "starting the schema transaction");
  kind = classify(db, &version, &rc); /* again: another process may have just written it */
  if (kind == SCHEMA_UNREADABLE)
    return rollback_after(db, jitops__db_fail(db, rc, "reading the schema"));
  if (kind == SCHEMA_FOREIGN)
    return rollback_after(db, foreign(db));
  if (kind == SCHEMA_OTHER_VERSION)
    jitops__log(JITOPS__LOG_WARN, "cache %s has schema %d, not %d: rebuilding it", db->path,
                version, JITOPS__SCHEMA_VERSION);
  if (kind != SCHEMA_OURS && (rc = create_schema(db, kind == SCHEMA_OTHER_VERSION)) != SQLITE_OK)
    return rollback_after(db, jitops__db_fail(db, rc, "creating the schema"));
  if (kind == SCHEMA_OTHER_VERSION && classify(db, &version, &rc) != SCHEMA_OURS)
    return rollback_after(db, foreign(db)); /* other objects were left beside ours */
  rc = jitops__db_exec(db, "COMMIT");
  return rc == SQLITE_OK ? JITOPS_SUCCESS : jitops__db_fail(db, rc, "committing the schema");
}

jitops_status jitops__schema_check(jitops__db *db) {
  int version = 0, rc = SQLITE_OK;
  switch (classify(db, &version, &rc)) {
  case SCHEMA_OURS:
    return JITOPS_SUCCESS;
  case SCHEMA_EMPTY:
    return jitops__fail(JITOPS_ERR_NOT_FOUND, "cache database %s is empty", db->path);
  case SCHEMA_OTHER_VERSION:
    /* Another libjitops's: nothing here can be read, and the next writer rebuilds it. */
    return jitops__fail(JITOPS_ERR_NOT_FOUND,
                        "cache database %s has schema %d, not %d: it holds nothing this "
                        "libjitops can use until a writer rebuilds it",
                        db->path, version, JITOPS__SCHEMA_VERSION);
  case SCHEMA_FOREIGN:
    return foreign(db);
  case SCHEMA_UNREADABLE:
    break;
  }
  return jitops__db_fail(db, rc, "reading the schema");
}
