/* A kernel's cache key covers every byte NVRTC reads: no process is ever served a binary
 * built from a header that has changed since. The library hands NVRTC only registered
 * sources, so it refuses what would make NVRTC read a file on disk:
 *   - an #include of an absolute path, or one whose name comes from a macro, anywhere in the
 *     sources a kernel includes;
 *   - options that add files or directories to read (-I, --include-path, -include,
 *     --pre-include, and the precompiled-header options);
 * and NVRTC no longer looks for an unregistered quoted include next to the source's name
 * (--no-source-include): that include fails to compile instead of reading the disk.
 * Each case runs in two processes, before and after the header on disk changes from 1111 to
 * 2222; the second must never get a disk hit. Registered headers, included with any spacing
 * the preprocessor allows, keep working. */
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

typedef struct outcome {
  jitops_status status;
  uint64_t disk_hits, compiles;
  char message[512];
} outcome;

typedef struct request {
  const char *cache_dir;
  const char *name;                 /* the source's name */
  const char *source;               /* its text */
  const char *option;               /* one option, or NULL */
  const char *header_name, *header; /* a registered header, or NULL */
} request;

/* Requests kernel "k" in a fresh process (a new runtime, nothing shared but the disk). */
static outcome run_in_child(const request *r) {
  int fds[2];
  outcome o;
  memset(&o, 0, sizeof o);
  CHECK(pipe(fds) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    jitops_runtime_config cfg = test_offline_config("sm_90", r->cache_dir);
    jitops_runtime_t *rt = NULL;
    jitops_kernel_t *k = NULL;
    o.status = jitops_runtime_create(&cfg, &rt);
    if (o.status == JITOPS_SUCCESS && r->header_name != NULL)
      o.status = jitops_source_register(rt, r->header_name, r->header);
    if (o.status == JITOPS_SUCCESS)
      o.status = jitops_source_register(rt, r->name, r->source);
    if (o.status == JITOPS_SUCCESS)
      o.status = jitops_kernel_get(rt, r->name, "k", &r->option, r->option ? 1 : 0, &k);
    snprintf(o.message, sizeof o.message, "%s", jitops_last_error());
    jitops_stats s;
    if (rt != NULL && jitops_runtime_get_stats(rt, &s) == JITOPS_SUCCESS)
      o.disk_hits = s.disk_hits, o.compiles = s.compiles;
    jitops_runtime_destroy(rt);
    _exit(write(fds[1], &o, sizeof o) == (ssize_t)sizeof o ? 0 : 1);
  }
  close(fds[1]);
  CHECK(read(fds[0], &o, sizeof o) == (ssize_t)sizeof o);
  close(fds[0]);
  waitpid(pid, NULL, 0);
  return o;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (f != NULL) {
    fputs(text, f);
    fclose(f);
  }
}

/* Runs `r` with the header at `header_path` holding 1111, then 2222: the second run must not
 * be a disk hit, and when `refused` is given, both must fail with it in the message. */
static void expect_never_stale(const char *what, const request *r, const char *header_path,
                               jitops_status refused_status, const char *refused) {
  write_file(header_path, "#define VALUE 1111\n");
  outcome before = run_in_child(r);
  write_file(header_path, "#define VALUE 2222\n");
  outcome after = run_in_child(r);
  int ok = after.disk_hits == 0;
  if (refused != NULL)
    ok = ok && before.status == refused_status && after.status == refused_status &&
         strstr(after.message, refused) != NULL;
  if (!ok)
    fprintf(stderr, "%s: before: %s (%llu disk hits); after: %s (%llu disk hits): %s\n", what,
            jitops_status_string(before.status), (unsigned long long)before.disk_hits,
            jitops_status_string(after.status), (unsigned long long)after.disk_hits, after.message);
  CHECK(ok);
}

static const char *const kernel_body = "__global__ void k(int *p) { *p = VALUE; }\n";

static void absolute_include(const char *root, const char *cache) {
  char header[1100], source[1400];
  snprintf(header, sizeof header, "%s/value.h", root);
  snprintf(source, sizeof source, "#include \"%s\"\n%s", header, kernel_body);
  request r = {cache, "user/absolute.cu", source, NULL, NULL, NULL};
  expect_never_stale("an absolute include", &r, header, JITOPS_ERR_INVALID_ARGUMENT, header);
  snprintf(source, sizeof source, "#  include <%s>\n%s", header, kernel_body);
  r.name = "user/absolute-angle.cu";
  expect_never_stale("an absolute <include>", &r, header, JITOPS_ERR_INVALID_ARGUMENT, header);
  snprintf(source, sizeof source, "#define WHERE \"%s\"\n#include WHERE\n%s", header, kernel_body);
  r.name = "user/computed.cu";
  expect_never_stale("a computed include", &r, header, JITOPS_ERR_INVALID_ARGUMENT, "WHERE");
}

static void include_options(const char *root, const char *cache) {
  char header[1100], option[1200];
  snprintf(header, sizeof header, "%s/value.h", root);
  char source[256];
  snprintf(source, sizeof source, "#include \"value.h\"\n%s", kernel_body);
  snprintf(option, sizeof option, "-I%s", root);
  request r = {cache, "user/dash-i.cu", source, option, NULL, NULL};
  expect_never_stale("-I", &r, header, JITOPS_ERR_INVALID_ARGUMENT, "-I");
  snprintf(option, sizeof option, "--include-path=%s", root);
  r.name = "user/include-path.cu";
  expect_never_stale("--include-path", &r, header, JITOPS_ERR_INVALID_ARGUMENT, "--include-path");
  snprintf(option, sizeof option, "--pre-include=%s", header);
  r.name = "user/pre-include.cu";
  r.source = kernel_body;
  expect_never_stale("--pre-include", &r, header, JITOPS_ERR_INVALID_ARGUMENT, "--pre-include");
  snprintf(option, sizeof option, "-include=%s", header);
  r.name = "user/dash-include.cu";
  expect_never_stale("-include", &r, header, JITOPS_ERR_INVALID_ARGUMENT, "-include");
}

/* "user/near.cu" includes "value.h", which exists on disk as user/value.h below the current
 * directory: NVRTC must not read it. */
static void include_next_to_the_source_name(const char *root, const char *cache) {
  char dir[1100], header[1200];
  snprintf(dir, sizeof dir, "%s/user", root);
  mkdir(dir, 0700);
  snprintf(header, sizeof header, "%s/value.h", dir);
  char source[256];
  snprintf(source, sizeof source, "#include \"value.h\"\n%s", kernel_body);
  CHECK(chdir(root) == 0);
  request r = {cache, "user/near.cu", source, NULL, NULL, NULL};
  expect_never_stale("an include next to the source's name", &r, header, JITOPS_ERR_COMPILE,
                     "value.h");
}

/* Registered headers are the way: included with any spacing, and their contents keyed. */
static void registered_headers_work(const char *cache) {
  const char *source =
      "#  include \"user/value.cuh\"\n/* #include \"/not/a/directive\" is"
      " refused only as a directive */\n"
      "# include \"jitops/common.cuh\"\n__global__ void k(int *p) { *p = VALUE; }\n";
  request r = {cache,       "user/registered.cu", source,
               "-DEXTRA=1", "user/value.cuh",     "#define VALUE 1111\n"};
  outcome first = run_in_child(&r);
  CHECK(first.status == JITOPS_SUCCESS && first.compiles == 1);
  if (first.status != JITOPS_SUCCESS)
    fprintf(stderr, "registered headers: %s\n", first.message);
  outcome again = run_in_child(&r);
  CHECK(again.status == JITOPS_SUCCESS && again.disk_hits == 1);
  r.header = "#define VALUE 2222\n";
  outcome changed = run_in_child(&r);
  CHECK(changed.status == JITOPS_SUCCESS && changed.disk_hits == 0 && changed.compiles == 1);
}

int main(void) {
  char root[1024], cache[1024];
  test_fresh_dir("headers", root, sizeof root);
  test_fresh_dir("cache", cache, sizeof cache);
  absolute_include(root, cache);
  include_options(root, cache);
  include_next_to_the_source_name(root, cache);
  registered_headers_work(cache);
  return test_finish("test_include_outside_sources");
}
