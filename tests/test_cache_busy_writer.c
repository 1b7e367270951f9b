/* A busy database never stalls a call: while another process holds the database's write lock
 * (a long import, a stuck writer), creating a runtime takes no lock at all, a kernel on disk
 * is still found (reads need no lock), a new kernel is compiled and kept in memory after a
 * bounded wait, and destroying the runtime gives up its usage flush after a bounded wait.
 * Once the lock is free, kernels are stored again. The bounds asserted here are generous
 * (a stall used to last a minute per step); the library's own bound is 2 s a step. */
#include <sqlite3.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

enum { CREATE_BOUND_MS = 5000, CALL_BOUND_MS = 15000, HOLD_S = 120 };

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A child that takes the write lock, says so, and holds it until told (or HOLD_S). */
static pid_t hold_write_lock(const char *db_path, int *release_fd) {
  int ready[2], release[2];
  CHECK(pipe(ready) == 0 && pipe(release) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    sqlite3 *db = NULL;
    char ok = sqlite3_open(db_path, &db) == SQLITE_OK &&
                      sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK
                  ? 'l'
                  : 'x';
    if (write(ready[1], &ok, 1) != 1)
      _exit(2);
    struct timeval limit = {HOLD_S, 0};
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(release[0], &fds);
    select(release[0] + 1, &fds, NULL, NULL, &limit);
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(db);
    _exit(0);
  }
  char ok = 0;
  CHECK(read(ready[0], &ok, 1) == 1 && ok == 'l');
  close(ready[0]);
  close(ready[1]);
  close(release[0]);
  *release_fd = release[1];
  return pid;
}

static jitops_kernel_t *get(jitops_runtime_t *rt, const char *expr, double *ms) {
  jitops_kernel_t *k = NULL;
  double start = now_ms();
  CHECK_OK(jitops_kernel_get(rt, "jitops/example.cuh", expr, NULL, 0, &k));
  *ms = now_ms() - start;
  return k;
}

int main(void) {
  char dir[1024], db_path[1100];
  test_fresh_dir("busy", dir, sizeof dir);
  snprintf(db_path, sizeof db_path, "%s/kernels.db", dir);
  jitops_runtime_config cfg = test_offline_config("sm_90", dir);
  const char *cached = "jitops::example_axpy<float, 1>", *fresh = "jitops::example_axpy<float, 2>";
  CHECK(test_request_examples(&cfg, &cached, 1, 1, NULL).compiles == 1);

  int release_fd = -1;
  pid_t holder = hold_write_lock(db_path, &release_fd);
  double start = now_ms();
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(&cfg, &rt));
  double create_ms = now_ms() - start;
  printf("with the write lock held elsewhere: runtime created in %.0f ms\n", create_ms);
  CHECK(create_ms < CREATE_BOUND_MS);
  if (rt != NULL) {
    jitops_runtime_info info;
    CHECK_OK(jitops_runtime_get_info(rt, &info));
    CHECK(info.cache_path[0] != 0 && info.cache_writable == 1); /* the tier stays on */
    double ms = 0;
    get(rt, cached, &ms);
    printf("a kernel on disk, found in %.0f ms\n", ms);
    CHECK(ms < CALL_BOUND_MS);
    get(rt, fresh, &ms);
    printf("a new kernel, compiled in %.0f ms\n", ms);
    CHECK(ms < CALL_BOUND_MS);
    jitops_stats s;
    CHECK_OK(jitops_runtime_get_stats(rt, &s));
    CHECK(s.disk_hits == 1 && s.compiles == 1);
    start = now_ms();
    jitops_runtime_destroy(rt);
    printf("destroyed in %.0f ms\n", now_ms() - start);
    CHECK(now_ms() - start < CALL_BOUND_MS);
  }

  CHECK(write(release_fd, "r", 1) == 1);
  waitpid(holder, NULL, 0);
  /* The lock is free again: the new kernel is compiled once more, and stored. */
  jitops_stats s = test_request_examples(&cfg, &fresh, 1, 1, NULL);
  CHECK(s.compiles == 1);
  s = test_request_examples(&cfg, &fresh, 1, 1, NULL);
  CHECK(s.disk_hits == 1 && s.compiles == 0);
  return test_finish("test_cache_busy_writer");
}
