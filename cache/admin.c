/* Cache administration: what `jitops-cache` does (export and import are in transfer.c).
 * Unlike the runtime's tier, these calls report cache problems, since inspecting the cache is
 * their whole purpose. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/admin_internal.h"
#include "cache/damage.h"
#include "cache/entry.h"
#include "cache/location.h"
#include "cache/remote.h"
#include "cache/settings.h"
#include "common/error.h"

jitops_status jitops__admin_sql_fail(sqlite3 *handle, const char *fn, const char *what) {
  return jitops__fail(JITOPS_ERR_CACHE, "%s: %s: %s", fn, what, sqlite3_errmsg(handle));
}

static jitops_status sql_fail(jitops_cache_t *cache, const char *fn, const char *what) {
  return jitops__admin_sql_fail(cache->db.handle, fn, what);
}

/* Opens the database. A damaged one is set aside when the directory allows it: a writable
 * open then starts a new database, and a read-only one finds no cache. */
static jitops_status open_database(jitops_cache_t *cache, const char *path, int writable,
                                   int dir_writable) {
  jitops__db_mode mode = writable       ? JITOPS__DB_READWRITE
                         : dir_writable ? JITOPS__DB_READONLY
                                        : JITOPS__DB_IMMUTABLE;
  jitops_status status = jitops__db_open(path, mode, JITOPS__ADMIN_BUSY_MS, &cache->db);
  if (status == JITOPS_SUCCESS || !cache->db.damaged || !dir_writable)
    return status;
  jitops__db_set_aside(&cache->db, jitops_last_error(), cache->recovered_from,
                       sizeof cache->recovered_from);
  if (!writable)
    return jitops__fail(JITOPS_ERR_NOT_FOUND,
                        "jitops_cache_open: %s; it was set aside as %s, and there is no cache "
                        "there now",
                        jitops_last_error(), cache->recovered_from);
  JITOPS__TRY(jitops__cache_file_check(path, 1));
  return jitops__db_open(path, mode, JITOPS__ADMIN_BUSY_MS, &cache->db);
}

jitops_status jitops_cache_open(const char *dir, int mode, jitops_cache_t **out) {
  static const char *const fn = "jitops_cache_open";
  JITOPS__REQUIRE_NONNULL(fn, out);
  *out = NULL;
  if (mode < JITOPS_CACHE_OPEN_READONLY || mode > JITOPS_CACHE_OPEN_EXISTING)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: mode %d is not a jitops_cache_open_mode",
                        fn, mode);
  int writable = mode != JITOPS_CACHE_OPEN_READONLY, create = mode == JITOPS_CACHE_OPEN_CREATE;
  char configured[4096], resolved[4096], path[4200];
  int dir_writable = 0;
  JITOPS__TRY(jitops__cache_dir_resolve(dir, configured, sizeof configured));
  if (!create && access(configured, F_OK) != 0)
    return jitops__fail(JITOPS_ERR_NOT_FOUND, "%s: there is no cache directory at %s", fn,
                        configured);
  JITOPS__TRY(
      jitops__cache_dir_check(configured, create, resolved, sizeof resolved, &dir_writable));
  if (writable && !dir_writable)
    return jitops__fail(JITOPS_ERR_CACHE, "%s: cache directory %s is read-only", fn, resolved);
  snprintf(path, sizeof path, "%s/%s", resolved, JITOPS__CACHE_DB_NAME);
  JITOPS__TRY(jitops__cache_file_check(path, create));
  if (!create && access(path, F_OK) != 0)
    return jitops__fail(JITOPS_ERR_NOT_FOUND, "%s: there is no cache database at %s", fn, path);
  jitops_cache_t *cache = calloc(1, sizeof *cache);
  if (cache == NULL)
    return jitops__fail(JITOPS_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  jitops_status status = open_database(cache, path, writable, dir_writable);
  if (status != JITOPS_SUCCESS) {
    free(cache);
    return status;
  }
  *out = cache;
  return JITOPS_SUCCESS;
}

void jitops_cache_close(jitops_cache_t *cache) {
  if (cache == NULL)
    return;
  jitops__db_close(&cache->db);
  free(cache);
}

const char *jitops_cache_path(const jitops_cache_t *cache) {
  return cache ? cache->db.path : "";
}

const char *jitops_cache_recovered_from(const jitops_cache_t *cache) {
  return cache ? cache->recovered_from : "";
}

jitops_status jitops_cache_settings_get(const char *dir, jitops_cache_settings *out) {
  JITOPS__REQUIRE_NONNULL("jitops_cache_settings_get", out);
  jitops__cache_plan plan;
  jitops__cache_plan_make(dir, JITOPS_CACHE_MODE_DEFAULT, 0, 0, &plan);
  memset(out, 0, sizeof *out);
  out->state = plan.state;
  out->degraded = plan.degraded;
  snprintf(out->reason, sizeof out->reason, "%s", plan.reason);
  out->max_bytes = plan.max_bytes;
  jitops__remote_plan remote;
  jitops__remote_plan_make(NULL, NULL, &remote);
  out->remote_state = remote.state;
  out->remote_signed = remote.is_signed;
  snprintf(out->remote_address, sizeof out->remote_address, "%s", remote.shown);
  snprintf(out->remote_reason, sizeof out->remote_reason, "%s", remote.reason);
  return JITOPS_SUCCESS;
}

static const char *text_or_empty(sqlite3_stmt *stmt, int column) {
  const char *text = (const char *)sqlite3_column_text(stmt, column);
  return text ? text : "";
}

static void bind_optional(sqlite3_stmt *stmt, int index, const char *text) {
  if (text != NULL)
    sqlite3_bind_text(stmt, index, text, -1, SQLITE_STATIC);
  else
    sqlite3_bind_null(stmt, index);
}

static void read_entry(sqlite3_stmt *stmt, jitops_cache_entry *e) {
  memset(e, 0, sizeof *e);
  if (sqlite3_column_bytes(stmt, 0) == 16)
    memcpy(e->key, sqlite3_column_blob(stmt, 0), 16);
  e->op = text_or_empty(stmt, 1);
  e->name_expression = text_or_empty(stmt, 2);
  e->lowered_name = text_or_empty(stmt, 3);
  e->target = text_or_empty(stmt, 4);
  e->options = text_or_empty(stmt, 5);
  e->nvrtc_version = sqlite3_column_int(stmt, 6);
  e->bytes = sqlite3_column_int64(stmt, 7);
  e->compile_ms = sqlite3_column_double(stmt, 8);
  e->created = sqlite3_column_int64(stmt, 9) / 1000;
  e->last_used = sqlite3_column_int64(stmt, 10) / 1000;
  e->use_count = sqlite3_column_int64(stmt, 11);
}

jitops_status jitops_cache_list(jitops_cache_t *cache, const char *op, const char *target,
                                int (*visit)(const jitops_cache_entry *, void *), void *user) {
  static const char *const fn = "jitops_cache_list";
  JITOPS__REQUIRE_NONNULL(fn, cache);
  JITOPS__REQUIRE_NONNULL(fn, visit);
  sqlite3_stmt *stmt = NULL;
  if (jitops__db_prepare(cache->db.handle,
                         "SELECT key, op, name_expr, lowered_name, target, options, nvrtc_version,"
                         " size, compile_ms, created, last_used, use_count FROM kernels"
                         " WHERE (?1 IS NULL OR op = ?1) AND (?2 IS NULL OR target = ?2)"
                         " ORDER BY last_used DESC, rowid DESC",
                         &stmt) != SQLITE_OK)
    return sql_fail(cache, fn, "preparing the listing");
  bind_optional(stmt, 1, op);
  bind_optional(stmt, 2, target);
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    jitops_cache_entry entry;
    read_entry(stmt, &entry);
    if (visit(&entry, user) != 0) {
      rc = SQLITE_DONE;
      break;
    }
  }
  sqlite3_finalize(stmt);
  return rc == SQLITE_DONE ? JITOPS_SUCCESS : sql_fail(cache, fn, "reading the entries");
}

jitops_status jitops_cache_stats(jitops_cache_t *cache,
                                 int (*visit)(const jitops_cache_group_stats *, void *),
                                 void *user) {
  static const char *const fn = "jitops_cache_stats";
  JITOPS__REQUIRE_NONNULL(fn, cache);
  JITOPS__REQUIRE_NONNULL(fn, visit);
  sqlite3_stmt *stmt = NULL;
  if (jitops__db_prepare(
          cache->db.handle,
          "SELECT g.op, g.target, COALESCE(k.n, 0), COALESCE(k.b, 0), COALESCE(u.memory_hits, 0),"
          " COALESCE(u.disk_hits, 0), COALESCE(u.misses, 0), COALESCE(u.compiles, 0),"
          " COALESCE(u.remote_hits, 0), COALESCE(u.remote_misses, 0), COALESCE(u.remote_errors, 0)"
          " FROM (SELECT op, target FROM kernels UNION SELECT op, target FROM usage) g"
          " LEFT JOIN (SELECT op, target, count(*) AS n, sum(size) AS b FROM kernels"
          "   GROUP BY op, target) k ON k.op = g.op AND k.target = g.target"
          " LEFT JOIN usage u ON u.op = g.op AND u.target = g.target ORDER BY g.op, g.target",
          &stmt) != SQLITE_OK)
    return sql_fail(cache, fn, "preparing the statistics");
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    jitops_cache_group_stats g = {
        text_or_empty(stmt, 0),        text_or_empty(stmt, 1),        sqlite3_column_int64(stmt, 2),
        sqlite3_column_int64(stmt, 3), sqlite3_column_int64(stmt, 4), sqlite3_column_int64(stmt, 5),
        sqlite3_column_int64(stmt, 6), sqlite3_column_int64(stmt, 7), sqlite3_column_int64(stmt, 8),
        sqlite3_column_int64(stmt, 9), sqlite3_column_int64(stmt, 10)};
    if (visit(&g, user) != 0) {
      rc = SQLITE_DONE;
      break;
    }
  }
  sqlite3_finalize(stmt);
  return rc == SQLITE_DONE ? JITOPS_SUCCESS : sql_fail(cache, fn, "reading the statistics");
}

jitops_status jitops__admin_require_writable(const jitops_cache_t *cache, const char *fn) {
  if (cache->db.mode != JITOPS__DB_READWRITE)
    return jitops__fail(JITOPS_ERR_CACHE, "%s: the cache was opened read-only", fn);
  return JITOPS_SUCCESS;
}

jitops_status jitops_cache_clear(jitops_cache_t *cache, const char *op, double older_than_days,
                                 int64_t *removed) {
  static const char *const fn = "jitops_cache_clear";
  JITOPS__REQUIRE_NONNULL(fn, cache);
  JITOPS__TRY(jitops__admin_require_writable(cache, fn));
  sqlite3_stmt *stmt = NULL;
  if (jitops__db_prepare(cache->db.handle,
                         "DELETE FROM kernels WHERE (?1 IS NULL OR op = ?1)"
                         " AND (?2 < 0 OR last_used < ?3)",
                         &stmt) != SQLITE_OK)
    return sql_fail(cache, fn, "preparing the deletion");
  bind_optional(stmt, 1, op);
  sqlite3_bind_double(stmt, 2, older_than_days);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  double now_ms = (double)ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
  sqlite3_bind_int64(stmt, 3, (int64_t)(now_ms - older_than_days * 86400e3));
  int rc = sqlite3_step(stmt);
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE)
    return sql_fail(cache, fn, "deleting entries");
  if (removed != NULL)
    *removed = sqlite3_changes(cache->db.handle);
  if (op == NULL && older_than_days < 0)
    jitops__db_prune_set_aside(cache->db.path, 0);
  return JITOPS_SUCCESS;
}

/* Collects the rowids of the rows that are not sound (cache/entry.h). */
static jitops_status find_bad_rows(jitops_cache_t *cache, int64_t **bad, int64_t *count,
                                   int64_t *checked) {
  sqlite3_stmt *stmt = NULL;
  if (jitops__db_prepare(cache->db.handle, "SELECT " JITOPS__ENTRY_COLUMNS ", rowid FROM kernels",
                         &stmt) != SQLITE_OK)
    return sql_fail(cache, "jitops_cache_verify", "preparing the scan");
  size_t capacity = 0;
  *bad = NULL;
  *count = *checked = 0;
  int rc;
  const char *fault;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    ++*checked;
    if (jitops__entry_is_sound(stmt, &fault))
      continue;
    if ((size_t)*count == capacity) {
      capacity = capacity ? 2 * capacity : 16;
      int64_t *grown = realloc(*bad, capacity * sizeof **bad);
      if (grown == NULL)
        break;
      *bad = grown;
    }
    (*bad)[(*count)++] = sqlite3_column_int64(stmt, JITOPS__ENTRY_COLUMN_COUNT);
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
    free(*bad);
    *bad = NULL;
    return sql_fail(cache, "jitops_cache_verify", "scanning the entries");
  }
  return JITOPS_SUCCESS;
}

jitops_status jitops_cache_verify(jitops_cache_t *cache, int64_t *checked, int64_t *dropped) {
  static const char *const fn = "jitops_cache_verify";
  JITOPS__REQUIRE_NONNULL(fn, cache);
  JITOPS__TRY(jitops__admin_require_writable(cache, fn));
  int64_t *bad = NULL, count = 0, seen = 0;
  JITOPS__TRY(find_bad_rows(cache, &bad, &count, &seen));
  sqlite3_stmt *stmt = NULL;
  int rc = jitops__db_prepare(cache->db.handle, "DELETE FROM kernels WHERE rowid = ?", &stmt);
  for (int64_t i = 0; i < count && rc == SQLITE_OK; ++i) {
    sqlite3_bind_int64(stmt, 1, bad[i]);
    rc = sqlite3_step(stmt) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    sqlite3_reset(stmt);
  }
  sqlite3_finalize(stmt);
  free(bad);
  if (rc != SQLITE_OK)
    return sql_fail(cache, fn, "deleting bad entries");
  if (checked != NULL)
    *checked = seen;
  if (dropped != NULL)
    *dropped = count;
  return JITOPS_SUCCESS;
}
