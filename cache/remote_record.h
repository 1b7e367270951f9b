/* What the remote tier stores under a kernel's key: a record that holds everything a local row
 * needs, the row's integrity hash (cache/entry.h), and, when the fleet has a key, a
 * signature.
 *
 * Layout (integers little-endian):
 *   "JITOPSR" and the format version (one byte)         8 bytes
 *   the cache key                                      16
 *   kind, NVRTC version (u32 each), compile time (u64 microseconds)
 *   op, name expression, lowered name, target, options: each a u32 length, then its bytes
 *     and a NUL (counted in the length)
 *   the blob: a u64 length, then its bytes
 *   the integrity hash, jitops__entry_hash of key, kind, target, lowered name and blob  16
 *   the signature scheme (one byte): 0 none; 1 HMAC-SHA256 under the fleet's key, over every
 *     byte before the scheme byte, followed by the 32-byte MAC
 *
 * Invariants:
 *   - A decoded record is sound (jitops__entry_row_fault), its hash right, and, when a key is
 *     given, signed with that key: anything else is refused with the reason. Without a key a
 *     signature is not checked (the server is then trusted as a whole).
 *   - The signature covers the key, the hash and every field, so a signed record cannot be
 *     replayed under another key or with another lowered name. */
#ifndef JITOPS_CACHE_REMOTE_RECORD_H
#define JITOPS_CACHE_REMOTE_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "cache/schema.h"
#include "cache/store.h"

/* Bump when the layout changes. Records live under a namespace that names it and the
 * schema version (whose integrity hash they carry), so libraries of another format never
 * read them, nor overwrite what this one reads. */
#define JITOPS__REMOTE_FORMAT_VERSION 1

#define JITOPS__REMOTE_STRINGIFY_(x) #x
#define JITOPS__REMOTE_STRINGIFY(x)  JITOPS__REMOTE_STRINGIFY_(x)
#define JITOPS__REMOTE_NAMESPACE                                                                   \
  "jitops:" JITOPS__REMOTE_STRINGIFY(JITOPS__REMOTE_FORMAT_VERSION) "." JITOPS__REMOTE_STRINGIFY(  \
      JITOPS__SCHEMA_VERSION) ":"

/* Where a key's record and its claim live: JITOPS__REMOTE_NAMESPACE "kernel:" or "claim:",
 * then the key in 32 lowercase hex digits. */
enum { JITOPS__REMOTE_KEY_BYTES = 96 };
void jitops__remote_record_name(const uint8_t key[16], char out[JITOPS__REMOTE_KEY_BYTES]);
void jitops__remote_claim_name(const uint8_t key[16], char out[JITOPS__REMOTE_KEY_BYTES]);

/* The signing key: none when size is 0. */
typedef struct jitops__signing_key {
  const void *bytes;
  size_t size;
} jitops__signing_key;

/* Encodes `row` (signed when key->size > 0) into a malloc'ed buffer. 0 when out of memory. */
int jitops__remote_record_encode(const jitops__store_row *row, const jitops__signing_key *key,
                                 char **out, size_t *size);

/* Decodes `data` into `row`, whose strings and image point into `data`. NULL when the record
 * is sound, hashed and (with a key) signed; the reason it is not otherwise. */
const char *jitops__remote_record_decode(const void *data, size_t size,
                                         const jitops__signing_key *key, jitops__store_row *row);

#endif
