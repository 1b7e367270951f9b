/* SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for signing the blobs of the remote tier:
 * a blob there is code that will run on the GPU, and a key shared by the fleet is what tells
 * a blob one of its nodes published from one anybody with access to the server wrote.
 *
 * Written here rather than taken from a crypto library because the tier needs nothing else
 * from one: a library dependency (OpenSSL, libgcrypt, nettle) for 150 lines of a fixed,
 * standard function would cost every build and installation more than it saves. Checked
 * against FIPS 180-2's and RFC 4231's test vectors (tests/test_sha256_hmac.c). */
#ifndef JITOPS_COMMON_SHA256_H
#define JITOPS_COMMON_SHA256_H

#include <stddef.h>
#include <stdint.h>

enum { JITOPS__SHA256_BYTES = 32, JITOPS__SHA256_BLOCK_BYTES = 64 };

typedef struct jitops__sha256 {
  uint32_t state[8];
  uint64_t length; /* bytes hashed so far */
  uint8_t block[JITOPS__SHA256_BLOCK_BYTES];
  size_t used; /* bytes of `block` filled */
} jitops__sha256;

void jitops__sha256_init(jitops__sha256 *ctx);
void jitops__sha256_update(jitops__sha256 *ctx, const void *data, size_t size);
void jitops__sha256_final(jitops__sha256 *ctx, uint8_t out[JITOPS__SHA256_BYTES]);

/* HMAC-SHA256 of `message` under `key` (any length: a key longer than a block is hashed
 * first, as RFC 2104 says). */
void jitops__hmac_sha256(const void *key, size_t key_size, const void *message, size_t size,
                         uint8_t out[JITOPS__SHA256_BYTES]);

/* 1 when the `size` bytes of `a` and `b` are equal, in a time that does not depend on where
 * they differ (a signature check must not tell a forger how many bytes were right). */
int jitops__equal_in_constant_time(const void *a, const void *b, size_t size);

#endif
