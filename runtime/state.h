/* Per-runtime state: a few slots where the core and the op families keep what lives as long
 * as a runtime (a cuBLASLt handle, a memory pool, a family's cache of choices). runtime.c
 * owns the slots and destroys what is in them with the runtime. */
#ifndef JITOPS_RUNTIME_STATE_H
#define JITOPS_RUNTIME_STATE_H

#include "jitops/jitops.h"

typedef enum jitops__state_slot {
  JITOPS__SLOT_CUBLASLT = 0,
  JITOPS__SLOT_FAMILY_1 = 1,
  JITOPS__SLOT_FAMILY_2 = 2,
  JITOPS__SLOT_FAMILY_3 = 3,
  JITOPS__SLOT_SCRATCH_POOL = 4, /* the core's: see jitops__scratch_acquire */
  JITOPS__SLOT_COUNT = 8
} jitops__state_slot;

/* Returns the state in `slot`, creating it with `create` on first use (under the runtime's
 * lock, so exactly once). `destroy` runs at jitops_runtime_destroy. */
jitops_status jitops__runtime_state(jitops_runtime_t *runtime, jitops__state_slot slot,
                                    jitops_status (*create)(jitops_runtime_t *, void **),
                                    void (*destroy)(jitops_runtime_t *, void *), void **out);

#endif
