/* Hashing: the 128-bit XXH3 hash every key in the library is made of, the hash of a byte
 * string, and the fixed byte and hex forms keys are stored and shown in. What goes into a
 * particular key (a kernel request, a cache entry) is the runtime's business (runtime/key.h);
 * the disk cache only needs to hash blobs and to store keys. */
#ifndef JITOPS_COMMON_HASH_H
#define JITOPS_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>

typedef struct jitops__key {
  uint64_t lo, hi;
} jitops__key;

static inline int jitops__key_equal(jitops__key a, jitops__key b) {
  return a.lo == b.lo && a.hi == b.hi;
}

/* XXH3-128 of `size` bytes. */
jitops__key jitops__content_hash(const void *data, size_t size);

/* 16 bytes, little-endian lo then hi: how keys are stored. */
void jitops__key_to_bytes(jitops__key key, uint8_t out[16]);
jitops__key jitops__key_from_bytes(const uint8_t in[16]);

/* 32 lowercase hex digits plus NUL. */
void jitops__key_to_hex(jitops__key key, char out[33]);

#endif
