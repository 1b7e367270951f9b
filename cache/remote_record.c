#include "cache/remote_record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/entry.h"
#include "common/sha256.h"

static const char magic[7] = {'J', 'I', 'T', 'O', 'P', 'S', 'R'};

enum { SCHEME_NONE = 0, SCHEME_HMAC_SHA256 = 1, TEXT_COUNT = 5 };

static void name_with(const char *kind, const uint8_t key[16], char *out) {
  int n = snprintf(out, JITOPS__REMOTE_KEY_BYTES, "%s%s:", JITOPS__REMOTE_NAMESPACE, kind);
  for (int i = 0; i < 16; ++i)
    n += snprintf(out + n, (size_t)(JITOPS__REMOTE_KEY_BYTES - n), "%02x", key[i]);
}

void jitops__remote_record_name(const uint8_t key[16], char out[JITOPS__REMOTE_KEY_BYTES]) {
  name_with("kernel", key, out);
}

void jitops__remote_claim_name(const uint8_t key[16], char out[JITOPS__REMOTE_KEY_BYTES]) {
  name_with("claim", key, out);
}

/* ---- encoding -------------------------------------------------------------------------- */

typedef struct writer {
  char *data;
  size_t used;
} writer;

static void put(writer *w, const void *bytes, size_t size) {
  memcpy(w->data + w->used, bytes, size);
  w->used += size;
}

static void put_le(writer *w, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i)
    w->data[w->used++] = (char)(value >> (8 * i));
}

static void put_text(writer *w, const char *text) {
  size_t length = strlen(text) + 1;
  put_le(w, length, 4);
  put(w, text, length);
}

static void texts_of(const jitops__store_row *row, const char *texts[TEXT_COUNT]) {
  texts[0] = row->op;
  texts[1] = row->name_expression;
  texts[2] = row->lowered_name;
  texts[3] = row->target;
  texts[4] = row->options;
}

int jitops__remote_record_encode(const jitops__store_row *row, const jitops__signing_key *key,
                                 char **out, size_t *size) {
  const char *texts[TEXT_COUNT];
  texts_of(row, texts);
  size_t capacity = 8 + 16 + 16 + 8 + row->size + 16 + 1 + JITOPS__SHA256_BYTES;
  for (int i = 0; i < TEXT_COUNT; ++i)
    capacity += 4 + strlen(texts[i]) + 1;
  writer w = {malloc(capacity), 0};
  if (w.data == NULL)
    return 0;
  put(&w, magic, sizeof magic);
  put_le(&w, JITOPS__REMOTE_FORMAT_VERSION, 1);
  put(&w, row->key, 16);
  put_le(&w, (uint64_t)row->kind, 4);
  put_le(&w, (uint64_t)row->nvrtc_version, 4);
  put_le(&w, (uint64_t)(row->compile_ms * 1000.0), 8);
  for (int i = 0; i < TEXT_COUNT; ++i)
    put_text(&w, texts[i]);
  put_le(&w, row->size, 8);
  put(&w, row->image, row->size);
  uint8_t hash[16];
  jitops__entry_hash(row->key, (int)row->kind, row->target, row->lowered_name, row->image,
                     row->size, hash);
  put(&w, hash, sizeof hash);
  size_t signed_bytes = w.used;
  put_le(&w, key->size > 0 ? SCHEME_HMAC_SHA256 : SCHEME_NONE, 1);
  if (key->size > 0) {
    uint8_t mac[JITOPS__SHA256_BYTES];
    jitops__hmac_sha256(key->bytes, key->size, w.data, signed_bytes, mac);
    put(&w, mac, sizeof mac);
  }
  *out = w.data;
  *size = w.used;
  return 1;
}

/* ---- decoding -------------------------------------------------------------------------- */

typedef struct reader {
  const unsigned char *data;
  size_t size, at;
  int short_read; /* a read went past the end */
} reader;

static const void *take(reader *r, size_t size) {
  if (r->short_read || size > r->size - r->at) {
    r->short_read = 1;
    return NULL;
  }
  const void *at = r->data + r->at;
  r->at += size;
  return at;
}

static uint64_t take_le(reader *r, size_t bytes) {
  const unsigned char *p = take(r, bytes);
  uint64_t value = 0;
  for (size_t i = 0; p != NULL && i < bytes; ++i)
    value |= (uint64_t)p[i] << (8 * i);
  return value;
}

/* A text: its length counts a NUL that must end it, and no NUL may come before. */
static const char *take_text(reader *r) {
  uint64_t length = take_le(r, 4);
  const char *text = length > 0 ? take(r, (size_t)length) : NULL;
  if (text == NULL || text[length - 1] != 0 || strlen(text) != length - 1)
    return NULL;
  return text;
}

/* The fields, up to and including the hash; NULL or the first fault. */
static const char *take_fields(reader *r, jitops__store_row *row, const uint8_t **hash) {
  const char *head = take(r, sizeof magic);
  if (head == NULL || memcmp(head, magic, sizeof magic) != 0)
    return "not a libjitops record";
  if (take_le(r, 1) != JITOPS__REMOTE_FORMAT_VERSION)
    return "a record of another format version";
  const uint8_t *key = take(r, 16);
  uint64_t kind = take_le(r, 4), nvrtc = take_le(r, 4), compile_us = take_le(r, 8);
  const char *texts[TEXT_COUNT];
  for (int i = 0; i < TEXT_COUNT; ++i)
    if ((texts[i] = take_text(r)) == NULL)
      return "a record whose texts are malformed";
  uint64_t size = take_le(r, 8);
  const void *image = take(r, (size_t)size);
  *hash = take(r, 16);
  if (r->short_read || key == NULL)
    return "a truncated record";
  memcpy(row->key, key, 16);
  row->kind = kind > 100 ? (jitops__blob_kind)100 : (jitops__blob_kind)kind;
  row->nvrtc_version = nvrtc > 1000000 ? 0 : (int)nvrtc;
  row->compile_ms = (double)compile_us / 1000.0;
  row->op = texts[0];
  row->name_expression = texts[1];
  row->lowered_name = texts[2];
  row->target = texts[3];
  row->options = texts[4];
  row->image = image;
  row->size = (size_t)size;
  return NULL;
}

static const char *check_signature(reader *r, const jitops__signing_key *key) {
  size_t signed_bytes = r->at;
  uint64_t scheme = take_le(r, 1);
  const void *mac = scheme == SCHEME_HMAC_SHA256 ? take(r, JITOPS__SHA256_BYTES) : NULL;
  if (r->short_read || (scheme != SCHEME_NONE && mac == NULL))
    return "a record whose signature is truncated or of an unknown scheme";
  if (r->at != r->size)
    return "a record with bytes after its end";
  if (key->size == 0)
    return NULL; /* no key: the server is trusted, signed or not */
  if (scheme != SCHEME_HMAC_SHA256)
    return "an unsigned record (JITOPS_CACHE_REMOTE_KEY is set: every record must be signed)";
  uint8_t expected[JITOPS__SHA256_BYTES];
  jitops__hmac_sha256(key->bytes, key->size, r->data, signed_bytes, expected);
  if (!jitops__equal_in_constant_time(expected, mac, sizeof expected))
    return "a record whose signature is wrong (signed with another key, or changed since)";
  return NULL;
}

const char *jitops__remote_record_decode(const void *data, size_t size,
                                         const jitops__signing_key *key, jitops__store_row *row) {
  reader r = {data, size, 0, 0};
  const uint8_t *hash = NULL;
  memset(row, 0, sizeof *row);
  const char *fault = take_fields(&r, row, &hash);
  if (fault == NULL)
    fault = check_signature(&r, key);
  if (fault == NULL && (fault = jitops__entry_row_fault(row)) == NULL &&
      row->kind == JITOPS__BLOB_TUNED)
    fault = "a record of a timed choice, not of a kernel";
  if (fault != NULL)
    return fault;
  uint8_t expected[16];
  jitops__entry_hash(row->key, (int)row->kind, row->target, row->lowered_name, row->image,
                     row->size, expected);
  return memcmp(expected, hash, sizeof expected) == 0 ? NULL : "a record whose hash does not match";
}
