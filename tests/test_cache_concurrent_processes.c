/* 8 processes × 4 threads start together on one empty cache and each asks for the same 16
 * specializations: no call fails, the cache ends with exactly 16 rows, and the claim
 * protocol has each kernel compiled once across all processes. */
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

enum { PROCESSES = 8, THREADS = 4, KERNELS = 16 };

typedef struct worker {
  jitops_runtime_t *rt;
  int index;
  int failures;
} worker;

static void expr_for(int k, char *out, size_t size) {
  static const char *const types[] = {"float", "double", "jitops::half", "jitops::bfloat16"};
  snprintf(out, size, "jitops::example_axpy<%s, %d>", types[k % 4], 1 + k / 4);
}

static void *run_worker(void *arg) {
  worker *w = arg;
  for (int i = 0; i < KERNELS; ++i) {
    char expr[96];
    expr_for((i * 5 + w->index * 3) % KERNELS, expr, sizeof expr); /* each in its own order */
    jitops_kernel_t *k = NULL;
    if (jitops_kernel_get(w->rt, "jitops/example.cuh", expr, NULL, 0, &k) != JITOPS_SUCCESS) {
      fprintf(stderr, "child %d: %s\n", (int)getpid(), jitops_last_error());
      ++w->failures;
    }
  }
  return NULL;
}

/* One rank: 4 threads on one runtime. Reports its counters through the pipe. */
static int run_child(const char *dir, int rank, int go_fd, int report_fd) {
  char go;
  if (read(go_fd, &go, 1) != 1)
    return 2;
  jitops_runtime_config cfg = test_offline_config("sm_90", dir);
  jitops_runtime_t *rt = NULL;
  if (jitops_runtime_create(&cfg, &rt) != JITOPS_SUCCESS)
    return 3;
  worker workers[THREADS];
  pthread_t threads[THREADS];
  for (int t = 0; t < THREADS; ++t) {
    workers[t] = (worker){rt, rank * THREADS + t, 0};
    pthread_create(&threads[t], NULL, run_worker, &workers[t]);
  }
  int failures = 0;
  for (int t = 0; t < THREADS; ++t) {
    pthread_join(threads[t], NULL);
    failures += workers[t].failures;
  }
  jitops_stats s;
  jitops_runtime_get_stats(rt, &s);
  jitops_runtime_destroy(rt);
  if (write(report_fd, &s, sizeof s) != (ssize_t)sizeof s)
    return 4;
  return failures ? 1 : 0;
}

static int count_rows(const jitops_cache_entry *e, void *user) {
  (void)e;
  ++*(int *)user;
  return 0;
}

int main(void) {
  char dir[1024];
  test_fresh_dir("ranks", dir, sizeof dir);
  int go[2], report[2];
  CHECK(pipe(go) == 0 && pipe(report) == 0);
  pid_t pids[PROCESSES];
  for (int p = 0; p < PROCESSES; ++p) {
    pids[p] = fork();
    if (pids[p] == 0)
      _exit(run_child(dir, p, go[0], report[1]));
  }
  /* Release all ranks at once. */
  char ready[PROCESSES];
  memset(ready, 'g', sizeof ready);
  CHECK(write(go[1], ready, sizeof ready) == (ssize_t)sizeof ready);
  uint64_t compiles = 0, disk_hits = 0, waits = 0, requests = 0, errors = 0;
  for (int p = 0; p < PROCESSES; ++p) {
    int status = 0;
    waitpid(pids[p], &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    jitops_stats s;
    if (read(report[0], &s, sizeof s) == (ssize_t)sizeof s) {
      compiles += s.compiles;
      disk_hits += s.disk_hits;
      waits += s.waits;
      errors += s.disk_errors;
      requests += s.memory_hits + s.disk_hits + s.misses;
    }
  }
  printf("8 ranks x 4 threads: %llu requests, %llu compiles, %llu disk hits (%llu after a wait), "
         "%llu disk errors\n",
         (unsigned long long)requests, (unsigned long long)compiles, (unsigned long long)disk_hits,
         (unsigned long long)waits, (unsigned long long)errors);
  CHECK(requests == PROCESSES * THREADS * KERNELS);
  CHECK(compiles == KERNELS);
  CHECK(errors == 0);
  jitops_cache_t *cache = NULL;
  int rows = 0;
  CHECK_OK(jitops_cache_open(dir, 0, &cache));
  if (cache)
    CHECK_OK(jitops_cache_list(cache, NULL, NULL, count_rows, &rows));
  jitops_cache_close(cache);
  CHECK(rows == KERNELS);
  return test_finish("test_cache_concurrent_processes");
}
