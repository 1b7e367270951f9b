/* The segment family's prewarm catalogue: each entry is one (value dtype, id dtype, reduction,
 * sorted or not, row length) combination, and compiling it compiles every kernel its forward
 * and backward calls use — through the same planner the calls use, for a typical problem
 * (2^20 rows, 10 000 segments; for unsorted max/min also 100 segments, which takes the
 * shared-memory atomic path, 10^6 segments, which takes buckets of shared tables for 4- and
 * 8-byte types at 64 columns and the narrow path (a global table, a thread an element) at one,
 * and each algorithm forced; for unsorted sum/mean also 10^6 segments, which takes the digit
 * path at 64 columns and the narrow path's fixed-point sums at one). Row lengths 1 (scalars per
 * row) and 64 (a typical embedding width, aligned) cover the small-row and the wide-row layouts. */
#include <stdio.h>
#include <string.h>

#include "ops/catalogue_family.h"
#include "ops/segment/kernels.h"
#include "ops/segment/plan.h"

static const jitops__dtype value_types[] = {JITOPS__DTYPE_F32, JITOPS__DTYPE_F16,
                                            JITOPS__DTYPE_BF16};
static const jitops__dtype id_types[] = {JITOPS__DTYPE_I64, JITOPS__DTYPE_I32};
static const char *const reduction_names[] = {"sum", "mean", "max", "min"};
static const int64_t row_lengths[] = {1, 64};

enum {
  N_VALUES = sizeof value_types / sizeof value_types[0],
  N_IDS = sizeof id_types / sizeof id_types[0],
  N_REDUCTIONS = 4,
  N_ORDERS = 2,
  N_LENGTHS = sizeof row_lengths / sizeof row_lengths[0],
  N_ENTRIES = N_VALUES * N_IDS * N_REDUCTIONS * N_ORDERS * N_LENGTHS
};

typedef struct entry {
  jitops__dtype value, id;
  jitops_segment_reduction reduction;
  bool sorted;
  int64_t cols;
} entry;

static entry decode(size_t index) {
  entry e;
  e.cols = row_lengths[index % N_LENGTHS];
  index /= N_LENGTHS;
  e.sorted = index % N_ORDERS != 0;
  index /= N_ORDERS;
  e.reduction = (jitops_segment_reduction)(index % N_REDUCTIONS);
  index /= N_REDUCTIONS;
  e.id = id_types[index % N_IDS];
  index /= N_IDS;
  e.value = value_types[index];
  return e;
}

static size_t segment_count(void) {
  return N_ENTRIES;
}

static const char *segment_describe(size_t index) {
  static _Thread_local char text[128];
  const entry e = decode(index);
  snprintf(text, sizeof text, "segment %s %s, %s data, %s ids, D=%lld, forward and backward",
           e.sorted ? "sorted" : "unsorted", reduction_names[e.reduction],
           jitops__dtype_name(e.value), jitops__dtype_name(e.id), (long long)e.cols);
  return text;
}

static jitops__segment_call typical_call(const entry *e, bool backward, int64_t segments,
                                         jitops_segment_algorithm algorithm) {
  jitops__segment_call call;
  memset(&call, 0, sizeof call);
  call.fn = "jitops_catalogue_compile";
  call.backward = backward;
  call.reduction = e->reduction;
  call.dtype = e->value;
  call.id_dtype = e->id;
  call.rows = (int64_t)1 << 20;
  call.cols = e->cols;
  call.segments = segments;
  call.sorted = e->sorted;
  call.algorithm = algorithm;
  call.vec_max = (int)(16 / jitops__dtype_size(e->value));
  return call;
}

static jitops_status compile_forward(jitops_runtime_t *runtime, const entry *e, int64_t segments,
                                     jitops_segment_algorithm algorithm) {
  const jitops__segment_call call = typical_call(e, false, segments, algorithm);
  jitops__segment_forward_plan plan;
  jitops__segment_forward_kernels kernels;
  JITOPS__TRY(jitops__segment_plan_forward(jitops__runtime_props(runtime), &call, &plan));
  return jitops__segment_get_forward_kernels(runtime, &call, &plan, false, NULL, &kernels);
}

static jitops_status segment_compile(jitops_runtime_t *runtime, size_t index) {
  if (index >= N_ENTRIES)
    return jitops__fail(JITOPS_ERR_NOT_FOUND, "jitops_catalogue_compile: no segment entry %zu",
                        index);
  const entry e = decode(index);
  JITOPS__TRY(compile_forward(runtime, &e, 10000, JITOPS_SEGMENT_ALGORITHM_AUTO));
  const bool extreme = e.reduction == JITOPS_SEGMENT_MAX || e.reduction == JITOPS_SEGMENT_MIN;
  if (!extreme && !e.sorted)
    JITOPS__TRY(compile_forward(runtime, &e, 1000000, JITOPS_SEGMENT_ALGORITHM_AUTO));
  if (extreme && !e.sorted) {
    JITOPS__TRY(compile_forward(runtime, &e, 100, JITOPS_SEGMENT_ALGORITHM_AUTO));
    JITOPS__TRY(compile_forward(runtime, &e, 1000000, JITOPS_SEGMENT_ALGORITHM_AUTO));
    JITOPS__TRY(compile_forward(runtime, &e, 10000, JITOPS_SEGMENT_ALGORITHM_ATOMIC));
    JITOPS__TRY(compile_forward(runtime, &e, 10000, JITOPS_SEGMENT_ALGORITHM_SORT));
  }
  const jitops__segment_call call = typical_call(&e, true, 10000, JITOPS_SEGMENT_ALGORITHM_AUTO);
  jitops__segment_backward_plan plan;
  jitops__segment_backward_kernels kernels;
  JITOPS__TRY(jitops__segment_plan_backward(jitops__runtime_props(runtime), &call, &plan));
  return jitops__segment_get_backward_kernels(runtime, &call, &plan, false, NULL, &kernels);
}

const jitops__catalogue_family jitops__catalogue_segment = {
    "segment", segment_count, segment_describe, segment_compile, NULL, NULL};
