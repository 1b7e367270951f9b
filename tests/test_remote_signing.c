/* Signed blobs (JITOPS_CACHE_REMOTE_KEY) against a real redis-server on loopback:
 *   - a node with the fleet's key gets every kernel another node with the key published;
 *   - a node with another key refuses them all (counted, warned about once), compiles, and
 *     publishes its own, signed, in their place;
 *   - a record tampered with on the server (one byte of its blob) is refused and recompiled,
 *     and the recompile replaces it, so the next node hits again;
 *   - an unsigned record is refused by a node with a key;
 *   - without a key, a tampered blob is still refused: the integrity hash catches it. */
#include "redis_testutil.h"

enum { KERNELS = 6 };

static const char *const *first_set, *const *second_set;
static test_server server;
static int node_count;

/* A node with an empty cache directory of its own, asking for `set` with `key`. */
static test_node_report run_fresh(const char *const *set, const char *key) {
  char dir[1024], tag[32];
  snprintf(tag, sizeof tag, "signing-node-%d", node_count++);
  test_fresh_dir(tag, dir, sizeof dir);
  test_node node = {dir, server.url, key, set, KERNELS, 0, -1};
  test_node_report r = test_node_run(&node);
  printf("node %d (key %s): %llu remote hits, %llu compiles, %llu remote errors, %d warnings\n",
         node_count, key[0] ? key : "none", (unsigned long long)r.stats.remote_hits,
         (unsigned long long)r.stats.compiles, (unsigned long long)r.stats.remote_errors,
         r.warnings);
  CHECK(r.failures == 0);
  CHECK(r.info.remote_signed == (key[0] != 0));
  return r;
}

static void check_counts(const test_node_report *r, uint64_t hits, uint64_t compiles,
                         uint64_t errors) {
  CHECK(r->stats.remote_hits == hits);
  CHECK(r->stats.compiles == compiles);
  CHECK(r->stats.remote_errors == errors);
  CHECK(r->warnings == (errors > 0));
}

/* Flips one byte of the blob of one record on the server. */
static void tamper_with_one_record(size_t signature_bytes) {
  jitops__redis *connection = test_redis_connect(&server);
  const char *scan[] = {"SCAN", "0", "MATCH", "jitops:*:kernel:*", "COUNT", "1000"};
  jitops__redis_reply names = test_redis_run(connection, 6, scan);
  CHECK(names.type == JITOPS__REDIS_ARRAY && names.elements[1].count > 0);
  const char *name = names.elements[1].elements[0].text;
  const char *get[] = {"GET", name};
  jitops__redis_reply record = test_redis_run(connection, 2, get);
  CHECK(record.type == JITOPS__REDIS_STRING && record.size > 100);
  /* The record ends with the hash (16 bytes), the scheme (1) and the signature: the blob's
   * last bytes come just before. */
  record.text[record.size - 17 - signature_bytes - 3] ^= 0x20;
  const char *set[] = {"SET", name, record.text};
  const size_t lengths[] = {3, strlen(name), record.size};
  jitops__redis_reply reply;
  char why[256];
  CHECK(jitops__redis_command(connection, 3, set, lengths, &reply, why, sizeof why));
  jitops__redis_reply_free(&reply);
  jitops__redis_reply_free(&record);
  jitops__redis_reply_free(&names);
  jitops__redis_close(connection);
}

static void flush_server(void) {
  jitops__redis *connection = test_redis_connect(&server);
  const char *flush[] = {"FLUSHALL"};
  jitops__redis_reply reply = test_redis_run(connection, 1, flush);
  jitops__redis_reply_free(&reply);
  jitops__redis_close(connection);
}

static void signed_fleet(void) {
  test_node_report r = run_fresh(first_set, "fleet-key-1");
  check_counts(&r, 0, KERNELS, 0);
  r = run_fresh(first_set, "fleet-key-1");
  check_counts(&r, KERNELS, 0, 0);
  r = run_fresh(first_set, "another-key"); /* refuses all, republishes under its key */
  check_counts(&r, 0, KERNELS, KERNELS);
  r = run_fresh(first_set, "another-key");
  check_counts(&r, KERNELS, 0, 0);
  r = run_fresh(first_set, ""); /* no key: the server is trusted, signed records load */
  check_counts(&r, KERNELS, 0, 0);
  tamper_with_one_record(32);
  r = run_fresh(first_set, "another-key");
  check_counts(&r, KERNELS - 1, 1, 1);
  r = run_fresh(first_set, "another-key"); /* the recompile replaced the tampered record */
  check_counts(&r, KERNELS, 0, 0);
}

static void unsigned_records(void) {
  test_node_report r = run_fresh(second_set, ""); /* publishes unsigned records */
  check_counts(&r, 0, KERNELS, 0);
  r = run_fresh(second_set, "fleet-key-1");
  check_counts(&r, 0, KERNELS, KERNELS);
  flush_server();
  r = run_fresh(second_set, "");
  check_counts(&r, 0, KERNELS, 0);
  tamper_with_one_record(0);
  r = run_fresh(second_set, "");
  check_counts(&r, KERNELS - 1, 1, 1);
}

int main(void) {
  test_redis_require("test_remote_signing");
  test_remote_unavailable_exits("test_remote_signing");
  first_set = test_example_exprs(2 * KERNELS);
  second_set = first_set + KERNELS;
  test_redis_start(&server, "redis-signing", NULL);
  signed_fleet();
  unsigned_records();
  test_server_stop(&server);
  return test_finish("test_remote_signing");
}
