/* An op call's kernels got together (runtime/kernel_batch.h), on a compile-only sm_90 runtime:
 * several new kernels are all built, each exactly once, and are the very kernels
 * jitops_kernel_get gives afterwards (as memory hits); a batch of kernels already in memory
 * builds nothing; a failure is reported with its own status and message, though another
 * thread built it, while the batch's other kernels are still built; a new runtime on the same
 * cache gets the stored kernels from disk and builds only the new ones of a mixed batch; the
 * lookup of stored kernels does not wait for a kernel another thread is building, in its own
 * runtime or another; a full batch and a name expression too long are refused. Needs no GPU. */
#include <pthread.h>
#include <unistd.h>

#include "runtime/images.h"
#include "runtime/kernel_batch.h"
#include "runtime/kernel_object.h"
#include "runtime/key.h"
#include "runtime/runtime_internal.h"
#include "testutil.h"

enum { KERNELS = 6 };

static const char *const SOURCE = "jitops/example.cuh";

static void expr_for(int k, char *out, size_t size) {
  static const char *const types[] = {"float", "double", "jitops::half"};
  snprintf(out, size, "jitops::example_axpy<%s, %d>", types[k % 3], 1 + k / 3);
}

static jitops_stats stats_of(jitops_runtime_t *rt) {
  jitops_stats s;
  memset(&s, 0, sizeof s);
  CHECK_OK(jitops_runtime_get_stats(rt, &s));
  return s;
}

static void new_kernels_are_built_once_each(jitops_runtime_t *rt) {
  jitops__kernel_batch batch;
  jitops__kernel_batch_init(&batch);
  jitops_kernel_t *got[KERNELS] = {0};
  char expr[96];
  for (int k = 0; k < KERNELS; ++k) {
    expr_for(k, expr, sizeof expr);
    CHECK_OK(jitops__kernel_batch_add(&batch, SOURCE, expr, &got[k]));
  }
  jitops_stats before = stats_of(rt);
  CHECK_OK(jitops__kernel_batch_get(rt, &batch));
  jitops_stats after = stats_of(rt);
  CHECK(after.compiles - before.compiles == KERNELS);
  for (int k = 0; k < KERNELS; ++k) {
    expr_for(k, expr, sizeof expr);
    jitops_kernel_t *again = NULL;
    CHECK_OK(jitops_kernel_get(rt, SOURCE, expr, NULL, 0, &again));
    CHECK(got[k] != NULL && again == got[k]);
  }
  /* The same batch again: every kernel is in memory, nothing is built. */
  memset(got, 0, sizeof got);
  before = stats_of(rt);
  CHECK_OK(jitops__kernel_batch_get(rt, &batch));
  after = stats_of(rt);
  CHECK(after.compiles == before.compiles && after.memory_hits - before.memory_hits == KERNELS);
  for (int k = 0; k < KERNELS; ++k)
    CHECK(got[k] != NULL);
}

static void a_failure_keeps_its_status_and_message(jitops_runtime_t *rt) {
  jitops__kernel_batch batch;
  jitops__kernel_batch_init(&batch);
  jitops_kernel_t *good[2] = {0}, *bad = NULL;
  CHECK_OK(jitops__kernel_batch_add(&batch, SOURCE, "jitops::example_axpy<float, 5>", &good[0]));
  CHECK_OK(jitops__kernel_batch_add(&batch, SOURCE, "jitops::no_such_kernel<float>", &bad));
  CHECK_OK(jitops__kernel_batch_add(&batch, SOURCE, "jitops::example_axpy<double, 5>", &good[1]));
  CHECK_FAILS(jitops__kernel_batch_get(rt, &batch), JITOPS_ERR_COMPILE, "no_such_kernel");
  CHECK(bad == NULL);
  /* The others were built all the same: now they are memory hits. */
  jitops_stats before = stats_of(rt);
  jitops_kernel_t *k = NULL;
  CHECK_OK(jitops_kernel_get(rt, SOURCE, "jitops::example_axpy<float, 5>", NULL, 0, &k));
  CHECK_OK(jitops_kernel_get(rt, SOURCE, "jitops::example_axpy<double, 5>", NULL, 0, &k));
  CHECK(stats_of(rt).compiles == before.compiles);
}

/* Small kernels are built after the others, but they are built, and a failure is still the
 * first in the batch's order: here the small one, added first. */
static void small_kernels_come_last_in_build_not_in_report(jitops_runtime_t *rt) {
  jitops__kernel_batch batch;
  jitops__kernel_batch_init(&batch);
  jitops_kernel_t *small_bad = NULL, *bad = NULL, *small_good = NULL, *good = NULL;
  CHECK_OK(jitops__kernel_batch_add_flagged(&batch, SOURCE, "jitops::no_such_small<float>",
                                            &small_bad, JITOPS__KERNEL_SMALL));
  CHECK_OK(jitops__kernel_batch_add(&batch, SOURCE, "jitops::no_such_kernel<double>", &bad));
  CHECK_OK(jitops__kernel_batch_add_flagged(&batch, SOURCE, "jitops::example_axpy<float, 7>",
                                            &small_good, JITOPS__KERNEL_SMALL));
  CHECK_OK(jitops__kernel_batch_add(&batch, SOURCE, "jitops::example_axpy<double, 7>", &good));
  CHECK_FAILS(jitops__kernel_batch_get(rt, &batch), JITOPS_ERR_COMPILE, "no_such_small");
  CHECK(small_bad == NULL && bad == NULL);
  CHECK(small_good != NULL && good != NULL);
}

/* A fresh runtime on the cache the first one filled: the batch's stored kernels are disk hits
 * (got on the calling thread, without claiming them), and only its new kernels compile. */
static void stored_kernels_come_from_disk(const jitops_runtime_config *cfg) {
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(cfg, &rt));
  if (rt == NULL)
    return;
  enum { NEW = 2 };
  jitops__kernel_batch batch;
  jitops__kernel_batch_init(&batch);
  jitops_kernel_t *got[KERNELS + NEW] = {0};
  char expr[96];
  for (int k = 0; k < KERNELS + NEW; ++k) {
    expr_for(k, expr, sizeof expr); /* the last NEW were never built */
    CHECK_OK(jitops__kernel_batch_add(&batch, SOURCE, expr, &got[k]));
  }
  CHECK_OK(jitops__kernel_batch_get(rt, &batch));
  jitops_stats s = stats_of(rt);
  CHECK(s.disk_hits == KERNELS && s.compiles == NEW && s.misses == NEW);
  for (int k = 0; k < KERNELS + NEW; ++k)
    CHECK(got[k] != NULL);
  jitops_runtime_destroy(rt);
}

/* A call made on a thread of its own: a stored-kernel lookup, or a plain get. */
typedef struct call {
  jitops_runtime_t *rt;
  const char *expr;
  int stored_only;
  jitops_status status;
  jitops_kernel_t *got;
  int done; /* set (release) once the call returned */
  pthread_t thread;
  int started;
} call;

static void *make_call(void *arg) {
  call *c = arg;
  c->status = c->stored_only ? jitops__kernel_get_stored(c->rt, SOURCE, c->expr, NULL, 0, &c->got)
                             : jitops_kernel_get(c->rt, SOURCE, c->expr, NULL, 0, &c->got);
  __atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
  return NULL;
}

static void start(call *c) {
  c->started = pthread_create(&c->thread, NULL, make_call, c) == 0;
  CHECK(c->started);
}

/* Waits until `ready(arg)` holds, for at most ~30 s: a liveness bound, not a timing (what is
 * waited for happens at once when the code is right, and never before the test's next step
 * when it is not). */
static int eventually(int (*ready)(void *), void *arg) {
  for (int i = 0; i < 3000; ++i) {
    if (ready(arg))
      return 1;
    usleep(10000);
  }
  return ready(arg);
}

static int returned(void *arg) {
  return __atomic_load_n(&((call *)arg)->done, __ATOMIC_ACQUIRE);
}

/* Whether the runtime's registry holds the kernel pending (a thread is building it). */
typedef struct pending_probe {
  jitops_runtime_t *rt;
  jitops__key lookup_key;
} pending_probe;

static int is_pending(void *arg) {
  pending_probe *p = arg;
  pthread_mutex_lock(&p->rt->build_lock);
  jitops_kernel_t *k = jitops__registry_find(&p->rt->registry, p->lookup_key);
  const int pending = k != NULL && k->state == JITOPS__KERNEL_PENDING;
  pthread_mutex_unlock(&p->rt->build_lock);
  return pending;
}

/* The cache key of `expr`, from a runtime on `dir` that builds it and is then destroyed (its
 * kernels free their image-table entries). */
static int cache_key_of(const char *expr, const char *dir, jitops__key *key) {
  jitops_runtime_config cfg = test_offline_config("sm_90", dir);
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(&cfg, &rt));
  if (rt == NULL)
    return 0;
  jitops_kernel_t *k = NULL;
  CHECK_OK(jitops_kernel_get(rt, SOURCE, expr, NULL, 0, &k));
  if (k != NULL)
    *key = k->cache_key;
  jitops_runtime_destroy(rt);
  return k != NULL;
}

/* While some thread builds a kernel, a batch's lookup of stored kernels reports it not stored
 * at once instead of waiting for that build, so that the batch's own builders start. Two
 * builders are stood in for: the test holding the kernel's image-table claim (as a runtime's
 * builder holds it through the compile: the lookup is in another runtime), and a thread of the
 * lookup's own runtime whose get of the kernel is pending behind that claim. Once the claim is
 * given up, the pending get and a batch get the kernel as usual. */
static void a_stored_lookup_never_waits_for_a_build(void) {
  static const char *const EXPR = "jitops::example_axpy<float, 7>";
  char dir_a[1024], dir_b[1024];
  test_fresh_dir("kernel-batch-builder", dir_a, sizeof dir_a);
  test_fresh_dir("kernel-batch-lookup", dir_b, sizeof dir_b);
  jitops__key key;
  if (!cache_key_of(EXPR, dir_a, &key))
    return;
  int build = 0;
  jitops__image *claim = jitops__images_acquire(key, &build);
  CHECK(claim != NULL && build == 1);
  if (claim == NULL || build != 1)
    return;
  jitops_runtime_config cfg_b = test_offline_config("sm_90", dir_b); /* nothing on disk */
  jitops_runtime_t *b = NULL;
  CHECK_OK(jitops_runtime_create(&cfg_b, &b));

  /* Another runtime's build (the claim): the lookup returns while it is held. */
  call other = {.rt = b, .expr = EXPR, .stored_only = 1};
  if (b != NULL)
    start(&other);
  CHECK(other.started && eventually(returned, &other));
  /* The lookup's own runtime: a get pending behind the claim, then a lookup beside it. */
  call getter = {.rt = b, .expr = EXPR, .stored_only = 0};
  call same = {.rt = b, .expr = EXPR, .stored_only = 1};
  pending_probe probe = {b, jitops__lookup_key(SOURCE, EXPR, NULL, 0)};
  if (b != NULL)
    start(&getter);
  const int got_pending = getter.started && eventually(is_pending, &probe);
  CHECK(got_pending);
  if (got_pending)
    start(&same);
  CHECK(same.started && eventually(returned, &same));
  CHECK(!returned(&getter)); /* still behind the claim: the lookup returned beside a build */

  jitops__images_abandon(claim);
  call *calls[] = {&other, &getter, &same};
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; ++i)
    if (calls[i]->started)
      pthread_join(calls[i]->thread, NULL);
  CHECK(other.status == JITOPS_ERR_NOT_FOUND && other.got == NULL);
  CHECK(same.status == JITOPS_ERR_NOT_FOUND && same.got == NULL);
  CHECK(getter.status == JITOPS_SUCCESS && getter.got != NULL); /* built once the claim went */
  if (b == NULL)
    return;

  /* The batch then finds it in memory. */
  jitops__kernel_batch batch;
  jitops__kernel_batch_init(&batch);
  jitops_kernel_t *got = NULL;
  CHECK_OK(jitops__kernel_batch_add(&batch, SOURCE, EXPR, &got));
  CHECK_OK(jitops__kernel_batch_get(b, &batch));
  CHECK(got != NULL && got == getter.got && stats_of(b).compiles == 1);
  jitops_runtime_destroy(b);
}

static void limits_are_refused(void) {
  jitops__kernel_batch batch;
  jitops__kernel_batch_init(&batch);
  jitops_kernel_t *out[JITOPS__KERNEL_BATCH_MAX + 1];
  for (int k = 0; k < JITOPS__KERNEL_BATCH_MAX; ++k)
    CHECK_OK(jitops__kernel_batch_add(&batch, SOURCE, "jitops::example_axpy<float, 1>", &out[k]));
  CHECK_FAILS(jitops__kernel_batch_add(&batch, SOURCE, "jitops::example_axpy<float, 1>",
                                       &out[JITOPS__KERNEL_BATCH_MAX]),
              JITOPS_ERR_INTERNAL, "more than");
  char long_expr[JITOPS__KERNEL_BATCH_EXPR + 8];
  memset(long_expr, 'x', sizeof long_expr - 1);
  long_expr[sizeof long_expr - 1] = '\0';
  jitops__kernel_batch_init(&batch);
  CHECK_FAILS(jitops__kernel_batch_add(&batch, SOURCE, long_expr, &out[0]), JITOPS_ERR_INTERNAL,
              "too long");
}

int main(void) {
  char dir[1024];
  test_fresh_dir("kernel-batch", dir, sizeof dir);
  jitops_runtime_config cfg = test_offline_config("sm_90", dir);
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(&cfg, &rt));
  if (rt == NULL)
    return test_finish("test_kernel_batch");
  new_kernels_are_built_once_each(rt);
  a_failure_keeps_its_status_and_message(rt);
  small_kernels_come_last_in_build_not_in_report(rt);
  jitops_runtime_destroy(rt);
  stored_kernels_come_from_disk(&cfg);
  a_stored_lookup_never_waits_for_a_build();
  limits_are_refused();
  return test_finish("test_kernel_batch");
}
