/* Time for bounds and pauses: a monotonic clock (never set back, so a bound measured on it
 * holds whatever happens to the wall clock) and a sleep. */
#ifndef JITOPS_COMMON_CLOCK_H
#define JITOPS_COMMON_CLOCK_H

#include <stdint.h>

/* Milliseconds of CLOCK_MONOTONIC. */
int64_t jitops__monotonic_ms(void);

void jitops__sleep_ms(int ms);

#endif
