/* The automatic algorithm of unsorted max/min, on a compile-only runtime (no GPU): each call is
 * validated as the public entry validates it, then planned; the path must be the one measured
 * fastest for its shape (ops/segment/plan.c states the measurements). Pinned here because the
 * GPU tests would pass on either path: a rule lost in a refactor would only show as time. */
#include <string.h>

#include "ops/segment/args.h"
#include "runtime/device.h"
#include "testutil.h"

static const DLDataType F32 = {kDLFloat, 32, 1}, F64 = {kDLFloat, 64, 1}, BF16 = {kDLBfloat, 16, 1},
                        I64 = {kDLInt, 64, 1};

/* A compact device tensor over a fake, well-aligned address (nothing is launched). */
static DLTensor tensor(int ndim, int64_t *shape, DLDataType dtype, uintptr_t address) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = (void *)address;
  t.device.device_type = kDLCUDA;
  t.ndim = ndim;
  t.dtype = dtype;
  t.shape = shape;
  return t;
}

/* The path the automatic choice plans for max over `segments` of rows [rows, cols] with int64
 * ids, unsorted. */
static jitops__segment_path planned_path(jitops_runtime_t *rt, DLDataType dtype, int64_t rows,
                                         int64_t cols, int64_t segments) {
  int64_t data_shape[2] = {rows, cols}, out_shape[2] = {segments, cols}, id_shape[1] = {rows};
  DLTensor data = tensor(2, data_shape, dtype, 0x10000000);
  DLTensor ids = tensor(1, id_shape, I64, 0x80000000);
  DLTensor out = tensor(2, out_shape, dtype, 0xc0000000);
  jitops_segment_options options;
  jitops_segment_options_init(&options);
  jitops__segment_call call;
  CHECK_OK(jitops__segment_check_forward("test", rt, JITOPS_SEGMENT_MAX, &data, &ids, segments,
                                         &out, &options, &call));
  jitops__segment_forward_plan plan;
  CHECK_OK(jitops__segment_plan_forward(jitops__runtime_props(rt), &call, &plan));
  return plan.path;
}

/* f32 takes buckets when the segments fit in at most 30 bucket tables of 48 KB. */
static void f32_takes_few_buckets(jitops_runtime_t *rt) {
  const int64_t N = 1 << 20;
  CHECK(planned_path(rt, F32, N, 16, 1000) == JITOPS__SEGMENT_PATH_BUCKETS);  /* 2 tables */
  CHECK(planned_path(rt, F32, N, 32, 10000) == JITOPS__SEGMENT_PATH_BUCKETS); /* 27 */
  CHECK(planned_path(rt, F32, N, 128, 1000) == JITOPS__SEGMENT_PATH_BUCKETS); /* 11 */
  /* The benchmark table's shape needs 53 tables: the sort. So does D 40 over 10^4 (33). */
  CHECK(planned_path(rt, F32, N, 64, 10000) == JITOPS__SEGMENT_PATH_SORT);
  CHECK(planned_path(rt, F32, N, 40, 10000) == JITOPS__SEGMENT_PATH_SORT);
  CHECK(planned_path(rt, F32, N, 1024, 10000) == JITOPS__SEGMENT_PATH_SORT);
}

/* f64 takes buckets for rows of up to 32 columns, however many tables. */
static void f64_takes_narrow_buckets(jitops_runtime_t *rt) {
  const int64_t N = 1 << 20;
  CHECK(planned_path(rt, F64, N, 32, 100000) == JITOPS__SEGMENT_PATH_BUCKETS); /* 521 tables */
  CHECK(planned_path(rt, F64, N, 12, 1000) == JITOPS__SEGMENT_PATH_BUCKETS);
  CHECK(planned_path(rt, F64, N, 40, 10000) == JITOPS__SEGMENT_PATH_SORT);
  CHECK(planned_path(rt, F64, N, 64, 1000) == JITOPS__SEGMENT_PATH_SORT);
}

/* What held before the rule: 2-byte values never take buckets (their codes are wider than the
 * values, which the tables' merge through the output needs equal), rows of at most 8 columns
 * take the narrow path, and segments of at most 2 rows take buckets at any width. */
static void other_rules_hold(jitops_runtime_t *rt) {
  const int64_t N = 1 << 20;
  CHECK(planned_path(rt, BF16, N, 16, 1000) == JITOPS__SEGMENT_PATH_SORT);
  CHECK(planned_path(rt, F32, N, 8, 10000) == JITOPS__SEGMENT_PATH_NARROW);
  CHECK(planned_path(rt, F32, N, 64, 1000000) == JITOPS__SEGMENT_PATH_BUCKETS);
}

int main(void) {
  jitops_runtime_config cfg = test_offline_config("sm_90", NULL);
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(&cfg, &rt));
  if (rt == NULL)
    return test_finish("test_segment_plan_choices");
  f32_takes_few_buckets(rt);
  f64_takes_narrow_buckets(rt);
  other_rules_hold(rt);
  jitops_runtime_destroy(rt);
  return test_finish("test_segment_plan_choices");
}
