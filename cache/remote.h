/* The runtime's remote tier: kernels shared by a fleet through a Redis server, asked after the
 * local tiers miss and before compiling (the rules are in jitops.h, "The remote tier").
 * Nothing here fails or stalls a call: every request is bounded (cache/redis_connection.h),
 * repeated failures open a breaker (cache/remote_breaker.h), a record that does not verify
 * (cache/remote_record.h) is refused, and each problem is counted and answered as "not
 * there", so the caller compiles. Thread-safe: one request at a time per tier. */
#ifndef JITOPS_CACHE_REMOTE_H
#define JITOPS_CACHE_REMOTE_H

#include <stddef.h>
#include <stdint.h>

#include "cache/remote_url.h"
#include "cache/store.h"
#include "jitops/jitops.h"

enum {
  JITOPS__REMOTE_TIMEOUT_MS = 50,      /* connect, and each request (see jitops.h) */
  JITOPS__REMOTE_CLAIM_TTL_MS = 30000, /* a claim's expiry: a dead compiler's cost to others */
  JITOPS__REMOTE_WAIT_MS = 60000,      /* the longest wait for another node's compile */
  JITOPS__REMOTE_MAX_RECORD_BYTES = 64 << 20 /* larger kernels are not shared */
};

/* What the settings make of the tier, before any connection. */
typedef struct jitops__remote_plan {
  jitops_remote_state state; /* OFF, UNAVAILABLE or ON */
  int is_signed;
  char shown[320];  /* the address without its password */
  char reason[512]; /* why UNAVAILABLE */
  jitops__remote_address address;
} jitops__remote_plan;

/* The plan for `configured_url` and `configured_key` (NULL: the environment; see
 * cache/settings.h). */
void jitops__remote_plan_make(const char *configured_url, const char *configured_key,
                              jitops__remote_plan *out);

/* Warns, once per process, that a configured tier is unavailable, and why. */
void jitops__remote_plan_warn(const jitops__remote_plan *plan);

typedef struct jitops__remote jitops__remote;

/* NULL when no tier is configured, or out of memory. A configured tier that cannot be used
 * is returned UNAVAILABLE (and warned about once), so that it can be described. */
jitops__remote *jitops__remote_open(const char *configured_url, const char *configured_key);
void jitops__remote_close(jitops__remote *remote);

/* Fills the remote_* fields of `info`; `remote` may be NULL. */
void jitops__remote_describe(jitops__remote *remote, jitops_runtime_info *info);
/* Failed requests and refused records so far. */
uint64_t jitops__remote_errors(const jitops__remote *remote);

/* What the caller expects a record of its key to be. */
typedef struct jitops__remote_expect {
  const char *target;
  int nvrtc_version;
  jitops__blob_kind kind;
} jitops__remote_expect;

typedef enum jitops__remote_result {
  JITOPS__REMOTE_SKIPPED = 0, /* not asked: no tier, unavailable, or its breaker is open */
  JITOPS__REMOTE_MISS = 1,    /* asked, and nothing usable came: compile */
  JITOPS__REMOTE_HIT = 2      /* `found` holds a verified kernel */
} jitops__remote_result;

/* A record taken from the server: `row` points into `data`. */
typedef struct jitops__remote_found {
  char *data;
  jitops__store_row row;
} jitops__remote_found;

void jitops__remote_found_free(jitops__remote_found *found);

/* What a fetch (and the publish or unclaim after it) did, for the caller's counters. */
typedef struct jitops__remote_outcome {
  int waited;      /* waited for another node's compile */
  int claimed;     /* the fleet's claim is ours: publish, or unclaim after a failed compile */
  uint64_t errors; /* failed requests and refused records */
} jitops__remote_outcome;

/* Asks for `key`: a verified record is a hit; otherwise the fleet's claim is taken (or waited
 * on, at most JITOPS__REMOTE_WAIT_MS). */
jitops__remote_result jitops__remote_fetch(jitops__remote *remote, const uint8_t key[16],
                                           const jitops__remote_expect *expect,
                                           jitops__remote_found *found,
                                           jitops__remote_outcome *outcome);

/* Publishes a kernel compiled after a miss (signed when the tier has a key), and releases the
 * claim when outcome->claimed. */
void jitops__remote_publish(jitops__remote *remote, const jitops__store_row *row,
                            jitops__remote_outcome *outcome);

/* Releases the claim after a failed compile, so that a waiting node compiles (and fails)
 * itself instead of waiting out the claim. */
void jitops__remote_unclaim(jitops__remote *remote, const uint8_t key[16],
                            jitops__remote_outcome *outcome);

#endif
