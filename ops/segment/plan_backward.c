/* The backward plan: sum gathers dy rows; mean first counts each segment's rows (offsets of
 * sorted ids, or integer-atomic counts); max/min either marks matches against a tie table over
 * rows in their natural order or, for sorted ids and large S x D tables, walks rows grouped by
 * segment (the forward's sort, plan.c) with tie bits in registers. */
#include "ops/segment/plan.h"

#include <string.h>

/* max/min backward, unsorted ids: with at least this many result cells the tie table (4 bytes
 * a cell, 8 with first_occurrence, cleared every call) and the per-row gathers of random result
 * rows cost more than grouping the rows by segment (the forward's sort) and keeping tie bits in
 * registers. Measured on an H200 (N = 2^20, tie table): D = 1024 / S = 10^4 3.6x the forward,
 * D = 64 / S = 10^6 2.6x; below, D = 64 / S = 10^4 1.2x and S = 100 1.8x. Sorted ids always
 * take the grouped rows: they need no sort. */
#define SEG_BACKWARD_RUNS_MIN_CELLS ((int64_t)1 << 22)
/* The grouped kernels' chunks: two full waves of the mark pass (the blocks an SM it asks for:
 * RUNS_NARROW_BLOCKS for narrow rows of 4-byte types, RUNS_WIDE_BLOCKS otherwise). A lane takes
 * at most 16 elements of a row a column tile (8 for f64): f32 D = 1024 walks two tiles of 512
 * columns. Whole rows a tile (32 elements, the current segment's result reloaded from L1 by each
 * access) measured 10% slower on an H100. */
#define SEG_BACKWARD_RUNS_WAVES 2

/* max/min over grouped rows: the forward's sort plan (never carrying values: the kernels
 * need the rows), with chunks for the mark pass's waves; the crossing runs' tie bits take the
 * partials (a pair of words a lane, slot and column tile), their ends seg_end. */
static void plan_runs(const jitops__device_props *props, const jitops__segment_call *call,
                      jitops__segment_backward_plan *plan, jitops__segment_scratch_cursor *cursor) {
  jitops__segment_forward_plan *g = &plan->grouped;
  const jitops__segment_layout *l = &plan->layout;
  plan->runs = true;
  g->layout = *l;
  g->path = call->sorted ? JITOPS__SEGMENT_PATH_BOUNDARIES : JITOPS__SEGMENT_PATH_SORT;
  const size_t acc = jitops__segment_acc_size(call->dtype);
  const int lane_elements = acc == 8 ? 8 : 16;
  int cpl = lane_elements / l->vec;
  if (cpl < 1)
    cpl = 1;
  plan->runs_cpl = cpl < l->cpl ? cpl : l->cpl;
  const int elements = plan->runs_cpl * l->vec;
  const bool narrow = elements < JITOPS__SEGMENT_RUNS_WIDE_ELEMENTS && acc == 4;
  const int64_t blocks_per_sm =
      narrow ? JITOPS__SEGMENT_RUNS_NARROW_BLOCKS : JITOPS__SEGMENT_RUNS_WIDE_BLOCKS;
  const int64_t threads_per_sm =
      blocks_per_sm * JITOPS__SEGMENT_RUNS_THREADS * SEG_BACKWARD_RUNS_WAVES;
  const int64_t cols_per_tile = (int64_t)l->lanes * elements;
  const int64_t tiles = (call->cols + cols_per_tile - 1) / cols_per_tile;
  const size_t bits_per_chunk =
      2 * (size_t)tiles * (size_t)l->lanes * sizeof(jitops__segment_tie_bits);
  jitops__segment_plan_grouped(props, call, threads_per_sm, bits_per_chunk, g, cursor);
  g->sort_carry = false;
  const int64_t lanes = g->chunks * l->lanes;
  plan->runs_mark_blocks =
      (uint32_t)((lanes + JITOPS__SEGMENT_RUNS_THREADS - 1) / JITOPS__SEGMENT_RUNS_THREADS);
  plan->runs_fix_blocks =
      (uint32_t)((lanes + JITOPS__SEGMENT_THREADS - 1) / JITOPS__SEGMENT_THREADS);
  plan->owned = jitops__segment_take(cursor, (size_t)g->chunks, sizeof(int32_t));
  plan->own_start = jitops__segment_take(cursor, (size_t)g->chunks, sizeof(int32_t));
  const size_t chunk_tiles = (size_t)g->chunks * (size_t)tiles;
  const size_t listed = JITOPS__SEGMENT_RUNS_TIED_LIST;
  plan->tied_count = jitops__segment_take(cursor, chunk_tiles, sizeof(int32_t));
  plan->tied_runs = jitops__segment_take(cursor, chunk_tiles, listed * 3 * sizeof(int32_t));
  plan->tied_bits =
      jitops__segment_take(cursor, chunk_tiles, listed * (size_t)l->lanes * sizeof(uint32_t));
}

/* mean: each segment's row count, from the offsets of sorted ids (S + 1 of them) or by integer
 * atomics, in shared memory when the table is small and each block brings enough rows. */
static void plan_counts(const jitops__device_props *props, const jitops__segment_call *call,
                        jitops__segment_backward_plan *plan,
                        jitops__segment_scratch_cursor *cursor) {
  if (call->sorted) {
    plan->counts = jitops__segment_take(cursor, (size_t)call->segments + 1, sizeof(int32_t));
    plan->offsets_blocks =
        (uint32_t)((call->segments + 1 + JITOPS__SEGMENT_THREADS - 1) / JITOPS__SEGMENT_THREADS);
    return;
  }
  plan->counts = jitops__segment_take(cursor, (size_t)call->segments, sizeof(int32_t));
  plan->count_table = (size_t)call->segments * sizeof(int32_t);
  const int64_t useful =
      call->segments > 0 ? call->rows / (JITOPS__SEGMENT_SHARED_ELEMENTS_PER_CELL * call->segments)
                         : 0;
  const int64_t sms = jitops__segment_sm_count(props);
  plan->count_shared = plan->count_table <= JITOPS__SEGMENT_SHARED_TABLE_BYTES && useful >= sms;
  plan->count_blocks = plan->count_shared ? (uint32_t)(useful < sms * 4 ? useful : sms * 4)
                                          : jitops__segment_grid(props, call->rows, 1, 16);
}

/* max/min by a tie table: S x D tie counts, then the tie flag (one memset clears both), and
 * with first_occurrence each cell's first matching row. */
static void plan_tie_table(const jitops__device_props *props, const jitops__segment_call *call,
                           jitops__segment_backward_plan *plan,
                           jitops__segment_scratch_cursor *cursor) {
  plan->tie_cells = (size_t)(call->segments * call->cols);
  plan->ties = jitops__segment_take(cursor, plan->tie_cells + 1, sizeof(int32_t));
  if (call->first_occurrence)
    plan->first_row = jitops__segment_take(cursor, plan->tie_cells, sizeof(int32_t));
  /* The split usually finds no tie and returns at once: one wave of blocks (it loops over the
   * rows) costs less to launch and retire than the mark's several. */
  plan->split_blocks = jitops__segment_grid(props, call->rows, plan->layout.lanes, 8);
}

jitops_status jitops__segment_plan_backward(const jitops__device_props *props,
                                            const jitops__segment_call *call,
                                            jitops__segment_backward_plan *plan) {
  memset(plan, 0, sizeof *plan);
  plan->layout = jitops__segment_choose_layout(call->cols, call->vec_max);
  /* Rows whose accesses all fit in one lane group: several rows at a time (the mark pass's
   * BATCH split over them). */
  plan->rows_in_flight =
      call->cols / plan->layout.vec <= plan->layout.lanes ? JITOPS__SEGMENT_BACKWARD_BATCH : 1;
  plan->rows_blocks = jitops__segment_grid(props, call->rows, plan->layout.lanes, 32);
  jitops__segment_scratch_cursor cursor = {0, false};
  if (call->host_ids != NULL)
    plan->ids_copy =
        jitops__segment_take(&cursor, (size_t)call->rows, jitops__dtype_size(call->id_dtype));
  if (call->rows > 0 && call->cols > 0) {
    const int64_t cells = call->segments * call->cols; /* both below 2^31 */
    switch (call->reduction) {
    case JITOPS_SEGMENT_MEAN:
      plan_counts(props, call, plan, &cursor);
      break;
    case JITOPS_SEGMENT_MAX:
    case JITOPS_SEGMENT_MIN:
      if (call->sorted || cells >= SEG_BACKWARD_RUNS_MIN_CELLS)
        plan_runs(props, call, plan, &cursor);
      else
        plan_tie_table(props, call, plan, &cursor);
      break;
    default:
      break;
    }
  }
  return jitops__segment_scratch_total(call, &cursor, &plan->workspace_bytes);
}
