/* The remote tier's parts that need no server: the address grammar (cache/remote_url.h), the
 * record's encoding and every check of its decoding (cache/remote_record.h), and the circuit
 * breaker's rule (cache/remote_breaker.h). */
#include "cache/remote_breaker.h"
#include "cache/remote_record.h"
#include "cache/remote_url.h"
#include "testutil.h"

static void check_url(const char *url, const char *host, int port, int db, const char *user,
                      const char *password) {
  jitops__remote_address a;
  if (jitops__remote_url_parse(url, &a) != JITOPS_SUCCESS) {
    fprintf(stderr, "%s: refused: %s\n", url, jitops_last_error());
    ++test_failures;
    return;
  }
  CHECK(strcmp(a.host, host) == 0 && a.port == port && a.db == db);
  CHECK(strcmp(a.user, user) == 0 && strcmp(a.password, password) == 0);
  CHECK(a.has_password == (password[0] != 0));
}

static void urls(void) {
  check_url("redis://127.0.0.1:6380", "127.0.0.1", 6380, 0, "", "");
  check_url("redis://cache.example:7000/3", "cache.example", 7000, 3, "", "");
  check_url("redis://localhost", "localhost", 6379, 0, "", "");
  check_url("redis://[::1]:6390/1", "::1", 6390, 1, "", "");
  check_url("redis://:s3cret@host:1/", "host", 1, 0, "", "s3cret");
  check_url("redis://jit:p%40ss:w@host:2", "host", 2, 0, "jit", "p@ss:w");
  check_url("redis://jit:a@b@host:2", "host", 2, 0, "jit", "a@b");
  static const char *const refused[][2] = {{"rediss://host:1", "TLS"},
                                           {"http://host:1", "redis://"},
                                           {"redis://", "no host"},
                                           {"redis://host:0", "port"},
                                           {"redis://host:70000", "port"},
                                           {"redis://host:x", "port"},
                                           {"redis://user@host:1", "password"},
                                           {"redis://host:1/db", "database"},
                                           {"redis://host:1?x=1", "query"},
                                           {"redis://[::1:1", "IPv6"},
                                           {"redis://a:%zz@host", "percent"}};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; ++i) {
    jitops__remote_address a;
    CHECK_FAILS(jitops__remote_url_parse(refused[i][0], &a), JITOPS_ERR_INVALID_ARGUMENT,
                refused[i][1]);
  }
  jitops__remote_address a;
  char shown[320];
  CHECK_OK(jitops__remote_url_parse("redis://jit:hidden@host:2/5", &a));
  jitops__remote_url_describe(&a, shown, sizeof shown);
  CHECK(strcmp(shown, "redis://jit@host:2/5") == 0 && strstr(shown, "hidden") == NULL);
}

/* ---- records --------------------------------------------------------------------------- */

static const unsigned char image[] = "\x7f"
                                     "ELF a kernel's bytes";

static jitops__store_row sample_row(void) {
  jitops__store_row row;
  memset(&row, 0, sizeof row);
  for (int i = 0; i < 16; ++i)
    row.key[i] = (uint8_t)(i * 7);
  row.op = "jitops/example.cuh";
  row.name_expression = "jitops::example_axpy<float, 1>";
  row.lowered_name = "_ZN6jitops12example_axpyIfLi1EEEvlfPKT_S3_PS1_";
  row.target = "sm_90";
  row.nvrtc_version = 1300;
  row.options = "-std=c++17 --gpu-architecture=sm_90";
  row.kind = JITOPS__BLOB_CUBIN;
  row.image = image;
  row.size = sizeof image;
  row.compile_ms = 123.456;
  return row;
}

static const char *decode(const char *data, size_t size, const char *key, jitops__store_row *out) {
  jitops__signing_key signing = {key, key ? strlen(key) : 0};
  return jitops__remote_record_decode(data, size, &signing, out);
}

static char *encode(const jitops__store_row *row, const char *key, size_t *size) {
  jitops__signing_key signing = {key, key ? strlen(key) : 0};
  char *data = NULL;
  CHECK(jitops__remote_record_encode(row, &signing, &data, size));
  return data;
}

/* Refused, with a reason that names `needle`. */
static void check_refused(const char *data, size_t size, const char *key, const char *needle) {
  jitops__store_row out;
  const char *fault = decode(data, size, key, &out);
  if (fault == NULL || strstr(fault, needle) == NULL) {
    fprintf(stderr, "expected a refusal naming \"%s\", got %s\n", needle, fault ? fault : "none");
    ++test_failures;
  }
}

static void round_trips(void) {
  jitops__store_row row = sample_row(), out;
  size_t size;
  char *data = encode(&row, NULL, &size);
  CHECK(decode(data, size, NULL, &out) == NULL);
  CHECK(memcmp(out.key, row.key, 16) == 0 && out.kind == row.kind && out.size == row.size);
  CHECK(memcmp(out.image, image, sizeof image) == 0 && out.nvrtc_version == 1300);
  CHECK(strcmp(out.lowered_name, row.lowered_name) == 0 && strcmp(out.options, row.options) == 0);
  CHECK(out.compile_ms > 123.4 && out.compile_ms < 123.5);
  check_refused(data, size, "fleet key", "unsigned");
  free(data);
  data = encode(&row, "fleet key", &size);
  CHECK(decode(data, size, "fleet key", &out) == NULL);
  CHECK(decode(data, size, NULL, &out) == NULL); /* no key: the server is trusted */
  check_refused(data, size, "another key", "signature is wrong");
  free(data);
}

static void damage(void) {
  jitops__store_row row = sample_row();
  size_t size;
  char *data = encode(&row, NULL, &size);
  char *copy = malloc(4096); /* larger than every record below */
  CHECK(size < 4000);
  memcpy(copy, data, size);
  copy[size - 30] ^= 1; /* a byte of the blob */
  check_refused(copy, size, NULL, "hash");
  memcpy(copy, data, size);
  copy[0] = 'X';
  check_refused(copy, size, NULL, "not a libjitops record");
  memcpy(copy, data, size);
  copy[7] = 2;
  check_refused(copy, size, NULL, "format version");
  for (size_t cut = 0; cut < size; cut += 7)
    check_refused(data, cut, NULL, "");
  memcpy(copy, data, size);
  copy[size] = 0;
  check_refused(copy, size + 1, NULL, "after its end");
  free(data);
  jitops__signing_key none = {NULL, 0};
  row.kind = JITOPS__BLOB_TUNED;
  data = encode(&row, NULL, &size);
  jitops__store_row out;
  CHECK(jitops__remote_record_decode(data, size, &none, &out) != NULL);
  free(data);
  row = sample_row();
  row.target = "gfx90a";
  data = encode(&row, NULL, &size);
  check_refused(data, size, NULL, "target");
  free(data);
  /* A signed record tampered with: the signature fails before anything else is believed. */
  row = sample_row();
  data = encode(&row, "k", &size);
  memcpy(copy, data, size);
  copy[size - 40] ^= 1;
  check_refused(copy, size, "k", "signature is wrong");
  free(data);
  free(copy);
}

static void names(void) {
  uint8_t key[16] = {0xab, 1};
  char name[JITOPS__REMOTE_KEY_BYTES];
  jitops__remote_record_name(key, name);
  CHECK(strncmp(name, "jitops:", 7) == 0 && strstr(name, ":kernel:ab01000000") != NULL);
  jitops__remote_claim_name(key, name);
  CHECK(strstr(name, ":claim:ab01") != NULL);
}

/* ---- the breaker ----------------------------------------------------------------------- */

static void breaker(void) {
  jitops__breaker b = {0, 0, 0};
  CHECK(jitops__breaker_allows(&b, 0));
  CHECK(!jitops__breaker_failure(&b, 0) && !jitops__breaker_failure(&b, 0));
  jitops__breaker_success(&b); /* a success in between: the count starts again */
  CHECK(!jitops__breaker_failure(&b, 0) && !jitops__breaker_failure(&b, 0));
  CHECK(jitops__breaker_failure(&b, 1000)); /* the third in a row opens it */
  CHECK(!jitops__breaker_allows(&b, 1000 + JITOPS__BREAKER_COOLDOWN_MS - 1));
  CHECK(jitops__breaker_allows(&b, 1000 + JITOPS__BREAKER_COOLDOWN_MS));
  int64_t now = 1000 + JITOPS__BREAKER_COOLDOWN_MS; /* the half-open request fails: longer */
  CHECK(jitops__breaker_failure(&b, now));
  CHECK(!jitops__breaker_allows(&b, now + 2 * JITOPS__BREAKER_COOLDOWN_MS - 1));
  for (int i = 0; i < 10; ++i)
    jitops__breaker_failure(&b, now);
  CHECK(b.cooldown_ms == JITOPS__BREAKER_COOLDOWN_MAX_MS);
  jitops__breaker_success(&b);
  CHECK(jitops__breaker_allows(&b, now) && b.cooldown_ms == 0);
}

int main(void) {
  urls();
  round_trips();
  damage();
  names();
  breaker();
  return test_finish("test_remote_units");
}
