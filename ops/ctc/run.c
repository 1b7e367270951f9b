/* The CTC entry points, straight through: validate the inputs (args.c), plan the recursion
 * (plan.c), validate the outputs, lay out the workspace, get the kernels from
 * "jitops/ctc.cuh" (before any scratch is taken or data moved), take the scratch and upload
 * the staged host data, fill the kernels' argument structs (jitops/ctc_abi.h), launch,
 * release:
 *   jitops_ctc_loss           alpha_kernel (MODE_LOSS, or MODE_VALUES + reduce_kernel)
 *   jitops_ctc_loss_backward  alpha_kernel (MODE_AB: alpha, beta, label grouping) + grad_kernel
 *                             (+ reduce_kernel when the loss is requested)
 *   jitops_ctc_alpha_beta     alpha_kernel (MODE_AB into the caller's tensors) */
#include <string.h>

#include "jitops/ctc.h"
#include "ops/ctc/args.h"
#include "ops/ctc/ctc_abi.h"
#include "ops/ctc/plan.h"
#include "runtime/op_support.h"

/* ---- kernels ------------------------------------------------------------------------------- */

/* A pass's kernels are added to one batch and got together (runtime/kernel_batch.h), so that
 * a cold call compiles its alpha, gradient and reduction kernels in parallel. In f32 (and
 * f16/bf16, which accumulate in it) they may be quick builds: every product that feeds a sum is
 * an explicit fma and the logs and exponentials are the SFU's (ctc_common.cuh); f64 calls the
 * math library's exp and log1p, whose code the optimizer contracts, so it is built in full. */

static jitops_status add_kernel(jitops__kernel_batch *b, const jitops__ctc_call *call,
                                const char *name, jitops_kernel_t **k) {
  const unsigned flags = call->acc == JITOPS__DTYPE_F64 ? 0 : JITOPS__KERNEL_QUICK;
  return jitops__kernel_batch_add_flagged(b, JITOPS__CTC_SOURCE, name, k, flags);
}

static jitops_status add_alpha(jitops__kernel_batch *b, const jitops__ctc_call *call,
                               const jitops__ctc_plan *plan, int mode, jitops__dtype out,
                               jitops_kernel_t **k) {
  char name[256];
  const jitops__ctc_alpha_kernel spec = jitops__ctc_alpha_kernel_of(call, plan, mode, out);
  jitops__ctc_alpha_name(&spec, name, sizeof name);
  return add_kernel(b, call, name, k);
}

static jitops_status add_grad(jitops__kernel_batch *b, const jitops__ctc_call *call,
                              const jitops__ctc_grad_launch *geometry, const DLTensor *grad_loss,
                              jitops_kernel_t **k) {
  char name[128];
  jitops__ctc_grad_name(call->f, jitops__dtype_of(grad_loss->dtype),
                        call->opt.gradient == JITOPS_CTC_GRADIENT_PYTORCH, geometry->tables, name,
                        sizeof name);
  return add_kernel(b, call, name, k);
}

static jitops_status add_reduce(jitops__kernel_batch *b, const jitops__ctc_call *call,
                                const DLTensor *out, jitops_kernel_t **k) {
  char name[128];
  jitops__ctc_reduce_name(call->acc, jitops__dtype_of(out->dtype), name, sizeof name);
  return add_kernel(b, call, name, k);
}

/* ---- scratch ------------------------------------------------------------------------------- */

/* Takes the scratch and uploads the staged host lengths and targets into it. */
static jitops_status acquire(const jitops__ctc_call *call, jitops_runtime_t *rt,
                             const jitops__ctc_workspace *ws, const jitops_workspace *workspace,
                             void *stream, jitops__scratch *s) {
  memset(s, 0, sizeof *s);
  if (ws->total == 0)
    return JITOPS_SUCCESS;
  JITOPS__TRY(jitops__scratch_acquire(rt, stream, workspace, ws->total, s));
  if (call->stage.size == 0)
    return JITOPS_SUCCESS;
  const jitops_status st = jitops__memcpy_async(rt, (char *)s->ptr + ws->stage, call->stage.bytes,
                                                call->stage.size, stream);
  if (st != JITOPS_SUCCESS)
    jitops__scratch_release(rt, stream, s);
  return st;
}

/* Stride 0 of a loss-like tensor: its own for [N] (or [1]), 1 for a scalar. */
static int64_t vector_stride(const DLTensor *t) {
  int64_t st[1] = {1};
  if (t->ndim == 1)
    jitops__tensor_strides(t, st);
  return st[0];
}

/* ---- alpha_kernel -------------------------------------------------------------------------- */

/* The arguments every mode shares: the inputs (the staged ones in the scratch) and the
 * global tier's states. */
static jitops__ctc_alpha_args alpha_args_for(const jitops__ctc_call *call,
                                             const jitops__ctc_plan *plan, char *scratch,
                                             const jitops__ctc_workspace *ws) {
  jitops__ctc_alpha_args a;
  memset(&a, 0, sizeof a);
  a.lp = call->lp;
  a.lp_st_t = call->lp_st[0];
  a.lp_st_n = call->lp_st[1];
  a.lp_st_c = call->lp_st[2];
  a.tgt = call->host_targets ? scratch + ws->stage + call->stage.targets_at : call->tgt;
  a.tgt_st_n = call->tgt_st[0];
  a.tgt_st_s = call->tgt_st[1];
  a.tgt_numel = call->tgt_numel;
  if (call->host_lengths) {
    const int64_t *lengths = (const int64_t *)(scratch + ws->stage);
    a.in_len = lengths;
    a.tgt_len = lengths + call->N;
    a.offsets = lengths + 2 * call->N;
    a.in_len_st = 1;
    a.tgt_len_st = 1;
  } else {
    a.in_len = call->il;
    a.tgt_len = call->tl;
    a.in_len_st = call->il_st;
    a.tgt_len_st = call->tl_st;
  }
  a.mem = plan->store == JITOPS__CTC_STORE_GLOBAL ? scratch + ws->mem : NULL;
  a.mem_block_bytes = (int64_t)plan->mem_block_bytes;
  a.T = (int32_t)call->T;
  a.N = (int32_t)call->N;
  a.C = (int32_t)call->C;
  a.blank = (int32_t)call->opt.blank;
  a.s_max = (int32_t)call->s_max;
  a.reduction = (int32_t)call->opt.reduction;
  a.zero_infinity = call->opt.zero_infinity != 0;
  return a;
}

/* The backward pass's alpha, beta, nll and label grouping, in the scratch. */
static void alpha_args_backward(jitops__ctc_alpha_args *a, char *scratch,
                                const jitops__ctc_workspace *ws) {
  a->alpha = scratch + ws->alpha;
  a->beta = scratch + ws->beta;
  a->ab_st_n = ws->ab_st_n;
  a->ab_st_t = ws->ab_st_t;
  a->ab_st_s = 1;
  a->ab_len = (int32_t)ws->ab_st_t;
  a->nll = scratch + ws->nll;
  a->nll_st = 1;
  a->info = (int32_t *)(scratch + ws->info);
  a->link = (int32_t *)(scratch + ws->link);
  a->link_st = ws->link_st;
  a->frames = (float *)(scratch + ws->frames);
  a->fill = 0;
}

/* The caller's log_alpha, log_beta and nll. */
static void alpha_args_public(jitops__ctc_alpha_args *a, DLTensor *la, DLTensor *lb,
                              DLTensor *nll) {
  int64_t st[3];
  jitops__tensor_strides(la, st);
  a->alpha = jitops__tensor_ptr(la);
  a->beta = jitops__tensor_ptr(lb); /* with log_alpha's strides (args.c) */
  a->ab_st_n = st[0];
  a->ab_st_t = st[1];
  a->ab_st_s = st[2];
  a->ab_len = (int32_t)la->shape[2];
  a->nll = jitops__tensor_ptr(nll);
  a->nll_st = vector_stride(nll);
  a->fill = 1;
}

/* Grid: N samples × `dirs` (alpha; beta; the label grouping). */
static jitops_status launch_alpha(const jitops__ctc_call *call, const jitops__ctc_plan *plan,
                                  const jitops_kernel_t *k, int mode, int dirs,
                                  jitops__ctc_alpha_args *a, void *stream) {
  if (call->N == 0)
    return JITOPS_SUCCESS;
  void *args[] = {a};
  return jitops__launch(k, (uint32_t)call->N, (uint32_t)dirs, 1, (uint32_t)plan->nt, 1, 1,
                        (uint32_t)jitops__ctc_alpha_shared_bytes(plan, mode), stream, args);
}

/* ---- grad_kernel and reduce_kernel --------------------------------------------------------- */

static jitops_status launch_grad(const jitops__ctc_call *call, const jitops__ctc_plan *plan,
                                 const jitops_kernel_t *k, const jitops__ctc_grad_launch *geometry,
                                 char *scratch, const jitops__ctc_workspace *ws,
                                 const DLTensor *grad_loss, DLTensor *grad, void *stream) {
  if (call->T == 0 || call->N == 0)
    return JITOPS_SUCCESS;
  jitops__ctc_grad_args a;
  memset(&a, 0, sizeof a);
  int64_t gst[3];
  jitops__tensor_strides(grad, gst);
  a.lp = call->lp;
  a.lp_st_t = call->lp_st[0];
  a.lp_st_n = call->lp_st[1];
  a.lp_st_c = call->lp_st[2];
  a.grad = jitops__tensor_ptr(grad);
  a.g_st_t = gst[0];
  a.g_st_n = gst[1];
  a.g_st_c = gst[2];
  a.alpha = scratch + ws->alpha;
  a.beta = scratch + ws->beta;
  a.ab_st_n = ws->ab_st_n;
  a.ab_st_t = ws->ab_st_t;
  a.nll = scratch + ws->nll;
  a.info = (const int32_t *)(scratch + ws->info);
  a.link = (const int32_t *)(scratch + ws->link);
  a.link_st = ws->link_st;
  a.frames = (const float *)(scratch + ws->frames);
  a.frame_nt = plan->nt;
  a.frame_shift = __builtin_ctz((unsigned)plan->k); /* K is a power of two */
  a.grad_loss = jitops__tensor_ptr(grad_loss);
  a.grad_loss_st = vector_stride(grad_loss);
  a.T = (int32_t)call->T;
  a.N = (int32_t)call->N;
  a.C = (int32_t)call->C;
  a.blank = (int32_t)call->opt.blank;
  a.reduction = (int32_t)call->opt.reduction;
  a.zero_infinity = call->opt.zero_infinity != 0;
  a.chunks = geometry->chunks;
  a.link_smem = geometry->link_smem;
  void *args[] = {&a};
  return jitops__launch(k, geometry->blocks, 1, 1, JITOPS__CTC_GRAD_THREADS, 1, 1,
                        geometry->shared_bytes, stream, args);
}

static jitops_status launch_reduce(const jitops__ctc_call *call, const jitops_kernel_t *k,
                                   const void *values, const DLTensor *out, void *stream) {
  jitops__ctc_reduce_args r;
  memset(&r, 0, sizeof r);
  r.values = values;
  r.out = jitops__tensor_ptr(out);
  r.out_st = vector_stride(out);
  r.N = (int32_t)call->N;
  r.reduction = (int32_t)call->opt.reduction;
  void *args[] = {&r};
  return jitops__launch(k, 1, 1, 1, JITOPS__CTC_REDUCE_THREADS, 1, 1, 0, stream, args);
}

/* ---- the passes ---------------------------------------------------------------------------- */

static jitops_status loss_run(const jitops__ctc_call *call, const jitops__ctc_plan *plan,
                              jitops_runtime_t *rt, DLTensor *loss,
                              const jitops_workspace *workspace, void *stream) {
  const bool none = call->opt.reduction == JITOPS_CTC_REDUCTION_NONE;
  const int mode = none ? JITOPS__CTC_MODE_LOSS : JITOPS__CTC_MODE_VALUES;
  jitops__ctc_workspace ws;
  JITOPS__TRY(jitops__ctc_workspace_plan(call, plan, JITOPS_CTC_PASS_LOSS, !none, &ws));
  jitops_kernel_t *ka, *kr = NULL;
  jitops__kernel_batch b;
  jitops__kernel_batch_init(&b);
  jitops__kernel_batch_for_launch(&b, stream);
  JITOPS__TRY(
      add_alpha(&b, call, plan, mode, none ? jitops__dtype_of(loss->dtype) : call->acc, &ka));
  if (!none)
    JITOPS__TRY(add_reduce(&b, call, loss, &kr));
  JITOPS__TRY(jitops__kernel_batch_get(rt, &b));
  jitops__scratch s;
  JITOPS__TRY(acquire(call, rt, &ws, workspace, stream, &s));
  char *scratch = (char *)s.ptr;
  jitops__ctc_alpha_args a = alpha_args_for(call, plan, scratch, &ws);
  if (none) {
    a.loss = jitops__tensor_ptr(loss);
    a.loss_st = vector_stride(loss);
  } else {
    a.values = scratch + ws.values;
  }
  jitops_status st = launch_alpha(call, plan, ka, mode, 1, &a, stream);
  if (st == JITOPS_SUCCESS && !none)
    st = launch_reduce(call, kr, scratch + ws.values, loss, stream);
  jitops__scratch_release(rt, stream, &s);
  return st;
}

static jitops_status backward_run(const jitops__ctc_call *call, const jitops__ctc_plan *plan,
                                  jitops_runtime_t *rt, const DLTensor *grad_loss, DLTensor *grad,
                                  DLTensor *loss, const jitops_workspace *workspace, void *stream) {
  jitops__ctc_workspace ws;
  jitops__ctc_grad_launch geometry;
  JITOPS__TRY(jitops__ctc_workspace_plan(call, plan, JITOPS_CTC_PASS_BACKWARD, loss != NULL, &ws));
  JITOPS__TRY(jitops__ctc_grad_plan(call, &ws, &geometry));
  jitops_kernel_t *ka, *kg, *kr = NULL;
  jitops__kernel_batch b;
  jitops__kernel_batch_init(&b);
  jitops__kernel_batch_for_launch(&b, stream);
  JITOPS__TRY(add_alpha(&b, call, plan, JITOPS__CTC_MODE_AB, call->acc, &ka));
  JITOPS__TRY(add_grad(&b, call, &geometry, grad_loss, &kg));
  if (loss != NULL)
    JITOPS__TRY(add_reduce(&b, call, loss, &kr));
  JITOPS__TRY(jitops__kernel_batch_get(rt, &b));
  jitops__scratch s;
  JITOPS__TRY(acquire(call, rt, &ws, workspace, stream, &s));
  char *scratch = (char *)s.ptr;
  jitops__ctc_alpha_args a = alpha_args_for(call, plan, scratch, &ws);
  a.values = loss ? scratch + ws.values : NULL;
  alpha_args_backward(&a, scratch, &ws);
  jitops_status st = launch_alpha(call, plan, ka, JITOPS__CTC_MODE_AB, 3, &a, stream);
  if (st == JITOPS_SUCCESS)
    st = launch_grad(call, plan, kg, &geometry, scratch, &ws, grad_loss, grad, stream);
  if (st == JITOPS_SUCCESS && loss != NULL)
    st = launch_reduce(call, kr, scratch + ws.values, loss, stream);
  jitops__scratch_release(rt, stream, &s);
  return st;
}

static jitops_status alpha_beta_run(const jitops__ctc_call *call, const jitops__ctc_plan *plan,
                                    jitops_runtime_t *rt, DLTensor *la, DLTensor *lb, DLTensor *nll,
                                    const jitops_workspace *workspace, void *stream) {
  jitops__ctc_workspace ws;
  JITOPS__TRY(jitops__ctc_workspace_plan(call, plan, JITOPS_CTC_PASS_ALPHA_BETA, false, &ws));
  jitops_kernel_t *ka;
  jitops__kernel_batch b;
  jitops__kernel_batch_init(&b);
  jitops__kernel_batch_for_launch(&b, stream);
  JITOPS__TRY(add_alpha(&b, call, plan, JITOPS__CTC_MODE_AB, call->acc, &ka));
  JITOPS__TRY(jitops__kernel_batch_get(rt, &b));
  jitops__scratch s;
  JITOPS__TRY(acquire(call, rt, &ws, workspace, stream, &s));
  jitops__ctc_alpha_args a = alpha_args_for(call, plan, (char *)s.ptr, &ws);
  alpha_args_public(&a, la, lb, nll);
  const jitops_status st = launch_alpha(call, plan, ka, JITOPS__CTC_MODE_AB, 2, &a, stream);
  jitops__scratch_release(rt, stream, &s);
  return st;
}

/* ---- one entry point ----------------------------------------------------------------------- */

/* The caller's outputs (and upstream gradient) of one pass; those it does not take are NULL. */
typedef struct outputs {
  DLTensor *loss;                       /* LOSS; BACKWARD, optional */
  const DLTensor *grad_loss;            /* BACKWARD */
  DLTensor *grad_log_probs;             /* BACKWARD */
  DLTensor *log_alpha, *log_beta, *nll; /* ALPHA_BETA */
} outputs;

/* Validates the inputs and plans the recursion: what every entry point does first. */
static jitops_status prepare(const char *fn, jitops_runtime_t *rt, const jitops__ctc_inputs *in,
                             jitops__ctc_call *call, jitops__ctc_plan *plan) {
  JITOPS__TRY(jitops__ctc_check_inputs(fn, rt, in, call));
  return jitops__ctc_plan_make(call, jitops__runtime_props(rt), plan);
}

static jitops_status check_outputs(const jitops__ctc_call *call, const jitops_runtime_t *rt,
                                   jitops_ctc_pass pass, const jitops__ctc_inputs *in,
                                   const outputs *out) {
  switch (pass) {
  case JITOPS_CTC_PASS_LOSS:
    return jitops__ctc_check_loss(call, rt, "loss", out->loss, true);
  case JITOPS_CTC_PASS_BACKWARD:
    JITOPS__TRY(jitops__ctc_check_loss(call, rt, "grad_loss", out->grad_loss, false));
    JITOPS__TRY(jitops__ctc_check_grad(call, rt, in->log_probs, out->grad_log_probs));
    return out->loss ? jitops__ctc_check_loss(call, rt, "loss", out->loss, true) : JITOPS_SUCCESS;
  default:
    return jitops__ctc_check_alpha_beta(call, rt, out->log_alpha, out->log_beta, out->nll);
  }
}

static jitops_status run_pass(const jitops__ctc_call *call, const jitops__ctc_plan *plan,
                              jitops_runtime_t *rt, jitops_ctc_pass pass, const outputs *out,
                              const jitops_workspace *workspace, void *stream) {
  switch (pass) {
  case JITOPS_CTC_PASS_LOSS:
    return loss_run(call, plan, rt, out->loss, workspace, stream);
  case JITOPS_CTC_PASS_BACKWARD:
    return backward_run(call, plan, rt, out->grad_loss, out->grad_log_probs, out->loss, workspace,
                        stream);
  default:
    return alpha_beta_run(call, plan, rt, out->log_alpha, out->log_beta, out->nll, workspace,
                          stream);
  }
}

/* An entry point of `pass`, straight through: the inputs and the plan, the outputs, the
 * pass. */
static jitops_status run_entry(const char *fn, jitops_runtime_t *rt, jitops_ctc_pass pass,
                               const jitops__ctc_inputs *in, const outputs *out,
                               const jitops_workspace *workspace, void *stream) {
  jitops__ctc_call call;
  jitops__ctc_plan plan;
  jitops_status st = prepare(fn, rt, in, &call, &plan);
  if (st == JITOPS_SUCCESS)
    st = check_outputs(&call, rt, pass, in, out);
  if (st == JITOPS_SUCCESS)
    st = run_pass(&call, &plan, rt, pass, out, workspace, stream);
  jitops__ctc_call_release(&call);
  return st;
}

/* ---- the public entry points ------------------------------------------------------------- */

jitops_status jitops_ctc_workspace_size(jitops_runtime_t *runtime, const DLTensor *log_probs,
                                        const DLTensor *targets, const DLTensor *input_lengths,
                                        const DLTensor *target_lengths,
                                        const jitops_ctc_options *options, jitops_ctc_pass pass,
                                        size_t *bytes) {
  static const char fn[] = "jitops_ctc_workspace_size";
  JITOPS__REQUIRE_NONNULL(fn, bytes);
  if (pass < JITOPS_CTC_PASS_LOSS || pass > JITOPS_CTC_PASS_ALPHA_BETA)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: pass %d is not a jitops_ctc_pass", fn,
                        (int)pass);
  const jitops__ctc_inputs in = {log_probs, targets, input_lengths, target_lengths, options};
  jitops__ctc_call call;
  jitops__ctc_plan plan;
  jitops__ctc_workspace ws;
  /* The loss pass of a sum or mean, and the backward pass when it also gives the loss, keep
   * each sample's term: count them whatever the reduction. */
  const bool values = pass != JITOPS_CTC_PASS_ALPHA_BETA;
  jitops_status st = prepare(fn, runtime, &in, &call, &plan);
  if (st == JITOPS_SUCCESS)
    st = jitops__ctc_workspace_plan(&call, &plan, pass, values, &ws);
  if (st == JITOPS_SUCCESS)
    *bytes = ws.total;
  jitops__ctc_call_release(&call);
  return st;
}

jitops_status jitops_ctc_loss(jitops_runtime_t *runtime, const DLTensor *log_probs,
                              const DLTensor *targets, const DLTensor *input_lengths,
                              const DLTensor *target_lengths, const jitops_ctc_options *options,
                              DLTensor *loss, const jitops_workspace *workspace, void *stream) {
  const jitops__ctc_inputs in = {log_probs, targets, input_lengths, target_lengths, options};
  const outputs out = {.loss = loss};
  return run_entry("jitops_ctc_loss", runtime, JITOPS_CTC_PASS_LOSS, &in, &out, workspace, stream);
}

jitops_status jitops_ctc_loss_backward(jitops_runtime_t *runtime, const DLTensor *log_probs,
                                       const DLTensor *targets, const DLTensor *input_lengths,
                                       const DLTensor *target_lengths, const DLTensor *grad_loss,
                                       const jitops_ctc_options *options, DLTensor *grad_log_probs,
                                       DLTensor *loss, const jitops_workspace *workspace,
                                       void *stream) {
  const jitops__ctc_inputs in = {log_probs, targets, input_lengths, target_lengths, options};
  const outputs out = {.loss = loss, .grad_loss = grad_loss, .grad_log_probs = grad_log_probs};
  return run_entry("jitops_ctc_loss_backward", runtime, JITOPS_CTC_PASS_BACKWARD, &in, &out,
                   workspace, stream);
}

jitops_status jitops_ctc_alpha_beta(jitops_runtime_t *runtime, const DLTensor *log_probs,
                                    const DLTensor *targets, const DLTensor *input_lengths,
                                    const DLTensor *target_lengths,
                                    const jitops_ctc_options *options, DLTensor *log_alpha,
                                    DLTensor *log_beta, DLTensor *nll,
                                    const jitops_workspace *workspace, void *stream) {
  const jitops__ctc_inputs in = {log_probs, targets, input_lengths, target_lengths, options};
  const outputs out = {.log_alpha = log_alpha, .log_beta = log_beta, .nll = nll};
  return run_entry("jitops_ctc_alpha_beta", runtime, JITOPS_CTC_PASS_ALPHA_BETA, &in, &out,
                   workspace, stream);
}
