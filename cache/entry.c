#include "cache/entry.h"

#include <math.h>
#include <string.h>

#include "cache/schema.h"
#include "cache/store_internal.h"
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

/* Each check asks a column's type before reading its value: a read that converts the value
 * leaves its type undefined. */
static int is_text_without_nul(sqlite3_stmt *stmt, int column) {
  if (sqlite3_column_type(stmt, column) != SQLITE_TEXT)
    return 0;
  const char *text = (const char *)sqlite3_column_text(stmt, column);
  return text != NULL && (int)strlen(text) == sqlite3_column_bytes(stmt, column);
}

static int integer_within(sqlite3_stmt *stmt, int column, int64_t min, int64_t max) {
  if (sqlite3_column_type(stmt, column) != SQLITE_INTEGER)
    return 0;
  int64_t value = sqlite3_column_int64(stmt, column);
  return value >= min && value <= max;
}

static int is_number(sqlite3_stmt *stmt, int column) {
  int type = sqlite3_column_type(stmt, column);
  return type == SQLITE_FLOAT || type == SQLITE_INTEGER;
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

static int length_within(const char *text, size_t min, size_t max) {
  size_t length = strlen(text);
  return length >= min && length <= max;
}

const char *jitops__entry_row_fault(const jitops__store_row *row) {
  if (!length_within(row->op, 1, MAX_OP_BYTES) ||
      !length_within(row->name_expression, 1, MAX_TEXT_BYTES) ||
      !length_within(row->lowered_name, 0, MAX_TEXT_BYTES) ||
      !length_within(row->options, 0, MAX_TEXT_BYTES))
    return "a name or the options are not text of a sane length";
  if (!length_within(row->target, 1, MAX_TARGET_BYTES) || !target_is_valid(row->target))
    return "the target is not one such as sm_90";
  if (row->nvrtc_version < 1 || row->nvrtc_version > MAX_NVRTC_VERSION ||
      (unsigned)row->kind >= KIND_COUNT)
    return "the NVRTC version or the kind is unknown";
  if (row->size < 1 || (int64_t)row->size > MAX_BLOB_BYTES)
    return "the blob is empty or larger than any kernel";
  if (!isfinite(row->compile_ms) || row->compile_ms < 0)
    return "a time or a count is negative";
  return NULL;
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

/* The first column of the wrong type or shape, or NULL. Bounds on the values are
 * jitops__entry_row_fault's, shared with rows from the remote tier. */
static const char *type_fault(sqlite3_stmt *s) {
  static const int texts[] = {COL_OP, COL_NAME_EXPR, COL_LOWERED, COL_TARGET, COL_OPTIONS};
  if (sqlite3_column_type(s, COL_KEY) != SQLITE_BLOB || sqlite3_column_bytes(s, COL_KEY) != 16)
    return "the key is not 16 bytes";
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; ++i)
    if (!is_text_without_nul(s, texts[i]))
      return "a name, the target or the options are not text";
  if (sqlite3_column_type(s, COL_NVRTC) != SQLITE_INTEGER ||
      !integer_within(s, COL_KIND, 0, INT32_MAX))
    return "the NVRTC version or the kind is unknown";
  if (sqlite3_column_type(s, COL_BLOB) != SQLITE_BLOB ||
      sqlite3_column_type(s, COL_HASH) != SQLITE_BLOB || sqlite3_column_bytes(s, COL_HASH) != 16)
    return "the blob or its hash is not a blob";
  if (sqlite3_column_type(s, COL_SIZE) != SQLITE_INTEGER ||
      sqlite3_column_int64(s, COL_SIZE) != sqlite3_column_bytes(s, COL_BLOB))
    return "the size is not the blob's length";
  if (!is_number(s, COL_COMPILE_MS) || !integer_within(s, COL_CREATED, 0, INT64_MAX) ||
      !integer_within(s, COL_LAST_USED, 0, INT64_MAX) ||
      !integer_within(s, COL_USE_COUNT, 0, INT64_MAX))
    return "a time or a count is negative";
  return NULL;
}

static const char *text_of(sqlite3_stmt *s, int column) {
  return (const char *)sqlite3_column_text(s, column);
}

void jitops__entry_row_read(sqlite3_stmt *s, jitops__store_row *row) {
  memcpy(row->key, sqlite3_column_blob(s, COL_KEY), 16);
  row->op = text_of(s, COL_OP);
  row->name_expression = text_of(s, COL_NAME_EXPR);
  row->lowered_name = text_of(s, COL_LOWERED);
  row->target = text_of(s, COL_TARGET);
  int64_t nvrtc = sqlite3_column_int64(s, COL_NVRTC);
  row->nvrtc_version = nvrtc < 1 || nvrtc > MAX_NVRTC_VERSION ? 0 : (int)nvrtc;
  row->options = text_of(s, COL_OPTIONS);
  row->kind = (jitops__blob_kind)sqlite3_column_int(s, COL_KIND);
  row->image = sqlite3_column_blob(s, COL_BLOB);
  row->size = (size_t)sqlite3_column_bytes(s, COL_BLOB);
  row->compile_ms = sqlite3_column_double(s, COL_COMPILE_MS);
}

/* The first column out of bounds, or NULL. */
static const char *column_fault(sqlite3_stmt *s) {
  const char *fault = type_fault(s);
  if (fault != NULL)
    return fault;
  jitops__store_row row;
  jitops__entry_row_read(s, &row);
  return jitops__entry_row_fault(&row);
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

/* ---- writing --------------------------------------------------------------------------- */

int jitops__entry_insert(sqlite3 *handle, const jitops__store_row *row, int replace) {
  sqlite3_stmt *stmt = NULL;
  int rc = jitops__db_prepare(handle,
                              replace ? "INSERT OR REPLACE INTO kernels(" JITOPS__ENTRY_COLUMNS ")"
                                        " VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)"
                                      : "INSERT OR IGNORE INTO kernels(" JITOPS__ENTRY_COLUMNS ")"
                                        " VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
                              &stmt);
  if (rc != SQLITE_OK)
    return rc;
  uint8_t hash[16];
  jitops__entry_hash(row->key, (int)row->kind, row->target, row->lowered_name, row->image,
                     row->size, hash);
  int64_t now = jitops__store_now_ms();
  sqlite3_bind_blob(stmt, 1, row->key, 16, SQLITE_STATIC);
  sqlite3_bind_text(stmt, 2, row->op, -1, SQLITE_STATIC);
  sqlite3_bind_text(stmt, 3, row->name_expression, -1, SQLITE_STATIC);
  sqlite3_bind_text(stmt, 4, row->lowered_name, -1, SQLITE_STATIC);
  sqlite3_bind_text(stmt, 5, row->target, -1, SQLITE_STATIC);
  sqlite3_bind_int(stmt, 6, row->nvrtc_version);
  sqlite3_bind_text(stmt, 7, row->options, -1, SQLITE_STATIC);
  sqlite3_bind_int(stmt, 8, (int)row->kind);
  sqlite3_bind_blob64(stmt, 9, row->image, row->size, SQLITE_STATIC);
  sqlite3_bind_blob(stmt, 10, hash, 16, SQLITE_STATIC);
  sqlite3_bind_int64(stmt, 11, (int64_t)row->size);
  sqlite3_bind_double(stmt, 12, row->compile_ms);
  sqlite3_bind_int64(stmt, 13, now);
  sqlite3_bind_int64(stmt, 14, now);
  rc = sqlite3_step(stmt);
  sqlite3_finalize(stmt);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}
