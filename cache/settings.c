#include "cache/settings.h"

#include "common/env.h"

enum { DEFAULT_MAX_BYTES = 1 << 30 };

jitops_cache_mode jitops__cache_mode_from_env(void) {
  static const jitops__env_word words[] = {
      {"off", JITOPS_CACHE_MODE_OFF},           {"0", JITOPS_CACHE_MODE_OFF},
      {"readonly", JITOPS_CACHE_MODE_READONLY}, {"readwrite", JITOPS_CACHE_MODE_READWRITE},
      {"on", JITOPS_CACHE_MODE_READWRITE},      {"1", JITOPS_CACHE_MODE_READWRITE}};
  return (jitops_cache_mode)jitops__env_word_value(
      "JITOPS_CACHE", words, sizeof words / sizeof words[0], JITOPS_CACHE_MODE_READWRITE);
}

int64_t jitops__cache_max_bytes_from_env(void) {
  return jitops__env_size("JITOPS_CACHE_MAX_BYTES", DEFAULT_MAX_BYTES, JITOPS__SIZE_LIMIT);
}

jitops_cache_mode jitops__cache_mode_resolve(jitops_cache_mode configured) {
  return configured != JITOPS_CACHE_MODE_DEFAULT ? configured : jitops__cache_mode_from_env();
}

int64_t jitops__cache_max_bytes_resolve(int64_t configured) {
  return configured != 0 ? configured : jitops__cache_max_bytes_from_env();
}
