/* Moving kernels between a cache and the remote tier: what `jitops-cache push` and `pull` do.
 * Unlike the runtime's tier, these report the server's problems, since moving kernels is
 * their whole purpose, and wait longer for it (ADMIN_TIMEOUT_MS a request).
 *
 * Invariants:
 *   - push sends only rows that pass jitops_cache_verify's checks, and no timed choices (they
 *     belong to one GPU's measurements, and runtimes never ask the server for them).
 *   - pull trusts nothing on the server: each record is decoded and checked as a runtime
 *     checks a remote hit (cache/remote_record.h), filed under its own key, and inserted only
 *     where the cache has no row of that key. One write transaction per page of SCAN. */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/admin_internal.h"
#include "cache/entry.h"
#include "cache/redis_connection.h"
#include "cache/remote.h"
#include "cache/remote_record.h"
#include "cache/settings.h"
#include "common/error.h"

enum { ADMIN_TIMEOUT_MS = 2000, SCAN_PAGE = 256 };

typedef struct session {
  const char *fn;
  jitops__remote_plan plan;
  jitops__signing_key key;
  jitops__redis *connection;
} session;

static jitops_status session_open(const char *fn, const char *url, const char *key, session *s) {
  memset(s, 0, sizeof *s);
  s->fn = fn;
  jitops__remote_plan_make(url, key, &s->plan);
  if (s->plan.state == JITOPS_REMOTE_STATE_OFF)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: no remote tier: set JITOPS_CACHE_REMOTE or pass its address", fn);
  if (s->plan.state == JITOPS_REMOTE_STATE_UNAVAILABLE)
    return jitops__fail(jitops__redis_available() ? JITOPS_ERR_INVALID_ARGUMENT
                                                  : JITOPS_ERR_UNSUPPORTED,
                        "%s: %s", fn, s->plan.reason);
  const char *signing = jitops__remote_key_setting(key);
  s->key = (jitops__signing_key){signing, signing ? strlen(signing) : 0};
  jitops__redis_limits limits = {ADMIN_TIMEOUT_MS, ADMIN_TIMEOUT_MS,
                                 JITOPS__REMOTE_MAX_RECORD_BYTES + (1 << 20)};
  char numeric[NI_MAXHOST], why[256];
  if (!jitops__redis_resolve(s->plan.address.host, numeric, sizeof numeric, why, sizeof why) ||
      (s->connection =
           jitops__redis_connect(&s->plan.address, numeric, &limits, why, sizeof why)) == NULL)
    return jitops__fail(JITOPS_ERR_IO, "%s: %s: %s", fn, s->plan.shown, why);
  return JITOPS_SUCCESS;
}

/* One command. JITOPS_ERR_IO for a failed request or an error reply. */
static jitops_status command(session *s, int argc, const char *const *argv, const size_t *lengths,
                             jitops__redis_reply *reply) {
  char why[256];
  if (!jitops__redis_command(s->connection, argc, argv, lengths, reply, why, sizeof why))
    return jitops__fail(JITOPS_ERR_IO, "%s: %s: %s: %s", s->fn, s->plan.shown, argv[0], why);
  if (reply->type != JITOPS__REDIS_ERROR)
    return JITOPS_SUCCESS;
  jitops_status status = jitops__fail(JITOPS_ERR_IO, "%s: %s: %s refused: %.300s", s->fn,
                                      s->plan.shown, argv[0], reply->text);
  jitops__redis_reply_free(reply);
  return status;
}

/* ---- push ------------------------------------------------------------------------------ */

static jitops_status push_row(session *s, const jitops__store_row *row) {
  char *record = NULL, name[JITOPS__REMOTE_KEY_BYTES];
  size_t size = 0;
  if (!jitops__remote_record_encode(row, &s->key, &record, &size))
    return jitops__fail(JITOPS_ERR_OUT_OF_MEMORY, "%s: out of host memory", s->fn);
  jitops__remote_record_name(row->key, name);
  const char *argv[] = {"SET", name, record};
  const size_t lengths[] = {3, strlen(name), size};
  jitops__redis_reply reply;
  jitops_status status = command(s, 3, argv, lengths, &reply);
  if (status == JITOPS_SUCCESS)
    jitops__redis_reply_free(&reply);
  free(record);
  return status;
}

static jitops_status push_rows(jitops_cache_t *cache, session *s, int64_t counts[2]) {
  sqlite3_stmt *stmt = NULL;
  if (jitops__db_prepare(cache->db.handle,
                         "SELECT " JITOPS__ENTRY_COLUMNS " FROM kernels WHERE kind != ?",
                         &stmt) != SQLITE_OK)
    return jitops__admin_sql_fail(cache->db.handle, s->fn, "reading the kernels");
  sqlite3_bind_int(stmt, 1, JITOPS__BLOB_TUNED);
  jitops_status status = JITOPS_SUCCESS;
  const char *fault;
  int rc;
  while (status == JITOPS_SUCCESS && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    if (!jitops__entry_is_sound(stmt, &fault))
      continue;
    jitops__store_row row;
    jitops__entry_row_read(stmt, &row);
    if (row.size <= JITOPS__REMOTE_MAX_RECORD_BYTES &&
        (status = push_row(s, &row)) == JITOPS_SUCCESS)
      ++counts[0];
  }
  if (status == JITOPS_SUCCESS && rc != SQLITE_DONE)
    status = jitops__admin_sql_fail(cache->db.handle, s->fn, "reading the kernels");
  sqlite3_finalize(stmt);
  return status;
}

/* counts[0]: what was moved; counts[1]: what was rejected. */
typedef jitops_status (*session_work)(jitops_cache_t *cache, session *s, int64_t counts[2]);

/* Opens a session, runs `work` in it, closes it. */
static jitops_status in_session(const char *fn, jitops_cache_t *cache, const char *remote,
                                const char *key, session_work work, int64_t counts[2]) {
  session s;
  jitops_status status = session_open(fn, remote, key, &s);
  if (status == JITOPS_SUCCESS)
    status = work(cache, &s, counts);
  jitops__redis_close(s.connection);
  return status;
}

jitops_status jitops_cache_push(jitops_cache_t *cache, const char *remote, const char *key,
                                int64_t *pushed) {
  static const char *const fn = "jitops_cache_push";
  JITOPS__REQUIRE_NONNULL(fn, cache);
  int64_t counts[2] = {0, 0};
  jitops_status status = in_session(fn, cache, remote, key, push_rows, counts);
  if (pushed != NULL)
    *pushed = counts[0];
  return status;
}

/* ---- pull ------------------------------------------------------------------------------ */

/* Whether `reply` is SCAN's [cursor, [names...]]. */
static int is_scan_page(const jitops__redis_reply *reply) {
  if (reply->type != JITOPS__REDIS_ARRAY || reply->count != 2 ||
      reply->elements[0].type != JITOPS__REDIS_STRING ||
      reply->elements[1].type != JITOPS__REDIS_ARRAY)
    return 0;
  for (size_t i = 0; i < reply->elements[1].count; ++i)
    if (reply->elements[1].elements[i].type != JITOPS__REDIS_STRING)
      return 0;
  return 1;
}

/* GETs the record `name` and inserts it when it verifies and is filed under its own key. */
static jitops_status pull_one(jitops_cache_t *cache, session *s, const char *name,
                              int64_t counts[2]) {
  const char *argv[] = {"GET", name};
  const size_t lengths[] = {3, strlen(name)};
  jitops__redis_reply reply;
  JITOPS__TRY(command(s, 2, argv, lengths, &reply));
  jitops__store_row row;
  char own_name[JITOPS__REMOTE_KEY_BYTES];
  const char *fault = reply.type != JITOPS__REDIS_STRING
                          ? "not a record"
                          : jitops__remote_record_decode(reply.text, reply.size, &s->key, &row);
  if (fault == NULL)
    jitops__remote_record_name(row.key, own_name);
  jitops_status status = JITOPS_SUCCESS;
  if (reply.type == JITOPS__REDIS_NIL) {
    /* gone since SCAN listed it */
  } else if (fault != NULL || strcmp(own_name, name) != 0) {
    ++counts[1];
  } else if (jitops__entry_insert(cache->db.handle, &row, 0) != SQLITE_OK) {
    status = jitops__admin_sql_fail(cache->db.handle, s->fn, "storing a kernel");
  } else {
    counts[0] += sqlite3_changes(cache->db.handle);
  }
  jitops__redis_reply_free(&reply);
  return status;
}

static jitops_status pull_page(jitops_cache_t *cache, session *s, const jitops__redis_reply *names,
                               int64_t counts[2]) {
  if (jitops__db_begin_write(&cache->db) != SQLITE_OK)
    return jitops__admin_sql_fail(cache->db.handle, s->fn, "starting a transaction");
  jitops_status status = JITOPS_SUCCESS;
  for (size_t i = 0; i < names->count && status == JITOPS_SUCCESS; ++i)
    status = pull_one(cache, s, names->elements[i].text, counts);
  if (status == JITOPS_SUCCESS && jitops__db_exec(&cache->db, "COMMIT") != SQLITE_OK)
    status = jitops__admin_sql_fail(cache->db.handle, s->fn, "committing");
  if (status != JITOPS_SUCCESS)
    jitops__db_exec(&cache->db, "ROLLBACK");
  return status;
}

static jitops_status pull_all(jitops_cache_t *cache, session *s, int64_t counts[2]) {
  char cursor[32] = "0", page[16];
  snprintf(page, sizeof page, "%d", SCAN_PAGE);
  const char *pattern = JITOPS__REMOTE_NAMESPACE "kernel:*";
  do {
    const char *argv[] = {"SCAN", cursor, "MATCH", pattern, "COUNT", page};
    const size_t lengths[] = {4, strlen(cursor), 5, strlen(pattern), 5, strlen(page)};
    jitops__redis_reply reply;
    JITOPS__TRY(command(s, 6, argv, lengths, &reply));
    jitops_status status =
        is_scan_page(&reply) && reply.elements[0].size < sizeof cursor
            ? pull_page(cache, s, &reply.elements[1], counts)
            : jitops__fail(JITOPS_ERR_IO, "%s: %s: an answer to SCAN that Redis never gives", s->fn,
                           s->plan.shown);
    if (status == JITOPS_SUCCESS)
      snprintf(cursor, sizeof cursor, "%s", reply.elements[0].text);
    jitops__redis_reply_free(&reply);
    JITOPS__TRY(status);
  } while (strcmp(cursor, "0") != 0);
  return JITOPS_SUCCESS;
}

jitops_status jitops_cache_pull(jitops_cache_t *cache, const char *remote, const char *key,
                                int64_t *pulled, int64_t *rejected) {
  static const char *const fn = "jitops_cache_pull";
  JITOPS__REQUIRE_NONNULL(fn, cache);
  JITOPS__TRY(jitops__admin_require_writable(cache, fn));
  int64_t counts[2] = {0, 0};
  jitops_status status = in_session(fn, cache, remote, key, pull_all, counts);
  if (pulled != NULL)
    *pulled = counts[0];
  if (rejected != NULL)
    *rejected = counts[1];
  return status;
}
