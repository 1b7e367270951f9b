/* The radix sort's launches (segment_sort.cuh): the digit counts of every pass, then one stable
 * counting pass a `bits` bits of the keys, each a dependent launch after the one before. */
#include "ops/segment/launches.h"

jitops_status jitops__segment_launch_sort(const jitops__segment_forward_plan *p,
                                          const jitops__segment_sort_kernels *k, char *scratch,
                                          jitops__segment_ids ids, const jitops__segment_rows *data,
                                          void *stream, jitops__segment_sorted *sorted) {
  const bool digit = p->path == JITOPS__SEGMENT_PATH_DIGIT;
  jitops__segment_sort_args args = {
      .ids = ids,
      .data = data != NULL ? data->ptr : NULL,
      .data_stride = data != NULL ? data->stride : 0,
      .passes = p->sort_passes,
      .bits = p->sort_bits,
      .hist = (int32_t *)(scratch + p->hist),
      .fallback = digit ? (const int32_t *)(scratch + p->digit_fallback) : NULL,
      .seg_start = digit ? (int32_t *)(scratch + p->seg_start) : NULL,
      .seg_end = digit ? (int32_t *)(scratch + p->seg_end) : NULL};
  void *params[] = {&args};
  /* On the digit path the previous operation is the digit reduction (or, where a cold call
   * deferred these kernels, the read of its flag); else the memset. */
  JITOPS__TRY((digit ? jitops__launch_after : jitops__launch)(
      k->histogram, p->hist_blocks, 1, 1, JITOPS__SEGMENT_SORT_THREADS, 1, 1, 0, stream, params));
  for (int pass = 0; pass < p->sort_passes; ++pass) {
    jitops__segment_sort_pass *a = &args.pass;
    /* The previous pass's output; NULL tells the pass kernel it is the first (it reads the ids). */
    a->keys_in = pass == 0 ? NULL : a->keys_out;
    a->vals_in = pass == 0 ? NULL : a->vals_out;
    a->keys_out = (int32_t *)(scratch + p->keys[pass % 2]);
    a->vals_out = (int32_t *)(scratch + p->vals[pass % 2]);
    a->hist = args.hist + pass * JITOPS__SEGMENT_SORT_RADIX_MAX;
    a->lookback = (uint64_t *)(scratch + p->lookback[pass % 2]);
    /* The other set was zeroed by the memset for pass 1; later passes are cleared by the pass
     * before them. */
    a->lookback_clear = pass >= 1 && pass + 1 < p->sort_passes
                            ? (uint64_t *)(scratch + p->lookback[(pass + 1) % 2])
                            : NULL;
    a->tile_counter = (int32_t *)(scratch + p->tile_counters) + pass;
    a->shift = pass * p->sort_bits;
    JITOPS__TRY(jitops__launch_after(k->pass, (uint32_t)p->sort_tiles, 1, 1,
                                     JITOPS__SEGMENT_SORT_THREADS, 1, 1, 0, stream, params));
  }
  sorted->keys = args.pass.keys_out;
  sorted->rows = args.pass.vals_out;
  return JITOPS_SUCCESS;
}
