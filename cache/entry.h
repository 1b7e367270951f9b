/* A row of the kernels table: its integrity hash, and the checks a row from outside (an
 * import, a shipped tier, a verify) must pass before it is trusted.
 *
 * Invariant: blob_hash is jitops__entry_hash of the row's key, kind, target, lowered name
 * and blob: everything that selects the code a key runs. So a row cannot point a key at
 * another kernel (a swapped key, a changed lowered name that selects another function of
 * the module) without failing its check. The hash guards against damage and mix-ups, not
 * against an attacker, who can recompute it: a file to import must be trusted like code. */
#ifndef JITOPS_CACHE_ENTRY_H
#define JITOPS_CACHE_ENTRY_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/store.h"

void jitops__entry_hash(const uint8_t key[16], int kind, const char *target,
                        const char *lowered_name, const void *blob, size_t size, uint8_t out[16]);

/* The columns of a kernels row, in the order jitops__entry_is_sound expects them, and the
 * positions of those a reader takes. */
#define JITOPS__ENTRY_COLUMNS                                                                      \
  "key, op, name_expr, lowered_name, target, nvrtc_version, options, kind, blob, blob_hash,"       \
  " size, compile_ms, created, last_used, use_count"
enum {
  JITOPS__ENTRY_KEY = 0,
  JITOPS__ENTRY_LOWERED_NAME = 3,
  JITOPS__ENTRY_BLOB = 8,
  JITOPS__ENTRY_COLUMN_COUNT = 15
};

/* Whether the current row of `stmt` (selected as JITOPS__ENTRY_COLUMNS) can be trusted: every
 * column of its type and within sane bounds (a 16-byte key, a known kind, a target such as
 * sm_90, size equal to the blob's length, text of bounded length without NULs, counts and
 * times not negative) and its hash right. 0 and the first fault in *fault otherwise. */
int jitops__entry_is_sound(sqlite3_stmt *stmt, const char **fault);

/* The first value of `row` out of the bounds above (texts, target, NVRTC version, kind, size,
 * compile time), or NULL: what a row from outside that is not a database's (a record of the
 * remote tier) must pass too. */
const char *jitops__entry_row_fault(const jitops__store_row *row);

/* The current row of `stmt` (selected as JITOPS__ENTRY_COLUMNS, and sound: see above) as a
 * jitops__store_row, whose strings and image are the statement's until its next step. */
void jitops__entry_row_read(sqlite3_stmt *stmt, jitops__store_row *row);

/* Inserts `row` with its hash, created and last used now, used 0 times: replacing a row of
 * the same key when `replace`, else leaving it. SQLite's result. */
int jitops__entry_insert(sqlite3 *handle, const jitops__store_row *row, int replace);

#endif
