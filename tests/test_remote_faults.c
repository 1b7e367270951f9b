/* The remote tier never fails a call and never stalls one: with the server killed mid-run,
 * paused (SIGSTOP), full (OOM errors), answering garbage, or not there at all, every kernel
 * request succeeds by compiling locally, the problem is warned about exactly once, and the
 * time lost to the server stays within a few timeouts (the breaker opens after 3 failures).
 * Each scenario runs in a process of its own, so that each has its own one warning. */
#include <signal.h>
#include <sys/wait.h>

#include "redis_testutil.h"

enum { KERNELS = 8 };

static const char *const *expr_list;

/* The time a node lost to the remote tier: its requests' wall time, less NVRTC's. */
static double lost_seconds(const test_node_report *r) {
  return r->seconds - r->stats.compile_ms / 1000.0;
}

/* What every scenario demands of a node: no failed call, every kernel compiled locally, one
 * warning, and little time lost. */
static void check_survived(const char *scenario, const test_node_report *r) {
  printf("%s: %d failed calls, %llu compiles, %llu remote errors, %d warnings, %.3f s lost, "
         "remote tier %d\n",
         scenario, r->failures, (unsigned long long)r->stats.compiles,
         (unsigned long long)r->stats.remote_errors, r->warnings, lost_seconds(r),
         (int)r->info.remote_state);
  CHECK(r->failures == 0);
  CHECK(r->stats.compiles == KERNELS && r->stats.remote_hits == 0);
  CHECK(r->stats.remote_errors >= 1);
  CHECK(r->warnings == 1);
  CHECK(lost_seconds(r) < 1.5);
}

static test_node fresh_node(const char *tag, const char *url, char *dir, size_t size) {
  test_fresh_dir(tag, dir, size);
  test_node node = {dir, url, "", expr_list, KERNELS, 0, -1};
  return node;
}

static void server_down(void) {
  test_server gone;
  test_garbage_start(&gone); /* a free port... */
  test_server_stop(&gone);   /* ...where nothing listens any more */
  char dir[1024];
  test_node node = fresh_node("down", gone.url, dir, sizeof dir);
  test_node_report r = test_node_run(&node);
  check_survived("no server", &r);
  CHECK(r.stats.remote_errors == 3); /* then the breaker skips the tier */
  CHECK(r.info.remote_state == JITOPS_REMOTE_STATE_SUSPENDED);
  CHECK(strstr(r.info.remote_reason, "connect") != NULL);
}

static void server_paused(void) {
  test_server server;
  test_redis_start(&server, "redis-paused", NULL);
  kill(server.pid, SIGSTOP); /* it accepts connections (the kernel does) and never answers */
  char dir[1024];
  test_node node = fresh_node("paused", server.url, dir, sizeof dir);
  test_node_report r = test_node_run(&node);
  check_survived("paused server", &r);
  CHECK(r.stats.remote_errors == 3);
  CHECK(r.info.remote_state == JITOPS_REMOTE_STATE_SUSPENDED);
  CHECK(strstr(r.info.remote_reason, "no answer within 50 ms") != NULL);
  kill(server.pid, SIGCONT);
  test_server_stop(&server);
}

/* In a process of its own, so that the warning counted is this scenario's. */
static void server_killed_mid_run(void) {
  test_server server;
  test_redis_start(&server, "redis-killed", NULL);
  char dir[1024];
  test_fresh_dir("killed", dir, sizeof dir);
  jitops_runtime_config config = test_offline_config("sm_90", dir);
  config.remote_cache = server.url;
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(&config, &rt));
  if (rt == NULL)
    return;
  jitops_kernel_t *kernel;
  for (int k = 0; k < KERNELS; ++k) {
    if (k == KERNELS / 2)
      test_server_stop(&server); /* SIGKILL, with the connection open */
    CHECK_OK(jitops_kernel_get(rt, "jitops/example.cuh", expr_list[k], NULL, 0, &kernel));
  }
  jitops_stats stats;
  jitops_runtime_info info;
  CHECK_OK(jitops_runtime_get_stats(rt, &stats));
  CHECK_OK(jitops_runtime_get_info(rt, &info));
  printf("server killed mid-run: %llu compiles, %llu remote errors, remote tier %d\n",
         (unsigned long long)stats.compiles, (unsigned long long)stats.remote_errors,
         (int)info.remote_state);
  CHECK(stats.compiles == KERNELS && stats.remote_errors == 3);
  CHECK(info.remote_state == JITOPS_REMOTE_STATE_SUSPENDED);
  jitops_runtime_destroy(rt);
}

/* Fills the server with 64 KiB values, then lowers its memory bound below what it holds: with
 * noeviction, it refuses every write (OOM) and still serves reads. */
static void fill_up(const test_server *server) {
  jitops__redis *connection = test_redis_connect(server);
  static char filler[64 << 10];
  memset(filler, 'x', sizeof filler - 1);
  for (int i = 0; i < 32; ++i) {
    char name[32];
    snprintf(name, sizeof name, "filler:%d", i);
    const char *set[] = {"SET", name, filler};
    jitops__redis_reply reply = test_redis_run(connection, 3, set);
    jitops__redis_reply_free(&reply);
  }
  const char *bound[] = {"CONFIG", "SET", "maxmemory", "1mb"}, *probe[] = {"SET", "probe", "1"};
  jitops__redis_reply reply = test_redis_run(connection, 4, bound);
  jitops__redis_reply_free(&reply);
  reply = test_redis_run(connection, 3, probe);
  CHECK(reply.type == JITOPS__REDIS_ERROR && strncmp(reply.text, "OOM", 3) == 0);
  jitops__redis_reply_free(&reply);
  jitops__redis_close(connection);
}

static void server_full(void) {
  const char *const policy[] = {"--maxmemory-policy", "noeviction", NULL};
  test_server server;
  test_redis_start(&server, "redis-full", policy);
  fill_up(&server);
  char dir[1024];
  test_node node = fresh_node("full", server.url, dir, sizeof dir);
  test_node_report r = test_node_run(&node);
  check_survived("full server", &r);
  CHECK(r.stats.remote_misses == KERNELS); /* reads still work: each kernel was asked for */
  test_server_stop(&server);
}

static void server_garbage(void) {
  test_server server;
  test_garbage_start(&server);
  char dir[1024];
  test_node node = fresh_node("garbage", server.url, dir, sizeof dir);
  test_node_report r = test_node_run(&node);
  check_survived("garbage server", &r);
  test_server_stop(&server);
}

/* Runs `scenario` in a child process; its failures become ours. */
static void in_own_process(void (*scenario)(void)) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    test_failures = 0;
    scenario();
    fflush(stdout);
    _exit(test_failures == 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void) {
  test_redis_require("test_remote_faults");
  test_remote_unavailable_exits("test_remote_faults");
  expr_list = test_example_exprs(KERNELS);
  in_own_process(server_down);
  in_own_process(server_paused);
  in_own_process(server_killed_mid_run);
  in_own_process(server_full);
  in_own_process(server_garbage);
  return test_finish("test_remote_faults");
}
