/* Choices made by timing candidates on the device (which cuBLASLt algorithm runs a GEMM
 * fastest, say). A timed choice is not reproducible, and a different choice gives
 * different bits, so it is made once per machine and kept in the kernel cache beside the
 * kernels: every later call, in this process and in the next, makes the same one.
 *
 * `what` names the kind of choice ("cublaslt-algo"), `id` holds everything the candidates
 * depend on (shape, dtypes, library version); the device's name is added to the key. */
#ifndef JITOPS_RUNTIME_TUNING_H
#define JITOPS_RUNTIME_TUNING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jitops/jitops.h"

typedef struct jitops__tuned {
  uint8_t key[16];
  bool claimed; /* we hold the cross-process claim: call _put or _abandon */
} jitops__tuned;

/* 1 with `size` bytes in `out` when the choice is on disk (or another process made it while
 * we waited for its claim). 0 when the caller should time the candidates; then, if
 * `tuned->claimed`, it must end with jitops__tuned_put or jitops__tuned_abandon. */
int jitops__tuned_get(jitops_runtime_t *runtime, const char *what, const void *id, size_t id_size,
                      void *out, size_t size, jitops__tuned *tuned);
/* Stores the choice (`description` is what `jitops-cache list` shows) and drops the claim. */
void jitops__tuned_put(jitops_runtime_t *runtime, const jitops__tuned *tuned, const char *op,
                       const char *description, const void *data, size_t size);
void jitops__tuned_abandon(jitops_runtime_t *runtime, const jitops__tuned *tuned);

/* Whether choices may be timed now: not with JITOPS_TUNE=0, not on a compile-only runtime, and
 * not while `stream` is being captured into a graph (timing needs a host synchronization).
 * This and jitops__time_candidates run inside jitops__context_enter. */
bool jitops__tuning_allowed(jitops_runtime_t *runtime, void *stream);

/* Times `count` candidates on `stream` after synchronizing it: `run(ctx, i)` enqueues
 * candidate i; each runs once to warm up, then `reps` times between events. The fastest
 * one's index goes to *best. A candidate that fails to enqueue is skipped; when all fail,
 * the first one's status is returned. */
jitops_status jitops__time_candidates(jitops_runtime_t *runtime, void *stream, int count, int reps,
                                      jitops_status (*run)(void *ctx, int index), void *ctx,
                                      int *best);

#endif
