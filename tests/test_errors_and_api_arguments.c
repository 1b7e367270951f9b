/* Every bad argument of the core public API gives its own status and a message that names
 * the argument. Runs without a GPU. */
#include <unistd.h>

#include "testutil.h"

static const char *const example = "jitops/example.cuh";

static void status_names(void) {
  for (int s = JITOPS_SUCCESS; s <= JITOPS_ERR_INTERNAL; ++s)
    CHECK(strncmp(jitops_status_string((jitops_status)s), "JITOPS_", 7) == 0);
  CHECK(strcmp(jitops_status_string(JITOPS_ERR_COMPILE), "JITOPS_ERR_COMPILE") == 0);
  CHECK(strcmp(jitops_status_string((jitops_status)999), "JITOPS_ERR_UNKNOWN_STATUS") == 0);
  CHECK(strcmp(jitops_version_string(), "0.1.0") == 0);
}

static void runtime_arguments(void) {
  jitops_runtime_config cfg = test_offline_config("sm_90", NULL);
  jitops_runtime_t *rt = NULL;
  CHECK_FAILS(jitops_runtime_create(&cfg, NULL), JITOPS_ERR_INVALID_ARGUMENT, "out is NULL");
  cfg.device = -2;
  CHECK_FAILS(jitops_runtime_create(&cfg, &rt), JITOPS_ERR_INVALID_ARGUMENT, "config.device");
  CHECK(rt == NULL);
  cfg = test_offline_config(NULL, NULL);
  CHECK_FAILS(jitops_runtime_create(&cfg, &rt), JITOPS_ERR_INVALID_ARGUMENT, "config.arch");
  cfg = test_offline_config("gfx90a", NULL);
  CHECK_FAILS(jitops_runtime_create(&cfg, &rt), JITOPS_ERR_INVALID_ARGUMENT, "malformed");
  cfg = test_offline_config("sm_", NULL);
  CHECK_FAILS(jitops_runtime_create(&cfg, &rt), JITOPS_ERR_INVALID_ARGUMENT, "config.arch");
  cfg = test_offline_config("sm_90", NULL);
  cfg.cache_mode = (jitops_cache_mode)9;
  CHECK_FAILS(jitops_runtime_create(&cfg, &rt), JITOPS_ERR_INVALID_ARGUMENT, "config.cache_mode");
  jitops_runtime_info info;
  jitops_stats stats;
  CHECK_FAILS(jitops_runtime_get_info(NULL, &info), JITOPS_ERR_INVALID_ARGUMENT, "rt is NULL");
  CHECK_FAILS(jitops_runtime_get_stats(NULL, &stats), JITOPS_ERR_INVALID_ARGUMENT, "rt is NULL");
  jitops_runtime_destroy(NULL); /* a no-op */
}

static void source_arguments(jitops_runtime_t *rt) {
  CHECK_FAILS(jitops_source_register(NULL, "a.cuh", "x"), JITOPS_ERR_INVALID_ARGUMENT, "rt");
  CHECK_FAILS(jitops_source_register(rt, NULL, "x"), JITOPS_ERR_INVALID_ARGUMENT, "name");
  CHECK_FAILS(jitops_source_register(rt, "a.cuh", NULL), JITOPS_ERR_INVALID_ARGUMENT, "source");
  CHECK_FAILS(jitops_source_register(rt, "", "x"), JITOPS_ERR_INVALID_ARGUMENT, "name");
  CHECK_FAILS(jitops_source_register(rt, "has space.cuh", "x"), JITOPS_ERR_INVALID_ARGUMENT,
              "[A-Za-z0-9_./-]");
  char long_name[300];
  memset(long_name, 'a', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = 0;
  CHECK_FAILS(jitops_source_register(rt, long_name, "x"), JITOPS_ERR_INVALID_ARGUMENT, "255");
  CHECK_OK(jitops_source_register(rt, "user/a.cuh", "// one"));
  CHECK_OK(jitops_source_register(rt, "user/a.cuh", "// one")); /* same text: a no-op */
  CHECK_FAILS(jitops_source_register(rt, "user/a.cuh", "// two"), JITOPS_ERR_ALREADY_EXISTS,
              "user/a.cuh");
  CHECK_FAILS(jitops_source_register(rt, example, "// not the template"), JITOPS_ERR_ALREADY_EXISTS,
              "jitops/example.cuh");
}

static void kernel_arguments(jitops_runtime_t *rt) {
  jitops_kernel_t *k = NULL;
  const char *expr = "jitops::example_axpy<float, 1>";
  const char *opts[] = {"-DX=1", NULL};
  const char *empty[] = {"   "};
  const char *arch[] = {"-arch=sm_80"};
  const char *std[] = {"--std=c++20"};
  CHECK_FAILS(jitops_kernel_get(NULL, example, expr, NULL, 0, &k), JITOPS_ERR_INVALID_ARGUMENT,
              "rt is NULL");
  CHECK_FAILS(jitops_kernel_get(rt, NULL, expr, NULL, 0, &k), JITOPS_ERR_INVALID_ARGUMENT,
              "source_name is NULL");
  CHECK_FAILS(jitops_kernel_get(rt, example, NULL, NULL, 0, &k), JITOPS_ERR_INVALID_ARGUMENT,
              "name_expression is NULL");
  CHECK_FAILS(jitops_kernel_get(rt, example, "", NULL, 0, &k), JITOPS_ERR_INVALID_ARGUMENT,
              "name_expression is empty");
  CHECK_FAILS(jitops_kernel_get(rt, example, expr, NULL, 0, NULL), JITOPS_ERR_INVALID_ARGUMENT,
              "out is NULL");
  CHECK_FAILS(jitops_kernel_get(rt, example, expr, NULL, 2, &k), JITOPS_ERR_INVALID_ARGUMENT,
              "options is NULL");
  CHECK_FAILS(jitops_kernel_get(rt, example, expr, opts, 2, &k), JITOPS_ERR_INVALID_ARGUMENT,
              "options[1] is NULL");
  CHECK_FAILS(jitops_kernel_get(rt, example, expr, empty, 1, &k), JITOPS_ERR_INVALID_ARGUMENT,
              "options[0] is empty");
  CHECK_FAILS(jitops_kernel_get(rt, example, expr, arch, 1, &k), JITOPS_ERR_INVALID_ARGUMENT,
              "the target");
  CHECK_FAILS(jitops_kernel_get(rt, example, expr, std, 1, &k), JITOPS_ERR_INVALID_ARGUMENT,
              "options[0]");
  CHECK_FAILS(jitops_kernel_get(rt, example, expr, opts, 300, &k), JITOPS_ERR_INVALID_ARGUMENT,
              "num_options 300");
  CHECK_FAILS(jitops_kernel_get(rt, "no/such.cuh", expr, NULL, 0, &k), JITOPS_ERR_NOT_FOUND,
              "no/such.cuh");
  CHECK_OK(jitops_source_register(rt, "user/broken.cuh",
                                  "__global__ void broken(int *p) { p[0] = undeclared_name; }"));
  CHECK_FAILS(jitops_kernel_get(rt, "user/broken.cuh", "broken", NULL, 0, &k), JITOPS_ERR_COMPILE,
              "undeclared_name");
  CHECK_FAILS(jitops_kernel_get(rt, example, "jitops::no_such_kernel<float>", NULL, 0, &k),
              JITOPS_ERR_COMPILE, "no_such_kernel");
  jitops_stats s;
  CHECK_OK(jitops_runtime_get_stats(rt, &s));
  CHECK(s.compile_errors == 2);
}

static void launch_arguments(jitops_runtime_t *rt) {
  jitops_kernel_t *k = NULL;
  CHECK_OK(jitops_kernel_get(rt, example, "jitops::example_axpy<float, 1>", NULL, 0, &k));
  jitops_launch_params p = {{1, 1, 1}, {128, 1, 1}, 0, NULL};
  CHECK_FAILS(jitops_kernel_launch(NULL, &p, NULL), JITOPS_ERR_INVALID_ARGUMENT, "kernel is NULL");
  CHECK_FAILS(jitops_kernel_launch(k, NULL, NULL), JITOPS_ERR_INVALID_ARGUMENT, "params is NULL");
  p.grid[1] = 0;
  CHECK_FAILS(jitops_kernel_launch(k, &p, NULL), JITOPS_ERR_INVALID_ARGUMENT, "params.grid[1]");
  p.grid[1] = 1;
  p.block[0] = 2048;
  CHECK_FAILS(jitops_kernel_launch(k, &p, NULL), JITOPS_ERR_INVALID_ARGUMENT, "params.block[0]");
  p.block[0] = 64;
  p.block[1] = 32;
  CHECK_FAILS(jitops_kernel_launch(k, &p, NULL), JITOPS_ERR_INVALID_ARGUMENT, "2048 threads");
  p.block[1] = 1;
  CHECK_FAILS(jitops_kernel_launch(k, &p, NULL), JITOPS_ERR_NO_DEVICE, "compile-only");
  size_t offset = 0, size = 0;
  CHECK_FAILS(jitops_kernel_param_info(NULL, 0, &offset, &size), JITOPS_ERR_INVALID_ARGUMENT,
              "kernel is NULL");
  CHECK_FAILS(jitops_kernel_param_info(k, 0, NULL, &size), JITOPS_ERR_INVALID_ARGUMENT,
              "offset is NULL");
  CHECK_FAILS(jitops_kernel_param_info(k, 0, &offset, NULL), JITOPS_ERR_INVALID_ARGUMENT,
              "size is NULL");
  CHECK_FAILS(jitops_kernel_param_info(k, 0, &offset, &size), JITOPS_ERR_NO_DEVICE, "compile-only");
  CHECK(strlen(jitops_kernel_lowered_name(k)) > 0);
  CHECK(strcmp(jitops_kernel_lowered_name(NULL), "") == 0);
}

static void interop_arguments(jitops_runtime_t *rt) {
  int word = 0;
  CHECK_FAILS(jitops_stream_wait(NULL, NULL, NULL), JITOPS_ERR_INVALID_ARGUMENT, "runtime is NULL");
  CHECK_FAILS(jitops_stream_wait(rt, NULL, (void *)2), JITOPS_ERR_NO_DEVICE, "compile-only");
  CHECK_FAILS(jitops_pointer_check(NULL, &word), JITOPS_ERR_INVALID_ARGUMENT, "runtime is NULL");
  CHECK_FAILS(jitops_pointer_check(rt, &word), JITOPS_ERR_NO_DEVICE, "compile-only");
}

static void catalogue_arguments(jitops_runtime_t *rt) {
  size_t n = jitops_catalogue_size();
  CHECK(n > 0);
  const char *op = NULL, *description = NULL;
  CHECK_OK(jitops_catalogue_describe(0, &op, &description));
  CHECK(op != NULL && description != NULL && strlen(description) > 0);
  CHECK_FAILS(jitops_catalogue_describe(n, &op, &description), JITOPS_ERR_NOT_FOUND, "index");
  CHECK_FAILS(jitops_catalogue_compile(NULL, 0), JITOPS_ERR_INVALID_ARGUMENT, "runtime");
  CHECK_FAILS(jitops_catalogue_compile(rt, n), JITOPS_ERR_NOT_FOUND, "index");
}

static void *never_allocate(void *user, size_t bytes, void *stream) {
  (void)user, (void)bytes, (void)stream;
  return NULL;
}

static void never_release(void *user, void *ptr, size_t bytes, void *stream) {
  (void)user, (void)ptr, (void)bytes, (void)stream;
}

/* One allocator per runtime, installed whole or not at all. */
static void allocator_arguments(jitops_runtime_t *rt) {
  jitops_allocator allocator = {never_allocate, NULL, NULL};
  CHECK_FAILS(jitops_runtime_set_allocator(NULL, &allocator), JITOPS_ERR_INVALID_ARGUMENT,
              "runtime is NULL");
  CHECK_FAILS(jitops_runtime_set_allocator(rt, NULL), JITOPS_ERR_INVALID_ARGUMENT,
              "allocator is NULL");
  CHECK_FAILS(jitops_runtime_set_allocator(rt, &allocator), JITOPS_ERR_INVALID_ARGUMENT,
              "allocator->release");
  allocator.release = never_release;
  CHECK_OK(jitops_runtime_set_allocator(rt, &allocator));
  CHECK_FAILS(jitops_runtime_set_allocator(rt, &allocator), JITOPS_ERR_ALREADY_EXISTS, "already");
}

static int count_entry(const jitops_cache_entry *e, void *user) {
  (void)e;
  ++*(int *)user;
  return 0;
}

static void cache_admin_arguments(void) {
  char dir[1024], missing[1100], file[1100];
  test_fresh_dir("admin", dir, sizeof dir);
  snprintf(missing, sizeof missing, "%s/absent", dir);
  jitops_cache_t *cache = NULL;
  CHECK_FAILS(jitops_cache_open(dir, 1, NULL), JITOPS_ERR_INVALID_ARGUMENT, "out is NULL");
  CHECK_FAILS(jitops_cache_open(missing, 0, &cache), JITOPS_ERR_NOT_FOUND, "absent");
  CHECK_OK(jitops_cache_open(dir, 1, &cache));
  int count = 0;
  CHECK_FAILS(jitops_cache_list(NULL, NULL, NULL, count_entry, &count), JITOPS_ERR_INVALID_ARGUMENT,
              "cache is NULL");
  CHECK_FAILS(jitops_cache_list(cache, NULL, NULL, NULL, NULL), JITOPS_ERR_INVALID_ARGUMENT,
              "visit is NULL");
  CHECK_FAILS(jitops_cache_stats(cache, NULL, NULL), JITOPS_ERR_INVALID_ARGUMENT, "visit");
  CHECK_FAILS(jitops_cache_clear(NULL, NULL, -1, NULL), JITOPS_ERR_INVALID_ARGUMENT, "cache");
  CHECK_FAILS(jitops_cache_verify(NULL, NULL, NULL), JITOPS_ERR_INVALID_ARGUMENT, "cache");
  CHECK_FAILS(jitops_cache_export(cache, NULL), JITOPS_ERR_INVALID_ARGUMENT, "file is NULL");
  snprintf(file, sizeof file, "%s/kernels.db", dir);
  CHECK_FAILS(jitops_cache_export(cache, file), JITOPS_ERR_IO, "already exists");
  CHECK_FAILS(jitops_cache_import(cache, missing, NULL, NULL), JITOPS_ERR_IO, "cannot read");
  snprintf(file, sizeof file, "%s/not-a-db", dir);
  FILE *f = fopen(file, "w");
  fputs("this is not a database, not even close, and it is long enough to look like one\n", f);
  fclose(f);
  CHECK_FAILS(jitops_cache_import(cache, file, NULL, NULL), JITOPS_ERR_CACHE, "not-a-db");
  jitops_cache_close(cache);
  CHECK_OK(jitops_cache_open(dir, 0, &cache));
  CHECK_FAILS(jitops_cache_clear(cache, NULL, -1, NULL), JITOPS_ERR_CACHE, "read-only");
  CHECK_FAILS(jitops_cache_verify(cache, NULL, NULL), JITOPS_ERR_CACHE, "read-only");
  jitops_cache_close(cache);
  jitops_cache_close(NULL);
}

int main(void) {
  status_names();
  runtime_arguments();
  jitops_runtime_config cfg = test_offline_config("sm_90", NULL);
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(&cfg, &rt));
  if (rt == NULL)
    return test_finish("test_errors_and_api_arguments");
  source_arguments(rt);
  kernel_arguments(rt);
  launch_arguments(rt);
  interop_arguments(rt);
  catalogue_arguments(rt);
  allocator_arguments(rt);
  jitops_runtime_destroy(rt);
  cache_admin_arguments();
  return test_finish("test_errors_and_api_arguments");
}
