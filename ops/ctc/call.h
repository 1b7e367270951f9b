/* A validated CTC call: what args.c (with host_data.c) finds out about the inputs, which
 * plan.c and run.c then read. Every extent and stride in it has been checked so that the
 * element offsets and byte counts formed from them fit int64 (args.c says how), and the
 * sizes derived from it go through checked arithmetic. */
#ifndef JITOPS_OPS_CTC_CALL_H
#define JITOPS_OPS_CTC_CALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jitops/ctc.h"
#include "runtime/op_support.h"

/* The alignment of every region of the workspace, and of the targets in the staging buffer. */
#define JITOPS__CTC_ALIGN 256

/* Lengths (and targets) in host memory, checked and packed for one upload into the scratch:
 * [input lengths N][target lengths N][offsets N] as int64, then, from `targets_at`, the
 * targets as a compact tensor when they are in host memory too. */
typedef struct jitops__ctc_staging {
  void *bytes; /* malloc'ed; NULL with device lengths */
  size_t size;
  size_t targets_at;
} jitops__ctc_staging;

typedef struct jitops__ctc_call {
  const char *fn; /* the entry point, for messages */
  jitops_ctc_options opt;
  jitops__dtype f, acc; /* log_probs' dtype and the accumulation dtype */
  jitops__dtype ti, li; /* the targets' and the lengths' dtypes */
  int64_t T, N, C;      /* log_probs' extents, each at most INT32_MAX */
  const void *lp;
  int64_t lp_st[3];
  bool concat;       /* targets concatenated 1-D, else padded [N, S] */
  int64_t S;         /* padded: targets' second extent; concatenated: their length */
  int64_t tgt_numel; /* elements of the targets tensor */
  const void *tgt;
  int64_t tgt_st[2]; /* padded: (n, s); concatenated: (0, stride) */
  bool host_lengths, host_targets;
  const void *il, *tl; /* device lengths */
  int64_t il_st, tl_st;
  int64_t s_max; /* the longest target the kernels accept, at most JITOPS__CTC_MAX_S */
  jitops__ctc_staging stage;
} jitops__ctc_call;

/* The longest target a call may have: 2 S + 1 states, and the int32 offsets the kernels form
 * from them, stay far from INT32_MAX. */
#define JITOPS__CTC_MAX_S (INT32_MAX / 4)

/* `bytes` rounded up to JITOPS__CTC_ALIGN into *out; false when that overflows. */
static inline bool jitops__ctc_align_up(size_t bytes, size_t *out) {
  size_t padded;
  if (__builtin_add_overflow(bytes, (size_t)JITOPS__CTC_ALIGN - 1, &padded))
    return false;
  *out = padded & ~((size_t)JITOPS__CTC_ALIGN - 1);
  return true;
}

#endif
