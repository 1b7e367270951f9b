#include "ops/ctc/plan.h"

#include <stdio.h>
#include <string.h>

/* Dynamic shared memory a gradient block may take without opting in. */
#define GRAD_SMEM_MAX (48 * 1024)

/* a · b · c into *out; false when it overflows. */
static bool mul3(size_t a, size_t b, size_t c, size_t *out) {
  size_t ab;
  return !__builtin_mul_overflow(a, b, &ab) && !__builtin_mul_overflow(ab, c, out);
}

/* ---- the recursion ------------------------------------------------------------------------- */

/* Threads of a block that spreads `states` over `k` per thread: whole warps. */
static int threads_for(int64_t states, int k) {
  return (int)(((states + k - 1) / k + 31) / 32 * 32);
}

/* A memory tier's block (jitops/ctc_abi.h): K·NT accumulators, then (K / 2)·NT int32 labels. */
static bool memory_block_bytes(int k, int nt, size_t acc, size_t *bytes) {
  size_t states, labels;
  return mul3((size_t)k, (size_t)nt, acc, &states) &&
         mul3((size_t)(k / 2), (size_t)nt, sizeof(int32_t), &labels) &&
         !__builtin_add_overflow(states, labels, bytes);
}

/* The memory tiers' static shared memory (jitops/ctc_abi.h), counted against the device's
 * limit along with the dynamic. */
static size_t memory_static_bytes(size_t acc) {
  return (2 * JITOPS__CTC_MEM_MAX_THREADS + 2) * (acc + sizeof(float)) +
         JITOPS__CTC_OFFSET_WARPS * sizeof(int64_t) + JITOPS__CTC_STATIC_SLACK;
}

/* The register tier's two row buffers for MODE_AB (JITOPS__CTC_STAGED). */
static bool staging_bytes(int k, int nt, size_t acc, size_t *bytes) {
  const size_t words = (size_t)k * (size_t)nt;
  return mul3(2, JITOPS__CTC_STAGED(words) + 1, acc, bytes);
}

static jitops_status plan_fail(const jitops__ctc_call *call, const char *what) {
  return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                      "%s: targets of length %lld need %s beyond 2^64 bytes", call->fn,
                      (long long)call->s_max, what);
}

/* The smallest bucket that holds `states`. */
static jitops_status capacity_for(const jitops__ctc_call *call, int64_t states, int64_t *cap) {
  *cap = JITOPS__CTC_MIN_CAP;
  while (*cap < states && *cap < JITOPS__CTC_MAX_CAP)
    *cap *= 2;
  if (*cap < states)
    return jitops__fail(JITOPS_ERR_UNSUPPORTED,
                        "%s: targets of length %lld need %lld states, more than 2^30", call->fn,
                        (long long)call->s_max, (long long)states);
  return JITOPS_SUCCESS;
}

/* Fails when options.storage forces a tier that cannot hold the bucket. */
static jitops_status check_forced_tier(const jitops__ctc_call *call, int64_t cap,
                                       size_t shared_need, size_t shared_limit) {
  const jitops_ctc_storage want = call->opt.storage;
  if (want == JITOPS_CTC_STORAGE_REGISTERS && cap > JITOPS__CTC_REG_MAX_CAP)
    return jitops__fail(JITOPS_ERR_UNSUPPORTED,
                        "%s: options.storage REGISTERS holds up to %d states; these targets need "
                        "a capacity of %lld",
                        call->fn, JITOPS__CTC_REG_MAX_CAP, (long long)cap);
  if (want == JITOPS_CTC_STORAGE_SHARED && shared_need > shared_limit)
    return jitops__fail(JITOPS_ERR_UNSUPPORTED,
                        "%s: options.storage SHARED needs %zu bytes of shared memory; the device "
                        "allows %zu",
                        call->fn, shared_need, shared_limit);
  return JITOPS_SUCCESS;
}

/* The tier: options.storage when forced, else registers up to REG_MAX_CAP, then shared memory
 * while it fits, then global memory. */
static int tier_for(jitops_ctc_storage want, int64_t cap, bool shared_fits) {
  if (want == JITOPS_CTC_STORAGE_REGISTERS ||
      (want == JITOPS_CTC_STORAGE_AUTO && cap <= JITOPS__CTC_REG_MAX_CAP))
    return JITOPS__CTC_STORE_REG;
  if (want == JITOPS_CTC_STORAGE_SHARED || (want == JITOPS_CTC_STORAGE_AUTO && shared_fits))
    return JITOPS__CTC_STORE_SHARED;
  return JITOPS__CTC_STORE_GLOBAL;
}

jitops_status jitops__ctc_plan_make(const jitops__ctc_call *call, const jitops__device_props *props,
                                    jitops__ctc_plan *plan) {
  const int64_t states = 2 * call->s_max + 1; /* s_max <= JITOPS__CTC_MAX_S (args.c) */
  memset(plan, 0, sizeof *plan);
  JITOPS__TRY(capacity_for(call, states, &plan->cap));
  const size_t acc = jitops__dtype_size(call->acc);
  const int mem_k = JITOPS__CTC_MEM_K(plan->cap), mem_nt = threads_for(states, mem_k);
  size_t mem_bytes, shared_need;
  if (!memory_block_bytes(mem_k, mem_nt, acc, &mem_bytes) ||
      __builtin_add_overflow(mem_bytes, memory_static_bytes(acc), &shared_need))
    return plan_fail(call, "shared memory");
  JITOPS__TRY(check_forced_tier(call, plan->cap, shared_need, props->smem_per_block_optin));
  plan->store = tier_for(call->opt.storage, plan->cap, shared_need <= props->smem_per_block_optin);
  if (plan->store == JITOPS__CTC_STORE_REG) {
    plan->k = JITOPS__CTC_REG_K(plan->cap);
    plan->nt = threads_for(states, plan->k);
    if (!staging_bytes(plan->k, plan->nt, acc, &plan->ab_staging_bytes))
      return plan_fail(call, "shared memory");
    return JITOPS_SUCCESS;
  }
  plan->k = mem_k;
  plan->nt = mem_nt;
  if (plan->store == JITOPS__CTC_STORE_SHARED)
    plan->shared_bytes = mem_bytes;
  else if (!jitops__ctc_align_up(mem_bytes, &plan->mem_block_bytes))
    return plan_fail(call, "a workspace");
  return JITOPS_SUCCESS;
}

size_t jitops__ctc_alpha_shared_bytes(const jitops__ctc_plan *plan, int mode) {
  if (plan->store == JITOPS__CTC_STORE_SHARED)
    return plan->shared_bytes;
  if (plan->store == JITOPS__CTC_STORE_REG && mode == JITOPS__CTC_MODE_AB)
    return plan->ab_staging_bytes;
  return 0;
}

/* ---- the workspace ------------------------------------------------------------------------- */

/* Appends a region of count × size bytes at the aligned end of *total, its start into *at;
 * false when the total overflows. */
static bool take(size_t *total, size_t count, size_t size, size_t *at) {
  size_t bytes, padded;
  *at = *total;
  return !__builtin_mul_overflow(count, size, &bytes) && jitops__ctc_align_up(bytes, &padded) &&
         !__builtin_add_overflow(*total, padded, total);
}

/* The backward pass's regions: nll, info, link, then alpha and beta, and with f32 accumulation
 * their frames (one f32 per recursion thread and row: half of alpha and beta's bytes with two
 * states a thread, less with more). f64 keeps no frames, and reserves none. */
static bool take_backward(const jitops__ctc_call *call, const jitops__ctc_plan *plan, size_t acc,
                          jitops__ctc_workspace *ws) {
  const size_t N = (size_t)call->N;
  size_t rows, row_bytes;
  ws->link_st = JITOPS__CTC_LINK_INTS * (call->s_max > 0 ? call->s_max : 1);
  ws->ab_st_t = 2 * call->s_max + 1;
  return take(&ws->total, N, acc, &ws->nll) &&
         take(&ws->total, N, JITOPS__CTC_INFO_INTS * sizeof(int32_t), &ws->info) &&
         take(&ws->total, N, (size_t)ws->link_st * sizeof(int32_t), &ws->link) &&
         !__builtin_mul_overflow(ws->ab_st_t, call->T, &ws->ab_st_n) &&
         !__builtin_mul_overflow(N, (size_t)call->T, &rows) &&
         !__builtin_mul_overflow((size_t)ws->ab_st_t, acc, &row_bytes) &&
         take(&ws->total, rows, row_bytes, &ws->alpha) &&
         take(&ws->total, rows, row_bytes, &ws->beta) &&
         take(&ws->total, acc == sizeof(float) ? 2 * rows : 0, (size_t)plan->nt * sizeof(float),
              &ws->frames);
}

jitops_status jitops__ctc_workspace_plan(const jitops__ctc_call *call, const jitops__ctc_plan *plan,
                                         jitops_ctc_pass pass, bool values,
                                         jitops__ctc_workspace *ws) {
  memset(ws, 0, sizeof *ws);
  const size_t acc = jitops__dtype_size(call->acc), N = (size_t)call->N;
  bool ok = take(&ws->total, call->stage.size, 1, &ws->stage);
  if (ok && values)
    ok = take(&ws->total, N, acc, &ws->values);
  if (ok && pass == JITOPS_CTC_PASS_BACKWARD)
    ok = take_backward(call, plan, acc, ws);
  /* The global tier: one block of states per (sample, direction). */
  if (ok && plan->store == JITOPS__CTC_STORE_GLOBAL)
    ok = take(&ws->total, 2 * N, plan->mem_block_bytes, &ws->mem);
  if (!ok)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: log_probs [%lld, %lld, %lld] with targets of up to %lld labels need a "
                        "workspace beyond 2^64 bytes",
                        call->fn, (long long)call->T, (long long)call->N, (long long)call->C,
                        (long long)call->s_max);
  return JITOPS_SUCCESS;
}

/* ---- the gradient's launch ----------------------------------------------------------------- */

jitops_status jitops__ctc_grad_plan(const jitops__ctc_call *call, const jitops__ctc_workspace *ws,
                                    jitops__ctc_grad_launch *launch) {
  memset(launch, 0, sizeof *launch);
  uint64_t blocks;
  const int64_t chunks = (call->T + JITOPS__CTC_GRAD_ROWS - 1) / JITOPS__CTC_GRAD_ROWS;
  if (__builtin_mul_overflow((uint64_t)chunks, (uint64_t)call->N, &blocks) || blocks > INT32_MAX)
    return jitops__fail(JITOPS_ERR_UNSUPPORTED, "%s: T * N is too large for one launch", call->fn);
  launch->chunks = (int32_t)chunks;
  launch->blocks = (uint32_t)blocks;
  /* link_st is 2 · the longest target and C an int32: no size below overflows a size_t. */
  const size_t link_bytes = (size_t)ws->link_st * sizeof(int32_t);
  const size_t table_bytes =
      JITOPS__CTC_GRAD_GAMMA_OFFSET(ws->link_st, call->C) +
      (size_t)JITOPS__CTC_GRAD_WARPS * (size_t)(ws->link_st / 2) * jitops__dtype_size(call->acc);
  launch->tables = table_bytes <= GRAD_SMEM_MAX;
  launch->link_smem = !launch->tables && link_bytes <= GRAD_SMEM_MAX;
  launch->shared_bytes = (uint32_t)(launch->tables      ? table_bytes
                                    : launch->link_smem ? link_bytes
                                                        : 0);
  return JITOPS_SUCCESS;
}

/* ---- name expressions ---------------------------------------------------------------------- */

jitops__ctc_alpha_kernel jitops__ctc_alpha_kernel_of(const jitops__ctc_call *call,
                                                     const jitops__ctc_plan *plan, int mode,
                                                     jitops__dtype out) {
  jitops__ctc_alpha_kernel k;
  k.f = call->f;
  k.ti = call->ti;
  k.li = call->host_lengths ? JITOPS__DTYPE_I64 : call->li; /* staged as int64 */
  k.offs = !call->concat        ? JITOPS__CTC_OFFS_PADDED
           : call->host_lengths ? JITOPS__CTC_OFFS_HOST
                                : JITOPS__CTC_OFFS_DEVICE;
  k.cap = plan->store == JITOPS__CTC_STORE_REG && plan->cap < JITOPS__CTC_REG_MIN_KERNEL_CAP
              ? JITOPS__CTC_REG_MIN_KERNEL_CAP
              : plan->cap;
  k.store = plan->store;
  k.mode = mode;
  k.out = out;
  return k;
}

void jitops__ctc_alpha_name(const jitops__ctc_alpha_kernel *k, char *buf, size_t size) {
  snprintf(buf, size, "jitops::ctc::alpha_kernel<%s, %s, %s, %d, %lld, %d, %d, %s>",
           jitops__dtype_cname(k->f), jitops__dtype_cname(k->ti), jitops__dtype_cname(k->li),
           k->offs, (long long)k->cap, k->store, k->mode, jitops__dtype_cname(k->out));
}

void jitops__ctc_grad_name(jitops__dtype f, jitops__dtype grad_loss, bool torch, bool tables,
                           char *buf, size_t size) {
  snprintf(buf, size, "jitops::ctc::grad_kernel<%s, %s, %s, %s>", jitops__dtype_cname(f),
           jitops__dtype_cname(grad_loss), torch ? "true" : "false", tables ? "true" : "false");
}

void jitops__ctc_reduce_name(jitops__dtype acc, jitops__dtype out, char *buf, size_t size) {
  snprintf(buf, size, "jitops::ctc::reduce_kernel<%s, %s>", jitops__dtype_cname(acc),
           jitops__dtype_cname(out));
}
