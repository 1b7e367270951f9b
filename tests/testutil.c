#include "testutil.h"

#include "runtime/kernel_batch.h"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

int test_failures = 0;
static int test_checks = 0;

void test_check_fails(jitops_status got, jitops_status want, const char *needle, const char *call,
                      const char *file, int line) {
  ++test_checks;
  const char *message = jitops_last_error();
  if (got != want) {
    fprintf(stderr, "%s:%d: %s -> %s, expected %s (%s)\n", file, line, call,
            jitops_status_string(got), jitops_status_string(want), message);
    ++test_failures;
  } else if (needle != NULL && strstr(message, needle) == NULL) {
    fprintf(stderr, "%s:%d: %s: message \"%s\" lacks \"%s\"\n", file, line, call, message, needle);
    ++test_failures;
  }
}

int test_finish(const char *name) {
  if (test_failures == 0) {
    printf("%s: passed\n", name);
    return 0;
  }
  printf("%s: %d failure(s)\n", name, test_failures);
  return 1;
}

void test_remove_tree(const char *path) {
  DIR *dir = opendir(path);
  if (dir == NULL) {
    unlink(path);
    return;
  }
  struct dirent *entry;
  char child[4096];
  while ((entry = readdir(dir)) != NULL) {
    if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
      continue;
    snprintf(child, sizeof child, "%s/%s", path, entry->d_name);
    struct stat st;
    if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode)) {
      chmod(child, 0700);
      test_remove_tree(child);
    } else {
      unlink(child);
    }
  }
  closedir(dir);
  rmdir(path);
}

int test_count_set_aside(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (d != NULL && (e = readdir(d)) != NULL)
    n += strncmp(e->d_name, "kernels.db.corrupt-", 19) == 0;
  if (d != NULL)
    closedir(d);
  return n;
}

static void make_dirs(const char *path) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; ++p) {
    if (*p == '/') {
      *p = 0;
      mkdir(buf, 0700);
      *p = '/';
    }
  }
  mkdir(buf, 0700);
}

void test_fresh_dir(const char *tag, char *out, size_t out_size) {
  const char *root = getenv("JITOPS_TEST_TMP");
  char base[2048];
  if (root == NULL || root[0] == 0)
    snprintf(base, sizeof base, "/tmp/jitops-test-%d", (int)getpid());
  else
    snprintf(base, sizeof base, "%s", root);
  snprintf(out, out_size, "%s/%s", base, tag);
  test_remove_tree(out);
  make_dirs(base);
  chmod(base, 0700);
  mkdir(out, 0700);
  chmod(out, 0700);
}

jitops_runtime_config test_offline_config(const char *arch, const char *dir) {
  jitops_runtime_config cfg;
  jitops_runtime_config_init(&cfg);
  cfg.device = -1;
  cfg.arch = arch;
  cfg.cache_dir = dir;
  cfg.cache_mode = dir ? JITOPS_CACHE_MODE_READWRITE : JITOPS_CACHE_MODE_OFF;
  cfg.shipped_cache = NULL;
  return cfg;
}

DLTensor test_fake_tensor(int index, DLDataType dtype, int ndim, int64_t *shape) {
  return (DLTensor){.data = (void *)(uintptr_t)((uint64_t)(index + 1) << 40),
                    .device = {kDLCUDA, 0},
                    .ndim = ndim,
                    .dtype = dtype,
                    .shape = shape};
}

int test_quick_builds_available(const char *name) {
  unsetenv("JITOPS_QUICK_BUILDS");
  unsetenv("JITOPS_CACHE_REMOTE");
  jitops_runtime_config cfg = test_offline_config("sm_90", NULL);
  jitops_runtime_t *rt = NULL;
  jitops_runtime_info info;
  const int has = jitops_runtime_create(&cfg, &rt) == JITOPS_SUCCESS &&
                  jitops_runtime_get_info(rt, &info) == JITOPS_SUCCESS &&
                  info.nvrtc_version >= JITOPS__QUICK_MIN_NVRTC;
  jitops_runtime_destroy(rt);
  if (!has)
    printf("%s: skipped (NVRTC older than 12.8)\n", name);
  return has;
}

jitops_stats test_request_examples(const jitops_runtime_config *config, const char *const *exprs,
                                   size_t count, int rounds, jitops_runtime_info *info) {
  jitops_stats stats;
  memset(&stats, 0, sizeof stats);
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(config, &rt));
  if (rt == NULL)
    return stats;
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < count; ++i) {
      jitops_kernel_t *k = NULL;
      CHECK_OK(jitops_kernel_get(rt, "jitops/example.cuh", exprs[i], NULL, 0, &k));
      CHECK(k != NULL && strlen(jitops_kernel_lowered_name(k)) > 0);
    }
  CHECK_OK(jitops_runtime_get_stats(rt, &stats));
  if (info != NULL)
    CHECK_OK(jitops_runtime_get_info(rt, info));
  jitops_runtime_destroy(rt);
  return stats;
}

uint64_t test_rand_u64(uint64_t *state) {
  uint64_t x = *state ? *state : 0x9E3779B97F4A7C15ull;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545F4914F6CDD1Dull;
}

double test_rand_uniform(uint64_t *state, double lo, double hi) {
  return lo + (hi - lo) * ((double)(test_rand_u64(state) >> 11) / 9007199254740992.0);
}

jitops_runtime_t *test_gpu_runtime_or_skip(const char *test_name) {
  jitops_runtime_t *rt = NULL;
  jitops_status status = jitops_runtime_create(NULL, &rt);
  if (status == JITOPS_ERR_NO_DEVICE) {
    printf("%s: skipped, no GPU: %s\n", test_name, jitops_last_error());
    exit(TEST_SKIP);
  }
  if (status != JITOPS_SUCCESS) {
    fprintf(stderr, "%s: jitops_runtime_create: %s: %s\n", test_name, jitops_status_string(status),
            jitops_last_error());
    exit(1);
  }
  return rt;
}

jitops_runtime_t *test_gpu_runtime_on_fresh_dir(const char *tag, char *dir, size_t dir_size) {
  test_fresh_dir(tag, dir, dir_size);
  jitops_runtime_config settings;
  jitops_runtime_config_init(&settings);
  settings.cache_dir = dir;
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(&settings, &rt));
  return rt;
}

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t test_f32_to_f16(float value) {
  uint32_t x = float_bits(value);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exponent = (x >> 23) & 0xffu, mantissa = x & 0x7fffffu;
  if (exponent == 0xff) /* inf or NaN */
    return (uint16_t)(sign | 0x7c00u | (mantissa ? 0x200u : 0));
  int e = (int)exponent - 127 + 15;
  if (e >= 31)
    return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) { /* subnormal or zero */
    if (e < -10)
      return (uint16_t)sign;
    mantissa |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - e);
    uint32_t half = mantissa >> shift, rest = mantissa & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1)))
      ++half;
    return (uint16_t)(sign | half);
  }
  uint32_t half = sign | ((uint32_t)e << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1)))
    ++half; /* may carry into the exponent, which is the right rounding */
  return (uint16_t)half;
}

float test_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) {
    float magnitude = (float)mantissa / 16777216.0f; /* 2^-24 */
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31)
    return bits_float(sign | 0x7f800000u | (mantissa << 13));
  return bits_float(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

uint16_t test_f32_to_bf16(float value) {
  uint32_t u = float_bits(value);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

float test_bf16_to_f32(uint16_t bits) {
  return bits_float((uint32_t)bits << 16);
}
