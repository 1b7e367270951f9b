#include "runtime/key.h"

#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

static jitops__key from_xxh(XXH128_hash_t h) {
  jitops__key key = {h.low64, h.high64};
  return key;
}

/* Appends a NUL-terminated field (terminator included, so fields cannot run into each other)
 * to the streaming state. */
static void add_field(XXH3_state_t *state, const char *text) {
  XXH3_128bits_update(state, text, strlen(text) + 1);
}

enum { LOOKUP_STACK_BYTES = 1024 };

static size_t append(char *buffer, size_t used, const char *text) {
  size_t n = strlen(text) + 1;
  if (used + n <= LOOKUP_STACK_BYTES)
    memcpy(buffer + used, text, n);
  return used + n;
}

jitops__key jitops__lookup_key(const char *source_name, const char *name_expression,
                               const char *const *options, size_t num_options) {
  /* The hot path: one one-shot hash over a stack buffer for the usual short request; the
   * streaming state only for requests that do not fit. */
  char buffer[LOOKUP_STACK_BYTES];
  size_t used = append(buffer, 0, source_name);
  used = append(buffer, used, name_expression);
  for (size_t i = 0; i < num_options; ++i)
    used = append(buffer, used, options[i]);
  if (used <= LOOKUP_STACK_BYTES)
    return from_xxh(XXH3_128bits(buffer, used));
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_128bits_reset(&state);
  add_field(&state, source_name);
  add_field(&state, name_expression);
  for (size_t i = 0; i < num_options; ++i)
    add_field(&state, options[i]);
  return from_xxh(XXH3_128bits_digest(&state));
}

jitops__key jitops__cache_key(const jitops__cache_key_inputs *in) {
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_128bits_reset(&state);
  const uint32_t header[2] = {JITOPS__CACHE_FORMAT_VERSION, (uint32_t)in->nvrtc_version};
  XXH3_128bits_update(&state, header, sizeof header);
  add_field(&state, in->target);
  uint8_t closure[16];
  jitops__key_to_bytes(in->source_closure, closure);
  XXH3_128bits_update(&state, closure, sizeof closure);
  add_field(&state, in->name_expression);
  const uint64_t count = in->num_options;
  XXH3_128bits_update(&state, &count, sizeof count);
  for (size_t i = 0; i < in->num_options; ++i)
    add_field(&state, in->options[i]);
  return from_xxh(XXH3_128bits_digest(&state));
}
