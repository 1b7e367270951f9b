/* Random DLTensors through every op's validation: hostile shapes (near INT64_MAX, zero),
 * strides (2^62, INT64_MIN, negative, zero), byte offsets (up to UINT64_MAX), ranks beyond
 * the limits, misaligned and NULL data, other devices, other dtypes. Every call must return a
 * status (success or one of the documented errors) and nothing else may happen: built with
 * UBSan and ASan (scripts/test_sanitized.sh), a signed overflow, a wrapped pointer or a wild
 * read fails the test.
 *
 * Families: scans, repeat, segment reductions, CTC and FLCE (a vocabulary shard's phases too).
 *
 * The calls are the ones that validate without launching: the *_workspace_size entry points
 * on a compile-only runtime, where a valid call returns a byte count and an invalid one its
 * status. Tensors in host memory carry no data (NULL), so that nothing reads host memory the
 * test does not own; the library must refuse them before reading. A fixed seed makes a failure
 * reproducible; JITOPS_FUZZ_ITERATIONS changes the count (default 100000 rounds of one call
 * or two per family). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

enum { MAX_RANK = 10 };

typedef struct fuzz_tensor {
  DLTensor dl;
  int64_t shape[MAX_RANK];
  int64_t strides[MAX_RANK];
} fuzz_tensor;

static uint64_t seed = 0x9e3779b97f4a7c15ull;

static uint64_t next(void) {
  return test_rand_u64(&seed);
}

static int64_t pick(const int64_t *values, size_t count) {
  return values[next() % count];
}

/* Mostly small sizes (so that some calls pass validation), sometimes hostile ones. */
static int64_t fuzz_extent(void) {
  static const int64_t hostile[] = {0,       1,         2,         INT64_MAX, INT64_MAX / 2,
                                    1 << 30, 1ll << 40, 1ll << 62, 3,         65537};
  return next() % 4 ? (int64_t)(next() % 9) : pick(hostile, sizeof hostile / sizeof *hostile);
}

static int64_t fuzz_stride(int64_t compact) {
  static const int64_t hostile[] = {0,         -1,           1,         INT64_MIN,    INT64_MAX,
                                    1ll << 62, -(1ll << 61), 1ll << 32, -(1ll << 40), 7};
  return next() % 3 ? compact : pick(hostile, sizeof hostile / sizeof *hostile);
}

static DLDataType fuzz_dtype(void) {
  if (next() % 4)
    return (DLDataType){kDLFloat, 32, 1};
  static const DLDataType dtypes[] = {{kDLFloat, 32, 1},  {kDLFloat, 16, 1}, {kDLBfloat, 16, 1},
                                      {kDLFloat, 64, 1},  {kDLInt, 32, 1},   {kDLInt, 64, 1},
                                      {kDLInt, 8, 1},     {kDLUInt, 8, 1},   {kDLFloat, 32, 4},
                                      {kDLComplex, 64, 1}};
  return dtypes[next() % (sizeof dtypes / sizeof *dtypes)];
}

static void fuzz(fuzz_tensor *t, int rank_hint) {
  memset(t, 0, sizeof *t);
  int rank = next() % 5 ? rank_hint : (int)(next() % MAX_RANK);
  t->dl.ndim = rank;
  t->dl.shape = t->shape;
  t->dl.strides = next() % 4 ? t->strides : NULL;
  int64_t compact = 1;
  for (int d = rank - 1; d >= 0; --d) {
    t->shape[d] = fuzz_extent();
    t->strides[d] = fuzz_stride(compact);
    int64_t grown;
    if (t->shape[d] > 0 && !__builtin_mul_overflow(compact, t->shape[d], &grown))
      compact = grown;
  }
  t->dl.dtype = fuzz_dtype();
  static const uint64_t offsets[] = {0, 0, 0, 4, 2, UINT64_MAX - 3, 1ull << 63, (1ull << 63) - 2};
  t->dl.byte_offset = offsets[next() % (sizeof offsets / sizeof *offsets)];
  static const uintptr_t addresses[] = {1u << 20, 1u << 20,         0,
                                        3,        UINTPTR_MAX - 15, (uintptr_t)1 << 47};
  t->dl.data = (void *)addresses[next() % (sizeof addresses / sizeof *addresses)];
  int device = (int)(next() % 8);
  t->dl.device = device == 0   ? (DLDevice){kDLCPU, 0}
                 : device == 1 ? (DLDevice){kDLCUDA, 1}
                               : (DLDevice){kDLCUDA, 0};
  if (t->dl.device.device_type == kDLCPU)
    t->dl.data = NULL; /* never give the library host memory it could read */
}

/* `t` as `source` (shape, strides, dtype: what related tensors share), with now and then one
 * of its own fields changed. */
static void fuzz_like(fuzz_tensor *t, const fuzz_tensor *source) {
  fuzz(t, source->dl.ndim);
  if (next() % 4 == 0)
    return;
  *t = *source;
  t->dl.shape = t->shape;
  t->dl.strides = source->dl.strides ? t->strides : NULL;
  if (next() % 3 == 0 && t->dl.ndim > 0)
    t->shape[next() % t->dl.ndim] = fuzz_extent();
}

static const DLTensor *maybe(fuzz_tensor *t) {
  return next() % 16 ? &t->dl : NULL;
}

/* One status check for every call: an error the API documents, or success. */
static int calls, passed;

static void expect_status(jitops_status status, const char *what) {
  ++calls;
  passed += status == JITOPS_SUCCESS;
  if ((int)status < 0 || status > JITOPS_ERR_INTERNAL || status == JITOPS_ERR_INTERNAL) {
    fprintf(stderr, "%s: status %d (%s): %s\n", what, (int)status, jitops_status_string(status),
            jitops_last_error());
    CHECK(0);
  }
}

static void fuzz_scan(jitops_runtime_t *rt) {
  fuzz_tensor x, y, i, dy, dx;
  size_t bytes;
  fuzz(&x, 1 + (int)(next() % 4));
  fuzz_like(&y, &x), fuzz_like(&i, &x), fuzz_like(&dy, &x), fuzz_like(&dx, &x);
  i.dl.dtype = next() % 8 ? (DLDataType){kDLInt, 64, 1} : i.dl.dtype;
  jitops_scan_op op = (jitops_scan_op)(next() % 6);
  int axis = (int)(next() % 11) - 5;
  expect_status(jitops_scan_workspace_size(rt, op, maybe(&x), axis, (int)(next() % 2), maybe(&y),
                                           op == JITOPS_SCAN_CUMMAX ? maybe(&i) : NULL, &bytes),
                "jitops_scan_workspace_size");
  expect_status(jitops_scan_backward_workspace_size(rt, op, maybe(&dy), maybe(&x), maybe(&y),
                                                    maybe(&i), axis, 0, maybe(&dx), &bytes),
                "jitops_scan_backward_workspace_size");
}

static void fuzz_repeat(jitops_runtime_t *rt) {
  fuzz_tensor dy, dx;
  int64_t repeats[MAX_RANK];
  int count = (int)(next() % MAX_RANK);
  for (int k = 0; k < count; ++k)
    repeats[k] = next() % 5 ? (int64_t)(next() % 4) : fuzz_stride(1);
  fuzz(&dy, count), fuzz(&dx, count);
  size_t bytes;
  expect_status(
      jitops_repeat_backward_workspace_size(rt, maybe(&dy), repeats, count, maybe(&dx), &bytes),
      "jitops_repeat_backward_workspace_size");
}

static void fuzz_segment(jitops_runtime_t *rt) {
  fuzz_tensor data, ids, out, grad_data;
  fuzz(&data, 1 + (int)(next() % 3)), fuzz(&ids, 1), fuzz(&out, data.dl.ndim);
  fuzz_like(&grad_data, &data);
  int64_t segments = next() % 4 ? (int64_t)(next() % 9) : fuzz_extent();
  if (next() % 4) { /* a coherent call, but for what the generator changed above */
    ids.dl.dtype = (DLDataType){kDLInt, next() % 2 ? 32 : 64, 1};
    ids.shape[0] = data.shape[0];
    out = data;
    out.dl.shape = out.shape;
    out.dl.strides = data.dl.strides ? out.strides : NULL;
    out.shape[0] = segments;
  }
  jitops_segment_options options;
  jitops_segment_options_init(&options);
  options.sorted = (int)(next() % 2);
  options.algorithm = (jitops_segment_algorithm)(next() % 3);
  jitops_segment_reduction reduction = (jitops_segment_reduction)(next() % 5);
  size_t bytes;
  expect_status(jitops_segment_reduce_workspace_size(rt, reduction, maybe(&data), maybe(&ids),
                                                     segments, maybe(&out), &options, &bytes),
                "jitops_segment_reduce_workspace_size");
  expect_status(jitops_segment_reduce_backward_workspace_size(
                    rt, reduction, maybe(&out), maybe(&data), maybe(&out), maybe(&ids), segments,
                    maybe(&grad_data), &options, &bytes),
                "jitops_segment_reduce_backward_workspace_size");
}

static void fuzz_ctc(jitops_runtime_t *rt) {
  fuzz_tensor lp, targets, il, tl;
  fuzz(&lp, 3), fuzz(&targets, 1 + (int)(next() % 2)), fuzz(&il, 1), fuzz(&tl, 1);
  if (next() % 4) { /* a coherent call, but for what the generator changed above */
    const DLDataType i64 = {kDLInt, 64, 1};
    targets.dl.dtype = il.dl.dtype = tl.dl.dtype = i64;
    il.shape[0] = tl.shape[0] = lp.shape[1];
    if (targets.dl.ndim == 2)
      targets.shape[0] = lp.shape[1];
  }
  jitops_ctc_options options;
  jitops_ctc_options_init(&options);
  options.blank = (int64_t)(next() % 5) - 1;
  options.max_target_length = next() % 4 ? 0 : fuzz_extent();
  size_t bytes;
  expect_status(jitops_ctc_workspace_size(rt, maybe(&lp), maybe(&targets), maybe(&il), maybe(&tl),
                                          &options, (jitops_ctc_pass)(next() % 3), &bytes),
                "jitops_ctc_workspace_size");
}

static void fuzz_flce(jitops_runtime_t *rt) {
  fuzz_tensor input, weight, bias, target, loss, grad_input, grad_weight;
  fuzz(&input, 2), fuzz(&weight, 2), fuzz(&bias, 1), fuzz(&target, 1), fuzz(&loss, next() % 2);
  fuzz(&grad_input, 2), fuzz(&grad_weight, 2);
  if (next() % 4) { /* a coherent call, but for what the generator changed above */
    target.dl.dtype = (DLDataType){kDLInt, 64, 1};
    weight.shape[1] = input.shape[1], target.shape[0] = input.shape[0];
    bias.shape[0] = weight.shape[0], weight.dl.dtype = bias.dl.dtype = input.dl.dtype;
    fuzz_like(&grad_input, &input), fuzz_like(&grad_weight, &weight);
  }
  jitops_flce_tensors tensors = {maybe(&input),
                                 maybe(&weight),
                                 next() % 2 ? &bias.dl : NULL,
                                 maybe(&target),
                                 NULL,
                                 next() % 16 ? &loss.dl : NULL,
                                 NULL,
                                 next() % 2 ? &grad_input.dl : NULL,
                                 next() % 2 ? &grad_weight.dl : NULL,
                                 NULL};
  jitops_flce_options options;
  jitops_flce_options_init(&options);
  options.reduction = (jitops_flce_reduction)(next() % 3);
  options.chunk_rows = next() % 4 ? 0 : fuzz_extent();
  options.scratch_budget_bytes = next() % 4 ? 0 : fuzz_stride(1 << 30);
  size_t bytes;
  expect_status(jitops_flce_workspace_size(rt, &tensors, &options, &bytes),
                "jitops_flce_workspace_size");
}

/* A vocabulary shard's two phases: the operands as fuzz_flce's, [BT] statistics, and shard
 * bounds that are mostly coherent. */
static void fuzz_flce_shard(jitops_runtime_t *rt) {
  fuzz_tensor input, weight, bias, target, dy, lse, linear, grad_input, grad_weight, grad_bias;
  fuzz(&input, 2), fuzz(&weight, 2), fuzz(&bias, 1), fuzz(&target, 1), fuzz(&dy, next() % 2);
  fuzz(&lse, 1), fuzz(&linear, 1), fuzz(&grad_input, 2), fuzz(&grad_weight, 2);
  fuzz(&grad_bias, 1);
  if (next() % 4) { /* a coherent call, but for what the generator changed above */
    target.dl.dtype = (DLDataType){kDLInt, 64, 1};
    weight.shape[1] = input.shape[1], target.shape[0] = input.shape[0];
    bias.shape[0] = weight.shape[0], weight.dl.dtype = bias.dl.dtype = input.dl.dtype;
    fuzz_like(&lse, &target), fuzz_like(&linear, &lse), fuzz_like(&grad_bias, &bias);
    lse.dl.dtype = linear.dl.dtype = (DLDataType){kDLFloat, 32, 1};
    fuzz_like(&grad_input, &input), fuzz_like(&grad_weight, &weight);
    /* Outputs must not overlap: most tensors at addresses of their own. */
    fuzz_tensor *all[] = {&input, &weight, &bias,       &target,      &dy,
                          &lse,   &linear, &grad_input, &grad_weight, &grad_bias};
    for (size_t k = 0; k < sizeof all / sizeof *all; ++k)
      if (all[k]->dl.data == (void *)(uintptr_t)(1u << 20) && next() % 8)
        all[k]->dl.data = (void *)((uintptr_t)(k + 1) << 36);
  }
  jitops_flce_options options;
  jitops_flce_options_init(&options);
  options.reduction = (jitops_flce_reduction)(next() % 3);
  options.vocab_start = next() % 4 ? (int64_t)(next() % 9) : fuzz_stride(1);
  if (next() % 4 == 0 ||
      __builtin_add_overflow(options.vocab_start, weight.shape[0], &options.vocab_size))
    options.vocab_size = fuzz_extent();
  options.scratch_budget_bytes = next() % 4 ? 0 : fuzz_stride(1 << 30);
  jitops_flce_tensors stats = {.input = maybe(&input),
                               .weight = maybe(&weight),
                               .bias = next() % 2 ? &bias.dl : NULL,
                               .target = maybe(&target)};
  size_t bytes;
  expect_status(jitops_flce_shard_stats_workspace_size(rt, &stats, &options, maybe(&lse),
                                                       maybe(&linear), &bytes),
                "jitops_flce_shard_stats_workspace_size");
  jitops_flce_tensors backward = stats;
  backward.grad_output = next() % 2 ? &dy.dl : NULL;
  backward.grad_input = next() % 2 ? &grad_input.dl : NULL;
  backward.grad_weight = next() % 2 ? &grad_weight.dl : NULL;
  backward.grad_bias = next() % 2 ? &grad_bias.dl : NULL;
  expect_status(
      jitops_flce_shard_backward_workspace_size(rt, &backward, &options, maybe(&lse), &bytes),
      "jitops_flce_shard_backward_workspace_size");
}

int main(void) {
  const char *env = getenv("JITOPS_FUZZ_ITERATIONS");
  int iterations = env != NULL ? atoi(env) : 100000;
  jitops_runtime_config config = test_offline_config("sm_90", NULL);
  config.cache_mode = JITOPS_CACHE_MODE_OFF;
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(&config, &rt));
  if (rt == NULL)
    return test_finish("test_validation_fuzz");
  void (*const families[])(jitops_runtime_t *) = {fuzz_scan, fuzz_repeat, fuzz_segment,
                                                  fuzz_ctc,  fuzz_flce,   fuzz_flce_shard};
  for (int n = 0; n < iterations; ++n)
    for (size_t f = 0; f < sizeof families / sizeof *families; ++f)
      families[f](rt);
  printf("test_validation_fuzz: %d validation calls, %d of them valid\n", calls, passed);
  jitops_runtime_destroy(rt);
  return test_finish("test_validation_fuzz");
}
