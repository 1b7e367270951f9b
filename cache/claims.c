/* Compile-once across processes. A process that misses takes a claim for the key in the same
 * BEGIN IMMEDIATE transaction that saw the miss: a row that names the holder (cache/process.h)
 * and, held for as long as the claim, a lock on the key's byte of the claims file
 * (cache/claim_locks.h). Others that miss see the claim and wait, polling, for the holder's
 * row, so 8 ranks that start together compile each kernel once.
 *
 * A claim is abandoned, and taken over at once, when its holder is gone: it exited (a zombie
 * counts), its pid is another process's now, or its lock byte is free (it died, in any PID
 * namespace of this host). A claim that cannot be judged (a holder on another host sharing
 * the directory) is abandoned when it is older than CLAIM_STALE_MS. Without a claims file a
 * process takes no claim and compiles: a duplicate compile at worst, never a stall. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cache/process.h"
#include "cache/store_internal.h"
#include "common/clock.h"
#include "common/log.h"

enum {
  CLAIM_STALE_MS = 300 * 1000, /* a claim this old is abandoned, whoever holds it */
  CLAIM_WAIT_MS = 600 * 1000   /* waiting longer than this, compile anyway */
};

static void holder_of(sqlite3_stmt *row, jitops__process *holder) {
  memset(holder, 0, sizeof *holder);
  holder->pid = sqlite3_column_int64(row, 0);
  holder->start_ticks = sqlite3_column_int64(row, 1);
  snprintf(holder->boot_id, sizeof holder->boot_id, "%s", sqlite3_column_text(row, 2));
  snprintf(holder->pid_namespace, sizeof holder->pid_namespace, "%s", sqlite3_column_text(row, 3));
  snprintf(holder->host, sizeof holder->host, "%s", sqlite3_column_text(row, 4));
}

/* Whether the claim in `row` (pid, start_ticks, boot_id, pid_namespace, host, claimed_at)
 * still binds us. */
static int claim_is_live(jitops__store *store, const uint8_t key[16], sqlite3_stmt *row) {
  jitops__process holder, self;
  holder_of(row, &holder);
  if (jitops__store_now_ms() - sqlite3_column_int64(row, 5) > CLAIM_STALE_MS)
    return 0;
  jitops__liveness liveness = jitops__process_liveness(&holder);
  if (liveness == JITOPS__PROCESS_GONE)
    return 0;
  jitops__process_self(&self);
  if (jitops__process_same(&holder, &self))
    return 1; /* another thread of ours: its lock is our own, invisible to the check below */
  return jitops__claim_lock_held_elsewhere(&store->claim_locks, key) != 0;
}

static int bind_claim(sqlite3_stmt *stmt, const uint8_t key[16], const jitops__process *self) {
  sqlite3_bind_blob(stmt, 1, key, 16, SQLITE_STATIC);
  sqlite3_bind_int64(stmt, 2, self->pid);
  sqlite3_bind_int64(stmt, 3, self->start_ticks);
  sqlite3_bind_text(stmt, 4, self->boot_id, -1, SQLITE_STATIC);
  sqlite3_bind_text(stmt, 5, self->pid_namespace, -1, SQLITE_STATIC);
  sqlite3_bind_text(stmt, 6, self->host, -1, SQLITE_STATIC);
  sqlite3_bind_int64(stmt, 7, jitops__store_now_ms());
  return sqlite3_step(stmt);
}

static int insert_claim(jitops__store *store, const uint8_t key[16]) {
  jitops__process self;
  jitops__process_self(&self);
  sqlite3_stmt *stmt = NULL;
  int rc = jitops__db_prepare(store->main.handle,
                              "INSERT OR REPLACE INTO claims(key, pid, start_ticks, boot_id,"
                              " pid_namespace, host, claimed_at) VALUES(?, ?, ?, ?, ?, ?, ?)",
                              &stmt);
  if (rc == SQLITE_OK)
    rc = bind_claim(stmt, key, &self) == SQLITE_DONE ? SQLITE_OK
                                                     : sqlite3_errcode(store->main.handle);
  sqlite3_finalize(stmt);
  return rc;
}

typedef enum claim_step {
  CLAIM_TAKEN,          /* ours now: compile, then put or unclaim */
  CLAIM_HELD_ELSEWHERE, /* a live holder: wait for its row */
  CLAIM_ROW_FOUND,      /* the kernel is there */
  CLAIM_NONE,           /* no claim could be taken: compile without one */
  CLAIM_FAILED          /* the database failed */
} claim_step;

/* The existing claim of `key`, live or not, inside the caller's transaction. */
static claim_step existing_claim(jitops__store *store, const uint8_t key[16], int *rc) {
  sqlite3_stmt *stmt = NULL;
  *rc = jitops__db_prepare(store->main.handle,
                           "SELECT pid, start_ticks, boot_id, pid_namespace, host, claimed_at"
                           " FROM claims WHERE key = ?",
                           &stmt);
  if (*rc != SQLITE_OK)
    return CLAIM_FAILED;
  sqlite3_bind_blob(stmt, 1, key, 16, SQLITE_STATIC);
  *rc = sqlite3_step(stmt);
  claim_step step =
      *rc == SQLITE_ROW && claim_is_live(store, key, stmt) ? CLAIM_HELD_ELSEWHERE : CLAIM_TAKEN;
  *rc = *rc == SQLITE_ROW || *rc == SQLITE_DONE ? SQLITE_OK : *rc;
  sqlite3_finalize(stmt);
  return *rc == SQLITE_OK ? step : CLAIM_FAILED;
}

/* The row if present, else the claim if free: what one transaction decides. */
static claim_step decide(jitops__store *store, const uint8_t key[16], jitops__blob *found,
                         int *rc) {
  if (jitops__store_read_row(&store->main, key, found, rc) == JITOPS__ROW_FOUND)
    return CLAIM_ROW_FOUND;
  claim_step step = existing_claim(store, key, rc);
  if (step != CLAIM_TAKEN)
    return step;
  switch (jitops__claim_lock_take(&store->claim_locks, key)) {
  case 0:
    return CLAIM_HELD_ELSEWHERE; /* its holder is between its lock and its row, or shares it */
  case 1:
    if ((*rc = insert_claim(store, key)) == SQLITE_OK)
      return CLAIM_TAKEN;
    jitops__claim_lock_release(&store->claim_locks, key);
    return CLAIM_FAILED;
  default:
    return CLAIM_NONE;
  }
}

static claim_step try_claim(jitops__store *store, const uint8_t key[16], jitops__blob *found) {
  int rc = jitops__db_begin_write(&store->main);
  if (rc != SQLITE_OK) {
    jitops__store_failed(store, rc, "starting a claim");
    return CLAIM_FAILED;
  }
  claim_step step = decide(store, key, found, &rc);
  if (step == CLAIM_FAILED) {
    jitops__db_exec(&store->main, "ROLLBACK");
    jitops__store_failed(store, rc, "taking a claim");
    return CLAIM_FAILED;
  }
  if ((rc = jitops__db_exec(&store->main, "COMMIT")) == SQLITE_OK)
    return step;
  jitops__db_exec(&store->main, "ROLLBACK");
  if (step == CLAIM_TAKEN)
    jitops__claim_lock_release(&store->claim_locks, key);
  jitops__store_failed(store, rc, "taking a claim");
  /* A row read before the failure was verified: it is good to use. */
  return step == CLAIM_ROW_FOUND ? CLAIM_ROW_FOUND : CLAIM_FAILED;
}

jitops__claim jitops__store_claim(jitops__store *store, const uint8_t key[16], jitops__blob *found,
                                  int *waited) {
  memset(found, 0, sizeof *found);
  *waited = 0;
  int64_t start = jitops__store_now_ms();
  int pause = 2;
  for (;;) {
    pthread_mutex_lock(&store->lock);
    claim_step step = CLAIM_FAILED;
    if (store->writable && store->main.handle != NULL)
      step = try_claim(store, key, found);
    pthread_mutex_unlock(&store->lock);
    if (step == CLAIM_ROW_FOUND)
      return JITOPS__CLAIM_FOUND;
    if (step != CLAIM_HELD_ELSEWHERE || jitops__store_now_ms() - start > CLAIM_WAIT_MS)
      return JITOPS__CLAIM_COMPILE;
    *waited = 1;
    jitops__sleep_ms(pause);
    pause = pause < 50 ? pause * 2 : 50;
  }
}

int jitops__claim_delete(jitops__store *store, const uint8_t key[16]) {
  jitops__process self;
  jitops__process_self(&self);
  sqlite3_stmt *stmt = NULL;
  int rc =
      jitops__db_prepare(store->main.handle,
                         "DELETE FROM claims WHERE key = ? AND pid = ? AND start_ticks = ?", &stmt);
  if (rc != SQLITE_OK)
    return rc;
  sqlite3_bind_blob(stmt, 1, key, 16, SQLITE_STATIC);
  sqlite3_bind_int64(stmt, 2, self.pid);
  sqlite3_bind_int64(stmt, 3, self.start_ticks);
  rc = sqlite3_step(stmt);
  sqlite3_finalize(stmt);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

void jitops__store_unclaim(jitops__store *store, const uint8_t key[16]) {
  if (store == NULL)
    return;
  pthread_mutex_lock(&store->lock);
  if (store->writable && store->main.handle != NULL)
    jitops__claim_delete(store, key);
  jitops__claim_lock_release(&store->claim_locks, key);
  pthread_mutex_unlock(&store->lock);
}
