/* What a runtime tells about its device: the properties that specialization and launch
 * choices depend on. runtime.c reads them when the device opens. */
#ifndef JITOPS_RUNTIME_DEVICE_H
#define JITOPS_RUNTIME_DEVICE_H

#include <stddef.h>

#include "jitops/jitops.h"

typedef struct jitops__device_props {
  int arch;                    /* 90 for sm_90 */
  int sm_count;                /* 0 on a compile-only runtime */
  int max_threads_per_block;   /* 1024 */
  size_t smem_per_block;       /* default limit, 48 KiB */
  size_t smem_per_block_optin; /* opt-in limit (227 KiB on sm_90) */
  size_t smem_per_sm;
  size_t l2_bytes;
} jitops__device_props;

/* Valid for the runtime's lifetime. A compile-only runtime reports its arch's typical values
 * (so that specialization choices can be made and prewarmed without a GPU). */
const jitops__device_props *jitops__runtime_props(const jitops_runtime_t *runtime);

#endif
