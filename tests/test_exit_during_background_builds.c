/* A process that exits while its runtime's background threads compile full builds exits
 * cleanly (runtime/background.c, "process exit"): children make an op call on a compile-only
 * sm_90 runtime, which queues the full builds of its quick builds, and exit() without destroying
 * the runtime: at once, 50 ms later (builds under way), and, on a cache holding only the first
 * child's quick builds, 20 ms later (the process's first NVRTC compile would be a background
 * build). Before the exit handler most such exits died of SIGSEGV or SIGABRT: NVRTC's static
 * destructors ran under a compiling thread. Each child must exit with status 0 within the limit,
 * and leave a cache that a later runtime takes kernels from with nothing set aside. Needs no
 * GPU; skipped with an NVRTC older than 12.8, which has no quick builds. */
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jitops/flce.h"
#include "testutil.h"

enum { ROUNDS = 2, EXIT_LIMIT_S = 120 };

static const DLDataType F32 = {kDLFloat, 32, 1}, I64 = {kDLInt, 64, 1};

/* BT 64, H 64, V 256 f32 with both gradients: the call's cold kernels are quick builds. */
static jitops_status cold_flce_call(jitops_runtime_t *rt) {
  static int64_t input_shape[2] = {64, 64}, weight_shape[2] = {256, 64}, rows[1] = {64};
  DLTensor input = test_fake_tensor(0, F32, 2, input_shape);
  DLTensor weight = test_fake_tensor(1, F32, 2, weight_shape);
  DLTensor target = test_fake_tensor(2, I64, 1, rows);
  DLTensor loss = test_fake_tensor(3, F32, 0, NULL);
  DLTensor grad_input = test_fake_tensor(4, F32, 2, input_shape);
  DLTensor grad_weight = test_fake_tensor(5, F32, 2, weight_shape);
  jitops_flce_tensors tensors = {.input = &input,
                                 .weight = &weight,
                                 .target = &target,
                                 .loss = &loss,
                                 .grad_input = &grad_input,
                                 .grad_weight = &grad_weight};
  jitops_flce_options options;
  jitops_flce_options_init(&options);
  return jitops_flce_forward(rt, &tensors, &options, NULL, NULL);
}

/* The children exit with their runtime alive on purpose: under LeakSanitizer
 * (scripts/test_sanitized.sh) a child's live memory at exit, its workers' included, is not a
 * leak. LeakSanitizer asks this hook at exit; the parent's check stays on. */
static int exiting_child;
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void) {
  return exiting_child;
}

/* The child: the call, `delay_ms` of waiting, then exit() with its background builds queued or
 * under way. Its status says what went wrong before the exit (2: no runtime, 3: the call, 4: no
 * background build asked for). */
static void exit_while_building(const char *dir, int delay_ms) {
  jitops_runtime_config cfg = test_offline_config("sm_90", dir);
  jitops_runtime_t *rt = NULL;
  if (jitops_runtime_create(&cfg, &rt) != JITOPS_SUCCESS)
    exit(2);
  if (cold_flce_call(rt) != JITOPS_ERR_NO_DEVICE)
    exit(3);
  jitops_stats stats;
  if (jitops_runtime_get_stats(rt, &stats) != JITOPS_SUCCESS ||
      (stats.quick_compiles == 0 && stats.disk_hits == 0))
    exit(4);
  const struct timespec delay = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
  nanosleep(&delay, NULL);
  exiting_child = 1;
  exit(0); /* the runtime is not destroyed: its full builds are queued or compiling */
}

static double seconds_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* The child's wait status, or -1 once it ran past the limit (then it is killed). */
static int wait_with_limit(pid_t pid) {
  const double end = seconds_now() + EXIT_LIMIT_S;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (seconds_now() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    usleep(10 * 1000);
  }
  return status;
}

/* A child making the call on `dir` exits with status 0, in time. */
static void a_child_exits_cleanly(const char *what, const char *dir, int delay_ms) {
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0)
    exit_while_building(dir, delay_ms);
  const int status = wait_with_limit(pid);
  if (!(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0))
    fprintf(stderr, "%s: %s %d\n", what,
            status == -1          ? "ran past the limit, killed"
            : WIFSIGNALED(status) ? "died of signal"
                                  : "exited with status",
            status == -1          ? EXIT_LIMIT_S
            : WIFSIGNALED(status) ? WTERMSIG(status)
                                  : WEXITSTATUS(status));
  CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* What the children left on disk is whole: a later runtime takes kernels from it and sets
 * nothing aside. */
static void the_cache_they_left_is_used(const char *dir) {
  jitops_runtime_config cfg = test_offline_config("sm_90", dir);
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(&cfg, &rt));
  CHECK_FAILS(cold_flce_call(rt), JITOPS_ERR_NO_DEVICE, "compile-only");
  jitops_stats stats;
  CHECK_OK(jitops_runtime_get_stats(rt, &stats));
  CHECK(stats.disk_hits > 0 && stats.compile_errors == 0);
  CHECK_OK(jitops_runtime_wait_builds(rt));
  jitops_runtime_destroy(rt);
  CHECK(test_count_set_aside(dir) == 0);
}

/* On an empty cache: exit at once after the cold call (the workers may not have started), then
 * 50 ms after it (full builds under way: the exit waits for them); then, on the cache the first
 * child left (its quick builds, few full ones), a process whose first NVRTC compile would be a
 * background build, exiting 20 ms after its call. */
static void children_exit_cleanly_while_compiling(int round) {
  char dir[512], other[512], tag[64];
  snprintf(tag, sizeof tag, "exit_%d", round);
  test_fresh_dir(tag, dir, sizeof dir);
  snprintf(tag, sizeof tag, "exit_later_%d", round);
  test_fresh_dir(tag, other, sizeof other);
  a_child_exits_cleanly("exit right after a cold call", dir, 0);
  a_child_exits_cleanly("exit 50 ms after a cold call", other, 50);
  a_child_exits_cleanly("exit 20 ms after a call served by quick builds on disk", dir, 20);
  the_cache_they_left_is_used(dir);
  the_cache_they_left_is_used(other);
}

int main(void) {
  if (!test_quick_builds_available("test_exit_during_background_builds"))
    return TEST_SKIP;
  for (int round = 0; round < ROUNDS; ++round)
    children_exit_cleanly_while_compiling(round);
  return test_finish("test_exit_during_background_builds");
}
