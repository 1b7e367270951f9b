#include "cache/db.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "common/hash.h"
#include "common/log.h"

enum { BUSY_TIMEOUT_MS = 10000, BEGIN_ATTEMPTS = 6 };

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
    "  host TEXT NOT NULL, claimed_at INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS usage(op TEXT NOT NULL, target TEXT NOT NULL,"
    "  memory_hits INTEGER NOT NULL DEFAULT 0, disk_hits INTEGER NOT NULL DEFAULT 0,"
    "  misses INTEGER NOT NULL DEFAULT 0, compiles INTEGER NOT NULL DEFAULT 0,"
    "  PRIMARY KEY(op, target));";

static const char *const drop_sql = "DROP TABLE IF EXISTS kernels; DROP TABLE IF EXISTS claims;"
                                    "DROP TABLE IF EXISTS usage; DROP TABLE IF EXISTS meta;";

int jitops__db_is_corruption(int rc) {
  int primary = rc & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

void jitops__blob_hash(const void *data, size_t size, uint8_t out[16]) {
  jitops__key_to_bytes(jitops__content_hash(data, size), out);
}

int jitops__db_exec(jitops__db *db, const char *sql) {
  return sqlite3_exec(db->handle, sql, NULL, NULL, NULL);
}

static int is_busy(int rc) {
  return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
}

int jitops__db_begin_write(jitops__db *db) {
  int rc = SQLITE_BUSY;
  for (int attempt = 0; attempt < BEGIN_ATTEMPTS; ++attempt) {
    rc = jitops__db_exec(db, "BEGIN IMMEDIATE");
    if (!is_busy(rc))
      return rc;
  }
  return rc;
}

/* SQLite's message for the latest failure, made specific where SQLite's is not. */
static const char *failure_reason(const jitops__db *db, int rc) {
  int extended = db->handle ? sqlite3_extended_errcode(db->handle) : rc;
  if (extended == SQLITE_CANTOPEN_SYMLINK)
    return "the database is a symbolic link (refused: the cache holds code that will run)";
  return db->handle ? sqlite3_errmsg(db->handle) : sqlite3_errstr(rc);
}

static jitops_status db_fail(jitops__db *db, int rc, const char *what) {
  db->last_rc = rc;
  return jitops__fail(JITOPS_ERR_CACHE, "cache database %s: %s: %s", db->path, what,
                      failure_reason(db, rc));
}

/* Rolls back after a failure was described (the rollback replaces SQLite's message). */
static jitops_status rollback_after(jitops__db *db, jitops_status status) {
  jitops__db_exec(db, "ROLLBACK");
  return status;
}

/* The stored schema version, 0 when there is no meta table yet, -1 on a read error. */
static int stored_schema_version(jitops__db *db, int *rc_out) {
  sqlite3_stmt *stmt = NULL;
  int rc = sqlite3_prepare_v2(db->handle, "SELECT value FROM meta WHERE name = 'schema_version'",
                              -1, &stmt, NULL);
  if (rc != SQLITE_OK) {
    /* "no such table" is a fresh database; anything else is an error. */
    int fresh = strstr(sqlite3_errmsg(db->handle), "no such table") != NULL;
    *rc_out = fresh ? SQLITE_OK : rc;
    return fresh ? 0 : -1;
  }
  int version = 0;
  rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW)
    version = sqlite3_column_int(stmt, 0);
  else if (rc != SQLITE_DONE)
    version = -1;
  sqlite3_finalize(stmt);
  *rc_out = rc == SQLITE_ROW ? SQLITE_OK : rc;
  return version;
}

static jitops_status ensure_schema(jitops__db *db) {
  int rc = jitops__db_begin_write(db);
  if (rc != SQLITE_OK)
    return db_fail(db, rc, "starting the schema transaction");
  int version = stored_schema_version(db, &rc);
  if (version < 0)
    return rollback_after(db, db_fail(db, rc, "reading the schema version"));
  if (version != 0 && version != JITOPS__SCHEMA_VERSION) {
    jitops__log(JITOPS__LOG_WARN, "cache %s has schema %d, not %d: rebuilding it", db->path,
                version, JITOPS__SCHEMA_VERSION);
    rc = jitops__db_exec(db, drop_sql);
  }
  char sql[128];
  snprintf(sql, sizeof sql,
           "INSERT OR REPLACE INTO meta(name, value) VALUES('schema_version', '%d')",
           JITOPS__SCHEMA_VERSION);
  if (rc == SQLITE_OK && version != JITOPS__SCHEMA_VERSION)
    rc = jitops__db_exec(db, schema_sql);
  if (rc == SQLITE_OK && version != JITOPS__SCHEMA_VERSION)
    rc = jitops__db_exec(db, sql);
  if (rc != SQLITE_OK)
    return rollback_after(db, db_fail(db, rc, "creating the schema"));
  rc = jitops__db_exec(db, "COMMIT");
  return rc == SQLITE_OK ? JITOPS_SUCCESS : db_fail(db, rc, "committing the schema");
}

static jitops_status check_schema(jitops__db *db) {
  int rc;
  int version = stored_schema_version(db, &rc);
  if (version == JITOPS__SCHEMA_VERSION)
    return JITOPS_SUCCESS;
  if (version < 0)
    return db_fail(db, rc, "reading the schema version");
  return jitops__fail(JITOPS_ERR_CACHE, "cache database %s has schema %d, not %d", db->path,
                      version, JITOPS__SCHEMA_VERSION);
}

/* A file: URI for the immutable mode, with the path percent-escaped. */
static void immutable_uri(const char *path, char *out, size_t size) {
  size_t n = (size_t)snprintf(out, size, "file:");
  for (const char *p = path; *p && n + 4 < size; ++p) {
    unsigned char c = (unsigned char)*p;
    if (c == '?' || c == '#' || c == '%' || c < 0x21 || c >= 0x7f)
      n += (size_t)snprintf(out + n, size - n, "%%%02X", c);
    else
      out[n++] = (char)c;
  }
  snprintf(out + n, size - n, "?immutable=1");
}

static int open_handle(jitops__db *db) {
  int flags = SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX;
  if (db->mode == JITOPS__DB_IMMUTABLE) {
    char uri[8192 + 32];
    immutable_uri(db->path, uri, sizeof uri);
    return sqlite3_open_v2(uri, &db->handle, flags | SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
  }
  flags |= db->mode == JITOPS__DB_READONLY ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
  return sqlite3_open_v2(db->path, &db->handle, flags, NULL);
}

/* Switching to WAL needs a moment of exclusive access, and SQLite reports a conflict with
 * another connection that is opening the same new file at once as SQLITE_BUSY without
 * calling the busy handler. The mode is stored in the file, so only the first opener of a
 * new database switches it; the others retry here until they see it. */
static int set_wal(jitops__db *db) {
  int rc = SQLITE_BUSY;
  for (int attempt = 0; attempt < 2000 && is_busy(rc); ++attempt) {
    rc = jitops__db_exec(db, "PRAGMA journal_mode=WAL");
    if (is_busy(rc)) {
      struct timespec pause = {0, 5 * 1000 * 1000};
      nanosleep(&pause, NULL);
    }
  }
  return rc;
}

static jitops_status configure(jitops__db *db) {
  sqlite3_busy_timeout(db->handle, BUSY_TIMEOUT_MS);
  if (db->mode != JITOPS__DB_READWRITE)
    return check_schema(db);
  int rc = set_wal(db);
  if (rc == SQLITE_OK)
    rc = jitops__db_exec(db, "PRAGMA synchronous=NORMAL");
  if (rc != SQLITE_OK)
    return db_fail(db, rc, "setting WAL mode");
  return ensure_schema(db);
}

jitops_status jitops__db_open(const char *path, jitops__db_mode mode, jitops__db *out) {
  memset(out, 0, sizeof *out);
  out->mode = mode;
  if (snprintf(out->path, sizeof out->path, "%s", path) >= (int)sizeof out->path)
    return jitops__fail(JITOPS_ERR_CACHE, "cache database path is too long");
  struct stat st;
  if (stat(path, &st) == 0)
    out->inode = st.st_ino;
  int rc = open_handle(out);
  jitops_status status =
      rc == SQLITE_OK ? configure(out) : db_fail(out, rc, "opening the database");
  if (status != JITOPS_SUCCESS) {
    sqlite3_close_v2(out->handle);
    out->handle = NULL;
  }
  return status;
}

void jitops__db_close(jitops__db *db) {
  if (db->handle != NULL)
    sqlite3_close_v2(db->handle);
  db->handle = NULL;
}

/* Set-aside copies are kept for a post-mortem, but a cache that keeps getting damaged (a
 * failing disk, a process writing over it) must not fill the disk with them. */
enum { SET_ASIDE_KEPT = 2 };

typedef struct aside_file {
  char name[256];
  time_t mtime;
} aside_file;

static int newest_first(const void *a, const void *b) {
  const aside_file *x = a, *y = b;
  if (x->mtime != y->mtime)
    return x->mtime < y->mtime ? 1 : -1;
  return -strcmp(x->name, y->name);
}

/* The directory part and the file name of `path`. */
static void split_path(const char *path, char *dir, size_t dir_size, const char **base) {
  const char *slash = strrchr(path, '/');
  if (slash == NULL) {
    snprintf(dir, dir_size, ".");
    *base = path;
  } else if (slash == path) {
    snprintf(dir, dir_size, "/");
    *base = path + 1;
  } else {
    snprintf(dir, dir_size, "%.*s", (int)(slash - path), path);
    *base = slash + 1;
  }
}

/* The set-aside copies of <dir>/<base>, newest first, in a malloc'ed array (NULL if none). */
static aside_file *list_set_aside(const char *dir, const char *base, size_t *count) {
  char prefix[300], full[4400];
  snprintf(prefix, sizeof prefix, "%s.corrupt-", base);
  *count = 0;
  DIR *d = opendir(dir);
  if (d == NULL)
    return NULL;
  aside_file *files = NULL;
  size_t capacity = 0;
  struct dirent *e;
  struct stat st;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 || strlen(e->d_name) >= 256)
      continue;
    snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
    if (lstat(full, &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    if (*count == capacity) {
      capacity = capacity ? capacity * 2 : 8;
      aside_file *grown = realloc(files, capacity * sizeof *files);
      if (grown == NULL)
        break;
      files = grown;
    }
    snprintf(files[*count].name, sizeof files[*count].name, "%s", e->d_name);
    files[(*count)++].mtime = st.st_mtime;
  }
  closedir(d);
  if (*count > 1)
    qsort(files, *count, sizeof *files, newest_first);
  return files;
}

int64_t jitops__db_prune_set_aside(const char *path, size_t keep) {
  char dir[4096], full[4400];
  const char *base;
  split_path(path, dir, sizeof dir, &base);
  size_t count = 0;
  aside_file *files = list_set_aside(dir, base, &count);
  int64_t removed = 0;
  for (size_t i = keep; i < count; ++i) {
    snprintf(full, sizeof full, "%s/%s", dir, files[i].name);
    removed += unlink(full) == 0;
  }
  free(files);
  return removed;
}

void jitops__db_set_aside(jitops__db *db) {
  static unsigned sequence; /* tells apart copies set aside by one process within a second */
  jitops__db_close(db);
  struct stat st;
  if (stat(db->path, &st) != 0 || (db->inode != 0 && st.st_ino != db->inode))
    return;
  char aside[4200], companion[4200];
  snprintf(aside, sizeof aside, "%s.corrupt-%ld-%d-%u", db->path, (long)time(NULL), (int)getpid(),
           __atomic_fetch_add(&sequence, 1, __ATOMIC_RELAXED));
  if (rename(db->path, aside) != 0)
    unlink(db->path);
  snprintf(companion, sizeof companion, "%s-wal", db->path);
  unlink(companion);
  snprintf(companion, sizeof companion, "%s-shm", db->path);
  unlink(companion);
  jitops__db_prune_set_aside(db->path, SET_ASIDE_KEPT);
  jitops__log(JITOPS__LOG_WARN, "cache %s was damaged: set aside as %s and rebuilt", db->path,
              aside);
}
