/* Shared helpers for the test programs: assertions that report file and line, scratch
 * directories, a seeded random source, and the GPU skip convention (exit 77). */
#ifndef JITOPS_TESTS_TESTUTIL_H
#define JITOPS_TESTS_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jitops/jitops.h"

#define TEST_SKIP 77

extern int test_failures;

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                     \
      ++test_failures;                                                                             \
    }                                                                                              \
  } while (0)

/* Requires a call to succeed; on failure prints the status and jitops_last_error. */
#define CHECK_OK(call)                                                                             \
  do {                                                                                             \
    jitops_status check_status_ = (call);                                                          \
    if (check_status_ != JITOPS_SUCCESS) {                                                         \
      fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call,                          \
              jitops_status_string(check_status_), jitops_last_error());                           \
      ++test_failures;                                                                             \
    }                                                                                              \
  } while (0)

/* Requires a call to fail with `status` and a message containing `needle`. */
#define CHECK_FAILS(call, status, needle)                                                          \
  test_check_fails((call), (status), (needle), #call, __FILE__, __LINE__)

void test_check_fails(jitops_status got, jitops_status want, const char *needle, const char *call,
                      const char *file, int line);

/* Prints "N passed, M failed" style summary and returns the exit code. */
int test_finish(const char *name);

/* A fresh, empty directory under $JITOPS_TEST_TMP (or /tmp) named after `tag`; the returned
 * string is static per call site until the next call with the same buffer. */
void test_fresh_dir(const char *tag, char *out, size_t out_size);

/* The damaged databases set aside in a cache directory ("kernels.db.corrupt-*"). */
int test_count_set_aside(const char *dir);

/* Removes a directory tree (for test set-up only). */
void test_remove_tree(const char *path);

/* A runtime config for a compile-only runtime targeting `arch` with the cache in `dir`
 * (NULL: no disk tier). */
jitops_runtime_config test_offline_config(const char *arch, const char *dir);

/* A fake device tensor for a compile-only runtime (nothing reads it), 1 TiB from the others
 * of other indexes; `shape` is kept by reference. */
DLTensor test_fake_tensor(int index, DLDataType dtype, int ndim, int64_t *shape);

/* Prepares a test of quick builds (runtime/kernel_batch.h): clears what would turn them off
 * ($JITOPS_QUICK_BUILDS, $JITOPS_CACHE_REMOTE) and returns 1, or 0 having printed that `name`
 * is skipped when this NVRTC has none (older than 12.8). */
int test_quick_builds_available(const char *name);

/* Creates a runtime from `config`, requests each example-template instance in `exprs`
 * `rounds` times (each request must succeed), and returns the runtime's counters (and its
 * info, when `info` is not NULL) just before destroying it. */
jitops_stats test_request_examples(const jitops_runtime_config *config, const char *const *exprs,
                                   size_t count, int rounds, jitops_runtime_info *info);

/* xorshift64*: deterministic per seed. */
uint64_t test_rand_u64(uint64_t *state);
double test_rand_uniform(uint64_t *state, double lo, double hi);

/* IEEE half and bfloat16 conversions for references, rounding to nearest even. */
uint16_t test_f32_to_f16(float value);
float test_f16_to_f32(uint16_t bits);
uint16_t test_f32_to_bf16(float value);
float test_bf16_to_f32(uint16_t bits);

/* Creates a device runtime on device 0, or exits 77 when there is no GPU or driver. */
jitops_runtime_t *test_gpu_runtime_or_skip(const char *test_name);

/* A device runtime on device 0 caching in a fresh directory named after `tag` (test_fresh_dir,
 * its path in `dir`: test_remove_tree it after the runtime), so that its ops' first calls are
 * cold; NULL, with the failure counted, if it cannot be made. Make it before any other runtime
 * of the process builds the kernels it should find cold. */
jitops_runtime_t *test_gpu_runtime_on_fresh_dir(const char *tag, char *dir, size_t dir_size);

#endif
