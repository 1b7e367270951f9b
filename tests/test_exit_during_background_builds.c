/* A process that exits while its runtime's background threads compile full builds exits
 * cleanly (runtime/background.c, "process exit"): children make a cold op call on a
 * compile-only sm_90 runtime, which launches quick builds and queues their full builds, and
 * exit() at once without destroying the runtime. Before the exit handler, NVRTC's static
 * destructors ran under a compiling thread and most such exits died of SIGSEGV or SIGABRT.
 * Each child must exit with status 0, within the time limit, and leave a cache that a later
 * runtime opens and uses with nothing set aside. Needs no GPU; skipped with an NVRTC older
 * than 12.8, which has no quick builds. */
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jitops/flce.h"
#include "testutil.h"

enum { CHILDREN = 4, EXIT_LIMIT_S = 300 };

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

/* The child: the cold call, then exit() with its background builds under way. Its status says
 * what went wrong before the exit (2: no runtime, 3: the call, 4: no quick build). */
static void exit_while_building(const char *dir) {
  jitops_runtime_config cfg = test_offline_config("sm_90", dir);
  jitops_runtime_t *rt = NULL;
  if (jitops_runtime_create(&cfg, &rt) != JITOPS_SUCCESS)
    exit(2);
  if (cold_flce_call(rt) != JITOPS_ERR_NO_DEVICE)
    exit(3);
  jitops_stats stats;
  if (jitops_runtime_get_stats(rt, &stats) != JITOPS_SUCCESS || stats.quick_compiles == 0)
    exit(4);
  exit(0); /* the runtime is not destroyed: its full builds are queued or compiling */
}

/* The child's wait status, or -1 once it ran past the limit (then it is killed). */
static int wait_with_limit(pid_t pid) {
  const time_t end = time(NULL) + EXIT_LIMIT_S;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (time(NULL) > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    usleep(10 * 1000);
  }
  return status;
}

static void a_child_exits_cleanly_while_compiling(int index) {
  char dir[512], tag[64];
  snprintf(tag, sizeof tag, "exit_%d", index);
  test_fresh_dir(tag, dir, sizeof dir);
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0)
    exit_while_building(dir);
  const int status = wait_with_limit(pid);
  if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
    fprintf(stderr, "child %d: %s %d\n", index,
            status == -1          ? "ran past the limit, killed"
            : WIFSIGNALED(status) ? "died of signal"
                                  : "exited with status",
            status == -1          ? EXIT_LIMIT_S
            : WIFSIGNALED(status) ? WTERMSIG(status)
                                  : WEXITSTATUS(status));
  CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);

  /* What the child left on disk is whole: a later runtime uses it and sets nothing aside. */
  jitops_runtime_config cfg = test_offline_config("sm_90", dir);
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(&cfg, &rt));
  CHECK_FAILS(cold_flce_call(rt), JITOPS_ERR_NO_DEVICE, "compile-only");
  CHECK_OK(jitops_runtime_wait_builds(rt));
  jitops_runtime_destroy(rt);
  CHECK(test_count_set_aside(dir) == 0);
}

int main(void) {
  if (!test_quick_builds_available("test_exit_during_background_builds"))
    return TEST_SKIP;
  for (int i = 0; i < CHILDREN; ++i)
    a_child_exits_cleanly_while_compiling(i);
  return test_finish("test_exit_during_background_builds");
}
