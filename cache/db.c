#include "cache/db.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/damage.h"
#include "cache/schema.h"
#include "common/clock.h"
#include "common/error.h"

int jitops__db_prepare(sqlite3 *handle, const char *sql, sqlite3_stmt **stmt) {
  return sqlite3_prepare_v2(handle, sql, -1, stmt, NULL);
}

int jitops__db_exec(jitops__db *db, const char *sql) {
  return sqlite3_exec(db->handle, sql, NULL, NULL, NULL);
}

static int is_busy(int rc) {
  return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
}

/* SQLite calls this while a lock it needs is held by another connection; `count` is 0 at the
 * first call of each wait. It sleeps briefly (1, 2, then 4 ms: short, so that a waiter gets
 * in within the gaps another process leaves between its transactions) and gives up once the
 * wait has lasted the connection's bound. */
static int busy_wait(void *context, int count) {
  jitops__db *db = context;
  int64_t now = jitops__monotonic_ms();
  if (count == 0)
    db->busy_since_ms = now;
  if (now - db->busy_since_ms >= db->busy_ms)
    return 0;
  jitops__sleep_ms(count < 2 ? 1 << count : 4);
  return 1;
}

/* Runs `sql` until it is not busy or the connection's bound has passed. For the statements
 * SQLite answers SQLITE_BUSY without calling the busy handler (a switch to WAL that meets
 * another connection opening the same new file; a lock taken while WAL is recovered). */
static int exec_bounded(jitops__db *db, const char *sql) {
  int64_t start = jitops__monotonic_ms();
  int rc = jitops__db_exec(db, sql);
  while (is_busy(rc) && jitops__monotonic_ms() - start < db->busy_ms) {
    jitops__sleep_ms(2);
    rc = jitops__db_exec(db, sql);
  }
  return rc;
}

int jitops__db_begin_write(jitops__db *db) {
  return exec_bounded(db, "BEGIN IMMEDIATE");
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
  /* A reader opens the file read-write where it may, with every write refused (query_only):
   * a read-only connection can create the -wal and -shm files but never remove them, while
   * this one, the last to close, checkpoints and removes them as a writer would. */
  int writable = db->mode == JITOPS__DB_READWRITE || access(db->path, W_OK) == 0;
  flags |= writable ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY;
  int rc = sqlite3_open_v2(db->path, &db->handle, flags, NULL);
  if (rc == SQLITE_OK && db->mode == JITOPS__DB_READONLY)
    rc = jitops__db_exec(db, "PRAGMA query_only=1");
  return rc;
}

/* WAL is stored in the file, so only the first opener of a new database switches to it (a
 * moment of exclusive access); everyone after reads that it is set, and takes no lock. */
static int use_wal(jitops__db *db) {
  sqlite3_stmt *stmt = NULL;
  int wal = 0;
  if (jitops__db_prepare(db->handle, "PRAGMA journal_mode", &stmt) == SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW)
    wal = sqlite3_stricmp((const char *)sqlite3_column_text(stmt, 0), "wal") == 0;
  sqlite3_finalize(stmt);
  return wal ? SQLITE_OK : exec_bounded(db, "PRAGMA journal_mode=WAL");
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
  sqlite3_busy_handler(db->handle, busy_wait, db);
  JITOPS__TRY(check_header(db));
  if (db->mode != JITOPS__DB_READWRITE)
    return jitops__schema_check(db);
  int rc = use_wal(db);
  if (rc == SQLITE_OK)
    rc = jitops__db_exec(db, "PRAGMA synchronous=NORMAL");
  if (rc != SQLITE_OK)
    return jitops__db_fail(db, rc, "setting WAL mode");
  return jitops__schema_ensure(db);
}

jitops_status jitops__db_open(const char *path, jitops__db_mode mode, int busy_ms,
                              jitops__db *out) {
  memset(out, 0, sizeof *out);
  out->mode = mode;
  out->busy_ms = busy_ms;
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
  sqlite3_finalize(db->read_row);
  db->read_row = NULL;
  if (db->handle != NULL)
    sqlite3_close_v2(db->handle);
  db->handle = NULL;
}
