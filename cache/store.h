/* The runtime's disk tier: look-ups, cross-process compile claims, inserts with LRU
 * eviction, and usage counts. Nothing here fails a call: every problem is logged once,
 * counted, and answered as "not on disk", so the caller compiles and goes on in memory.
 *
 * Compile-once across processes: a process that misses claims the key (claims.c); others
 * wait for its row, and take the claim over at once if its holder is gone.
 *
 * A busy database never stalls a call: each step waits at most JITOPS__STORE_BUSY_MS (2 s)
 * for another process's write lock, then goes on without the disk. Opening and looking up
 * take no write lock; a miss takes it twice (claim, store), destroying a runtime once
 * (usage). */
#ifndef JITOPS_CACHE_STORE_H
#define JITOPS_CACHE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "jitops/jitops.h"

typedef struct jitops__store jitops__store;

typedef struct jitops__store_options {
  const char *dir;        /* NULL: the default location */
  jitops_cache_mode mode; /* DEFAULT: from $JITOPS_CACHE */
  int64_t max_bytes;      /* 0: $JITOPS_CACHE_MAX_BYTES or 1 GiB; < 0 unbounded */
  const char *shipped;    /* NULL: $JITOPS_CACHE_SHIPPED */
} jitops__store_options;

/* A store in whatever state the options and the location allow (see
 * jitops__store_describe): off, read-only or read-write. A tier lowered for a reason nobody
 * asked for is warned about once per process. NULL only when out of memory. */
jitops__store *jitops__store_open(const jitops__store_options *options);
void jitops__store_close(jitops__store *store);

const char *jitops__store_path(const jitops__store *store);
/* Fills the cache_* fields of `info`: path, writability, state, degradation, reason, bound.
 * `store` may be NULL (a runtime that ran out of memory making one). */
void jitops__store_describe(jitops__store *store, jitops_runtime_info *info);
int jitops__store_writable(const jitops__store *store);
/* Problems survived so far (corruption, I/O, a full disk). */
uint64_t jitops__store_errors(const jitops__store *store);

typedef struct jitops__blob {
  void *image;
  size_t size;
  char *lowered_name;
} jitops__blob;

void jitops__blob_free(jitops__blob *blob);

/* 1 and a verified blob when `key` is on disk (main database, then the shipped tier). */
int jitops__store_get(jitops__store *store, const uint8_t key[16], jitops__blob *out);

typedef enum jitops__claim {
  JITOPS__CLAIM_COMPILE = 0, /* compile it; the claim (if one was taken) is ours */
  JITOPS__CLAIM_FOUND = 1    /* another process stored it meanwhile: `found` holds it */
} jitops__claim;

/* Called after a miss. Waits while another live process holds the key's claim. */
jitops__claim jitops__store_claim(jitops__store *store, const uint8_t key[16], jitops__blob *found,
                                  int *waited);

/* What a row's blob is. */
typedef enum jitops__blob_kind {
  JITOPS__BLOB_CUBIN = 0,
  JITOPS__BLOB_PTX = 1,
  JITOPS__BLOB_TUNED = 2 /* a choice made by timing (jitops__tuned_put), not a kernel */
} jitops__blob_kind;

typedef struct jitops__store_row {
  uint8_t key[16];
  const char *op;
  const char *name_expression;
  const char *lowered_name;
  const char *target;
  int nvrtc_version;
  const char *options; /* space-separated */
  jitops__blob_kind kind;
  const void *image;
  size_t size;
  double compile_ms;
} jitops__store_row;

/* Stores a compiled kernel, drops our claim and evicts least recently used rows over the
 * size limit (never the new one). */
void jitops__store_put(jitops__store *store, const jitops__store_row *row);

/* Drops our claim after a failed compile, so waiters compile (and fail) themselves. */
void jitops__store_unclaim(jitops__store *store, const uint8_t key[16]);

typedef struct jitops__usage {
  uint8_t key[16];
  const char *op;
  const char *target;
  uint64_t memory_hits, disk_hits, misses, compiles;
  uint64_t remote_hits, remote_misses, remote_errors;
} jitops__usage;

/* Adds usage to the rows' use counts and last-use times, and to the per-(op, target)
 * totals that `jitops-cache stats` shows. */
void jitops__store_flush(jitops__store *store, const jitops__usage *usage, size_t count);

#endif
