/* For the remote tier's tests: a redis-server of the test's own, on loopback and a free port,
 * started and stopped by the test (and killed with it: it never outlives a crashed test); a
 * fake server that answers garbage; and "nodes": child processes that each create a
 * compile-only runtime with their own cache directory, ask for kernels, and report their
 * counters. */
#ifndef JITOPS_TESTS_REDIS_TESTUTIL_H
#define JITOPS_TESTS_REDIS_TESTUTIL_H

#include <sys/types.h>
#include <unistd.h>

#include "cache/redis_connection.h"
#include "testutil.h"

typedef struct test_server {
  pid_t pid;
  int port;
  char url[128];
  char dir[1024];
} test_server;

/* Exits 77 (skipped) when redis-server is not installed. */
void test_redis_require(const char *test_name);

/* In a build without hiredis: checks that a node with a remote tier configured reports it
 * unavailable, warns once and compiles every kernel, then exits with the test's result. A
 * no-op in a build with hiredis. */
void test_remote_unavailable_exits(const char *test_name);

/* Starts redis-server with `extra` arguments (NULL-terminated; may be NULL), in a fresh
 * directory named after `tag`, and waits until it answers. Fails the test (exit 1) if it
 * cannot. */
void test_redis_start(test_server *server, const char *tag, const char *const *extra);

/* Starts a server that reads whatever comes and answers each read with the next of a few
 * kinds of nonsense: wrong types, malformed RESP, huge announced lengths, HTTP. */
void test_garbage_start(test_server *server);

/* SIGKILLs the server and reaps it. */
void test_server_stop(test_server *server);

/* A connection to the server, through the library's own client, for the test to look at or
 * change what is stored. Fails the test (exit 1) if it cannot connect. */
jitops__redis *test_redis_connect(const test_server *server);
/* Runs a command of C strings; returns the reply (free it), type NIL on a failure too. */
jitops__redis_reply test_redis_run(jitops__redis *connection, int argc, const char *const *argv);

/* How a node behaves. */
typedef struct test_node {
  const char *cache_dir; /* NULL: no disk tier */
  const char *remote;    /* the config's remote_cache ("" for none) */
  const char *key;       /* the config's remote_cache_key ("" for none) */
  const char *const *exprs;
  size_t count; /* kernels: jitops::example_axpy instances from `exprs` */
  int first;    /* the node asks for exprs[(first + i) % count]: nodes differ in order */
  int go_fd;    /* >= 0: read one byte before starting, so nodes start together */
} test_node;

/* What a node reports: its counters, the failures of its calls, and the warnings logged. */
typedef struct test_node_report {
  jitops_stats stats;
  jitops_runtime_info info;
  int failures;
  int warnings;
  double seconds; /* the wall time of its kernel requests */
} test_node_report;

/* Runs `node` in a child process; returns its pid. Its report arrives on *report_fd. */
pid_t test_node_start(const test_node *node, int *report_fd);
/* Reaps `pid` and reads its report from `report_fd`; a child that failed to report counts as
 * a failure. */
test_node_report test_node_finish(pid_t pid, int report_fd);
/* Both, for one node at a time. */
test_node_report test_node_run(const test_node *node);

/* "jitops::example_axpy<T, N>" for kernel `k` of a set: 4 types times N = 1 + k / 4. */
void test_example_expr(int k, char *out, size_t size);

/* The first `count` of those (count <= 64), in storage that lasts as long as the process. */
const char *const *test_example_exprs(int count);

#endif
