#include "cache/entry.h"

#include <math.h>
#include <string.h>

#include "cache/schema.h"
#include "common/hash.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

/* Bounds of the columns a row from outside may hold. Names and options are far below them
 * (a source name is at most 255 bytes, a request's options 4 KiB); a blob of a gigabyte is
 * no kernel. */
enum {
  MAX_OP_BYTES = 255,
  MAX_TEXT_BYTES = 16384,
  MAX_TARGET_BYTES = 23,
  MAX_NVRTC_VERSION = 100000,
  KIND_COUNT = 3 /* jitops__blob_kind: CUBIN, PTX, TUNED */
};
#define MAX_BLOB_BYTES ((int64_t)1 << 30)
#define STRINGIFY_(x)  #x
#define STRINGIFY(x)   STRINGIFY_(x)

/* Each field ends with its terminating NUL (the blob with its length first), so that no two
 * splits of the same bytes hash alike; the tag names the schema the hash belongs to. */
void jitops__entry_hash(const uint8_t key[16], int kind, const char *target,
                        const char *lowered_name, const void *blob, size_t size, uint8_t out[16]) {
  static const char tag[] = "jitops-entry-v" STRINGIFY(JITOPS__SCHEMA_VERSION);
  const uint64_t numbers[2] = {(uint64_t)kind, (uint64_t)size};
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_128bits_reset(&state);
  XXH3_128bits_update(&state, tag, sizeof tag);
  XXH3_128bits_update(&state, key, 16);
  XXH3_128bits_update(&state, numbers, sizeof numbers);
  XXH3_128bits_update(&state, target, strlen(target) + 1);
  XXH3_128bits_update(&state, lowered_name, strlen(lowered_name) + 1);
  XXH3_128bits_update(&state, blob, size);
  XXH128_hash_t h = XXH3_128bits_digest(&state);
  jitops__key_to_bytes((jitops__key){h.low64, h.high64}, out);
}

/* ---- soundness ------------------------------------------------------------------------- */

/* Text of `min`..`max` bytes with no NUL inside. */
static int text_within(sqlite3_stmt *stmt, int column, int min, int max) {
  if (sqlite3_column_type(stmt, column) != SQLITE_TEXT)
    return 0;
  const char *text = (const char *)sqlite3_column_text(stmt, column);
  int bytes = sqlite3_column_bytes(stmt, column);
  return text != NULL && bytes >= min && bytes <= max && (int)strlen(text) == bytes;
}

/* Each check asks a column's type before reading its value: a read that converts the value
 * leaves its type undefined. */
static int integer_within(sqlite3_stmt *stmt, int column, int64_t min, int64_t max) {
  if (sqlite3_column_type(stmt, column) != SQLITE_INTEGER)
    return 0;
  int64_t value = sqlite3_column_int64(stmt, column);
  return value >= min && value <= max;
}

static int duration_is_valid(sqlite3_stmt *stmt, int column) {
  int type = sqlite3_column_type(stmt, column);
  if (type != SQLITE_FLOAT && type != SQLITE_INTEGER)
    return 0;
  double ms = sqlite3_column_double(stmt, column);
  return isfinite(ms) && ms >= 0;
}

/* "sm_90", "compute_89", "sm_90a": what NVRTC's --gpu-architecture takes. */
static int target_is_valid(const char *target) {
  const char *digits = strncmp(target, "sm_", 3) == 0        ? target + 3
                       : strncmp(target, "compute_", 8) == 0 ? target + 8
                                                             : NULL;
  if (digits == NULL)
    return 0;
  size_t n = strspn(digits, "0123456789");
  const char *rest = digits + n;
  return n >= 2 && n <= 3 && (rest[0] == 0 || (strchr("af", rest[0]) && rest[1] == 0));
}

enum {
  COL_KEY,
  COL_OP,
  COL_NAME_EXPR,
  COL_LOWERED,
  COL_TARGET,
  COL_NVRTC,
  COL_OPTIONS,
  COL_KIND,
  COL_BLOB,
  COL_HASH,
  COL_SIZE,
  COL_COMPILE_MS,
  COL_CREATED,
  COL_LAST_USED,
  COL_USE_COUNT
};

/* The first column out of bounds, or NULL. */
static const char *column_fault(sqlite3_stmt *s) {
  if (sqlite3_column_type(s, COL_KEY) != SQLITE_BLOB || sqlite3_column_bytes(s, COL_KEY) != 16)
    return "the key is not 16 bytes";
  if (!text_within(s, COL_OP, 1, MAX_OP_BYTES) ||
      !text_within(s, COL_NAME_EXPR, 1, MAX_TEXT_BYTES) ||
      !text_within(s, COL_LOWERED, 0, MAX_TEXT_BYTES) ||
      !text_within(s, COL_OPTIONS, 0, MAX_TEXT_BYTES))
    return "a name or the options are not text of a sane length";
  if (!text_within(s, COL_TARGET, 1, MAX_TARGET_BYTES) ||
      !target_is_valid((const char *)sqlite3_column_text(s, COL_TARGET)))
    return "the target is not one such as sm_90";
  if (!integer_within(s, COL_NVRTC, 1, MAX_NVRTC_VERSION) ||
      !integer_within(s, COL_KIND, 0, KIND_COUNT - 1))
    return "the NVRTC version or the kind is unknown";
  if (sqlite3_column_type(s, COL_BLOB) != SQLITE_BLOB ||
      sqlite3_column_type(s, COL_HASH) != SQLITE_BLOB || sqlite3_column_bytes(s, COL_HASH) != 16)
    return "the blob or its hash is not a blob";
  if (!integer_within(s, COL_SIZE, 1, MAX_BLOB_BYTES) ||
      sqlite3_column_int64(s, COL_SIZE) != sqlite3_column_bytes(s, COL_BLOB))
    return "the size is not the blob's length";
  if (!duration_is_valid(s, COL_COMPILE_MS) || !integer_within(s, COL_CREATED, 0, INT64_MAX) ||
      !integer_within(s, COL_LAST_USED, 0, INT64_MAX) ||
      !integer_within(s, COL_USE_COUNT, 0, INT64_MAX))
    return "a time or a count is negative";
  return NULL;
}

int jitops__entry_is_sound(sqlite3_stmt *stmt, const char **fault) {
  *fault = column_fault(stmt);
  if (*fault != NULL)
    return 0;
  uint8_t expected[16];
  jitops__entry_hash(sqlite3_column_blob(stmt, COL_KEY), sqlite3_column_int(stmt, COL_KIND),
                     (const char *)sqlite3_column_text(stmt, COL_TARGET),
                     (const char *)sqlite3_column_text(stmt, COL_LOWERED),
                     sqlite3_column_blob(stmt, COL_BLOB),
                     (size_t)sqlite3_column_bytes(stmt, COL_BLOB), expected);
  if (memcmp(sqlite3_column_blob(stmt, COL_HASH), expected, 16) != 0)
    *fault = "its hash does not match";
  return *fault == NULL;
}
