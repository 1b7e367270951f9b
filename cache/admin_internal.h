/* What the administration calls share: the handle, and how they report SQLite's failures.
 * admin.c opens the cache and inspects, clears and verifies it; transfer.c exports and
 * imports it. */
#ifndef JITOPS_CACHE_ADMIN_INTERNAL_H
#define JITOPS_CACHE_ADMIN_INTERNAL_H

#include "cache/db.h"
#include "jitops/jitops.h"

/* Administration waits longer than a runtime for another process's lock (a runtime storing
 * a kernel holds it for milliseconds), but not forever. */
enum { JITOPS__ADMIN_BUSY_MS = 10000 };

struct jitops_cache {
  jitops__db db;
  char recovered_from[4200]; /* where a damaged database found by the open went; "" if none */
};

/* Describes a failure of the latest statement on `handle` as JITOPS_ERR_CACHE: call it
 * before anything else runs on that connection (a ROLLBACK would replace the message with
 * "not an error"). */
jitops_status jitops__admin_sql_fail(sqlite3 *handle, const char *fn, const char *what);

/* JITOPS_ERR_CACHE unless the cache was opened writable. */
jitops_status jitops__admin_require_writable(const jitops_cache_t *cache, const char *fn);

#endif
