/* The promise behind quick builds (runtime/kernel_batch.h): a QUICK kernel computes the same
 * bits at NVRTC's quick level as in full. Without fast-math, the one freedom NVRTC has over
 * the source's IEEE roundings is contracting a product into the sum it feeds (--fmad, on by
 * default), and how it does so may change with the optimization level. A build whose machine
 * code is byte for byte the same with --fmad=false contracted nothing, so it computes its
 * source's own roundings; when that holds both in full and at the quick level, the two builds
 * compute the same bits.
 *
 * So: the ops' cold calls on a compile-only sm_90 runtime (fake tensors) for the shapes that
 * reach their kernels' layouts (scans of every op along both axes in f32 and bf16, the f64 and
 * long-axis and short-row variants, their backwards, and the segment reductions' paths), then
 * every kernel they asked for as a quick build is built again with --fmad=false in full and at
 * the quick level, and each pair's code (the CUBINs' .text sections) must be the same.
 *
 * Same code is sufficient but strict: ptxas may schedule a rounded operation (mul.rn) otherwise
 * than a plain one where there was nothing to contract, as it does in FLCE's row kernel, whose
 * expf and logf are plain multiplies and adds. A kernel whose code differs passes when its PTX,
 * at both levels, shows that nothing was and nothing could be contracted: NVVM contracted
 * nothing (the PTX under --fmad=false is the same but for the .rn it writes on every add, sub
 * and mul), and ptxas has nothing to contract (no plain product reaches a plain add or sub,
 * directly or through a neg, mov or select: ptx_can_contract, itself tested on PTX written
 * here).
 *
 * The f64 logcumsumexp, whose math library calls (exp, log1p) do contract, must not be a quick
 * build, and both checks must see its contractions. Needs no GPU; skipped with an NVRTC older
 * than 12.8, which has no quick builds. */
#include <elf.h>
#include <pthread.h>
#include <stdint.h>

#include "jitops/ctc.h"
#include "jitops/flce.h"
#include "jitops/scan.h"
#include "jitops/segment.h"
#include "runtime/compiler.h"
#include "runtime/embedded.h"
#include "runtime/images.h"
#include "runtime/kernel_batch.h"
#include "runtime/kernel_object.h"
#include "testutil.h"

#define NO_FMAD "--fmad=false"

static const DLDataType F32 = {kDLFloat, 32, 1}, BF16 = {kDLBfloat, 16, 1}, F64 = {kDLFloat, 64, 1},
                        F16 = {kDLFloat, 16, 1}, I64 = {kDLInt, 64, 1};

/* ---- the ops' cold calls ---------------------------------------------------------------- */

/* A call that got its kernels and then found no GPU to launch on. */
static void got_kernels(jitops_status status, const char *what) {
  if (status != JITOPS_ERR_NO_DEVICE)
    fprintf(stderr, "%s: %s: %s\n", what, jitops_status_string(status), jitops_last_error());
  CHECK(status == JITOPS_ERR_NO_DEVICE);
}

static const jitops_scan_op SCAN_OPS[] = {JITOPS_SCAN_CUMSUM, JITOPS_SCAN_CUMPROD,
                                          JITOPS_SCAN_CUMMAX, JITOPS_SCAN_CUMMIN,
                                          JITOPS_SCAN_LOGCUMSUMEXP};

/* One op forward and backward along `axis` of a tensor of `shape`. */
static void scan_both_ways(jitops_runtime_t *rt, jitops_scan_op op, DLDataType dtype, int ndim,
                           int64_t *shape, int axis) {
  const int extremum = op == JITOPS_SCAN_CUMMAX || op == JITOPS_SCAN_CUMMIN;
  DLTensor x = test_fake_tensor(0, dtype, ndim, shape), y = test_fake_tensor(1, dtype, ndim, shape);
  DLTensor dy = test_fake_tensor(2, dtype, ndim, shape),
           dx = test_fake_tensor(3, dtype, ndim, shape);
  DLTensor idx = test_fake_tensor(4, I64, ndim, shape);
  got_kernels(jitops_scan(rt, op, &x, axis, 0, &y, extremum ? &idx : NULL, NULL, NULL), "scan");
  got_kernels(
      jitops_scan_backward(rt, op, &dy, &x, &y, extremum ? &idx : NULL, axis, 0, &dx, NULL, NULL),
      "scan backward");
}

static void scans(jitops_runtime_t *rt) {
  int64_t square[2] = {256, 4096}, long_axis[1] = {(int64_t)1 << 24},
          short_rows[2] = {1 << 17, 100};
  for (size_t i = 0; i < sizeof SCAN_OPS / sizeof SCAN_OPS[0]; ++i) {
    for (int axis = 0; axis < 2; ++axis) {
      scan_both_ways(rt, SCAN_OPS[i], F32, 2, square, axis);
      scan_both_ways(rt, SCAN_OPS[i], BF16, 2, square, axis);
    }
    scan_both_ways(rt, SCAN_OPS[i], F32, 1, long_axis, 0);
    scan_both_ways(rt, SCAN_OPS[i], F32, 2, short_rows, 1);
  }
  scan_both_ways(rt, JITOPS_SCAN_CUMSUM, F64, 2, square, 1);
  scan_both_ways(rt, JITOPS_SCAN_CUMPROD, F64, 2, square, 1);
}

/* One reduction forward and backward over `rows` x `cols` f32 rows into `segments`. */
static void segment_both_ways(jitops_runtime_t *rt, jitops_segment_reduction reduction,
                              int64_t rows, int64_t cols, int64_t segments, int sorted) {
  int64_t data_shape[2] = {rows, cols}, ids_shape[1] = {rows}, out_shape[2] = {segments, cols};
  DLTensor data = test_fake_tensor(0, F32, 2, data_shape),
           ids = test_fake_tensor(1, I64, 1, ids_shape);
  DLTensor out = test_fake_tensor(2, F32, 2, out_shape),
           grad_out = test_fake_tensor(3, F32, 2, out_shape);
  DLTensor grad_data = test_fake_tensor(4, F32, 2, data_shape);
  jitops_segment_options options;
  jitops_segment_options_init(&options);
  options.sorted = sorted;
  got_kernels(
      jitops_segment_reduce(rt, reduction, &data, &ids, segments, &out, &options, NULL, NULL),
      "segment");
  got_kernels(jitops_segment_reduce_backward(rt, reduction, &grad_out, &data, &out, &ids, segments,
                                             &grad_data, &options, NULL, NULL),
              "segment backward");
}

static void segments(jitops_runtime_t *rt) {
  static const jitops_segment_reduction all[] = {JITOPS_SEGMENT_SUM, JITOPS_SEGMENT_MEAN,
                                                 JITOPS_SEGMENT_MAX, JITOPS_SEGMENT_MIN};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
    segment_both_ways(rt, all[i], 1 << 20, 64, 10000, 0);   /* the sort, buckets */
    segment_both_ways(rt, all[i], 1 << 20, 64, 10000, 1);   /* sorted ids */
    segment_both_ways(rt, all[i], 1 << 20, 64, 100, 0);     /* a table in shared memory */
    segment_both_ways(rt, all[i], 1 << 20, 3, 1000000, 0);  /* narrow rows */
    segment_both_ways(rt, all[i], 1 << 20, 64, 1000000, 0); /* the digit path */
    segment_both_ways(rt, all[i], 4096, 8, 64, 0);          /* a small call */
  }
  segment_both_ways(rt, JITOPS_SEGMENT_MAX, 1 << 20, 1024, 10000, 0); /* the runs backward */
}

/* CTC's loss and its backward (with the loss) for T x N x C log_probs and padded targets of S
 * labels, lengths on the device. */
static void ctc_both_ways(jitops_runtime_t *rt, DLDataType dtype, int64_t T, int64_t N, int64_t C,
                          int64_t S, jitops_ctc_gradient gradient, jitops_ctc_reduction reduction) {
  int64_t lp_shape[3] = {T, N, C}, targets_shape[2] = {N, S}, n_shape[1] = {N};
  const DLDataType loss_type = dtype.bits == 64 ? dtype : F32;
  const int none = reduction == JITOPS_CTC_REDUCTION_NONE;
  DLTensor lp = test_fake_tensor(0, dtype, 3, lp_shape),
           grad = test_fake_tensor(1, dtype, 3, lp_shape);
  DLTensor targets = test_fake_tensor(2, I64, 2, targets_shape);
  DLTensor in_len = test_fake_tensor(3, I64, 1, n_shape),
           tg_len = test_fake_tensor(4, I64, 1, n_shape);
  DLTensor loss = test_fake_tensor(5, loss_type, none ? 1 : 0, n_shape);
  DLTensor grad_loss = test_fake_tensor(6, loss_type, none ? 1 : 0, n_shape);
  jitops_ctc_options options;
  jitops_ctc_options_init(&options);
  options.gradient = gradient;
  options.reduction = reduction;
  got_kernels(jitops_ctc_loss(rt, &lp, &targets, &in_len, &tg_len, &options, &loss, NULL, NULL),
              "ctc");
  got_kernels(jitops_ctc_loss_backward(rt, &lp, &targets, &in_len, &tg_len, &grad_loss, &options,
                                       &grad, &loss, NULL, NULL),
              "ctc backward");
}

static void ctcs(jitops_runtime_t *rt) {
  ctc_both_ways(rt, F32, 500, 64, 64, 100, JITOPS_CTC_GRADIENT_EXACT, JITOPS_CTC_REDUCTION_MEAN);
  ctc_both_ways(rt, F32, 500, 64, 64, 100, JITOPS_CTC_GRADIENT_PYTORCH, JITOPS_CTC_REDUCTION_NONE);
  ctc_both_ways(rt, BF16, 500, 64, 64, 100, JITOPS_CTC_GRADIENT_PYTORCH, JITOPS_CTC_REDUCTION_SUM);
  ctc_both_ways(rt, F32, 2400, 4, 64, 2000, JITOPS_CTC_GRADIENT_EXACT, JITOPS_CTC_REDUCTION_MEAN);
  ctc_both_ways(rt, F32, 100, 2, 50000, 50, JITOPS_CTC_GRADIENT_PYTORCH, JITOPS_CTC_REDUCTION_MEAN);
}

/* FLCE over BT 256 rows, H 128 and a vocabulary of V rows (V picks the row kernel's block size)
 * in `dtype`: the forward with every gradient, the backward's rescaling, and a vocabulary
 * shard's two phases (the shard holding the vocabulary's first V rows of 2V). */
static void flce_calls(jitops_runtime_t *rt, DLDataType dtype, int64_t V, int bias,
                       const jitops_flce_options *options) {
  int64_t input_shape[2] = {256, 128}, weight_shape[2] = {V, 128}, rows[1] = {256}, cols[1] = {V};
  const int none = options->reduction == JITOPS_FLCE_REDUCTION_NONE;
  DLTensor input = test_fake_tensor(0, dtype, 2, input_shape),
           weight = test_fake_tensor(1, dtype, 2, weight_shape);
  DLTensor bias_t = test_fake_tensor(2, dtype, 1, cols), target = test_fake_tensor(3, I64, 1, rows);
  DLTensor loss = test_fake_tensor(4, F32, none, rows), lse = test_fake_tensor(5, F32, 1, rows);
  DLTensor dy = test_fake_tensor(6, F32, none, rows);
  DLTensor grad_input = test_fake_tensor(7, dtype, 2, input_shape),
           grad_weight = test_fake_tensor(8, dtype, 2, weight_shape),
           grad_bias = test_fake_tensor(9, dtype, 1, cols);
  DLTensor linear = test_fake_tensor(10, F32, 1, rows);
  jitops_flce_tensors t = {.input = &input,
                           .weight = &weight,
                           .bias = bias ? &bias_t : NULL,
                           .target = &target,
                           .grad_output = none ? &dy : NULL,
                           .loss = &loss,
                           .lse = &lse,
                           .grad_input = &grad_input,
                           .grad_weight = &grad_weight,
                           .grad_bias = bias ? &grad_bias : NULL};
  got_kernels(jitops_flce_forward(rt, &t, options, NULL, NULL), "flce");
  if (!none)
    got_kernels(
        jitops_flce_backward(rt, &dy, &grad_input, &grad_weight, bias ? &grad_bias : NULL, NULL),
        "flce backward");

  jitops_flce_options sharded = *options;
  sharded.vocab_start = 0;
  sharded.vocab_size = 2 * V;
  jitops_flce_tensors stats = {
      .input = &input, .weight = &weight, .bias = t.bias, .target = &target};
  got_kernels(jitops_flce_shard_stats(rt, &stats, &sharded, &lse, &linear, NULL, NULL),
              "flce shard stats");
  jitops_flce_tensors back = t;
  back.loss = back.lse = NULL;
  got_kernels(jitops_flce_shard_backward(rt, &back, &sharded, &lse, NULL, NULL),
              "flce shard backward");
}

static void flces(jitops_runtime_t *rt) {
  jitops_flce_options plain, every, none;
  jitops_flce_options_init(&plain);
  jitops_flce_options_init(&every);
  every.reduction = JITOPS_FLCE_REDUCTION_SUM;
  every.label_smoothing = 0.1;
  every.softcap = 30;
  every.z_loss_scale = 1e-4;
  jitops_flce_options_init(&none);
  none.reduction = JITOPS_FLCE_REDUCTION_NONE;
  none.label_smoothing = 0.05;
  flce_calls(rt, BF16, 32000, 0, &plain); /* the benchmarks' */
  flce_calls(rt, F32, 2000, 1, &every);
  flce_calls(rt, F16, 600, 0, &none);
  flce_calls(rt, BF16, 2000, 1, &every);
}

/* ---- the quick builds they asked for ---------------------------------------------------- */

typedef struct request {
  const char *source;
  char *expr;
  int same_full, same_quick; /* the pair's code matched; -1 until built */
  int ptx_clean;             /* where it did not: the PTX shows no contraction; -1 until read */
} request;

typedef struct requests {
  request item[512];
  size_t count;
} requests;

/* The built-in source that defines the kernel template of `expr` ("ns::name<...>"): the one
 * source of its op family with "name(" after a blank. */
static const char *source_of(const char *op, const char *expr) {
  const char *end = strchr(expr, '<') ? strchr(expr, '<') : expr + strlen(expr);
  const char *start = end;
  while (start > expr && start[-1] != ':')
    --start;
  char needle[160], family[64];
  snprintf(needle, sizeof needle, " %.*s(", (int)(end - start), start);
  snprintf(family, sizeof family, "jitops/%s", op);
  const char *found = NULL;
  int matches = 0;
  for (size_t i = 0; i < jitops__embedded_source_count; ++i) {
    const jitops__embedded_source *s = &jitops__embedded_sources[i];
    if (strncmp(s->name, family, strlen(family)) == 0 && strstr(s->text, needle) != NULL)
      found = s->name, ++matches;
  }
  if (matches != 1)
    fprintf(stderr, "%s: %d sources define it\n", expr, matches);
  CHECK(matches == 1);
  return matches == 1 ? found : NULL;
}

static int collect_quick(const jitops_cache_entry *e, void *user) {
  requests *r = user;
  if (strstr(e->options, JITOPS__QUICK_OPTION) == NULL)
    return 0;
  const char *source = source_of(e->op, e->name_expression);
  CHECK(r->count < sizeof r->item / sizeof r->item[0]);
  if (source != NULL && r->count < sizeof r->item / sizeof r->item[0])
    r->item[r->count++] = (request){source, strdup(e->name_expression), -1, -1, -1};
  return 0;
}

/* ---- comparing builds --------------------------------------------------------------------- */

/* Whether two CUBINs hold the same machine code: their .text sections, in order. */
static int same_code(const jitops__image *a, const jitops__image *b) {
  const jitops__image *img[2] = {a, b};
  const unsigned char *text[2][16];
  size_t size[2][16], n[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    const unsigned char *bytes = img[k]->bytes;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)bytes;
    if (img[k]->size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0)
      return 0;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(bytes + eh->e_shoff);
    const char *names = (const char *)bytes + sh[eh->e_shstrndx].sh_offset;
    for (unsigned i = 0; i < eh->e_shnum && n[k] < 16; ++i)
      if (strncmp(names + sh[i].sh_name, ".text", 5) == 0) {
        text[k][n[k]] = bytes + sh[i].sh_offset;
        size[k][n[k]++] = sh[i].sh_size;
      }
  }
  if (n[0] == 0 || n[0] != n[1])
    return 0;
  for (size_t i = 0; i < n[0]; ++i)
    if (size[0][i] != size[1][i] || memcmp(text[0][i], text[1][i], size[0][i]) != 0)
      return 0;
  return 1;
}

static jitops_kernel_t *build(jitops_runtime_t *rt, const request *q, int quick, int no_fmad) {
  const char *options[3];
  size_t n = 0;
  for (size_t i = 0; quick && i < JITOPS__QUICK_OPTION_COUNT; ++i)
    options[n++] = jitops__quick_options[i];
  if (no_fmad)
    options[n++] = NO_FMAD;
  jitops_kernel_t *k = NULL;
  CHECK_OK(jitops_kernel_get(rt, q->source, q->expr, options, n, &k));
  CHECK(k == NULL || k->image != NULL);
  return k;
}

static int pair_is_same(jitops_runtime_t *rt, const request *q, int quick) {
  jitops_kernel_t *a = build(rt, q, quick, 0), *b = build(rt, q, quick, 1);
  return a != NULL && b != NULL && a->image != NULL && b->image != NULL &&
         same_code(a->image, b->image);
}

/* ---- the PTX check ------------------------------------------------------------------------ */

static jitops__source_set sources; /* the embedded templates, for compiling to PTX */

/* The PTX of `q` for sm_90 with the runtime's options, at the quick level or in full, with or
 * without --fmad=false; NULL (having failed a check) when it does not compile. */
static char *ptx_of(const request *q, int quick, int no_fmad) {
  const char *options[16];
  size_t n = 0;
  for (size_t i = 0; i < jitops__default_option_count && n < 12; ++i)
    options[n++] = jitops__default_options[i];
  options[n++] = "--gpu-architecture=compute_90";
  for (size_t i = 0; quick && i < JITOPS__QUICK_OPTION_COUNT; ++i)
    options[n++] = jitops__quick_options[i];
  if (no_fmad)
    options[n++] = NO_FMAD;
  const jitops__source **closure = NULL;
  size_t count = 0;
  jitops__key hash;
  jitops__compiled compiled;
  memset(&compiled, 0, sizeof compiled);
  CHECK_OK(jitops__sources_closure(&sources, q->source, &closure, &count, &hash));
  if (closure != NULL)
    CHECK_OK(jitops__compile(closure, count, q->expr, options, n, &compiled));
  free(closure);
  char *ptx = compiled.image;
  compiled.image = NULL;
  jitops__compiled_free(&compiled);
  return ptx;
}

/* One PTX instruction: its opcode and up to 4 operands, without the predicate. */
typedef struct instruction {
  char opcode[32], operand[4][32];
  int operands;
} instruction;

/* Parses the instruction on the line at `p`; 0 for a line that holds none. */
static int parse_instruction(const char *p, instruction *out) {
  memset(out, 0, sizeof *out);
  p += strspn(p, " \t");
  if (*p == '@')
    p += strcspn(p, " \t"), p += strspn(p, " \t");
  size_t length = strcspn(p, " \t;\n");
  if (length == 0 || length >= sizeof out->opcode || !(*p >= 'a' && *p <= 'z'))
    return 0;
  memcpy(out->opcode, p, length);
  p += length;
  while (out->operands < 4 && *p != ';' && *p != '\n' && *p != 0) {
    p += strspn(p, " \t,");
    length = strcspn(p, " \t,;\n");
    if (length == 0)
      break;
    snprintf(out->operand[out->operands++], sizeof out->operand[0], "%.*s", (int)length, p);
    p += length;
  }
  return 1;
}

/* Whether `i` is `name` on a float type without an explicit rounding: "mul.f32", not
 * "mul.rn.f32" or "mul.lo.s32". */
static int plain_float(const instruction *i, const char *name) {
  const size_t n = strlen(name);
  if (strncmp(i->opcode, name, n) != 0 || i->opcode[n] != '.' || strstr(i->opcode, ".rn") != NULL)
    return 0;
  const char *type = strrchr(i->opcode, '.') + 1;
  return type[0] == 'f' || strncmp(type, "bf16", 4) == 0;
}

typedef struct names {
  char item[4096][32];
  size_t count;
} names;

static int has_name(const names *set, const char *name) {
  for (size_t i = 0; i < set->count; ++i)
    if (strcmp(set->item[i], name) == 0)
      return 1;
  return 0;
}

/* Whether `i` passes a product on (a neg, a mov or a select of one). */
static int passes_product_on(const names *products, const instruction *i) {
  if (strncmp(i->opcode, "neg.", 4) == 0 || strncmp(i->opcode, "mov.", 4) == 0)
    return has_name(products, i->operand[1]);
  if (strncmp(i->opcode, "selp.", 5) == 0 && i->operands >= 3)
    return has_name(products, i->operand[1]) || has_name(products, i->operand[2]);
  return 0;
}

/* Whether ptxas could contract something in `ptx`: a plain float product whose register (or a
 * neg, mov or select of it) an unrounded add or sub reads. By register names, not data flow, and
 * to a fixed point over the whole text (loops define registers after their uses): a register
 * that ever holds a plain product counts, so the answer errs towards yes. */
static int ptx_can_contract(const char *ptx) {
  static names products; /* one caller at a time: the comparisons' threads do not use it */
  products.count = 0;
  instruction in;
  for (size_t before = (size_t)-1; before != products.count;) {
    before = products.count;
    for (const char *p = ptx; p != NULL && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
      if (!parse_instruction(p, &in) || in.operands < 2 || has_name(&products, in.operand[0]))
        continue;
      const int product = plain_float(&in, "mul") || passes_product_on(&products, &in);
      if (product && products.count < sizeof products.item / sizeof products.item[0])
        snprintf(products.item[products.count++], sizeof products.item[0], "%s", in.operand[0]);
      CHECK(products.count < sizeof products.item / sizeof products.item[0]);
    }
  }
  for (const char *p = ptx; p != NULL && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
    if (parse_instruction(p, &in) && (plain_float(&in, "add") || plain_float(&in, "sub")))
      for (int k = 1; k < in.operands; ++k)
        if (has_name(&products, in.operand[k]))
          return 1;
  return 0;
}

/* `ptx` with the ".rn" of every add, sub and mul taken out, in place. */
static void drop_rounding(char *ptx) {
  static const char *const rounded[] = {"add.rn.", "sub.rn.", "mul.rn."};
  for (size_t i = 0; i < sizeof rounded / sizeof rounded[0]; ++i)
    for (char *p = ptx; (p = strstr(p, rounded[i])) != NULL;)
      memmove(p + 3, p + 6, strlen(p + 6) + 1);
}

/* Whether `q`'s PTX at one level shows no contraction: NVVM made none, ptxas can make none. */
static int ptx_is_clean(const request *q, int quick) {
  char *plain = ptx_of(q, quick, 0), *no_fmad = ptx_of(q, quick, 1);
  int clean = plain != NULL && no_fmad != NULL && !ptx_can_contract(plain);
  if (clean) {
    drop_rounding(plain);
    drop_rounding(no_fmad);
    clean = strcmp(plain, no_fmad) == 0;
  }
  free(plain);
  free(no_fmad);
  return clean;
}

/* ptx_can_contract on PTX written to show each case. */
static void the_ptx_check_sees_contractions(void) {
  CHECK(ptx_can_contract("\tmul.f32 \t%f3, %f1, %f2;\n\tadd.f32 \t%f4, %f3, %f5;\n"));
  CHECK(ptx_can_contract("\tmul.f64 \t%fd3, %fd1, %fd2;\n\tsub.f64 \t%fd4, %fd5, %fd3;\n"));
  CHECK(ptx_can_contract("\tmul.f32 \t%f3, %f1, %f2;\n\tneg.f32 \t%f6, %f3;\n"
                         "\tmov.f32 \t%f7, %f6;\n\t@%p1 add.f32 \t%f8, %f5, %f7;\n"));
  CHECK(ptx_can_contract("\tmul.f32 \t%f3, %f1, %f2;\n\tselp.f32 \t%f6, %f5, %f3, %p1;\n"
                         "\tsub.f32 \t%f8, %f6, %f7;\n"));
  /* A loop: the product is defined below the add that reads it. */
  CHECK(ptx_can_contract("$L__BB0_1:\n\tadd.f32 \t%f4, %f4, %f3;\n\tmul.f32 \t%f3, %f1, %f2;\n"
                         "\tbra.uni \t$L__BB0_1;\n"));
  CHECK(!ptx_can_contract("\tmul.rn.f32 \t%f3, %f1, %f2;\n\tadd.f32 \t%f4, %f3, %f5;\n"));
  CHECK(!ptx_can_contract("\tmul.f32 \t%f3, %f1, %f2;\n\tadd.rn.f32 \t%f4, %f3, %f5;\n"));
  CHECK(!ptx_can_contract("\tmul.f32 \t%f3, %f1, %f2;\n\tfma.rn.f32 \t%f4, %f3, %f5, %f6;\n"));
  CHECK(!ptx_can_contract("\tmul.lo.s32 \t%r3, %r1, %r2;\n\tadd.s32 \t%r4, %r3, %r5;\n"));
  char ptx[] = "\tadd.rn.f32 \t%f4, %f3, %f5;\n\tmul.rn.f64 \t%fd1, %fd2, %fd3;\n";
  drop_rounding(ptx);
  CHECK(strcmp(ptx, "\tadd.f32 \t%f4, %f3, %f5;\n\tmul.f64 \t%fd1, %fd2, %fd3;\n") == 0);
}

typedef struct work {
  jitops_runtime_t *rt;
  requests *r;
  size_t next; /* taken with an atomic fetch-add */
} work;

static void *compare_some(void *arg) {
  work *w = arg;
  for (;;) {
    size_t i = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED);
    if (i >= w->r->count)
      return NULL;
    request *q = &w->r->item[i];
    q->same_full = pair_is_same(w->rt, q, 0);
    q->same_quick = pair_is_same(w->rt, q, 1);
  }
}

/* Compares every request's pairs on two threads. */
static void compare_all(jitops_runtime_t *rt, requests *r) {
  work w = {rt, r, 0};
  pthread_t other;
  const int started = pthread_create(&other, NULL, compare_some, &w) == 0;
  compare_some(&w);
  if (started)
    pthread_join(other, NULL);
}

/* ---- the checks --------------------------------------------------------------------------- */

static jitops_runtime_t *runtime_on(const char *dir) {
  jitops_runtime_config cfg = test_offline_config("sm_90", dir);
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(&cfg, &rt));
  return rt;
}

/* Calls `visit` for each entry of the cache in `dir`. */
static void list_cache(const char *dir, int (*visit)(const jitops_cache_entry *, void *),
                       void *user) {
  jitops_cache_t *cache = NULL;
  CHECK_OK(jitops_cache_open(dir, 0, &cache));
  if (cache != NULL)
    CHECK_OK(jitops_cache_list(cache, NULL, NULL, visit, user));
  jitops_cache_close(cache);
}

static void quick_kernels_contract_nothing(const char *dir) {
  jitops_runtime_t *rt = runtime_on(dir);
  if (rt == NULL)
    return;
  scans(rt);
  segments(rt);
  ctcs(rt);
  flces(rt);
  CHECK_OK(jitops_runtime_wait_builds(rt));
  jitops_stats stats;
  CHECK_OK(jitops_runtime_get_stats(rt, &stats));

  static requests r;
  list_cache(dir, collect_quick, &r);
  CHECK(r.count == stats.quick_compiles);
  CHECK(r.count >= 100); /* the calls above reach at least this many quick kernels */
  compare_all(rt, &r);
  size_t scans_seen = 0, segments_seen = 0, ctcs_seen = 0, flces_seen = 0, by_ptx = 0;
  for (size_t i = 0; i < r.count; ++i) {
    request *q = &r.item[i];
    if (q->same_full != 1 || q->same_quick != 1) {
      q->ptx_clean = ptx_is_clean(q, 0) && ptx_is_clean(q, 1);
      by_ptx += q->ptx_clean == 1;
      if (q->ptx_clean != 1)
        fprintf(stderr, "%s: --fmad=false changes its code (full: %s, quick: %s) and its PTX\n",
                q->expr, q->same_full == 1 ? "no" : "yes", q->same_quick == 1 ? "no" : "yes");
    }
    CHECK((q->same_full == 1 && q->same_quick == 1) || q->ptx_clean == 1);
    scans_seen += strstr(q->source, "scan") != NULL;
    segments_seen += strstr(q->source, "segment") != NULL;
    ctcs_seen += strstr(q->source, "ctc") != NULL;
    flces_seen += strstr(q->source, "flce") != NULL;
    free(q->expr);
  }
  printf("%zu quick kernels compared (%zu scan, %zu segment, %zu ctc, %zu flce; %zu by their PTX), "
         "%llu compiles in all\n",
         r.count, scans_seen, segments_seen, ctcs_seen, flces_seen, by_ptx,
         (unsigned long long)stats.compiles);
  CHECK(scans_seen > 0 && segments_seen > 0 && ctcs_seen > 0 && flces_seen > 0);
  jitops_runtime_destroy(rt);
}

static int take_first(const jitops_cache_entry *e, void *user) {
  snprintf(user, 256, "%s", e->name_expression);
  return 1;
}

/* The f64 logcumsumexp: built in full, and its code and its PTX do change under --fmad=false. */
static void a_contracting_kernel_is_seen_and_not_quick(const char *dir) {
  jitops_runtime_t *rt = runtime_on(dir);
  if (rt == NULL)
    return;
  int64_t shape[2] = {256, 4096};
  DLTensor x = test_fake_tensor(0, F64, 2, shape), y = test_fake_tensor(1, F64, 2, shape);
  got_kernels(jitops_scan(rt, JITOPS_SCAN_LOGCUMSUMEXP, &x, 1, 0, &y, NULL, NULL, NULL), "lcse");
  jitops_stats stats;
  CHECK_OK(jitops_runtime_get_stats(rt, &stats));
  CHECK(stats.compiles == 1 && stats.quick_compiles == 0);
  char expr[256] = "";
  list_cache(dir, take_first, expr);
  CHECK(strstr(expr, "Lcse<double>") != NULL);
  request q = {source_of("scan", expr), expr, -1, -1, -1};
  CHECK(!pair_is_same(rt, &q, 0));
  CHECK(!ptx_is_clean(&q, 0) && !ptx_is_clean(&q, 1));
  jitops_runtime_destroy(rt);
}

int main(void) {
  if (!test_quick_builds_available("test_quick_kernels_contract_nothing"))
    return TEST_SKIP;
  CHECK_OK(jitops__sources_init(&sources));
  the_ptx_check_sees_contractions();
  char dir[1024];
  test_fresh_dir("contracting", dir, sizeof dir);
  a_contracting_kernel_is_seen_and_not_quick(dir);
  test_fresh_dir("contract-nothing", dir, sizeof dir);
  quick_kernels_contract_nothing(dir);
  jitops__sources_free(&sources);
  return test_finish("test_quick_kernels_contract_nothing");
}
