/* Several runtimes of one target in one process (one per GPU, in real use) compile each
 * kernel once: two compile-only sm_90 runtimes, two threads on each, all started together on
 * the same kernels, run NVRTC once per kernel in all, with or without a disk tier; the other
 * runtime's requests are shared hits. Also: another target, or other source contents under
 * the same name, share nothing; an image lives only while a runtime holds its kernel; a
 * compile error is not shared as a success, and nobody hangs on it. Needs no GPU. */
#include <pthread.h>

#include "testutil.h"

enum { RUNTIMES = 2, THREADS_PER_RUNTIME = 2, KERNELS = 8 };

static pthread_barrier_t start_line;

typedef struct worker {
  jitops_runtime_t *rt;
  int index;
  const char *lowered[KERNELS]; /* by kernel, as this worker got it */
} worker;

static void expr_for(int k, char *out, size_t size) {
  static const char *const types[] = {"float", "double", "jitops::half", "jitops::bfloat16"};
  snprintf(out, size, "jitops::example_axpy<%s, %d>", types[k % 4], 1 + k / 4);
}

static void *request_all(void *arg) {
  worker *w = arg;
  pthread_barrier_wait(&start_line);
  for (int i = 0; i < KERNELS; ++i) {
    int k = (i + 3 * w->index) % KERNELS; /* each worker in its own order */
    char expr[96];
    expr_for(k, expr, sizeof expr);
    jitops_kernel_t *kernel = NULL;
    CHECK_OK(jitops_kernel_get(w->rt, "jitops/example.cuh", expr, NULL, 0, &kernel));
    w->lowered[k] = jitops_kernel_lowered_name(kernel);
  }
  return NULL;
}

static void create_runtimes(const char *const *archs, const char *dir, jitops_runtime_t **rts) {
  for (int r = 0; r < RUNTIMES; ++r) {
    jitops_runtime_config cfg = test_offline_config(archs[r], dir);
    rts[r] = NULL;
    CHECK_OK(jitops_runtime_create(&cfg, &rts[r]));
    if (rts[r] == NULL)
      exit(test_finish("test_compile_once_across_runtimes"));
  }
}

/* Every worker asks for every kernel at once; returns the runtimes' counters (summed into
 * `total`, one by one into `each`) and leaves the runtimes alive. */
static void race(jitops_runtime_t **rts, jitops_stats *each, jitops_stats *total) {
  enum { WORKERS = RUNTIMES * THREADS_PER_RUNTIME };
  worker workers[WORKERS];
  pthread_t threads[WORKERS];
  pthread_barrier_init(&start_line, NULL, WORKERS);
  for (int w = 0; w < WORKERS; ++w) {
    workers[w] = (worker){rts[w % RUNTIMES], w, {0}};
    pthread_create(&threads[w], NULL, request_all, &workers[w]);
  }
  for (int w = 0; w < WORKERS; ++w)
    pthread_join(threads[w], NULL);
  pthread_barrier_destroy(&start_line);
  memset(total, 0, sizeof *total);
  for (int r = 0; r < RUNTIMES; ++r) {
    CHECK_OK(jitops_runtime_get_stats(rts[r], &each[r]));
    total->compiles += each[r].compiles;
    total->shared_hits += each[r].shared_hits;
    total->disk_hits += each[r].disk_hits;
    total->compile_errors += each[r].compile_errors;
  }
  for (int w = 1; w < WORKERS; ++w)
    for (int k = 0; k < KERNELS; ++k)
      CHECK(workers[w].lowered[k] && strcmp(workers[w].lowered[k], workers[0].lowered[k]) == 0);
}

static void destroy_runtimes(jitops_runtime_t **rts) {
  for (int r = 0; r < RUNTIMES; ++r)
    jitops_runtime_destroy(rts[r]);
}

/* Same target: one compile per kernel in the process. `dir` NULL: no disk tier at all. */
static void same_target_compiles_once(const char *dir) {
  static const char *const archs[RUNTIMES] = {"sm_90", "sm_90"};
  jitops_runtime_t *rts[RUNTIMES];
  jitops_stats each[RUNTIMES], total;
  create_runtimes(archs, dir, rts);
  race(rts, each, &total);
  CHECK(total.compiles == KERNELS);
  CHECK(total.shared_hits == KERNELS);
  CHECK(total.disk_hits == 0 && total.compile_errors == 0);
  for (int r = 0; r < RUNTIMES; ++r) {
    /* Each runtime builds or shares each kernel once; its other thread hits its registry. */
    CHECK(each[r].misses + each[r].shared_hits == KERNELS);
    CHECK(each[r].compiles == each[r].misses);
    CHECK(each[r].memory_hits == KERNELS * (THREADS_PER_RUNTIME - 1));
  }
  destroy_runtimes(rts);
}

/* The key names the target: an sm_80 runtime shares nothing with an sm_90 one. */
static void other_target_shares_nothing(void) {
  static const char *const archs[RUNTIMES] = {"sm_90", "sm_80"};
  jitops_runtime_t *rts[RUNTIMES];
  jitops_stats each[RUNTIMES], total;
  create_runtimes(archs, NULL, rts);
  race(rts, each, &total);
  CHECK(total.compiles == RUNTIMES * KERNELS);
  CHECK(total.shared_hits == 0);
  destroy_runtimes(rts);
}

static jitops_stats request_one(jitops_runtime_t *rt, const char *source, const char *expr,
                                jitops_status want) {
  jitops_kernel_t *k = NULL;
  jitops_status got = jitops_kernel_get(rt, source, expr, NULL, 0, &k);
  CHECK(got == want);
  if (got != want)
    fprintf(stderr, "  %s: %s\n", jitops_status_string(got), jitops_last_error());
  jitops_stats s;
  CHECK_OK(jitops_runtime_get_stats(rt, &s));
  return s;
}

/* An image is shared while a runtime holds its kernel, and freed with the last one: a runtime
 * created after every holder is gone (and with no disk tier) compiles again. */
static void image_lives_with_its_kernels(void) {
  static const char *const archs[RUNTIMES] = {"sm_90", "sm_90"};
  const char *expr = "jitops::example_axpy<float, 7>";
  jitops_runtime_t *rts[RUNTIMES];
  create_runtimes(archs, NULL, rts);
  CHECK(request_one(rts[0], "jitops/example.cuh", expr, JITOPS_SUCCESS).compiles == 1);
  CHECK(request_one(rts[1], "jitops/example.cuh", expr, JITOPS_SUCCESS).shared_hits == 1);
  jitops_runtime_destroy(rts[0]);
  jitops_runtime_t *late = NULL;
  jitops_runtime_config cfg = test_offline_config("sm_90", NULL);
  CHECK_OK(jitops_runtime_create(&cfg, &late));
  CHECK(request_one(late, "jitops/example.cuh", expr, JITOPS_SUCCESS).shared_hits == 1);
  jitops_runtime_destroy(rts[1]);
  jitops_runtime_destroy(late);
  CHECK_OK(jitops_runtime_create(&cfg, &late));
  jitops_stats s = request_one(late, "jitops/example.cuh", expr, JITOPS_SUCCESS);
  CHECK(s.compiles == 1 && s.shared_hits == 0);
  jitops_runtime_destroy(late);
}

/* Sources are per runtime: the same name with other contents is another key. */
static void same_name_other_source_shares_nothing(void) {
  static const char *const archs[RUNTIMES] = {"sm_90", "sm_90"};
  jitops_runtime_t *rts[RUNTIMES];
  create_runtimes(archs, NULL, rts);
  CHECK_OK(jitops_source_register(rts[0], "user/k.cu", "extern \"C\" __global__ void k() {}\n"));
  CHECK_OK(jitops_source_register(rts[1], "user/k.cu",
                                  "extern \"C\" __global__ void k() { __syncthreads(); }\n"));
  for (int r = 0; r < RUNTIMES; ++r) {
    jitops_stats s = request_one(rts[r], "user/k.cu", "k", JITOPS_SUCCESS);
    CHECK(s.compiles == 1 && s.shared_hits == 0);
  }
  destroy_runtimes(rts);
}

typedef struct broken_worker {
  jitops_runtime_t *rt;
  jitops_status status;
} broken_worker;

static void *request_broken(void *arg) {
  broken_worker *w = arg;
  jitops_kernel_t *k = NULL;
  pthread_barrier_wait(&start_line);
  w->status = jitops_kernel_get(w->rt, "user/broken.cu", "broken", NULL, 0, &k);
  return NULL;
}

/* A builder that fails gives the key up: the other runtime compiles (and fails) itself, with
 * its own NVRTC log, rather than waiting forever or sharing a failure. */
static void compile_error_is_not_shared(void) {
  static const char *const archs[RUNTIMES] = {"sm_90", "sm_90"};
  jitops_runtime_t *rts[RUNTIMES];
  create_runtimes(archs, NULL, rts);
  broken_worker workers[RUNTIMES];
  pthread_t threads[RUNTIMES];
  pthread_barrier_init(&start_line, NULL, RUNTIMES);
  for (int r = 0; r < RUNTIMES; ++r) {
    CHECK_OK(jitops_source_register(rts[r], "user/broken.cu",
                                    "extern \"C\" __global__ void broken() { nope(); }\n"));
    workers[r] = (broken_worker){rts[r], JITOPS_SUCCESS};
    pthread_create(&threads[r], NULL, request_broken, &workers[r]);
  }
  for (int r = 0; r < RUNTIMES; ++r) {
    pthread_join(threads[r], NULL);
    CHECK(workers[r].status == JITOPS_ERR_COMPILE);
    jitops_stats s;
    CHECK_OK(jitops_runtime_get_stats(rts[r], &s));
    CHECK(s.compile_errors == 1 && s.compiles == 0 && s.shared_hits == 0);
  }
  pthread_barrier_destroy(&start_line);
  destroy_runtimes(rts);
}

int main(void) {
  same_target_compiles_once(NULL);
  char dir[512];
  test_fresh_dir("shared_disk", dir, sizeof dir);
  same_target_compiles_once(dir);
  other_target_shares_nothing();
  image_lives_with_its_kernels();
  same_name_other_source_shares_nothing();
  compile_error_is_not_shared();
  return test_finish("test_compile_once_across_runtimes");
}
