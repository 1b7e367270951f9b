/* Planning a fused linear cross-entropy call: algorithm, chunk sizes, steps and scratch
 * layout. */
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

static size_t align_up(size_t x) {
  return (x + SCRATCH_ALIGN - 1) & ~(SCRATCH_ALIGN - 1);
}

static int64_t round_up(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}

static int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
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

/* The per-row buffers, the bias accumulator and cuBLASLt's workspace; returns their size. */
static size_t layout_fixed(const jitops__flce_problem *p, jitops__flce_plan *plan) {
  size_t off = 0;
  plan->off_count = off;
  off += SCRATCH_ALIGN;
  plan->off_loss = off;
  off += align_up((size_t)p->bt * p->acc_elem);
  plan->off_lse = off;
  off += align_up((size_t)p->bt * p->acc_elem);
  plan->off_bias = off;
  if (p->grad_bias)
    off += align_up((size_t)p->v * p->acc_elem);
  plan->off_blas = off;
  plan->blas_bytes = JITOPS__FLCE_BLAS_WORKSPACE;
  off += plan->blas_bytes;
  plan->off_region = off;
  return off;
}

/* Rows per chunk, before the algorithm is chosen. */
static jitops_status choose_chunk(const char *fn, const jitops__flce_problem *p, size_t avail,
                                  size_t row_bytes, int64_t *chunk) {
  int64_t rows = p->bt > 0 ? p->bt : 1;
  int64_t fit = (int64_t)(avail / row_bytes); /* >= 1, checked by the caller */
  if (p->chunk_rows > 0) {
    *chunk = min64(p->chunk_rows, rows);
    if (*chunk > fit)
      return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                          "%s: options->chunk_rows %lld needs %zu bytes of logits, more than the "
                          "%zu that options->scratch_budget_bytes leaves",
                          fn, (long long)p->chunk_rows, (size_t)*chunk * row_bytes, avail);
    return JITOPS_SUCCESS;
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
 * of equal width (a multiple of LD_MULTIPLE columns). */
static void plan_groups(const jitops__flce_problem *p, size_t chunk_bytes, jitops__flce_plan *plan,
                        size_t *region) {
  int64_t rows = p->bt > 0 ? p->bt : 1;
  int64_t widest = (int64_t)(chunk_bytes / ((size_t)rows * p->elem)) / LD_MULTIPLE * LD_MULTIPLE;
  if (widest < LD_MULTIPLE)
    widest = LD_MULTIPLE;
  int64_t groups = ceil_div(p->v, widest);
  int64_t width = round_up(ceil_div(p->v, groups), LD_MULTIPLE);
  plan->group_cols = width < p->v ? width : p->v;
  plan->ld_group = round_up(plan->group_cols, LD_MULTIPLE);
  size_t group_bytes = (size_t)rows * (size_t)plan->ld_group * p->elem;
  *region = chunk_bytes > group_bytes ? chunk_bytes : group_bytes;
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
  plan->ld_logits = round_up(p->v, LD_MULTIPLE);
  size_t row_bytes = (size_t)plan->ld_logits * p->elem;
  size_t fixed = layout_fixed(p, plan);
  size_t budget = (size_t)p->budget;
  if (budget < fixed + row_bytes)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: options->scratch_budget_bytes %lld is below the %zu bytes this "
                        "problem needs at least",
                        fn, (long long)p->budget, fixed + row_bytes);
  size_t avail = budget - fixed;
  int64_t chunk;
  JITOPS__TRY(choose_chunk(fn, p, avail, row_bytes, &chunk));
  int64_t rows = p->bt > 0 ? p->bt : 1;
  size_t chunk_bytes = align_up((size_t)chunk * row_bytes);
  size_t region = chunk_bytes;
  plan->algorithm = JITOPS__FLCE_ROWS;
  if (p->grad_weight && p->grad_weight_16bit && chunk < rows) {
    size_t acc = align_up((size_t)p->v * (size_t)p->h * 4);
    if (chunk_bytes + acc <= avail) {
      /* The f32 accumulator fits: 3 GEMMs per chunk. Bigger chunks pass over the
       * accumulator fewer times, so an automatic chunk grows into the budget. */
      if (p->chunk_rows == 0) {
        int64_t grown = pow2_floor((int64_t)((avail - acc) / row_bytes));
        if (grown > chunk)
          chunk = min64(min64(grown, CHUNK_MAX_ROWS), rows - 1);
        chunk_bytes = align_up((size_t)chunk * row_bytes);
      }
      plan->grad_weight_acc = true;
      plan->off_gw_acc = plan->off_region + chunk_bytes;
      region = chunk_bytes + acc;
    } else {
      plan->algorithm = JITOPS__FLCE_VOCAB;
      plan_groups(p, chunk_bytes, plan, &region);
      if (region > avail)
        return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                            "%s: options->scratch_budget_bytes %lld is too small: grad_weight "
                            "needs %zu bytes for %lld rows of %lld vocabulary columns",
                            fn, (long long)p->budget, fixed + region, (long long)rows,
                            (long long)LD_MULTIPLE);
    }
  }
  plan->chunk_rows = chunk;
  plan->steps = steps_of(p, plan);
  plan->total_bytes = plan->off_region + align_up(region);
  plan->workspace_bytes = plan->total_bytes + SCRATCH_ALIGN;
  return JITOPS_SUCCESS;
}
