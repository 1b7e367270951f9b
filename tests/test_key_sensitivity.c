/* The cache key changes with every input that determines the binary (source closure, name
 * expression, options, target, NVRTC version) and with nothing else; the lookup key
 * separates requests; a change in an included source changes the including kernel's key. */
#include "runtime/key.h"
#include "runtime/sources.h"
#include "testutil.h"

static jitops__cache_key_inputs base_inputs(const char *const *options, size_t n) {
  jitops__cache_key_inputs in = {"sm_90", 1300, {0x1234, 0x5678}, "k<float>", options, n};
  return in;
}

static void cache_key_inputs(void) {
  const char *opts[] = {"-std=c++17", "--gpu-architecture=sm_90", "-DA=1"};
  const char *opts_other[] = {"-std=c++17", "--gpu-architecture=sm_90", "-DA=2"};
  const char *opts_split[] = {"-std=c++17", "--gpu-architecture=sm_90", "-DA=1", ""};
  jitops__cache_key_inputs in = base_inputs(opts, 3);
  jitops__key base = jitops__cache_key(&in);
  CHECK(jitops__key_equal(base, jitops__cache_key(&in)));
  jitops__cache_key_inputs v = in;
  v.target = "sm_80";
  CHECK(!jitops__key_equal(base, jitops__cache_key(&v)));
  v = in;
  v.nvrtc_version = 1301;
  CHECK(!jitops__key_equal(base, jitops__cache_key(&v)));
  v = in;
  v.source_closure.lo ^= 1;
  CHECK(!jitops__key_equal(base, jitops__cache_key(&v)));
  v = in;
  v.name_expression = "k<double>";
  CHECK(!jitops__key_equal(base, jitops__cache_key(&v)));
  v = base_inputs(opts_other, 3);
  CHECK(!jitops__key_equal(base, jitops__cache_key(&v)));
  v = base_inputs(opts, 2);
  CHECK(!jitops__key_equal(base, jitops__cache_key(&v)));
  v = base_inputs(opts_split, 4);
  CHECK(!jitops__key_equal(base, jitops__cache_key(&v)));
  uint8_t bytes[16];
  jitops__key_to_bytes(base, bytes);
  CHECK(jitops__key_equal(base, jitops__key_from_bytes(bytes)));
}

static void lookup_keys(void) {
  const char *a[] = {"-DA=1"};
  const char *ab[] = {"-DA=1", "-DB=1"};
  jitops__key k = jitops__lookup_key("s.cuh", "k<float>", a, 1);
  CHECK(jitops__key_equal(k, jitops__lookup_key("s.cuh", "k<float>", a, 1)));
  CHECK(!jitops__key_equal(k, jitops__lookup_key("t.cuh", "k<float>", a, 1)));
  CHECK(!jitops__key_equal(k, jitops__lookup_key("s.cuh", "k<double>", a, 1)));
  CHECK(!jitops__key_equal(k, jitops__lookup_key("s.cuh", "k<float>", ab, 2)));
  CHECK(!jitops__key_equal(k, jitops__lookup_key("s.cuh", "k<float>", NULL, 0)));
  /* Field boundaries matter: ("ab", "c") differs from ("a", "bc"). */
  CHECK(!jitops__key_equal(jitops__lookup_key("ab", "c", NULL, 0),
                           jitops__lookup_key("a", "bc", NULL, 0)));
  /* A request too long for the stack buffer hashes the same bytes by streaming. */
  char long_expr[3000];
  memset(long_expr, 'x', sizeof long_expr - 1);
  long_expr[sizeof long_expr - 1] = 0;
  jitops__key long_key = jitops__lookup_key("s.cuh", long_expr, a, 1);
  CHECK(jitops__key_equal(long_key, jitops__lookup_key("s.cuh", long_expr, a, 1)));
  long_expr[2000] = 'y';
  CHECK(!jitops__key_equal(long_key, jitops__lookup_key("s.cuh", long_expr, a, 1)));
}

static jitops__key closure_of(const char *header_text, const char *main_text) {
  jitops__source_set set;
  jitops__key hash = {0, 0};
  if (jitops__sources_init(&set) != JITOPS_SUCCESS)
    return hash;
  CHECK_OK(jitops__sources_register(&set, "user/h.cuh", header_text));
  CHECK_OK(jitops__sources_register(&set, "user/unrelated.cuh", "// not included"));
  CHECK_OK(jitops__sources_register(&set, "user/main.cuh", main_text));
  const jitops__source **closure = NULL;
  size_t count = 0;
  CHECK_OK(jitops__sources_closure(&set, "user/main.cuh", &closure, &count, &hash));
  CHECK(count == 3); /* main, h.cuh and the jitops/common.cuh that h.cuh includes */
  free(closure);
  jitops__sources_free(&set);
  return hash;
}

static void source_closures(void) {
  const char *header = "#include \"jitops/common.cuh\"\n#define H 1\n";
  const char *main_text = "#include \"user/h.cuh\"\n__global__ void k() {}\n";
  jitops__key base = closure_of(header, main_text);
  CHECK(jitops__key_equal(base, closure_of(header, main_text)));
  CHECK(!jitops__key_equal(base,
                           closure_of("#include \"jitops/common.cuh\"\n#define H 2\n", main_text)));
  CHECK(!jitops__key_equal(
      base, closure_of(header, "#include \"user/h.cuh\"\n__global__ void k() { }\n")));
}

/* The closure of `name` in `set`: its size, and its hash in *hash. */
static size_t closure_size(jitops__source_set *set, const char *name, jitops__key *hash) {
  const jitops__source **closure = NULL;
  size_t count = 0;
  CHECK_OK(jitops__sources_closure(set, name, &closure, &count, hash));
  free(closure);
  return count;
}

/* A source's includes are parsed once, but which registered source each names is looked up
 * at every closure: a header registered after the source that includes it (and after a
 * closure of that source) joins its closure and changes its key, and a refused include stays
 * refused. */
static void closures_follow_later_registrations(void) {
  jitops__source_set set;
  CHECK_OK(jitops__sources_init(&set));
  CHECK_OK(jitops__sources_register(&set, "user/main.cuh",
                                    "#include \"user/late.cuh\"\n__global__ void k() {}\n"));
  jitops__key before, again, after;
  CHECK(closure_size(&set, "user/main.cuh", &before) == 1);
  CHECK(closure_size(&set, "user/main.cuh", &again) == 1);
  CHECK(jitops__key_equal(before, again));
  CHECK_OK(jitops__sources_register(&set, "user/late.cuh", "#define LATE 1\n"));
  CHECK(closure_size(&set, "user/main.cuh", &after) == 2);
  CHECK(!jitops__key_equal(before, after));

  CHECK_OK(jitops__sources_register(&set, "user/disk.cuh", "#include \"/etc/hostname\"\n"));
  const jitops__source **closure = NULL;
  size_t count = 0;
  for (int i = 0; i < 2; ++i)
    CHECK_FAILS(jitops__sources_closure(&set, "user/disk.cuh", &closure, &count, &after),
                JITOPS_ERR_INVALID_ARGUMENT, "/etc/hostname");
  jitops__sources_free(&set);
}

int main(void) {
  cache_key_inputs();
  lookup_keys();
  source_closures();
  closures_follow_later_registrations();
  return test_finish("test_key_sensitivity");
}
