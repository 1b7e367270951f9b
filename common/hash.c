#include "common/hash.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

jitops__key jitops__content_hash(const void *data, size_t size) {
  XXH128_hash_t h = XXH3_128bits(data, size);
  jitops__key key = {h.low64, h.high64};
  return key;
}

void jitops__key_to_bytes(jitops__key key, uint8_t out[16]) {
  for (int i = 0; i < 8; ++i) {
    out[i] = (uint8_t)(key.lo >> (8 * i));
    out[8 + i] = (uint8_t)(key.hi >> (8 * i));
  }
}

jitops__key jitops__key_from_bytes(const uint8_t in[16]) {
  jitops__key key = {0, 0};
  for (int i = 0; i < 8; ++i) {
    key.lo |= (uint64_t)in[i] << (8 * i);
    key.hi |= (uint64_t)in[8 + i] << (8 * i);
  }
  return key;
}

void jitops__key_to_hex(jitops__key key, char out[33]) {
  static const char digits[] = "0123456789abcdef";
  uint8_t bytes[16];
  jitops__key_to_bytes(key, bytes);
  for (int i = 0; i < 16; ++i) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 15];
  }
  out[32] = 0;
}
