/* The kernels a segment plan uses (kernels.h): one name expression per template instance,
 * gathered for the call and got together (runtime/kernel_batch.h), so that a cold call
 * compiles its kernels in parallel. */
#include "ops/segment/kernels.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define SRC_SORT     "jitops/segment_sort.cuh"
#define SRC_REDUCE   "jitops/segment_reduce.cuh"
#define SRC_ATOMIC   "jitops/segment_atomic.cuh"
#define SRC_BACKWARD "jitops/segment_backward.cuh"
#define SRC_TILES    "jitops/segment_tiles.cuh"
#define SRC_RUNS     "jitops/segment_backward_runs.cuh"
#define SRC_BUCKETS  "jitops/segment_buckets.cuh"
#define SRC_DIGIT    "jitops/segment_digit.cuh"
#define SRC_NARROW   "jitops/segment_narrow.cuh"
#define NS           "jitops::segment::"

/* Adds one kernel to the call's batch (its name expression formatted from `fmt`). Every kernel
 * of the family may be a quick build (runtime/kernel_batch.h): its arithmetic is integer work,
 * comparisons, float additions in an order the source fixes, the fixed point's exact scaling,
 * and divisions (IEEE, or divide_by_count's explicit fmas); no product feeds a sum. */
static jitops_status get(jitops__kernel_batch *b, const char *source, jitops_kernel_t **out,
                         const char *fmt, ...) JITOPS__PRINTF(4, 5);

static jitops_status get(jitops__kernel_batch *b, const char *source, jitops_kernel_t **out,
                         const char *fmt, ...) {
  char expr[JITOPS__KERNEL_BATCH_EXPR];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(expr, sizeof expr, fmt, ap);
  va_end(ap);
  return jitops__kernel_batch_add_flagged(b, source, expr, out, JITOPS__KERNEL_QUICK);
}

static const char *tf(bool b) {
  return b ? "true" : "false";
}

static jitops_status get_sort(jitops__kernel_batch *b, const jitops__segment_call *call,
                              const char *I, const jitops__segment_forward_plan *plan,
                              jitops__segment_sort_kernels *k) {
  /* Only a sort that carries values depends on the value type. One kernel runs every pass
   * (the first reads the ids, later ones the previous pass's keys): a cold sort of two or more
   * passes compiles one pass kernel, not two. */
  const char *T = plan->sort_carry ? jitops__dtype_cname(call->dtype) : "float";
  JITOPS__TRY(
      get(b, SRC_SORT, &k->pass, NS "segment_sort_pass<%s, %s, %s>", I, T, tf(plan->sort_carry)));
  /* The histogram compiles in a third of the pass's time: built after the call's other kernels,
   * so that on two cores the pass and the reduction start first. */
  char histogram[JITOPS__KERNEL_BATCH_EXPR];
  snprintf(histogram, sizeof histogram, NS "segment_sort_histogram<%s>", I);
  return jitops__kernel_batch_add_flagged(b, SRC_SORT, histogram, &k->histogram,
                                          JITOPS__KERNEL_SMALL | JITOPS__KERNEL_QUICK);
}

/* chunked reduction and fixup; `key_type` is the ids' type for sorted ids and int (the radix
 * sort's keys) otherwise. */
static jitops_status get_grouped(jitops__kernel_batch *b, const jitops__segment_call *call,
                                 const jitops__segment_forward_plan *plan, const char *key_type,
                                 bool sorted, jitops__segment_forward_kernels *k) {
  const char *T = jitops__dtype_cname(call->dtype);
  const jitops__segment_layout *l = &plan->layout;
  const int op = (int)call->reduction;
  if (plan->chunks > 0)
    JITOPS__TRY(get(b, SRC_REDUCE, &k->reduce,
                    NS "segment_reduce_chunks<%s, %s, %d, %d, %d, %d, %s, %s>", T, key_type, op,
                    l->vec, l->lanes, l->cpl, tf(sorted), tf(plan->sort_carry)));
  return get(b, SRC_REDUCE, &k->fixup, NS "segment_reduce_fixup<%s, %d, %d, %d, %d>", T, op, l->vec,
             l->lanes, l->cpl);
}

/* The digit path's fallback: the full sort, the chunked reduction and the fixup, which run
 * only when the scatter raises the fallback flag. */
static jitops_status get_digit_fallback(jitops__kernel_batch *b, const jitops__segment_call *call,
                                        const char *I, const jitops__segment_forward_plan *plan,
                                        jitops__segment_forward_kernels *k) {
  JITOPS__TRY(get_sort(b, call, I, plan, &k->sort));
  return get_grouped(b, call, plan, "int", false, k);
}

/* The digit path: the scatter and the digit reduction, then the fallback, deferred (a cold
 * call whose ids raise no flag needs only the first two: runtime/kernel_batch.h). */
static jitops_status get_digit(jitops__kernel_batch *b, const jitops__segment_call *call,
                               const char *I, const jitops__segment_forward_plan *plan,
                               jitops__segment_forward_kernels *k) {
  const char *T = jitops__dtype_cname(call->dtype);
  const jitops__segment_layout *l = &plan->layout;
  JITOPS__TRY(get(b, SRC_DIGIT, &k->digit_scatter, NS "segment_digit_scatter<%s>", I));
  JITOPS__TRY(get(b, SRC_DIGIT, &k->digit_reduce, NS "segment_digit_reduce<%s, %d, %d, %d, %d>", T,
                  (int)call->reduction, l->vec, l->lanes, l->cpl));
  const size_t first = b->count;
  JITOPS__TRY(get_digit_fallback(b, call, I, plan, k));
  jitops__kernel_batch_defer_since(b, first);
  return JITOPS_SUCCESS;
}

/* The narrow path: max/min's atomic pass and finalize, or sum/mean's prepare, fixed-point
 * atomic pass and finalize; the row length is a template argument (at most 8). */
static jitops_status get_narrow(jitops__kernel_batch *b, const jitops__segment_call *call,
                                const char *I, jitops__segment_forward_kernels *k) {
  const char *T = jitops__dtype_cname(call->dtype);
  const int op = (int)call->reduction, D = (int)call->cols;
  if (call->reduction == JITOPS_SEGMENT_MAX || call->reduction == JITOPS_SEGMENT_MIN) {
    JITOPS__TRY(get(b, SRC_NARROW, &k->narrow_add, NS "segment_narrow_extreme<%s, %s, %d, %d>", T,
                    I, op, D));
    return get(b, SRC_NARROW, &k->narrow_finalize, NS "segment_narrow_extreme_finalize<%s, %d, %d>",
               T, op, D);
  }
  const char *mean = tf(call->reduction == JITOPS_SEGMENT_MEAN);
  JITOPS__TRY(get(b, SRC_NARROW, &k->narrow_prepare, NS "segment_fixed_prepare<%s, %d>", T, D));
  JITOPS__TRY(
      get(b, SRC_NARROW, &k->narrow_add, NS "segment_fixed_add<%s, %s, %s, %d>", T, I, mean, D));
  return get(b, SRC_NARROW, &k->narrow_finalize, NS "segment_fixed_finalize<%s, %s, %d>", T, mean,
             D);
}

/* The forward's kernels for `plan`'s path, added to the call's batch. */
static jitops_status add_forward(jitops__kernel_batch *b, const jitops__segment_call *call,
                                 const jitops__segment_forward_plan *plan,
                                 jitops__segment_forward_kernels *out) {
  const char *T = jitops__dtype_cname(call->dtype);
  const char *I = jitops__dtype_cname(call->id_dtype);
  const jitops__segment_layout *l = &plan->layout;
  const int op = (int)call->reduction;
  switch (plan->path) {
  case JITOPS__SEGMENT_PATH_EMPTY:
    if (call->counter != NULL && call->rows > 0)
      return get(b, SRC_REDUCE, &out->count_too_large, NS "segment_count_too_large<%s>", I);
    return JITOPS_SUCCESS;
  case JITOPS__SEGMENT_PATH_SORT:
    if (call->rows > 0)
      JITOPS__TRY(get_sort(b, call, I, plan, &out->sort));
    return get_grouped(b, call, plan, "int", false, out);
  case JITOPS__SEGMENT_PATH_BOUNDARIES:
    return get_grouped(b, call, plan, I, true, out);
  case JITOPS__SEGMENT_PATH_DIGIT:
    return get_digit(b, call, I, plan, out);
  case JITOPS__SEGMENT_PATH_NARROW:
    return get_narrow(b, call, I, out);
  case JITOPS__SEGMENT_PATH_TILES: {
    const bool mean = call->reduction == JITOPS_SEGMENT_MEAN;
    JITOPS__TRY(
        get(b, SRC_TILES, &out->tile_sums, NS "segment_tile_sums<%s, %s, %s>", T, I, tf(mean)));
    return get(b, SRC_TILES, &out->tile_combine, NS "segment_tile_combine<%s, %s>", T, tf(mean));
  }
  case JITOPS__SEGMENT_PATH_BUCKETS:
    JITOPS__TRY(get(b, SRC_BUCKETS, &out->bucket_count, NS "segment_bucket_count<%s>", I));
    JITOPS__TRY(get(b, SRC_BUCKETS, &out->bucket_offsets, NS "segment_bucket_offsets"));
    JITOPS__TRY(get(b, SRC_BUCKETS, &out->bucket_scatter, NS "segment_bucket_scatter<%s, %s, %d>",
                    T, I, op));
    return get(b, SRC_BUCKETS, &out->bucket_extreme,
               NS "segment_bucket_extreme<%s, %d, %d, %d, %d>", T, op, l->vec, l->lanes, l->cpl);
  case JITOPS__SEGMENT_PATH_ATOMIC:
    JITOPS__TRY(get(b, SRC_ATOMIC, &out->atomic,
                    NS "segment_atomic_extreme<%s, %s, %d, %d, %d, %s>", T, I, op, l->vec, l->lanes,
                    tf(plan->atomic_shared)));
    return get(b, SRC_ATOMIC, &out->finalize, NS "segment_atomic_finalize<%s, %d, %d, %d>", T, op,
               l->vec, l->lanes);
  }
  return jitops__fail(JITOPS_ERR_INTERNAL, "%s: unknown segment path %d", call->fn,
                      (int)plan->path);
}

/* max/min over grouped rows: the sort (unsorted ids), then the mark and fix passes. */
static jitops_status get_backward_runs(jitops__kernel_batch *b, const jitops__segment_call *call,
                                       const jitops__segment_backward_plan *plan,
                                       jitops__segment_backward_kernels *k) {
  const char *T = jitops__dtype_cname(call->dtype);
  const char *I = jitops__dtype_cname(call->id_dtype);
  const jitops__segment_layout *l = &plan->layout;
  const char *key_type = call->sorted ? I : "int";
  if (!call->sorted)
    JITOPS__TRY(get_sort(b, call, I, &plan->grouped, &k->sort));
  JITOPS__TRY(get(b, SRC_RUNS, &k->runs_mark,
                  NS "segment_backward_runs_mark<%s, %s, %d, %d, %d, %s, %s>", T, key_type, l->vec,
                  l->lanes, plan->runs_cpl, tf(call->sorted), tf(call->first_occurrence)));
  return get(b, SRC_RUNS, &k->runs_fix, NS "segment_backward_runs_fix<%s, %s, %d, %d, %d, %s, %s>",
             T, key_type, l->vec, l->lanes, plan->runs_cpl, tf(call->sorted),
             tf(call->first_occurrence));
}

/* The backward's kernels for `plan`, added to the call's batch. */
static jitops_status add_backward(jitops__kernel_batch *b, const jitops__segment_call *call,
                                  const jitops__segment_backward_plan *plan,
                                  jitops__segment_backward_kernels *out) {
  const char *T = jitops__dtype_cname(call->dtype);
  const char *I = jitops__dtype_cname(call->id_dtype);
  const jitops__segment_layout *l = &plan->layout;
  const int op = (int)call->reduction;
  switch (call->reduction) {
  case JITOPS_SEGMENT_SUM:
    return get(b, SRC_BACKWARD, &out->gather,
               NS "segment_backward_gather<%s, %s, %d, %d, %d, false>", T, I, op, l->vec, l->lanes);
  case JITOPS_SEGMENT_MEAN:
    if (call->sorted)
      JITOPS__TRY(get(b, SRC_REDUCE, &out->offsets, NS "segment_offsets<%s>", I));
    else
      JITOPS__TRY(get(b, SRC_BACKWARD, &out->count_rows, NS "segment_count_rows<%s, %s>", I,
                      tf(plan->count_shared)));
    return get(b, SRC_BACKWARD, &out->gather, NS "segment_backward_gather<%s, %s, %d, %d, %d, %s>",
               T, I, op, l->vec, l->lanes, tf(call->sorted));
  case JITOPS_SEGMENT_MAX:
  case JITOPS_SEGMENT_MIN:
    if (plan->runs)
      return get_backward_runs(b, call, plan, out);
    JITOPS__TRY(get(b, SRC_BACKWARD, &out->mark,
                    NS "segment_backward_extreme_mark<%s, %s, %d, %d, %s, %d>", T, I, l->vec,
                    l->lanes, tf(call->first_occurrence), plan->rows_in_flight));
    return get(b, SRC_BACKWARD, &out->split,
               NS "segment_backward_extreme_split<%s, %s, %d, %d, %s>", T, I, l->vec, l->lanes,
               tf(call->first_occurrence));
  }
  return jitops__fail(JITOPS_ERR_INTERNAL, "%s: unknown reduction %d", call->fn, op);
}

jitops_status jitops__segment_get_forward_kernels(jitops_runtime_t *runtime,
                                                  const jitops__segment_call *call,
                                                  const jitops__segment_forward_plan *plan,
                                                  bool launches, void *stream,
                                                  jitops__segment_forward_kernels *out) {
  memset(out, 0, sizeof *out);
  jitops__kernel_batch batch;
  jitops__kernel_batch_init(&batch);
  if (launches)
    jitops__kernel_batch_for_launch(&batch, stream);
  JITOPS__TRY(add_forward(&batch, call, plan, out));
  return jitops__kernel_batch_get(runtime, &batch);
}

jitops_status jitops__segment_get_digit_fallback(jitops_runtime_t *runtime,
                                                 const jitops__segment_call *call,
                                                 const jitops__segment_forward_plan *plan,
                                                 void *stream,
                                                 jitops__segment_forward_kernels *kernels) {
  jitops__kernel_batch batch;
  jitops__kernel_batch_init(&batch);
  jitops__kernel_batch_for_launch(&batch, stream);
  JITOPS__TRY(get_digit_fallback(&batch, call, jitops__dtype_cname(call->id_dtype), plan, kernels));
  return jitops__kernel_batch_get(runtime, &batch);
}

jitops_status jitops__segment_get_backward_kernels(jitops_runtime_t *runtime,
                                                   const jitops__segment_call *call,
                                                   const jitops__segment_backward_plan *plan,
                                                   bool launches, void *stream,
                                                   jitops__segment_backward_kernels *out) {
  memset(out, 0, sizeof *out);
  if (call->rows == 0 || call->cols == 0)
    return JITOPS_SUCCESS;
  jitops__kernel_batch batch;
  jitops__kernel_batch_init(&batch);
  if (launches)
    jitops__kernel_batch_for_launch(&batch, stream);
  JITOPS__TRY(add_backward(&batch, call, plan, out));
  return jitops__kernel_batch_get(runtime, &batch);
}
