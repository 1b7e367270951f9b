/* Locks that say whether a claim's holder still runs, wherever it runs on this host. Each
 * claim's holder keeps an open-file-description lock on one byte of "<database>-claims",
 * chosen by the key; the kernel drops it when the holder exits (a zombie has already
 * closed its files), and sees it from every PID namespace that shares the file. So a claim
 * whose byte is free is abandoned, at once.
 *
 * The bytes lie far beyond the end of the (empty) file, spread over 2^62 offsets, so that
 * two keys share one with negligible odds (a shared byte only makes a waiter wait for the
 * other key's compile too). The file is separate from the database because closing any
 * descriptor of the database would drop the POSIX locks SQLite holds on it. */
#ifndef JITOPS_CACHE_CLAIM_LOCKS_H
#define JITOPS_CACHE_CLAIM_LOCKS_H

#include <stdint.h>

#include "jitops/jitops.h"

/* -1 when there is no lock file (claims are then not taken). */
typedef struct jitops__claim_locks {
  int fd;
} jitops__claim_locks;

/* Opens (creating 0600) "<db_path>-claims", refusing a symlink; fd -1 when it cannot. */
void jitops__claim_locks_open(jitops__claim_locks *locks, const char *db_path);
void jitops__claim_locks_close(jitops__claim_locks *locks);

/* 1 when this open file description now holds `key`'s byte, 0 when another one does, -1 on
 * an error (no lock file, a file system without such locks). */
int jitops__claim_lock_take(const jitops__claim_locks *locks, const uint8_t key[16]);
void jitops__claim_lock_release(const jitops__claim_locks *locks, const uint8_t key[16]);

/* 1 when another open file description holds `key`'s byte, 0 when none does (ours may),
 * -1 when it cannot be told. */
int jitops__claim_lock_held_elsewhere(const jitops__claim_locks *locks, const uint8_t key[16]);

#endif
