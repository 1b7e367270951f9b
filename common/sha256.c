#include "common/sha256.h"

#include <string.h>

static const uint32_t round_constants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t rotate_right(uint32_t x, unsigned n) {
  return (x >> n) | (x << (32 - n));
}

static uint32_t load_be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void store_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

/* The message schedule of one block: 16 words of it, then 48 derived. */
static void schedule(const uint8_t block[64], uint32_t w[64]) {
  for (int i = 0; i < 16; ++i)
    w[i] = load_be32(block + 4 * i);
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = rotate_right(w[i - 15], 7) ^ rotate_right(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotate_right(w[i - 2], 17) ^ rotate_right(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
}

static void compress(uint32_t state[8], const uint8_t block[64]) {
  uint32_t w[64], v[8];
  schedule(block, w);
  memcpy(v, state, sizeof v);
  for (int i = 0; i < 64; ++i) {
    uint32_t s1 = rotate_right(v[4], 6) ^ rotate_right(v[4], 11) ^ rotate_right(v[4], 25);
    uint32_t choice = (v[4] & v[5]) ^ (~v[4] & v[6]);
    uint32_t t1 = v[7] + s1 + choice + round_constants[i] + w[i];
    uint32_t s0 = rotate_right(v[0], 2) ^ rotate_right(v[0], 13) ^ rotate_right(v[0], 22);
    uint32_t majority = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
    memmove(v + 1, v, 7 * sizeof v[0]);
    v[4] += t1;
    v[0] = t1 + s0 + majority;
  }
  for (int i = 0; i < 8; ++i)
    state[i] += v[i];
}

void jitops__sha256_init(jitops__sha256 *ctx) {
  static const uint32_t initial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                      0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(ctx->state, initial, sizeof initial);
  ctx->length = 0;
  ctx->used = 0;
}

void jitops__sha256_update(jitops__sha256 *ctx, const void *data, size_t size) {
  const uint8_t *p = data;
  ctx->length += size;
  while (size > 0) {
    size_t take = JITOPS__SHA256_BLOCK_BYTES - ctx->used;
    if (take > size)
      take = size;
    memcpy(ctx->block + ctx->used, p, take);
    ctx->used += take;
    p += take;
    size -= take;
    if (ctx->used == JITOPS__SHA256_BLOCK_BYTES) {
      compress(ctx->state, ctx->block);
      ctx->used = 0;
    }
  }
}

/* Pads with 0x80, zeros and the message's length in bits (big-endian), as FIPS 180-4 5.1.1
 * says, then writes the state big-endian. */
void jitops__sha256_final(jitops__sha256 *ctx, uint8_t out[JITOPS__SHA256_BYTES]) {
  uint64_t bits = ctx->length * 8;
  ctx->block[ctx->used++] = 0x80;
  if (ctx->used > JITOPS__SHA256_BLOCK_BYTES - 8) {
    memset(ctx->block + ctx->used, 0, JITOPS__SHA256_BLOCK_BYTES - ctx->used);
    compress(ctx->state, ctx->block);
    ctx->used = 0;
  }
  memset(ctx->block + ctx->used, 0, JITOPS__SHA256_BLOCK_BYTES - 8 - ctx->used);
  for (int i = 0; i < 8; ++i)
    ctx->block[JITOPS__SHA256_BLOCK_BYTES - 1 - i] = (uint8_t)(bits >> (8 * i));
  compress(ctx->state, ctx->block);
  for (int i = 0; i < 8; ++i)
    store_be32(out + 4 * i, ctx->state[i]);
  memset(ctx, 0, sizeof *ctx);
}

/* H((K ^ opad) || H((K ^ ipad) || message)), with K the key padded (or first hashed) to a
 * block. */
void jitops__hmac_sha256(const void *key, size_t key_size, const void *message, size_t size,
                         uint8_t out[JITOPS__SHA256_BYTES]) {
  uint8_t block_key[JITOPS__SHA256_BLOCK_BYTES] = {0}, pad[JITOPS__SHA256_BLOCK_BYTES];
  uint8_t inner[JITOPS__SHA256_BYTES];
  jitops__sha256 ctx;
  if (key_size > JITOPS__SHA256_BLOCK_BYTES) {
    jitops__sha256_init(&ctx);
    jitops__sha256_update(&ctx, key, key_size);
    jitops__sha256_final(&ctx, block_key);
  } else if (key_size > 0) {
    memcpy(block_key, key, key_size);
  }
  for (int i = 0; i < JITOPS__SHA256_BLOCK_BYTES; ++i)
    pad[i] = block_key[i] ^ 0x36;
  jitops__sha256_init(&ctx);
  jitops__sha256_update(&ctx, pad, sizeof pad);
  jitops__sha256_update(&ctx, message, size);
  jitops__sha256_final(&ctx, inner);
  for (int i = 0; i < JITOPS__SHA256_BLOCK_BYTES; ++i)
    pad[i] = block_key[i] ^ 0x5c;
  jitops__sha256_init(&ctx);
  jitops__sha256_update(&ctx, pad, sizeof pad);
  jitops__sha256_update(&ctx, inner, sizeof inner);
  jitops__sha256_final(&ctx, out);
  memset(block_key, 0, sizeof block_key);
  memset(pad, 0, sizeof pad);
}

int jitops__equal_in_constant_time(const void *a, const void *b, size_t size) {
  const volatile uint8_t *x = a, *y = b;
  uint8_t difference = 0;
  for (size_t i = 0; i < size; ++i)
    difference |= x[i] ^ y[i];
  return difference == 0;
}
