/* Planning a CTC call: the capacity bucket and where the recursion keeps its states, the
 * block shape and shared memory of each launch, the workspace layout, and the kernels' name
 * expressions. Pure host arithmetic (checked wherever it grows with the call's extents), so
 * the workspace queries and the catalogue use it too. */
#ifndef JITOPS_OPS_CTC_PLAN_H
#define JITOPS_OPS_CTC_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jitops/ctc.h"
#include "ops/ctc/call.h"
#include "ops/ctc/ctc_abi.h"
#include "runtime/op_support.h"

/* The source every CTC kernel comes from. */
#define JITOPS__CTC_SOURCE "jitops/ctc.cuh"

/* The recursion of one call (every alpha_kernel launch of it). */
typedef struct jitops__ctc_plan {
  int64_t cap;             /* the capacity bucket (CAP) */
  int store;               /* JITOPS__CTC_STORE_* */
  int k;                   /* states per thread */
  int nt;                  /* threads per block */
  size_t shared_bytes;     /* the shared tier: a block's states and labels */
  size_t mem_block_bytes;  /* the global tier: the same in the workspace, aligned */
  size_t ab_staging_bytes; /* the register tier, MODE_AB: its two row buffers */
} jitops__ctc_plan;

/* Chooses the bucket and tier for call->s_max on a device with `props` (options.storage may
 * force a tier: JITOPS_ERR_UNSUPPORTED when the bucket does not fit it). */
jitops_status jitops__ctc_plan_make(const jitops__ctc_call *call, const jitops__device_props *props,
                                    jitops__ctc_plan *plan);

/* Dynamic shared memory of an alpha_kernel launch in `mode`. */
size_t jitops__ctc_alpha_shared_bytes(const jitops__ctc_plan *plan, int mode);

/* Where each region of the scratch starts (bytes, JITOPS__CTC_ALIGN-aligned), and how the
 * workspace alpha and beta of the backward pass are laid out. */
typedef struct jitops__ctc_workspace {
  size_t stage;                        /* the staged host lengths and targets */
  size_t values;                       /* each sample's term of the sum or mean */
  size_t nll, info, link, alpha, beta; /* the backward pass's */
  size_t frames;                       /* the backward pass's: f32 [N][2][T][NT] */
  size_t mem;                          /* the global tier's states */
  size_t total;
  int64_t ab_st_t, ab_st_n; /* alpha/beta: A per (n, t) row (2 S_max + 1), and per sample */
  int64_t link_st;          /* link: int32 per sample */
} jitops__ctc_workspace;

/* The workspace `pass` needs; `values`: room for the terms of a sum or mean. Fails with
 * JITOPS_ERR_INVALID_SHAPE when its size overflows size_t. */
jitops_status jitops__ctc_workspace_plan(const jitops__ctc_call *call, const jitops__ctc_plan *plan,
                                         jitops_ctc_pass pass, bool values,
                                         jitops__ctc_workspace *ws);

/* The gradient's launch: `chunks` blocks of JITOPS__CTC_GRAD_ROWS rows per sample, and what
 * goes to dynamic shared memory within the default 48 KiB (jitops/ctc_abi.h): the tables when
 * they fit, else the sample's links when they fit. */
typedef struct jitops__ctc_grad_launch {
  int32_t chunks;
  uint32_t blocks;
  bool link_smem, tables;
  uint32_t shared_bytes;
} jitops__ctc_grad_launch;

/* Fails with JITOPS_ERR_UNSUPPORTED when the grid is beyond one launch. */
jitops_status jitops__ctc_grad_plan(const jitops__ctc_call *call, const jitops__ctc_workspace *ws,
                                    jitops__ctc_grad_launch *launch);

/* One alpha_kernel specialization: its template arguments. */
typedef struct jitops__ctc_alpha_kernel {
  jitops__dtype f, ti, li; /* log_probs, targets, lengths (i64 for staged host lengths) */
  int offs;                /* JITOPS__CTC_OFFS_* */
  int64_t cap;
  int store, mode;   /* JITOPS__CTC_STORE_*, JITOPS__CTC_MODE_* */
  jitops__dtype out; /* MODE_LOSS: the loss dtype; otherwise the accumulation dtype */
} jitops__ctc_alpha_kernel;

/* The call's alpha_kernel in `mode`, writing `out`. */
jitops__ctc_alpha_kernel jitops__ctc_alpha_kernel_of(const jitops__ctc_call *call,
                                                     const jitops__ctc_plan *plan, int mode,
                                                     jitops__dtype out);

/* Name expressions: alpha_kernel, grad_kernel<F, G, TORCH, TABLES>, reduce_kernel<A, O>. */
void jitops__ctc_alpha_name(const jitops__ctc_alpha_kernel *k, char *buf, size_t size);
void jitops__ctc_grad_name(jitops__dtype f, jitops__dtype grad_loss, bool torch, bool tables,
                           char *buf, size_t size);
void jitops__ctc_reduce_name(jitops__dtype acc, jitops__dtype out, char *buf, size_t size);

#endif
