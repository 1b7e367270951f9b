#include "cache/db.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/damage.h"
#include "cache/schema.h"
#include "common/error.h"
#include "common/hash.h"

enum { BUSY_TIMEOUT_MS = 10000, BEGIN_ATTEMPTS = 6 };

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

jitops_status jitops__db_fail(jitops__db *db, int rc, const char *what) {
  db->last_rc = rc;
  db->damaged = db->damaged || jitops__db_rc_is_damage(rc);
  return jitops__fail(JITOPS_ERR_CACHE, "cache database %s: %s: %s", db->path, what,
                      failure_reason(db, rc));
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

static jitops_status check_header(jitops__db *db) {
  char reason[256];
  if (!jitops__db_header_is_damaged(db->handle, reason, sizeof reason))
    return JITOPS_SUCCESS;
  db->damaged = 1;
  db->last_rc = SQLITE_CORRUPT;
  return jitops__fail(JITOPS_ERR_CACHE, "cache database %s: %s", db->path, reason);
}

static jitops_status configure(jitops__db *db) {
  sqlite3_busy_timeout(db->handle, BUSY_TIMEOUT_MS);
  JITOPS__TRY(check_header(db));
  if (db->mode != JITOPS__DB_READWRITE)
    return jitops__schema_check(db);
  int rc = set_wal(db);
  if (rc == SQLITE_OK)
    rc = jitops__db_exec(db, "PRAGMA synchronous=NORMAL");
  if (rc != SQLITE_OK)
    return jitops__db_fail(db, rc, "setting WAL mode");
  return jitops__schema_ensure(db);
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
      rc == SQLITE_OK ? configure(out) : jitops__db_fail(out, rc, "opening the database");
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
