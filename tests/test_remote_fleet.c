/* The remote tier across a fleet, against a real redis-server on loopback:
 *   1. node A (its own cache directory and process) compiles every kernel and publishes it;
 *      node B, with an empty cache of its own, gets every kernel from Redis with zero
 *      compiles; node B again (a new process) finds them all on its disk, asking Redis
 *      nothing; the server holds one record per kernel and no claim.
 *   2. 8 processes over 2 cache directories, started together on an empty Redis, each ask for
 *      the same 16 kernels in their own order: every call succeeds and the fleet compiles
 *      each kernel exactly once in total (the disk claim within a directory, the Redis claim
 *      across them).
 * Compile-only runtimes (sm_90): no GPU is needed. */
#include "redis_testutil.h"

enum { FLEET_KERNELS = 16, NODES = 8, DIRECTORIES = 2 };

static const char *const *expr_list;

static long long count_keys(const test_server *server, const char *pattern) {
  jitops__redis *connection = test_redis_connect(server);
  long long count = 0;
  char cursor[32] = "0";
  do {
    const char *argv[] = {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
    jitops__redis_reply reply = test_redis_run(connection, 6, argv);
    if (reply.type != JITOPS__REDIS_ARRAY || reply.count != 2) {
      jitops__redis_reply_free(&reply);
      break;
    }
    count += (long long)reply.elements[1].count;
    snprintf(cursor, sizeof cursor, "%s", reply.elements[0].text);
    jitops__redis_reply_free(&reply);
  } while (strcmp(cursor, "0") != 0);
  jitops__redis_close(connection);
  return count;
}

static void a_compiles_b_downloads(const test_server *server) {
  enum { KERNELS = 8 };
  char dir_a[1024], dir_b[1024];
  test_fresh_dir("node-a", dir_a, sizeof dir_a);
  test_fresh_dir("node-b", dir_b, sizeof dir_b);
  test_node node = {dir_a, server->url, "", expr_list, KERNELS, 0, -1};
  test_node_report a = test_node_run(&node);
  CHECK(a.failures == 0 && a.stats.compiles == KERNELS && a.stats.remote_misses == KERNELS);
  CHECK(a.stats.remote_errors == 0 && a.warnings == 0);
  CHECK(a.info.remote_state == JITOPS_REMOTE_STATE_ON && !a.info.remote_signed);
  CHECK(strstr(a.info.remote_address, "redis://127.0.0.1:") == a.info.remote_address);

  node.cache_dir = dir_b;
  node.first = 3;
  test_node_report b = test_node_run(&node);
  printf("node B: %llu remote hits, %llu compiles, %llu disk hits\n",
         (unsigned long long)b.stats.remote_hits, (unsigned long long)b.stats.compiles,
         (unsigned long long)b.stats.disk_hits);
  CHECK(b.failures == 0 && b.stats.compiles == 0 && b.stats.remote_hits == KERNELS);
  CHECK(b.stats.misses == 0 && b.stats.remote_errors == 0 && b.warnings == 0);

  test_node_report again = test_node_run(&node);
  CHECK(again.failures == 0 && again.stats.disk_hits == KERNELS);
  CHECK(again.stats.remote_hits == 0 && again.stats.remote_misses == 0);
  CHECK(count_keys(server, "jitops:*:kernel:*") == KERNELS);
  CHECK(count_keys(server, "jitops:*:claim:*") == 0);
}

static void eight_nodes_compile_once(const test_server *server) {
  char dirs[DIRECTORIES][1024];
  for (int d = 0; d < DIRECTORIES; ++d) {
    char tag[32];
    snprintf(tag, sizeof tag, "fleet-dir-%d", d);
    test_fresh_dir(tag, dirs[d], sizeof dirs[d]);
  }
  int go[2];
  CHECK(pipe(go) == 0);
  pid_t pids[NODES];
  int reports[NODES];
  for (int n = 0; n < NODES; ++n) {
    test_node node = {dirs[n % DIRECTORIES], server->url, "",   expr_list,
                      FLEET_KERNELS,         n * 5,       go[0]};
    pids[n] = test_node_start(&node, &reports[n]);
  }
  char start[NODES];
  memset(start, 'g', sizeof start);
  CHECK(write(go[1], start, sizeof start) == (ssize_t)sizeof start);
  uint64_t compiles = 0, remote_hits = 0, disk_hits = 0, waits = 0, errors = 0;
  int failures = 0;
  for (int n = 0; n < NODES; ++n) {
    test_node_report r = test_node_finish(pids[n], reports[n]);
    failures += r.failures;
    compiles += r.stats.compiles;
    remote_hits += r.stats.remote_hits;
    disk_hits += r.stats.disk_hits;
    waits += r.stats.waits;
    errors += r.stats.remote_errors;
  }
  close(go[0]);
  close(go[1]);
  printf("8 nodes over 2 directories: %llu compiles, %llu remote hits, %llu disk hits "
         "(%llu after a wait), %llu remote errors\n",
         (unsigned long long)compiles, (unsigned long long)remote_hits,
         (unsigned long long)disk_hits, (unsigned long long)waits, (unsigned long long)errors);
  CHECK(failures == 0);
  CHECK(compiles == FLEET_KERNELS);
  CHECK(errors == 0);
  CHECK(count_keys(server, "jitops:*:kernel:*") == FLEET_KERNELS);
}

int main(void) {
  test_redis_require("test_remote_fleet");
  test_remote_unavailable_exits("test_remote_fleet");
  expr_list = test_example_exprs(FLEET_KERNELS);
  test_server server;
  test_redis_start(&server, "redis-fleet", NULL);
  a_compiles_b_downloads(&server);
  test_server_stop(&server);
  /* An empty server for the fleet. On a loaded machine (8 compilers on 2 cores), a request
   * may wait for the CPU longer than the default 50 ms: this test is about the claims, not
   * the timeouts, which test_remote_faults covers. */
  setenv("JITOPS_CACHE_REMOTE_TIMEOUT_MS", "2000", 1);
  test_redis_start(&server, "redis-fleet-empty", NULL);
  eight_nodes_compile_once(&server);
  test_server_stop(&server);
  return test_finish("test_remote_fleet");
}
