/* Planning a fused linear cross-entropy call: algorithm, chunk sizes, steps and scratch
 * layout. Every size here comes from the caller's tensors and options, so every product and
 * sum is checked: a scratch size that wrapped around would pass the budget it is held to. */
#include "ops/flce/plan.h"

#include <string.h>

#include "ops/flce/flce_abi.h"

/* Every scratch buffer starts on a 256-byte boundary: the GEMMs' preferred alignment, and a
 * vector access of the row kernel. */
#define SCRATCH_ALIGN JITOPS__FLCE_SCRATCH_ALIGN
_Static_assert(SCRATCH_ALIGN % JITOPS__FLCE_VECTOR_BYTES == 0, "scratch buffers start on a vector");

/* Logits buffers' row strides and vocabulary groups' widths: whole multiples of this. */
#define LD_MULTIPLE ((int64_t)JITOPS__FLCE_LOGITS_LD_MULTIPLE)

/* Automatic chunks aim at this many bytes of logits: big enough that the GEMMs run at full
 * speed (1024 rows of a 128K vocabulary, 4096 of a 32K one), small enough to be scratch. */
#define CHUNK_TARGET_BYTES ((size_t)256 << 20)
#define CHUNK_MAX_ROWS     ((int64_t)4096)

/* ---- the automatic budget ------------------------------------------------------------------ */

/* A sixteenth of the device: 5 GiB on an 80 GB H100, which holds Llama-3's head (BT 8192,
 * V 128256, bf16) as one chunk of logits, the fastest plan (3 GEMMs, no accumulator), where
 * the 1 GiB floor forces the vocabulary algorithm (4 GEMMs) and runs 1.2-1.3x slower. A
 * fraction of the total, not of what is free, so that the plan, and with it every bit of the
 * result, is the same on every run on the same kind of GPU; half the free memory bounds it
 * only when memory is short, where running at all matters more. */
#define AUTO_BUDGET_SHARE 16

int64_t jitops__flce_auto_budget(size_t free_bytes, size_t total_bytes) {
  const size_t least = (size_t)JITOPS_FLCE_DEFAULT_SCRATCH_BUDGET;
  const size_t most = (size_t)JITOPS_FLCE_MAX_AUTO_SCRATCH_BUDGET;
  size_t budget = total_bytes / AUTO_BUDGET_SHARE;
  if (free_bytes / 2 < budget)
    budget = free_bytes / 2;
  if (budget > most)
    budget = most;
  return (int64_t)(budget < least ? least : budget);
}

/* ---- arithmetic ------------------------------------------------------------------------------ */

/* x rounded up to a whole SCRATCH_ALIGN; false when that overflows. */
static bool align_up(size_t x, size_t *out) {
  if (!jitops__add_size(x, SCRATCH_ALIGN - 1, out))
    return false;
  *out &= ~(SCRATCH_ALIGN - 1);
  return true;
}

/* The aligned bytes of n elements of `elem` bytes; false when they overflow. */
static bool buffer_bytes(size_t n, size_t elem, size_t *out) {
  size_t bytes;
  return jitops__mul_size(n, elem, &bytes) && align_up(bytes, out);
}

/* x >= 0 rounded up to a multiple of m > 0; false when that overflows. */
static bool round_up(int64_t x, int64_t m, int64_t *out) {
  if (!jitops__add_i64(x, m - 1, out))
    return false;
  *out = *out / m * m;
  return true;
}

/* a / b rounded up, for a >= 0 and b > 0 (no a + b - 1 to overflow). */
static int64_t ceil_div(int64_t a, int64_t b) {
  return a / b + (a % b != 0);
}

static int64_t pow2_floor(int64_t x) {
  int64_t p = 1;
  while (p <= x / 2)
    p *= 2;
  return p;
}

static int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

/* A problem whose scratch sizes overflow size_t: far beyond any budget, but said as such. */
static jitops_status too_large(const char *fn, const jitops__flce_problem *p) {
  return jitops__fail(JITOPS_ERR_OUT_OF_RANGE,
                      "%s: input's BT = %lld rows and weight's V = %lld rows of H = %lld need "
                      "more scratch bytes than size_t counts",
                      fn, (long long)p->bt, (long long)p->v, (long long)p->h);
}

/* ---- the layout ------------------------------------------------------------------------------ */

/* The per-row buffers, the bias accumulator and cuBLASLt's workspace, their total into
 * *fixed; false when it overflows. */
static bool layout_fixed(const jitops__flce_problem *p, jitops__flce_plan *plan, size_t *fixed) {
  size_t rows_bytes, bias_bytes = 0;
  if (!buffer_bytes((size_t)p->bt, p->acc_elem, &rows_bytes) ||
      (p->grad_bias && !buffer_bytes((size_t)p->v, p->acc_elem, &bias_bytes)))
    return false;
  plan->off_count = 0;
  plan->off_loss = SCRATCH_ALIGN; /* the count takes one aligned slot */
  plan->blas_bytes = JITOPS__FLCE_BLAS_WORKSPACE;
  if (!jitops__add_size(plan->off_loss, rows_bytes, &plan->off_lse) ||
      !jitops__add_size(plan->off_lse, rows_bytes, &plan->off_bias) ||
      !jitops__add_size(plan->off_bias, bias_bytes, &plan->off_blas) ||
      !jitops__add_size(plan->off_blas, plan->blas_bytes, &plan->off_region))
    return false;
  *fixed = plan->off_region;
  return true;
}

/* Rows per chunk, before the algorithm is chosen. */
static jitops_status choose_chunk(const char *fn, const jitops__flce_problem *p, size_t avail,
                                  size_t row_bytes, int64_t *chunk) {
  int64_t rows = p->bt > 0 ? p->bt : 1;
  int64_t fit = (int64_t)(avail / row_bytes); /* >= 1, checked by the caller */
  if (p->chunk_rows > 0) {
    *chunk = min64(p->chunk_rows, rows);
    size_t need;
    if (*chunk <= fit)
      return JITOPS_SUCCESS;
    if (!jitops__mul_size((size_t)*chunk, row_bytes, &need))
      return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                          "%s: options->chunk_rows %lld needs more bytes of logits than size_t "
                          "counts, more than the %zu that options->scratch_budget_bytes leaves",
                          fn, (long long)p->chunk_rows, avail);
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: options->chunk_rows %lld needs %zu bytes of logits, more than the "
                        "%zu that options->scratch_budget_bytes leaves",
                        fn, (long long)p->chunk_rows, need, avail);
  }
  if (rows <= fit) { /* one chunk: the whole batch */
    *chunk = rows;
    return JITOPS_SUCCESS;
  }
  size_t target = avail < CHUNK_TARGET_BYTES ? avail : CHUNK_TARGET_BYTES;
  int64_t c = (int64_t)(target / row_bytes);
  c = c < 1 ? 1 : pow2_floor(c);
  *chunk = min64(min64(c, CHUNK_MAX_ROWS), rows);
  return JITOPS_SUCCESS;
}

/* The vocab algorithm's second pass: groups as wide as the chunk buffer allows for all rows,
 * of equal width (a multiple of LD_MULTIPLE columns). The region the pass needs into
 * *region; false when it overflows (then no budget holds it). */
static bool plan_groups(const jitops__flce_problem *p, size_t chunk_bytes, jitops__flce_plan *plan,
                        size_t *region) {
  int64_t rows = p->bt > 0 ? p->bt : 1;
  size_t row_elems_bytes, group_bytes;
  if (!jitops__mul_size((size_t)rows, p->elem, &row_elems_bytes))
    return false;
  int64_t widest = (int64_t)(chunk_bytes / row_elems_bytes) / LD_MULTIPLE * LD_MULTIPLE;
  if (widest < LD_MULTIPLE)
    widest = LD_MULTIPLE;
  int64_t groups = ceil_div(p->v, widest), width;
  if (!round_up(ceil_div(p->v, groups), LD_MULTIPLE, &width))
    return false;
  plan->group_cols = width < p->v ? width : p->v;
  if (!round_up(plan->group_cols, LD_MULTIPLE, &plan->ld_group) ||
      !jitops__mul_size(row_elems_bytes, (size_t)plan->ld_group, &group_bytes))
    return false;
  *region = chunk_bytes > group_bytes ? chunk_bytes : group_bytes;
  return true;
}

/* The rows algorithm with several chunks and a 16-bit grad_weight: an f32 V x H accumulator
 * beside the chunk, when the budget holds both. Bigger chunks pass over the accumulator fewer
 * times, so an automatic chunk grows into the budget. */
static bool plan_accumulator(const jitops__flce_problem *p, size_t avail, size_t row_bytes,
                             int64_t *chunk, size_t *chunk_bytes, jitops__flce_plan *plan,
                             size_t *region) {
  size_t elems, acc, need;
  if (!jitops__mul_size((size_t)p->v, (size_t)p->h, &elems) ||
      !buffer_bytes(elems, sizeof(float), &acc) || !jitops__add_size(*chunk_bytes, acc, &need) ||
      need > avail)
    return false;
  if (p->chunk_rows == 0) {
    int64_t rows = p->bt > 0 ? p->bt : 1;
    int64_t grown = pow2_floor((int64_t)((avail - acc) / row_bytes));
    if (grown > *chunk)
      *chunk = min64(min64(grown, CHUNK_MAX_ROWS), rows - 1);
    /* *chunk * row_bytes <= avail - acc: neither overflows. */
    if (!align_up((size_t)*chunk * row_bytes, chunk_bytes))
      return false;
  }
  plan->grad_weight_acc = true;
  plan->off_gw_acc = plan->off_region + *chunk_bytes;
  *region = *chunk_bytes + acc;
  return true;
}

/* Which passes and kernels run, once the algorithm is known. */
static jitops__flce_steps steps_of(const jitops__flce_problem *p, const jitops__flce_plan *plan) {
  jitops__flce_steps s;
  s.pass2 = p->grad_weight && plan->algorithm == JITOPS__FLCE_VOCAB;
  s.pass1_grads = p->grad_input || (p->grad_weight && !s.pass2) || (p->grad_bias && !s.pass2);
  s.colsum_pass1 = p->grad_bias && s.pass1_grads;
  s.colsum_pass2 = p->grad_bias && !s.pass1_grads;
  return s;
}

jitops_status jitops__flce_plan_make(const char *fn, const jitops__flce_problem *p,
                                     jitops__flce_plan *plan) {
  memset(plan, 0, sizeof *plan);
  size_t row_bytes, fixed, least;
  if (!round_up(p->v, LD_MULTIPLE, &plan->ld_logits) ||
      !jitops__mul_size((size_t)plan->ld_logits, p->elem, &row_bytes) ||
      !layout_fixed(p, plan, &fixed) || !jitops__add_size(fixed, row_bytes, &least))
    return too_large(fn, p);
  size_t budget = (size_t)p->budget;
  if (budget < least)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: options->scratch_budget_bytes %lld is below the %zu bytes this "
                        "problem needs at least",
                        fn, (long long)p->budget, least);
  size_t avail = budget - fixed;
  int64_t chunk;
  JITOPS__TRY(choose_chunk(fn, p, avail, row_bytes, &chunk));
  int64_t rows = p->bt > 0 ? p->bt : 1;
  size_t chunk_bytes, need;
  if (!align_up((size_t)chunk * row_bytes, &chunk_bytes)) /* chunk * row_bytes <= avail */
    return too_large(fn, p);
  size_t region = chunk_bytes;
  plan->algorithm = JITOPS__FLCE_ROWS;
  if (p->grad_weight && p->grad_weight_16bit && chunk < rows &&
      !plan_accumulator(p, avail, row_bytes, &chunk, &chunk_bytes, plan, &region)) {
    plan->algorithm = JITOPS__FLCE_VOCAB;
    if (!plan_groups(p, chunk_bytes, plan, &region) || !jitops__add_size(fixed, region, &need))
      return too_large(fn, p);
    if (region > avail)
      return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                          "%s: options->scratch_budget_bytes %lld is too small: grad_weight "
                          "needs %zu bytes for %lld rows of %lld vocabulary columns",
                          fn, (long long)p->budget, need, (long long)rows, (long long)LD_MULTIPLE);
  }
  plan->chunk_rows = chunk;
  plan->steps = steps_of(p, plan);
  size_t region_bytes;
  if (!align_up(region, &region_bytes) ||
      !jitops__add_size(plan->off_region, region_bytes, &plan->total_bytes) ||
      !jitops__add_size(plan->total_bytes, SCRATCH_ALIGN, &plan->workspace_bytes))
    return too_large(fn, p);
  return JITOPS_SUCCESS;
}
