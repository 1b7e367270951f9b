/* Specialization and compilation without a GPU: the example template and a user template
 * compile to CUBIN for sm_90 and sm_80, and to PTX for an architecture NVRTC does not know;
 * template arguments and -D options give distinct kernels. */
#include "testutil.h"

typedef struct entry_list {
  int count;
  char targets[16][24];
  int64_t bytes[16];
} entry_list;

static int collect(const jitops_cache_entry *e, void *user) {
  entry_list *list = user;
  if (list->count < 16) {
    snprintf(list->targets[list->count], sizeof list->targets[0], "%s", e->target);
    list->bytes[list->count] = e->bytes;
  }
  ++list->count;
  return 0;
}

static const char *const user_source =
    "#include \"jitops/common.cuh\"\n"
    "#ifndef SCALE\n#define SCALE 1\n#endif\n"
    "namespace user {\n"
    "template <class T> __global__ void scale(T *p, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) jitops::store(p + i, jitops::load(p + i) * SCALE);\n"
    "}\n}\n";

static void compile_for(const char *arch, const char *dir, const char *want_target) {
  jitops_runtime_config cfg = test_offline_config(arch, dir);
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(&cfg, &rt));
  if (rt == NULL)
    return;
  jitops_kernel_t *a = NULL, *b = NULL, *c = NULL, *d = NULL, *again = NULL;
  CHECK_OK(
      jitops_kernel_get(rt, "jitops/example.cuh", "jitops::example_axpy<float, 2>", NULL, 0, &a));
  CHECK_OK(jitops_kernel_get(rt, "jitops/example.cuh", "jitops::example_axpy<jitops::bfloat16, 2>",
                             NULL, 0, &b));
  CHECK_OK(jitops_source_register(rt, "user/scale.cuh", user_source));
  const char *scale3[] = {"-DSCALE=3"};
  CHECK_OK(jitops_kernel_get(rt, "user/scale.cuh", "user::scale<double>", NULL, 0, &c));
  CHECK_OK(jitops_kernel_get(rt, "user/scale.cuh", "user::scale<double>", scale3, 1, &d));
  CHECK_OK(jitops_kernel_get(rt, "user/scale.cuh", "user::scale<double>", scale3, 1, &again));
  CHECK(a && b && c && d && a != b && c != d && again == d);
  if (a && b)
    CHECK(strcmp(jitops_kernel_lowered_name(a), jitops_kernel_lowered_name(b)) != 0);
  if (c)
    CHECK(strstr(jitops_kernel_lowered_name(c), "scale") != NULL);
  jitops_stats s;
  CHECK_OK(jitops_runtime_get_stats(rt, &s));
  CHECK(s.compiles == 4 && s.misses == 4 && s.memory_hits == 1 && s.compile_errors == 0);
  jitops_runtime_info info;
  CHECK_OK(jitops_runtime_get_info(rt, &info));
  CHECK(info.has_device == 0 && info.device == -1 && info.nvrtc_version >= 1200);
  jitops_runtime_destroy(rt);

  jitops_cache_t *cache = NULL;
  CHECK_OK(jitops_cache_open(dir, 0, &cache));
  entry_list list = {0};
  if (cache)
    CHECK_OK(jitops_cache_list(cache, NULL, NULL, collect, &list));
  jitops_cache_close(cache);
  CHECK(list.count == 4);
  for (int i = 0; i < list.count && i < 16; ++i) {
    CHECK(strcmp(list.targets[i], want_target) == 0);
    CHECK(list.bytes[i] > 200);
  }
}

int main(void) {
  char dir[1024];
  test_fresh_dir("sm90", dir, sizeof dir);
  compile_for("sm_90", dir, "sm_90");
  test_fresh_dir("sm80", dir, sizeof dir);
  compile_for("sm_80", dir, "sm_80");
  /* NVRTC does not know sm_999: PTX for the newest architecture it knows. */
  test_fresh_dir("sm999", dir, sizeof dir);
  jitops_runtime_config cfg = test_offline_config("sm_999", dir);
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(&cfg, &rt));
  jitops_kernel_t *k = NULL;
  if (rt)
    CHECK_OK(
        jitops_kernel_get(rt, "jitops/example.cuh", "jitops::example_axpy<float, 1>", NULL, 0, &k));
  jitops_runtime_destroy(rt);
  jitops_cache_t *cache = NULL;
  entry_list list = {0};
  CHECK_OK(jitops_cache_open(dir, 0, &cache));
  if (cache)
    CHECK_OK(jitops_cache_list(cache, NULL, NULL, collect, &list));
  jitops_cache_close(cache);
  CHECK(list.count == 1 && strncmp(list.targets[0], "compute_", 8) == 0);
  /* An architecture older than any NVRTC supports is refused. */
  cfg = test_offline_config("sm_20", NULL);
  CHECK_FAILS(jitops_runtime_create(&cfg, &rt), JITOPS_ERR_UNSUPPORTED, "sm_20");
  return test_finish("test_compile_targets");
}
