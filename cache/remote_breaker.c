#include "cache/remote_breaker.h"

int jitops__breaker_allows(const jitops__breaker *breaker, int64_t now_ms) {
  return now_ms >= breaker->open_until_ms;
}

void jitops__breaker_success(jitops__breaker *breaker) {
  breaker->consecutive_failures = 0;
  breaker->cooldown_ms = 0;
  breaker->open_until_ms = 0;
}

int jitops__breaker_failure(jitops__breaker *breaker, int64_t now_ms) {
  if (++breaker->consecutive_failures < JITOPS__BREAKER_FAILURES)
    return 0;
  /* Open, or (a failed half-open request) open again for longer. */
  breaker->cooldown_ms = breaker->cooldown_ms == 0 ? JITOPS__BREAKER_COOLDOWN_MS
                         : breaker->cooldown_ms >= JITOPS__BREAKER_COOLDOWN_MAX_MS / 2
                             ? JITOPS__BREAKER_COOLDOWN_MAX_MS
                             : breaker->cooldown_ms * 2;
  breaker->open_until_ms = now_ms + breaker->cooldown_ms;
  return 1;
}
