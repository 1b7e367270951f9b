/* SHA-256 and HMAC-SHA256 (common/sha256.h), which sign the remote tier's blobs, against the
 * published test vectors: FIPS 180-2's examples (appendix B) and every case of RFC 4231. Also
 * inputs fed in pieces that straddle blocks, which must hash as when fed whole. */
#include "common/sha256.h"
#include "testutil.h"

static void to_hex(const uint8_t *bytes, size_t size, char *out) {
  for (size_t i = 0; i < size; ++i)
    snprintf(out + 2 * i, 3, "%02x", bytes[i]);
}

static void check_digest(const char *what, const uint8_t *digest, size_t size, const char *want) {
  char hex[2 * JITOPS__SHA256_BYTES + 1];
  to_hex(digest, size, hex);
  if (strcmp(hex, want) != 0) {
    fprintf(stderr, "%s: got %s, expected %s\n", what, hex, want);
    ++test_failures;
  }
}

static void check_sha256(const char *what, const void *data, size_t size, const char *want) {
  jitops__sha256 ctx;
  uint8_t digest[JITOPS__SHA256_BYTES];
  jitops__sha256_init(&ctx);
  jitops__sha256_update(&ctx, data, size);
  jitops__sha256_final(&ctx, digest);
  check_digest(what, digest, sizeof digest, want);
  /* The same bytes in pieces of 1, 3, 7, ... bytes cross every block boundary. */
  const uint8_t *p = data;
  jitops__sha256_init(&ctx);
  for (size_t done = 0, piece = 1; done < size; done += piece, piece = piece * 2 + 1)
    jitops__sha256_update(&ctx, p + done, piece < size - done ? piece : size - done);
  jitops__sha256_final(&ctx, digest);
  check_digest(what, digest, sizeof digest, want);
}

static void fips_180_2(void) {
  check_sha256("empty", "", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  check_sha256("abc", "abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const char *two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  check_sha256("448 bits", two_blocks, strlen(two_blocks),
               "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  static char million[1000000];
  memset(million, 'a', sizeof million);
  check_sha256("a million a", million, sizeof million,
               "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

typedef struct hmac_case {
  uint8_t key_byte; /* the key is `key_size` copies of it, unless key_text is set */
  size_t key_size;
  const char *key_text;
  uint8_t data_byte; /* the data is `data_size` copies of it, unless data_text is set */
  size_t data_size;
  const char *data_text;
  size_t digest_bytes; /* case 5 compares a truncated MAC */
  const char *want;
} hmac_case;

static const hmac_case rfc_4231[] = {
    {0x0b, 20, NULL, 0, 0, "Hi There", 32,
     "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
    {0, 0, "Jefe", 0, 0, "what do ya want for nothing?", 32,
     "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
    {0xaa, 20, NULL, 0xdd, 50, NULL, 32,
     "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
    {0, 25, NULL, 0xcd, 50, NULL, 32, /* key 0x01..0x19 */
     "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
    {0x0c, 20, NULL, 0, 0, "Test With Truncation", 16, "a3b6167473100ee06e0c796c2955552b"},
    {0xaa, 131, NULL, 0, 0, "Test Using Larger Than Block-Size Key - Hash Key First", 32,
     "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
    {0xaa, 131, NULL, 0, 0,
     "This is a test using a larger than block-size key and a larger than block-size data. The "
     "key needs to be hashed before being used by the HMAC algorithm.",
     32, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
};

static void check_hmac(size_t index, const hmac_case *c) {
  uint8_t key[256], data[256], mac[JITOPS__SHA256_BYTES];
  size_t key_size = c->key_text ? strlen(c->key_text) : c->key_size;
  size_t data_size = c->data_text ? strlen(c->data_text) : c->data_size;
  for (size_t i = 0; i < key_size; ++i)
    key[i] = c->key_text ? (uint8_t)c->key_text[i] : c->key_byte ? c->key_byte : (uint8_t)(i + 1);
  for (size_t i = 0; i < data_size; ++i)
    data[i] = c->data_text ? (uint8_t)c->data_text[i] : c->data_byte;
  jitops__hmac_sha256(key, key_size, data, data_size, mac);
  char what[64];
  snprintf(what, sizeof what, "RFC 4231 test case %zu", index + 1);
  check_digest(what, mac, c->digest_bytes, c->want);
}

int main(void) {
  fips_180_2();
  for (size_t i = 0; i < sizeof rfc_4231 / sizeof rfc_4231[0]; ++i)
    check_hmac(i, &rfc_4231[i]);
  CHECK(jitops__equal_in_constant_time("abcd", "abcd", 4));
  CHECK(!jitops__equal_in_constant_time("abcd", "abce", 4));
  CHECK(jitops__equal_in_constant_time("x", "y", 0));
  return test_finish("test_sha256_hmac");
}
