/*
 * libjitops — segment reductions: TensorFlow's unsorted_segment_{sum,mean,max,min} and
 * segment_{sum,mean,max,min} (sorted ids), forward and backward.
 *
 *   out[s, ...] = reduce { data[i, ...] : segment_ids[i] == s },   s in [0, num_segments)
 *
 * Shapes and layouts
 *   data         [N, D...] of f32, f64, f16 or bf16. The trailing dims are flattened to D and
 *                must be compact (row-major); the leading dim may have any stride (a view of
 *                every other row, a padded row pitch, even 0 or negative).
 *   segment_ids  [N], int32 or int64, any stride. On the device (kDLCUDA, kDLCUDAManaged), or
 *                in host memory (kDLCPU, kDLCUDAHost): host ids are checked on the host — an
 *                id >= num_segments is an error there — and copied to the device on `stream`.
 *                From pageable memory that copy is staged before the call returns; from
 *                page-locked memory (kDLCUDAHost, or pinned memory labelled kDLCPU) the stream
 *                reads them later, as cudaMemcpyAsync would, so keep them unchanged until
 *                the stream has passed the call. (The Python layer passes pinned ids through
 *                a pageable copy.)
 *   out          [num_segments, D...], the dtype of data, trailing dims equal to data's. Its
 *                leading stride must be >= D (rows must not overlap).
 *   N <= 2^31 - 2^16 rows and num_segments <= 2^31 - 2; D, and N x D, are not limited.
 *
 * Semantics (TensorFlow's)
 *   - Rows with a negative id are dropped. Rows with an id >= num_segments are dropped too
 *     and counted into options->dropped_count when one is given, so that bad ids never
 *     corrupt memory and are never silently lost.
 *   - Empty segments: sum 0, mean 0, max and min the fill value (options->fill, else the
 *     dtype's lowest() for max and max() for min, as in TensorFlow).
 *   - max/min propagate NaN. Among equal values the result is the value itself; -0 and +0
 *     may come out either way, always the same way for the same inputs and algorithm.
 *   - f16 and bf16 accumulate in f32, f32 in f32, f64 in f64; mean divides the sum by the
 *     count before rounding to the output dtype.
 *   - Sorted variant (options->sorted): the caller promises non-decreasing ids, which skips
 *     the grouping sort. Broken promises give unspecified results (never out-of-bounds
 *     accesses); host ids are checked and a decrease is an error.
 *
 * Determinism: bit-identical results for the same inputs on the same GPU. No floating-point
 * atomics: unsorted ids are grouped by a stable radix sort (sum and mean over many segments of
 * a few rows: scattered into parts of consecutive segments, each part's rows then ordered by
 * segment and row index), and each segment is reduced in row order by a fixed split; the
 * atomic algorithm for max/min uses integer atomics, whose result does not depend on their
 * order. Unsorted sum and mean of f32, f16 and bf16 rows of at most 8 columns over at least
 * 16384 segments (but not those the parts take), or of at most 16384 rows, or of at most 64
 * rows a segment on average, and of rows of up to 64 columns in calls of at most 16384 rows and
 * 2^18 result cells (with sorted ids too, then also at most 2^18 elements), add in 64-bit fixed
 * point with integer atomics (exact and order-independent): every value is first rounded to a
 * multiple of 2^(e + L - 62), where the largest finite |x| of the call is below 2^e and N below
 * 2^L (about 2^-41 of the largest |x| at N = 2^20), so segments whose values are all more than
 * ~10^6 times smaller than the call's largest lose relative precision; infinities and NaN give
 * inf/-inf/NaN as any summation order would. The backward uses integer atomics only (counts), and
 * divides or routes deterministically; the max/min backward with sorted ids or at least 2^22 result
 * cells groups the rows by segment (the same sort, or none for sorted ids) and finds ties without
 * atomics.
 *
 * Work and memory: O(N x D) time for every variant (no per-cell scans), on the caller's
 * stream, never synchronizing, but for a cold sum or mean on the parts path (above) with quick
 * builds: while its fallback sort is not built yet, it waits for the stream once to read whether
 * the ids need that sort (jitops.h, quick builds). Scratch comes from `workspace` when it is at
 * least as large as the *_workspace_size functions say, else from the runtime's memory pool on
 * `stream` (freed stream-ordered, so every call can be captured in a CUDA graph — except with
 * ids in pageable host memory, whose copy is not capturable). Sizes, roughly:
 *   forward, unsorted ids, sort algorithm:   17 N + 8 S + 2 (N / chunk) D a  bytes
 *                                            (8.5 N with at most 255 segments)
 *   forward, unsorted, sum/mean, 8 <= D <= 128, 2^17 <= S <= 4096 P, N <= 1.25 P S / 1024
 *   (parts of P = 1024, 512 or 256 segments, the largest that fits):
 *                                            N + 8 S + 2 (N / chunk) D a
 *                                            + max(16 N, 16384 ceil(S / P))  bytes
 *   forward, sorted ids:                     8 S + 2 (N / chunk) D a  bytes
 *   forward, unsorted, one column, sum/mean, S <= 16384, N <= 2^22 (not f64):
 *                                            4 S ceil(N / 4096)  bytes (8 for mean)
 *   forward, unsorted, D <= 8, sum/mean (not f64), S >= 16384, not the parts above:
 *                                            8 S D + S D / 4 (+ 4 S for mean) + 4 K  bytes
 *                                            (K <= 8 blocks an SM)
 *   forward, atomic algorithm (max/min):     S D k  bytes (k = 4, or 8 for f64); with buckets
 *                                            of segments 8 N + 4 B (C + 5) + 16 (B + N / 4096)
 *                                            (B buckets, C <= 128 counting blocks)
 *   backward sum: 0; mean: 4 S; max/min, unsorted ids and S x D < 2^22: 4 S D (8 S D with
 *   first_occurrence); otherwise 17 N + 8 S + (N / chunk) (32 L + 60) T bytes, without the
 *   17 N for sorted ids (L <= 32 the lanes a row takes, T = ceil(D / (16 L)) column tiles,
 *   ceil(D / (8 L)) for f64)
 * where a is the accumulation type's size and chunk is 32..2048 rows (the call picks it).
 * Host ids add N x sizeof(id) for the device copy.
 *
 * Errors (every entry point): JITOPS_ERR_INVALID_ARGUMENT (NULL runtime or tensor, bad
 * reduction, option or num_segments < 0), JITOPS_ERR_INVALID_SHAPE, JITOPS_ERR_INVALID_DTYPE,
 * JITOPS_ERR_INVALID_LAYOUT (strided trailing dims, overlapping output rows, a byte_offset
 * that misaligns an element), JITOPS_ERR_INVALID_DEVICE, JITOPS_ERR_OUT_OF_RANGE (a host id
 * >= num_segments, host ids not sorted), JITOPS_ERR_UNSUPPORTED (too many rows or segments),
 * plus the core's JITOPS_ERR_COMPILE, JITOPS_ERR_NO_DEVICE, JITOPS_ERR_DRIVER and
 * JITOPS_ERR_OUT_OF_MEMORY. Every argument is checked before any device work.
 */
#ifndef JITOPS_SEGMENT_H
#define JITOPS_SEGMENT_H

#include "jitops/jitops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum jitops_segment_reduction {
  JITOPS_SEGMENT_SUM = 0,
  JITOPS_SEGMENT_MEAN = 1, /* the sum divided by the segment's row count; 0 when empty */
  JITOPS_SEGMENT_MAX = 2,
  JITOPS_SEGMENT_MIN = 3
} jitops_segment_reduction;

typedef enum jitops_segment_algorithm {
  /* The sort algorithm for sum and mean and for sorted ids (but fixed-point atomics for
   * unsorted sum and mean over rows of at most 8 columns and at least 16384 segments, or small
   * or sparse calls, and small calls over rows of up to 64 columns, see Determinism); for unsorted
   * max/min, the atomic algorithm when its S x D table fits in shared memory (and N x D is at least
   * 16 times S x D per block), when rows have at most 8 columns, or up to 64 in calls of at
   * most 16384 rows and 2^18 result cells, sorted ids included (a thread an element into the
   * global table), or in
   * buckets (f32 and f64) when segments hold at most 2 rows on average, or (f32) when the segments
   * fit in at most 30 buckets, or (f64) when rows have at most 32 columns; else the sort algorithm
   * (global atomics lose on wide rows). */
  JITOPS_SEGMENT_ALGORITHM_AUTO = 0,
  /* Group rows by segment — a stable radix sort of unsorted ids, the boundaries of sorted
   * ones — and reduce each segment in row order. Any reduction. */
  JITOPS_SEGMENT_ALGORITHM_SORT = 1,
  /* max/min only: integer atomics on an order-preserving encoding of the values. Also
   * deterministic (an integer max does not depend on the order of updates). Three layouts:
   * the whole S x D table in each block's shared memory when it fits; for f32 and f64, buckets
   * of consecutive segments whose P x D table fits in 48 KB of shared memory (a counting sort
   * of the rows by bucket, then one block per bucket, or per 4096 rows of a larger one, with
   * at most 12288 buckets); else one S x D table in global memory. */
  JITOPS_SEGMENT_ALGORITHM_ATOMIC = 2
} jitops_segment_algorithm;

typedef struct jitops_segment_options {
  /* 1: segment_ids are non-decreasing (TensorFlow's segment_* ops). Default 0. */
  int sorted;
  /* 1: empty max/min segments take `fill` (rounded to the dtype; inf and NaN allowed)
   * instead of lowest() (max) or max() (min). Only for max and min. Default 0. */
  int has_fill;
  double fill;
  /* Backward of max/min: 0 splits dy equally among the inputs equal to the result
   * (TensorFlow); 1 gives it all to the first such row. Default 0. */
  int first_occurrence;
  /* Forward only: NULL, or a device tensor of one int32 or int64 element to which the
   * number of ids >= num_segments is added (atomically; zero it before the first call). */
  const DLTensor *dropped_count;
  /* Forward only. Default JITOPS_SEGMENT_ALGORITHM_AUTO. */
  jitops_segment_algorithm algorithm;
} jitops_segment_options;

/* Fills `options` with the defaults listed above. */
JITOPS_API void jitops_segment_options_init(jitops_segment_options *options);

/* out[s] = reduction over the rows i of data with segment_ids[i] == s. `options` NULL means
 * the defaults. Asynchronous on `stream`. See the top of this header for shapes, semantics
 * and errors. */
JITOPS_API jitops_status jitops_segment_reduce(jitops_runtime_t *runtime,
                                               jitops_segment_reduction reduction,
                                               const DLTensor *data, const DLTensor *segment_ids,
                                               int64_t num_segments, const DLTensor *out,
                                               const jitops_segment_options *options,
                                               const jitops_workspace *workspace, void *stream);

/* The gradient of jitops_segment_reduce with respect to data:
 *   sum:     grad_data[i] = grad_out[ids[i]]
 *   mean:    grad_data[i] = grad_out[ids[i]] / count(ids[i])
 *   max/min: grad_data[i, d] = grad_out[s, d] / ties(s, d) where data[i, d] == out[s, d]
 *            (s = ids[i]; ties = the number of such rows), else 0; with
 *            options->first_occurrence only the lowest such row gets grad_out[s, d]. A NaN
 *            result equals nothing and routes no gradient.
 * Rows with a dropped id get 0. grad_out and out are [num_segments, D...], data and
 * grad_data [N, D...], all of one dtype; data and out (the forward's input and result) are
 * needed for max and min only and may be NULL for sum and mean. grad_data is written in
 * full. segment_ids may be on the device or in host memory, as for the forward (host ids are
 * checked and copied). options->sorted selects the sorted-ids variant (mean only uses it);
 * `dropped_count` and `algorithm` are ignored. Deterministic. */
JITOPS_API jitops_status jitops_segment_reduce_backward(
    jitops_runtime_t *runtime, jitops_segment_reduction reduction, const DLTensor *grad_out,
    const DLTensor *data, const DLTensor *out, const DLTensor *segment_ids, int64_t num_segments,
    const DLTensor *grad_data, const jitops_segment_options *options,
    const jitops_workspace *workspace, void *stream);

/* The workspace bytes jitops_segment_reduce needs for these arguments (their shapes, dtypes,
 * strides, alignment and memory kinds; data pointers are not read). A workspace at least
 * this large makes the call allocate nothing. Validates like jitops_segment_reduce. */
JITOPS_API jitops_status jitops_segment_reduce_workspace_size(
    jitops_runtime_t *runtime, jitops_segment_reduction reduction, const DLTensor *data,
    const DLTensor *segment_ids, int64_t num_segments, const DLTensor *out,
    const jitops_segment_options *options, size_t *bytes);

/* The same for jitops_segment_reduce_backward. */
JITOPS_API jitops_status jitops_segment_reduce_backward_workspace_size(
    jitops_runtime_t *runtime, jitops_segment_reduction reduction, const DLTensor *grad_out,
    const DLTensor *data, const DLTensor *out, const DLTensor *segment_ids, int64_t num_segments,
    const DLTensor *grad_data, const jitops_segment_options *options, size_t *bytes);

#ifdef __cplusplus
}
#endif

#endif /* JITOPS_SEGMENT_H */
