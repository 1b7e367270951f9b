/* What the first call of a node pays for a kernel (its jitops_kernel_get, or the catalogue
 * compile of an op's entry): a cold compile, a local disk hit, a remote hit (an empty local
 * cache, a warm Redis), and a remote miss (compile, claim and publish, against a cold
 * compile's plain compile). Compile-only runtimes (sm_90): CPU only. Each measurement runs in
 * a fresh process, as a new node's first call would; the table shows the median of REPEAT.
 *
 * Redis: $JITOPS_CACHE_REMOTE if set (it is flushed), else a redis-server of the benchmark's
 * own on loopback. Usage: bench_remote_hit [REPEAT] */
#include <sys/wait.h>
#include <time.h>

#include "redis_testutil.h"

enum { MAX_REPEAT = 51 };

typedef enum scenario { COLD, DISK, REMOTE_HIT, REMOTE_MISS, SCENARIOS } scenario;
static const char *const titles[SCENARIOS] = {"cold compile", "local disk hit", "remote hit",
                                              "remote miss"};

typedef struct subject {
  const char *label;
  const char *expr; /* a jitops::example_axpy instance, or NULL for a catalogue entry */
  size_t entry;
} subject;

static const char *remote_url;
static int run_count;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* The timed first call, in this (child) process. */
static double first_call(const subject *s, const char *dir, const char *remote) {
  jitops_runtime_config config = test_offline_config("sm_90", dir);
  config.remote_cache = remote;
  jitops_runtime_t *rt = NULL;
  if (jitops_runtime_create(&config, &rt) != JITOPS_SUCCESS)
    return -1;
  jitops_kernel_t *kernel;
  double start = now_ms();
  jitops_status status =
      s->expr ? jitops_kernel_get(rt, "jitops/example.cuh", s->expr, NULL, 0, &kernel)
              : jitops_catalogue_compile(rt, s->entry);
  double elapsed = now_ms() - start;
  jitops_runtime_destroy(rt);
  return status == JITOPS_SUCCESS ? elapsed : -1;
}

/* Runs the first call in a fresh process, with the cache in a directory of its own unless
 * `dir` names one. */
static double in_fresh_process(const subject *s, const char *dir, const char *remote) {
  char own[1024], tag[32];
  if (dir == NULL) {
    snprintf(tag, sizeof tag, "bench-node-%d", run_count++);
    test_fresh_dir(tag, own, sizeof own);
    dir = own;
  }
  int fds[2];
  if (pipe(fds) != 0)
    return -1;
  pid_t pid = fork();
  if (pid == 0) {
    double ms = first_call(s, dir, remote);
    _exit(write(fds[1], &ms, sizeof ms) == (ssize_t)sizeof ms ? 0 : 1);
  }
  close(fds[1]);
  double ms = -1;
  if (read(fds[0], &ms, sizeof ms) != (ssize_t)sizeof ms)
    ms = -1;
  close(fds[0]);
  waitpid(pid, NULL, 0);
  return ms;
}

static void flush_remote(void) {
  jitops__remote_address address;
  jitops__redis_limits limits = {2000, 2000, 1 << 20};
  char why[256];
  jitops__redis *connection = NULL;
  if (jitops__remote_url_parse(remote_url, &address) == JITOPS_SUCCESS)
    connection = jitops__redis_connect(&address, address.host, &limits, why, sizeof why);
  if (connection == NULL)
    return;
  const char *flush[] = {"FLUSHDB"};
  jitops__redis_reply reply = test_redis_run(connection, 1, flush);
  jitops__redis_reply_free(&reply);
  jitops__redis_close(connection);
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One round of every scenario; times[scenario] receives its time. */
static void one_round(const subject *s, double times[SCENARIOS]) {
  char warm[1024];
  test_fresh_dir("bench-warm", warm, sizeof warm);
  flush_remote();
  times[COLD] = in_fresh_process(s, warm, "");
  times[DISK] = in_fresh_process(s, warm, "");
  times[REMOTE_MISS] = in_fresh_process(s, NULL, remote_url); /* publishes it */
  times[REMOTE_HIT] = in_fresh_process(s, NULL, remote_url);
}

static void measure(const subject *s, int repeat) {
  double samples[SCENARIOS][MAX_REPEAT];
  for (int r = 0; r < repeat; ++r) {
    double round[SCENARIOS];
    one_round(s, round);
    for (int c = 0; c < SCENARIOS; ++c)
      samples[c][r] = round[c];
  }
  printf("%-32s", s->label);
  for (int c = 0; c < SCENARIOS; ++c) {
    qsort(samples[c], (size_t)repeat, sizeof samples[c][0], by_value);
    printf("  %14.2f", samples[c][repeat / 2]);
  }
  printf("\n");
}

/* The first catalogue entry of `op`, or 0. */
static size_t entry_of(const char *op, const char **description) {
  for (size_t i = 0; i < jitops_catalogue_size(); ++i) {
    const char *entry_op;
    if (jitops_catalogue_describe(i, &entry_op, description) == JITOPS_SUCCESS &&
        strcmp(entry_op, op) == 0)
      return i;
  }
  return 0;
}

int main(int argc, char **argv) {
  int repeat = argc > 1 ? atoi(argv[1]) : 5;
  repeat = repeat < 1 ? 1 : repeat > MAX_REPEAT ? MAX_REPEAT : repeat;
  test_server server = {0};
  remote_url = getenv("JITOPS_CACHE_REMOTE");
  if (remote_url == NULL || remote_url[0] == 0) {
    test_redis_require("bench_remote_hit");
    test_redis_start(&server, "bench-redis", NULL);
    remote_url = server.url;
  }
  const char *description = "";
  size_t scan_entry = entry_of("scan", &description);
  char scan_label[64];
  snprintf(scan_label, sizeof scan_label, "scan, catalogue entry %zu (*)", scan_entry);
  const subject subjects[] = {{"example_axpy<float, 4>", "jitops::example_axpy<float, 4>", 0},
                              {scan_label, NULL, scan_entry}};
  printf("First call of a node (ms), compile-only runtime (sm_90), median of %d, Redis on "
         "loopback\n",
         repeat);
  printf("%-32s", "kernel");
  for (int c = 0; c < SCENARIOS; ++c)
    printf("  %14s", titles[c]);
  printf("\n");
  for (size_t i = 0; i < sizeof subjects / sizeof subjects[0]; ++i)
    measure(&subjects[i], repeat);
  printf("(*) %s\n", description);
  test_server_stop(&server);
  return 0;
}
