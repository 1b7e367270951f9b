/* The remote tier's circuit breaker: when the server keeps failing, stop asking it for a
 * while, so that a server that is down or stopped costs a process a few timeouts in all, not
 * one per kernel.
 *
 * The rule: JITOPS__BREAKER_FAILURES consecutive failed requests (no connection, a timeout, a
 * reply that is not Redis's, an error reply such as OOM) open the breaker for a cool-down:
 * every request is skipped until it ends. Then one request goes through (half-open): a
 * success closes the breaker, a failure opens it again for twice as long. The cool-down starts
 * at JITOPS__BREAKER_COOLDOWN_MS and doubles up to JITOPS__BREAKER_COOLDOWN_MAX_MS; any success
 * resets it and the count. Not thread-safe: its owner holds a lock. */
#ifndef JITOPS_CACHE_REMOTE_BREAKER_H
#define JITOPS_CACHE_REMOTE_BREAKER_H

#include <stdint.h>

enum {
  JITOPS__BREAKER_FAILURES = 3,
  JITOPS__BREAKER_COOLDOWN_MS = 5000,
  JITOPS__BREAKER_COOLDOWN_MAX_MS = 60000
};

typedef struct jitops__breaker {
  int consecutive_failures;
  int cooldown_ms;       /* the next opening's; 0 before the first */
  int64_t open_until_ms; /* requests are skipped before this time */
} jitops__breaker;

/* 1 when a request may go to the server at `now_ms` (monotonic milliseconds). */
int jitops__breaker_allows(const jitops__breaker *breaker, int64_t now_ms);

/* Records a request's outcome. jitops__breaker_failure returns 1 when it opened the breaker. */
void jitops__breaker_success(jitops__breaker *breaker);
int jitops__breaker_failure(jitops__breaker *breaker, int64_t now_ms);

#endif
