/* jitops/ctc_abi.h — what the CTC host code (the C files of ops/ctc/) and the CTC kernels
 * (ctc.cuh and the files it includes) share: what an alpha_kernel instance's template
 * parameters mean (what it writes, where it keeps its states, how it finds a sample's
 * targets), the capacity buckets and how a bucket spreads its states over a block, the block
 * shapes and the shared memory the host sizes launches by, the bookkeeping the gradient reads,
 * and the one argument struct of each kernel. Written in the common subset of C and CUDA C++
 * (see templates/abi.h); the layout checks after each struct run in both compilers. */
#ifndef JITOPS_OPS_CTC_ABI_H
#define JITOPS_OPS_CTC_ABI_H

#if defined(__CUDACC_RTC__)
#include "jitops/abi.h"
#else
#include "templates/abi.h"
#endif

/* ---- alpha_kernel's template parameters ------------------------------------------------- */

/* MODE: what the recursion writes. */
#define JITOPS__CTC_MODE_LOSS   0 /* each sample's loss, into `loss` */
#define JITOPS__CTC_MODE_VALUES 1 /* each sample's term of the sum or mean, into `values` */
#define JITOPS__CTC_MODE_AB     2 /* alpha, beta and nll (and info and link for the gradient) */

/* STORE: where the recursion keeps its states. */
#define JITOPS__CTC_STORE_REG    0 /* registers, K per thread */
#define JITOPS__CTC_STORE_SHARED 1 /* dynamic shared memory */
#define JITOPS__CTC_STORE_GLOBAL 2 /* global memory: one block of `mem` per (sample, direction) */

/* OFFS: where sample n's targets start. */
#define JITOPS__CTC_OFFS_PADDED 0 /* row n of padded [N, S] targets */
#define JITOPS__CTC_OFFS_HOST   1 /* concatenated; offsets[n], summed on the host */
#define JITOPS__CTC_OFFS_DEVICE 2 /* concatenated; the earlier lengths summed on the device */

/* ---- capacity ----------------------------------------------------------------------------- */

/* CAP, a kernel's capacity in states, is a power of two from MIN_CAP to MAX_CAP, at least the
 * 2 S_max + 1 states of the longest target. Up to REG_MAX_CAP the states fit in registers. */
#define JITOPS__CTC_MIN_CAP     32
#define JITOPS__CTC_REG_MAX_CAP 8192
#define JITOPS__CTC_MAX_CAP     (1 << 30)

/* The register tier's buckets up to 256 states run one kernel, compiled for capacity 256: K (2)
 * and the emission ring (8 steps) are the same for all of them, and the kernel's launch bound
 * (at most 128 threads) leaves every register available, so the smaller buckets compiled to
 * the same code (f32: identical SASS) under keys of their own. Target lengths up to 127 thus
 * compile one kernel per mode, whatever lengths a batch brings. */
#define JITOPS__CTC_REG_MIN_KERNEL_CAP 256

/* K, the states each thread owns, of a bucket and tier. The register tier keeps K small while
 * that keeps the block at <= 128 threads, so that the four SM sub-partitions share the work of
 * small targets (one warp holding 256 states measured 1.45x slower at S = 100: its exp/log all
 * ran on one sub-partition). The memory tiers take 1024 threads at most (MEM_MAX_THREADS). */
#define JITOPS__CTC_REG_K(cap) ((cap) <= 256 ? 2 : (cap) <= 512 ? 4 : 8)
#define JITOPS__CTC_MEM_K(cap) ((cap) / 1024 < 2 ? 2 : (cap) / 1024)
#define JITOPS__CTC_K(cap, store)                                                                  \
  ((store) == JITOPS__CTC_STORE_REG ? JITOPS__CTC_REG_K(cap) : JITOPS__CTC_MEM_K(cap))

/* ---- shared memory of the recursion ------------------------------------------------------- */

/* Register tier, MODE_AB: rows of states pass through two shared row buffers so that the
 * stores of alpha and beta coalesce. State s sits at word STAGED(s) of a row, one word of
 * padding per 32 so that a warp writing K consecutive states a lane hits distinct banks; a row
 * of NT·K states takes STAGED(NT·K) + 1 words. */
#define JITOPS__CTC_STAGED(s) ((s) + ((s) >> 5))

/* Memory tiers: a block's states are K·NT accumulators, then its labels, (K / 2)·NT int32
 * (dynamic shared memory, or a block of `mem`). Its static shared memory is the halo,
 * 2·MEM_MAX_THREADS accumulators and as many f32 frames, two final states and their two
 * frames, and OFFSET_WARPS int64 partial sums of
 * the device offsets (OFFS_DEVICE), which the host counts, with STATIC_SLACK bytes to spare,
 * against the device's limit before it picks the shared tier. */
#define JITOPS__CTC_MEM_MAX_THREADS 1024
#define JITOPS__CTC_OFFSET_WARPS    32
#define JITOPS__CTC_STATIC_SLACK    64

/* ---- the gradient's bookkeeping (MODE_AB writes it, grad_kernel reads it) ---------------- */

/* info: INFO_INTS int32 per sample, {input length, or -1 for an invalid sample; target length;
 * log2 of the sample's probability as the f32 bits of an integer frame and of a small
 * remainder (f32 accumulation; 0, 0 for f64)}.
 * link: LINK_INTS int32 per target position j, {its label; the next position with that label
 * (LINK_END when none) | (1 << LINK_FIRST_BIT) when j is the label's first occurrence}. */
#define JITOPS__CTC_INFO_INTS      4
#define JITOPS__CTC_LINK_INTS      2
#define JITOPS__CTC_LINK_FIRST_BIT 30
#define JITOPS__CTC_LINK_END       ((1 << JITOPS__CTC_LINK_FIRST_BIT) - 1)

/* frames (f32 accumulation): the recursion keeps each thread's states relative to an integer
 * offset of its own, in log2 units (its frame, ctc_common.cuh). The MODE_AB workspace rows hold
 * the states in their frames (log2), and `frames` the frame of every (sample, direction, t,
 * thread): f32 [N][2][T][NT], t the original time for both directions. */

/* ---- block shapes ------------------------------------------------------------------------- */

/* grad_kernel: a block of GRAD_THREADS threads, one warp per (t, n) row, takes GRAD_ROWS rows
 * of one sample (8 warps × 4 rows). reduce_kernel: one block of REDUCE_THREADS threads. */
#define JITOPS__CTC_GRAD_THREADS   256
#define JITOPS__CTC_GRAD_WARPS     (JITOPS__CTC_GRAD_THREADS / 32)
#define JITOPS__CTC_GRAD_ROWS      32
#define JITOPS__CTC_REDUCE_THREADS 256

/* grad_kernel's dynamic shared memory. With TABLES: the sample's links (link_st int32), each
 * class's first target position (C int32, from GRAD_HEAD_OFFSET on), and one row of link_st / 2
 * accumulators per warp for its row's label posteriors (from GRAD_GAMMA_OFFSET on). Without,
 * the links alone when link_smem, else nothing. */
#define JITOPS__CTC_GRAD_ALIGN16(bytes)       (((size_t)(bytes) + 15u) / 16u * 16u)
#define JITOPS__CTC_GRAD_HEAD_OFFSET(link_st) JITOPS__CTC_GRAD_ALIGN16((size_t)(link_st)*4u)
#define JITOPS__CTC_GRAD_GAMMA_OFFSET(link_st, C)                                                  \
  (JITOPS__CTC_GRAD_HEAD_OFFSET(link_st) + JITOPS__CTC_GRAD_ALIGN16((size_t)(C)*4u))

/* ---- kernel arguments --------------------------------------------------------------------- */

/* Strides are in elements. F is log_probs' type, A the accumulation type (f32 for f16, bf16
 * and f32; f64 for f64), TI the targets' and LI the lengths' index type. Each struct's size,
 * and the offsets of members past its pointers and 8-byte fields, are checked after it. */

/* The argument of jitops::ctc::alpha_kernel (grid: N samples × directions; y = 0 alpha, 1 beta,
 * 2 the label grouping). */
typedef struct jitops__ctc_alpha_args {
  const void *lp; /* [T, N, C] of F */
  int64_t lp_st_t, lp_st_n, lp_st_c;
  const void *tgt;              /* TI: padded [N, S] or concatenated */
  int64_t tgt_st_n, tgt_st_s;   /* padded: (n, s) strides; concatenated: (0, stride) */
  int64_t tgt_numel;            /* concatenated: its element count (bounds check) */
  const void *in_len, *tgt_len; /* [N] of LI */
  int64_t in_len_st, tgt_len_st;
  const int64_t *offsets; /* OFFS_HOST: where each sample's targets start */
  void *loss;             /* MODE_LOSS: each sample's loss, of the loss type O */
  int64_t loss_st;
  void *values;       /* A[N]: terms of the sum or mean, or NULL */
  void *alpha, *beta; /* MODE_AB: A, [N, T, ab_len] with the strides below */
  int64_t ab_st_n, ab_st_t, ab_st_s;
  void *nll; /* MODE_AB: A[N] with stride nll_st */
  int64_t nll_st;
  int32_t *info;           /* MODE_AB: INFO_INTS per sample, or NULL */
  int32_t *link;           /* MODE_AB: LINK_INTS per target position, or NULL */
  int64_t link_st;         /* int32 between samples in `link` */
  void *mem;               /* global tier: the states of every block */
  int64_t mem_block_bytes; /* bytes of one block's states */
  float *frames;           /* MODE_AB, f32 accumulation: the workspace rows' frames, or NULL
                              (then rows hold natural logs) */
  int32_t T, N, C, blank;
  int32_t s_max;     /* longest target this launch accepts (device lengths) */
  int32_t reduction; /* 0 none, 1 sum, 2 mean */
  int32_t zero_infinity;
  int32_t ab_len; /* MODE_AB: the s extent of alpha and beta */
  int32_t fill;   /* MODE_AB: write -inf (NaN for invalid samples) outside the valid region */
  int32_t pad_;   /* the size a multiple of 8, as written */
} jitops__ctc_alpha_args;
JITOPS__ABI_OFFSET(jitops__ctc_alpha_args, offsets, 96);
JITOPS__ABI_OFFSET(jitops__ctc_alpha_args, info, 184);
JITOPS__ABI_OFFSET(jitops__ctc_alpha_args, frames, 224);
JITOPS__ABI_OFFSET(jitops__ctc_alpha_args, T, 232);
JITOPS__ABI_OFFSET(jitops__ctc_alpha_args, fill, 264);
JITOPS__ABI_SIZE(jitops__ctc_alpha_args, 272);

/* The argument of jitops::ctc::grad_kernel (grid: `chunks` blocks per sample). */
typedef struct jitops__ctc_grad_args {
  const void *lp; /* [T, N, C] of F */
  int64_t lp_st_t, lp_st_n, lp_st_c;
  void *grad; /* [T, N, C] of F */
  int64_t g_st_t, g_st_n, g_st_c;
  void *alpha; /* A: natural logs (f64), or log2 in frames (f32); without TABLES, the label
                  posteriors overwrite the odd states in place */
  const void *beta;
  int64_t ab_st_n, ab_st_t; /* unit stride along s */
  const void *nll;          /* A[N] */
  const int32_t *info;      /* INFO_INTS per sample */
  const int32_t *link;      /* LINK_INTS per target position */
  int64_t link_st;
  const void *grad_loss; /* G: [N] (reduction none) or a scalar */
  int64_t grad_loss_st;
  const float *frames; /* f32 accumulation: alpha's and beta's frames (see `frames` above) */
  int32_t T, N, C, blank;
  int32_t reduction, zero_infinity;
  int32_t chunks;      /* blocks per sample along t */
  int32_t link_smem;   /* without TABLES, 1: copy the sample's links to dynamic shared memory */
  int32_t frame_nt;    /* the recursion's threads per block (NT) */
  int32_t frame_shift; /* log2 of its states per thread (K) */
} jitops__ctc_grad_args;
JITOPS__ABI_OFFSET(jitops__ctc_grad_args, nll, 96);
JITOPS__ABI_OFFSET(jitops__ctc_grad_args, frames, 144);
JITOPS__ABI_OFFSET(jitops__ctc_grad_args, T, 152);
JITOPS__ABI_OFFSET(jitops__ctc_grad_args, frame_shift, 188);
JITOPS__ABI_SIZE(jitops__ctc_grad_args, 192);

/* The argument of jitops::ctc::reduce_kernel (one block). */
typedef struct jitops__ctc_reduce_args {
  const void *values; /* A[N] */
  void *out;          /* O: [N] with stride out_st (reduction none), or a scalar */
  int64_t out_st;
  int32_t N, reduction;
} jitops__ctc_reduce_args;
JITOPS__ABI_OFFSET(jitops__ctc_reduce_args, N, 24);
JITOPS__ABI_SIZE(jitops__ctc_reduce_args, 32);

#endif
