/* A configuration mistake is never silent: an environment value the library does not
 * understand (JITOPS_CACHE=of, JITOPS_CACHE_MAX_BYTES=abc, JITOPS_LOG=verbose, a remote tier's
 * address or timeout, and the GPU variables, which are checked even where no GPU reads them) and a
 * disk tier turned off for a reason nobody asked for each give one warning at the default log
 * level, on stderr or to the application's log callback; JITOPS_LOG=off silences them, and what was
 * asked for (JITOPS_CACHE=off) is not warned about. Sizes take binary suffixes (1K, 512M, 1G).
 *
 * Warnings are once per process, so each case runs in a fresh process: this program runs
 * itself with the case's name and environment, and reads what it wrote to stderr. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static const char *const exprs[] = {"jitops::example_axpy<float, 1>",
                                    "jitops::example_axpy<float, 2>",
                                    "jitops::example_axpy<float, 3>"};
enum { KERNELS = 3 };

/* ---- the child side: one runtime (or two), as an application would create it ------------ */

static int count_entry(const jitops_cache_entry *e, void *user) {
  (void)e;
  ++*(int *)user;
  return 0;
}

static void create_and_request(int runtimes) {
  jitops_runtime_config cfg;
  jitops_runtime_config_init(&cfg);
  cfg.device = -1;
  cfg.arch = "sm_90";
  for (int r = 0; r < runtimes; ++r)
    test_request_examples(&cfg, exprs, KERNELS, 1, NULL);
}

/* Prints the number of entries in the default cache to stdout. */
static void print_entries(void) {
  jitops_cache_t *cache = NULL;
  int n = 0;
  if (jitops_cache_open(NULL, 0, &cache) == JITOPS_SUCCESS)
    jitops_cache_list(cache, NULL, NULL, count_entry, &n);
  jitops_cache_close(cache);
  printf("entries=%d\n", n);
}

static void record_message(void *user, int level, const char *message) {
  FILE *out = user;
  fprintf(out, "callback level=%d: %s\n", level, message);
}

static int run_case(const char *name) {
  if (strcmp(name, "callback") == 0)
    jitops_set_log_callback(record_message, stdout);
  create_and_request(strcmp(name, "twice") == 0 ? 2 : 1);
  if (strcmp(name, "entries") == 0)
    print_entries();
  fflush(stdout);
  return test_failures != 0;
}

/* ---- the parent side --------------------------------------------------------------------- */

typedef struct output {
  char out[8192];
  char err[8192];
} output;

static void read_file(const char *path, char *text, size_t size) {
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(text, 1, size - 1, f) : 0;
  text[n] = 0;
  if (f)
    fclose(f);
}

/* Runs this program on `name` with `env` ("NAME=value" entries, NULL-terminated) added to a
 * clean environment whose cache is `cache_dir`. */
static void run_child(const char *name, const char *cache_dir, const char *const *env,
                      output *result) {
  char out_path[1200], err_path[1200], tmp[1024];
  test_fresh_dir("output", tmp, sizeof tmp);
  snprintf(out_path, sizeof out_path, "%s/out", tmp);
  snprintf(err_path, sizeof err_path, "%s/err", tmp);
  pid_t pid = fork();
  if (pid == 0) {
    int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(out, 1);
    dup2(err, 2);
    clearenv();
    setenv("JITOPS_CACHE_DIR", cache_dir, 1);
    for (size_t i = 0; env[i] != NULL; ++i)
      putenv((char *)env[i]);
    execl("/proc/self/exe", "test_environment_warnings", name, (char *)NULL);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  read_file(out_path, result->out, sizeof result->out);
  read_file(err_path, result->err, sizeof result->err);
}

static int occurrences(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
    ++n;
  return n;
}

/* Runs case `name` and requires stderr to name `needle` exactly once (NULL: stderr empty). */
static void expect_warning(const char *name, const char *const *env, const char *needle) {
  char dir[1024];
  output o;
  test_fresh_dir("cache", dir, sizeof dir);
  run_child(name, dir, env, &o);
  int ok = needle ? occurrences(o.err, needle) == 1 : o.err[0] == 0;
  if (!ok)
    fprintf(stderr, "case %s (%s): expected %s%s%s on stderr, got:\n%s\n", name, env[0],
            needle ? "one \"" : "nothing", needle ? needle : "", needle ? "\"" : "", o.err);
  CHECK(ok);
}

static void bad_values_warn_once(void) {
  const char *const cache_of[] = {"JITOPS_CACHE=of", NULL};
  expect_warning("twice", cache_of, "JITOPS_CACHE=of");
  const char *const max_abc[] = {"JITOPS_CACHE_MAX_BYTES=abc", NULL};
  expect_warning("twice", max_abc, "JITOPS_CACHE_MAX_BYTES=abc");
  const char *const log_verbose[] = {"JITOPS_LOG=verbose", NULL};
  expect_warning("twice", log_verbose, "JITOPS_LOG=verbose");
  const char *const tune[] = {"JITOPS_TUNE=maybe", NULL};
  expect_warning("plain", tune, "JITOPS_TUNE=maybe");
  const char *const launches[] = {"JITOPS_DEPENDENT_LAUNCHES=fast", NULL};
  expect_warning("plain", launches, "JITOPS_DEPENDENT_LAUNCHES=fast");
  const char *const keep[] = {"JITOPS_SCRATCH_KEEP_BYTES=lots", NULL};
  expect_warning("plain", keep, "JITOPS_SCRATCH_KEEP_BYTES=lots");
  const char *const remote[] = {"JITOPS_CACHE_REMOTE=http://cache:6379", NULL};
  expect_warning("twice", remote, "does not start with redis://");
  const char *const timeout[] = {"JITOPS_CACHE_REMOTE_TIMEOUT_MS=soon", NULL};
  expect_warning("twice", timeout, "JITOPS_CACHE_REMOTE_TIMEOUT_MS=soon");
}

static void good_values_are_quiet(void) {
  const char *const good[] = {
      "JITOPS_CACHE=readwrite", "JITOPS_CACHE_MAX_BYTES=512M",  "JITOPS_LOG=warn",
      "JITOPS_TUNE=0",          "JITOPS_SCRATCH_KEEP_BYTES=1G", NULL};
  expect_warning("plain", good, NULL);
  const char *const off[] = {"JITOPS_CACHE=off", NULL};
  expect_warning("plain", off, NULL);
  const char *const silenced[] = {"JITOPS_LOG=off", "JITOPS_CACHE=of", "JITOPS_CACHE_MAX_BYTES=abc",
                                  NULL};
  expect_warning("plain", silenced, NULL);
}

/* A cache directory others can write is refused, and the default log level says so. */
static void unasked_tier_off_warns(void) {
  char dir[1024];
  output o;
  test_fresh_dir("shared", dir, sizeof dir);
  CHECK(chmod(dir, 0777) == 0);
  const char *const none[] = {NULL};
  run_child("plain", dir, none, &o);
  CHECK(occurrences(o.err, "disk cache off") == 1);
  CHECK(strstr(o.err, "writable by others") != NULL);
  CHECK(chmod(dir, 0700) == 0);
}

/* 1K keeps only the newest kernel (the size limit never evicts the row just stored); 1G
 * keeps all three. */
static void size_suffixes(void) {
  char dir[1024];
  output o;
  test_fresh_dir("small", dir, sizeof dir);
  const char *const small[] = {"JITOPS_CACHE_MAX_BYTES=1K", NULL};
  run_child("entries", dir, small, &o);
  CHECK(strstr(o.out, "entries=1\n") != NULL && o.err[0] == 0);
  test_fresh_dir("large", dir, sizeof dir);
  const char *const large[] = {"JITOPS_CACHE_MAX_BYTES=1G", NULL};
  run_child("entries", dir, large, &o);
  CHECK(strstr(o.out, "entries=3\n") != NULL && o.err[0] == 0);
}

/* An application's callback receives the warning, at JITOPS_LOG_WARN, and stderr nothing. */
static void callback_receives_warnings(void) {
  char dir[1024];
  output o;
  test_fresh_dir("callback", dir, sizeof dir);
  const char *const cache_of[] = {"JITOPS_CACHE=of", NULL};
  run_child("callback", dir, cache_of, &o);
  CHECK(o.err[0] == 0);
  CHECK(occurrences(o.out, "callback level=2: ") == 1);
  CHECK(strstr(o.out, "JITOPS_CACHE=of") != NULL);
  CHECK(strstr(o.out, "\n\n") == NULL); /* a message is one line, without its newline */
}

int main(int argc, char **argv) {
  if (argc > 1)
    return run_case(argv[1]);
  bad_values_warn_once();
  good_values_are_quiet();
  unasked_tier_off_warns();
  size_suffixes();
  callback_receives_warnings();
  return test_finish("test_environment_warnings");
}
