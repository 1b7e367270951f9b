/* What the files of the runtime's disk tier share: the store itself (store.c opens and closes
 * it and handles failures), reading (store_read.c), writing (store_write.c) and claims
 * (claims.c). Every function here expects the caller to hold store->lock. */
#ifndef JITOPS_CACHE_STORE_INTERNAL_H
#define JITOPS_CACHE_STORE_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "cache/claim_locks.h"
#include "cache/db.h"
#include "cache/store.h"

/* The longest the runtime's tier waits for another process's write lock at each step: a
 * busy database makes a call go on without the disk, never stall. */
#define JITOPS__STORE_BUSY_MS 2000

struct jitops__store {
  pthread_mutex_t lock; /* one connection per tier, used by one thread at a time */
  jitops__db main;      /* handle NULL when only the shipped tier exists */
  jitops__db shipped;   /* handle NULL when there is none */
  jitops__claim_locks claim_locks;
  int writable;
  jitops_cache_state state; /* the main database's; reason says why it is not read-write */
  int degraded;             /* lowered by the library itself (see jitops_runtime_info) */
  char reason[512];
  int64_t max_bytes;
  int recoveries;
  uint64_t errors;
  int warned_write;
};

/* Wall-clock milliseconds, as stored in the rows. */
int64_t jitops__store_now_ms(void);

/* Handles a failed statement on the main database: a damaged file is set aside and a new one
 * opened (a few times at most); anything else is counted and warned about once. */
void jitops__store_failed(jitops__store *store, int rc, const char *what);

typedef enum jitops__row_result {
  JITOPS__ROW_ABSENT,
  JITOPS__ROW_FOUND,
  JITOPS__ROW_BAD, /* present, but it failed its hash check */
  JITOPS__ROW_ERROR
} jitops__row_result;

/* Reads `key`'s row from `db` into `out` when it verifies. *rc holds SQLite's result. */
jitops__row_result jitops__store_read_row(jitops__db *db, const uint8_t key[16], jitops__blob *out,
                                          int *rc);

/* Deletes this process's claim row of `key`, inside the caller's transaction if there is
 * one. The claim's lock is released by the caller afterwards (jitops__claim_lock_release). */
int jitops__claim_delete(jitops__store *store, const uint8_t key[16]);

#endif
