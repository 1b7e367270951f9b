/* The kernels one op call needs, gathered first and then got together: those already in the
 * runtime's memory at once, on the calling thread; the others built in parallel, so that a
 * cold call that needs several kernels waits for its slowest compile rather than for the sum
 * of them. */
#ifndef JITOPS_RUNTIME_KERNEL_BATCH_H
#define JITOPS_RUNTIME_KERNEL_BATCH_H

#include <stddef.h>

#include "jitops/jitops.h"

enum {
  JITOPS__KERNEL_BATCH_MAX = 16,   /* kernels one call may gather */
  JITOPS__KERNEL_BATCH_EXPR = 256, /* bytes of a name expression, its NUL included */
  JITOPS__KERNEL_BATCH_THREADS = 8 /* builders at most, the calling thread included */
};

typedef struct jitops__kernel_batch_item {
  const char *source; /* a built-in source name (static storage) */
  char expr[JITOPS__KERNEL_BATCH_EXPR];
  jitops_kernel_t **out;
  int small; /* built after the others (jitops__kernel_batch_add_small) */
} jitops__kernel_batch_item;

typedef struct jitops__kernel_batch {
  size_t count;
  jitops__kernel_batch_item item[JITOPS__KERNEL_BATCH_MAX];
} jitops__kernel_batch;

void jitops__kernel_batch_init(jitops__kernel_batch *batch);

/* Adds "source, expr" (no options), to be written to *out by jitops__kernel_batch_get.
 * JITOPS_ERR_INTERNAL when the batch is full or the expression too long. */
jitops_status jitops__kernel_batch_add(jitops__kernel_batch *batch, const char *source,
                                       const char *expr, jitops_kernel_t **out);

/* The same for a kernel that compiles in a fraction of the time of the batch's others (a helper
 * pass): the builders take it after them. With fewer cores than kernels, the long compiles then
 * start at once and the small one fills in behind them, instead of delaying one of them (a
 * segment sort's cold call: 0.46-0.55 s -> 0.41-0.50 s on two cores). */
jitops_status jitops__kernel_batch_add_small(jitops__kernel_batch *batch, const char *source,
                                             const char *expr, jitops_kernel_t **out);

/* Every kernel of the batch, as jitops_kernel_get would give it. Kernels in memory, and (for
 * a batch of several) those on disk, are got on the calling thread; the others are built by up
 * to min(their number, the online CPUs, JITOPS__KERNEL_BATCH_THREADS) threads, the calling one
 * included, small ones last; the log may then run on those threads. On failure, the status and
 * message are those of the first failing kernel in the batch's order (small ones included). */
jitops_status jitops__kernel_batch_get(jitops_runtime_t *runtime, jitops__kernel_batch *batch);

/* The ready kernel of (source, expr, no options) in the runtime's memory, counted as a memory
 * hit; NULL when it is not there yet (kernel.c). */
jitops_kernel_t *jitops__kernel_find_ready(jitops_runtime_t *runtime, const char *source_name,
                                           const char *name_expression);

/* The kernel of (source, expr, no options) from memory, another runtime of the process, or
 * the disk tier, as jitops_kernel_get would give it, without claiming, asking the remote tier
 * or compiling: JITOPS_ERR_NOT_FOUND (no message) when it is in none of them, and at once,
 * without waiting, when another thread of any runtime is building it (kernel.c). */
jitops_status jitops__kernel_get_stored(jitops_runtime_t *runtime, const char *source_name,
                                        const char *name_expression, jitops_kernel_t **out);

#endif
