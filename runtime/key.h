/* Keys. Two 128-bit XXH3 hashes identify a kernel:
 *   - the lookup key, over (source name, name expression, options as given): what a request
 *     names. A source name's contents never change within a runtime, so within one runtime
 *     it identifies the binary. It keys the in-memory registry, so a hit hashes only the
 *     request's own short strings.
 *   - the cache key, over everything that determines the binary: the cache format version,
 *     the target, the NVRTC version, the closure of source texts (the main source and every
 *     source it includes, by content, never by path or time), the name expression and the
 *     normalized compile options. It keys the disk cache, shared across processes. */
#ifndef JITOPS_RUNTIME_KEY_H
#define JITOPS_RUNTIME_KEY_H

#include <stddef.h>
#include <stdint.h>

#include "common/hash.h"

/* Bump when the stored format (blob layout, option defaults, key inputs) changes.
 * 2: --no-source-include joined the default options. */
#define JITOPS__CACHE_FORMAT_VERSION 2

/* The lookup key of a request. */
jitops__key jitops__lookup_key(const char *source_name, const char *name_expression,
                               const char *const *options, size_t num_options);

/* Everything the cache key covers. `options` are the normalized, complete options
 * (defaults and target included) in the order NVRTC gets them. */
typedef struct jitops__cache_key_inputs {
  const char *target; /* "sm_90" or "compute_90" */
  int nvrtc_version;  /* 1300 */
  jitops__key source_closure;
  const char *name_expression;
  const char *const *options;
  size_t num_options;
} jitops__cache_key_inputs;

jitops__key jitops__cache_key(const jitops__cache_key_inputs *inputs);

#endif
