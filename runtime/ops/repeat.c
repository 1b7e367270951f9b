/* torch.Tensor.repeat and its backward: validation, collapsing of dimensions, the launch of
 * "jitops/repeat.cuh", and the family's prewarm catalogue entries. */
#include <stdio.h>
#include <string.h>

#include "jitops/repeat.h"
#include "runtime/op_support.h"

static const char *const SOURCE = "jitops/repeat.cuh";
enum { MAX_RANK = 8, THREADS = 256, UNROLL = 4 };

/* One (collapsed) dimension: the input's size, the repeat count, and both tensors' strides. */
typedef struct rdim {
  int64_t in;
  int64_t rep;
  int64_t in_stride;  /* x (forward) or dx (backward) */
  int64_t out_stride; /* y (forward) or dy (backward) */
} rdim;

typedef struct rgeom {
  int n; /* ≥ 1 */
  rdim d[MAX_RANK];
} rgeom;

/* ---- validation ------------------------------------------------------------------------- */

/* Checks repeats against `small` (x or dx) and `big` (y or dy), both already tensor-checked. */
static jitops_status check_repeats(const char *fn, const DLTensor *small, const char *small_arg,
                                   const int64_t *repeats, int num_repeats, const DLTensor *big,
                                   const char *big_arg) {
  if (num_repeats < 0 || num_repeats > MAX_RANK)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: num_repeats is %d; expected 0..%d", fn,
                        num_repeats, MAX_RANK);
  if (num_repeats > 0 && repeats == NULL)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: repeats is NULL but num_repeats is %d",
                        fn, num_repeats);
  if (num_repeats < small->ndim)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: repeats has %d entries, fewer than %s's %d dimensions", fn,
                        num_repeats, small_arg, small->ndim);
  for (int i = 0; i < num_repeats; ++i)
    if (repeats[i] < 0)
      return jitops__fail(JITOPS_ERR_OUT_OF_RANGE, "%s: repeats[%d] is %lld; repeats must be ≥ 0",
                          fn, i, (long long)repeats[i]);
  int64_t want[MAX_RANK];
  const int pad = num_repeats - small->ndim;
  for (int i = 0; i < num_repeats; ++i) {
    const int64_t in = i < pad ? 1 : small->shape[i - pad];
    if (in > 0 && repeats[i] > INT64_MAX / in)
      return jitops__fail(JITOPS_ERR_OUT_OF_RANGE,
                          "%s: dimension %d of the output (%lld × %lld) overflows int64", fn, i,
                          (long long)in, (long long)repeats[i]);
    want[i] = in * repeats[i];
  }
  int same = big->ndim == num_repeats;
  for (int i = 0; same && i < num_repeats; ++i)
    same = big->shape[i] == want[i];
  if (!same) {
    char a[200], b[200];
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: %s has shape %s; %s repeated gives %s", fn,
                        big_arg, jitops__shape_text(big->shape, big->ndim, a, sizeof a), small_arg,
                        jitops__shape_text(want, num_repeats, b, sizeof b));
  }
  return JITOPS_SUCCESS;
}

static jitops_status check_pair(const char *fn, jitops_runtime_t *runtime, const DLTensor *small,
                                const char *small_arg, const DLTensor *big, const char *big_arg,
                                const int64_t *repeats, int num_repeats, int backward) {
  JITOPS__REQUIRE_NONNULL(fn, runtime);
  JITOPS__TRY(jitops__tensor_check(fn, small_arg, small, runtime, MAX_RANK));
  JITOPS__TRY(jitops__tensor_check(fn, big_arg, big, runtime, MAX_RANK));
  JITOPS__TRY(check_repeats(fn, small, small_arg, repeats, num_repeats, big, big_arg));
  const jitops__dtype ds = jitops__dtype_of(small->dtype), db = jitops__dtype_of(big->dtype);
  const jitops__dtype lead = backward ? db : ds;
  const char *lead_arg = backward ? big_arg : small_arg;
  if (!jitops__dtype_is_float(lead) && !(jitops__dtype_is_int(lead) && !backward))
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE, "%s: %s has dtype %s; %s takes %s", fn, lead_arg,
                        jitops__dtype_name(lead), fn,
                        backward ? "f32, f64, f16 and bf16" : "f32, f64, f16, bf16, i32 and i64");
  if (ds != db)
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE, "%s: %s has dtype %s but %s has %s", fn,
                        backward ? small_arg : big_arg, jitops__dtype_name(backward ? ds : db),
                        lead_arg, jitops__dtype_name(lead));
  JITOPS__TRY(jitops__check_aligned(fn, small_arg, small));
  JITOPS__TRY(jitops__check_aligned(fn, big_arg, big));
  JITOPS__TRY(
      jitops__check_no_self_overlap(fn, backward ? small_arg : big_arg, backward ? small : big));
  return JITOPS_SUCCESS;
}

/* ---- collapsing --------------------------------------------------------------------------- */

/* Drops dimensions of size 1 in both tensors and merges a dimension into its outer neighbour
 * when the inner one is not repeated and both tensors are contiguous across the two, or when
 * both have input size 1 (two repeat counts over one block). */
static void collapse(rgeom *g, const DLTensor *small, const DLTensor *big, const int64_t *repeats,
                     int num_repeats) {
  int64_t ss[MAX_RANK], bs[MAX_RANK];
  jitops__tensor_strides(small, ss);
  jitops__tensor_strides(big, bs);
  const int pad = num_repeats - small->ndim;
  g->n = 0;
  for (int i = 0; i < num_repeats; ++i) {
    rdim d = {i < pad ? 1 : small->shape[i - pad], repeats[i], i < pad ? 0 : ss[i - pad], bs[i]};
    if (d.in == 1 && d.rep == 1)
      continue;
    if (g->n > 0) {
      rdim *o = &g->d[g->n - 1];
      if (d.rep == 1 && o->in_stride == d.in_stride * d.in &&
          o->out_stride == d.out_stride * d.in) {
        o->in *= d.in;
        o->in_stride = d.in_stride;
        o->out_stride = d.out_stride;
        continue;
      }
      if (d.in == 1 && o->in == 1 && o->out_stride == d.out_stride * d.rep) {
        o->rep *= d.rep;
        o->out_stride = d.out_stride;
        continue;
      }
    }
    g->d[g->n++] = d;
  }
  if (g->n == 0) {
    g->n = 1;
    g->d[0] = (rdim){1, 1, 1, 1};
  }
}

/* The widest VEC (elements per access, at most 16 bytes) that every access of the innermost
 * dimension allows: unit strides, whole vectors per copy, and aligned addresses. */
static int vector_width(const rgeom *g, size_t elem, const void *a, const void *b) {
  const rdim *in = &g->d[g->n - 1];
  if (in->in_stride != 1 || in->out_stride != 1)
    return 1;
  int vec = (int)(16 / elem);
  for (; vec > 1; vec /= 2) {
    const size_t bytes = (size_t)vec * elem;
    int ok = in->in % vec == 0 && (uintptr_t)a % bytes == 0 && (uintptr_t)b % bytes == 0;
    for (int i = 0; ok && i < g->n - 1; ++i) {
      const rdim *d = &g->d[i];
      ok = (d->in_stride * (int64_t)elem) % (int64_t)bytes == 0 &&
           (d->out_stride * (int64_t)elem) % (int64_t)bytes == 0;
    }
    if (ok)
      return vec;
  }
  return 1;
}

static int64_t numel_of(const rgeom *g, int out) {
  int64_t n = 1;
  for (int i = 0; i < g->n; ++i)
    n *= out ? g->d[i].in * g->d[i].rep : g->d[i].in;
  return n;
}

/* ---- forward ------------------------------------------------------------------------------- */

static const char *bits_type(size_t elem) {
  return elem == 2 ? "unsigned short" : elem == 4 ? "unsigned int" : "unsigned long long";
}

static void fwd_name(size_t elem, int nb, int vec, int wide, char *buf, size_t size) {
  snprintf(buf, size, "jitops::repeat::fwd<%s, %d, %d, %s>", bits_type(elem), nb, vec,
           wide ? "true" : "false");
}

/* Index arithmetic needs 64 bits only when an extent reaches 2^31. */
static int needs_wide(const rgeom *g, int64_t extra) {
  int64_t biggest = extra;
  for (int i = 0; i < g->n; ++i) {
    const int64_t v[3] = {g->d[i].in, g->d[i].rep, g->d[i].in * g->d[i].rep};
    for (int k = 0; k < 3; ++k)
      biggest = v[k] > biggest ? v[k] : biggest;
  }
  return biggest >= ((int64_t)1 << 31);
}

jitops_status jitops_repeat(jitops_runtime_t *runtime, const DLTensor *x, const int64_t *repeats,
                            int num_repeats, DLTensor *y, void *stream) {
  static const char fn[] = "jitops_repeat";
  JITOPS__TRY(check_pair(fn, runtime, x, "x", y, "y", repeats, num_repeats, 0));
  if (jitops__tensor_numel(y) == 0)
    return JITOPS_SUCCESS;
  rgeom g;
  collapse(&g, x, y, repeats, num_repeats);
  const size_t elem = jitops__dtype_size(jitops__dtype_of(x->dtype));
  const char *xp = jitops__tensor_ptr(x);
  char *yp = jitops__tensor_ptr(y);
  const int vec = vector_width(&g, elem, xp, yp);
  const rdim *w = &g.d[g.n - 1];
  const int nb = g.n - 1;
  const int64_t width = w->in * w->rep, rows = numel_of(&g, 1) / width;
  /* Threads per row: enough for the row's vectors, so narrow rows share a block. */
  int64_t tc = 1;
  while (tc < THREADS && tc * vec < width)
    tc *= 2;
  const int64_t per_block = tc * UNROLL * vec;
  const int64_t col_blocks = (width + per_block - 1) / per_block;
  const int64_t row_blocks = (rows + THREADS / tc - 1) / (THREADS / tc);
  if (col_blocks > 2147483647ll / row_blocks)
    return jitops__fail(JITOPS_ERR_UNSUPPORTED, "%s: the output is too large for one grid", fn);

  int64_t words[10 + 4 * MAX_RANK];
  size_t n = 0;
  words[n++] = (int64_t)(uintptr_t)xp;
  words[n++] = (int64_t)(uintptr_t)yp;
  words[n++] = rows;
  words[n++] = width;
  words[n++] = w->in;
  words[n++] = w->in_stride;
  words[n++] = w->out_stride;
  words[n++] = tc;
  words[n++] = col_blocks;
  words[n++] = (tc * vec) % w->in;
  const int nbs = nb > 0 ? nb : 1;
  for (int part = 0; part < 4; ++part)
    for (int i = 0; i < nbs; ++i) {
      const rdim *d = &g.d[i];
      const int64_t v[4] = {d->in * d->rep, d->in, d->in_stride, d->out_stride};
      words[n++] = i < nb ? v[part] : 1;
    }
  char name[128];
  fwd_name(elem, nb, vec,
           needs_wide(&g, col_blocks * row_blocks > rows ? col_blocks * row_blocks : rows), name,
           sizeof name);
  jitops_kernel_t *kernel;
  JITOPS__TRY(jitops_kernel_get(runtime, SOURCE, name, NULL, 0, &kernel));
  void *args[] = {words};
  return jitops__launch(kernel, (uint32_t)(col_blocks * row_blocks), 1, 1, THREADS, 1, 1, 0, stream,
                        args);
}

/* ---- backward ------------------------------------------------------------------------------ */

typedef struct bwd_plan {
  rgeom g;
  int vec;
  int64_t n;      /* dx vectors */
  int64_t combos; /* copies per element */
  int64_t splits; /* blockIdx.y ranges of copies; 1: no partial sums */
  int64_t split_len;
  size_t scratch_bytes;
} bwd_plan;

static void bwd_plan_make(bwd_plan *p, jitops_runtime_t *rt, const DLTensor *dy,
                          const int64_t *repeats, int num_repeats, const DLTensor *dx) {
  collapse(&p->g, dx, dy, repeats, num_repeats);
  const jitops__dtype dt = jitops__dtype_of(dy->dtype);
  const size_t elem = jitops__dtype_size(dt);
  p->vec = vector_width(&p->g, elem, jitops__tensor_ptr(dx), jitops__tensor_ptr(dy));
  p->n = numel_of(&p->g, 0) / p->vec;
  p->combos = 1;
  for (int i = 0; i < p->g.n; ++i)
    p->combos *= p->g.d[i].rep;
  /* Split the copies when dx alone cannot occupy the GPU: at least 4 threads per core slot
   * of every SM, each split at least 64 copies long. */
  int sms = jitops__runtime_props(rt)->sm_count;
  if (sms <= 0)
    sms = 132;
  const int64_t want_threads = (int64_t)sms * 2048;
  p->splits = 1;
  if (p->n > 0 && p->n < want_threads && p->combos >= 128) {
    int64_t s = (want_threads + p->n - 1) / p->n;
    if (s > p->combos / 64)
      s = p->combos / 64;
    if (s > 65535)
      s = 65535;
    p->splits = s > 1 ? s : 1;
  }
  p->split_len = (p->combos + p->splits - 1) / p->splits;
  if (p->splits > 1)
    p->splits = (p->combos + p->split_len - 1) / p->split_len;
  const size_t acc = jitops__dtype_size(jitops__dtype_accumulator(dt));
  p->scratch_bytes = p->splits > 1 ? (size_t)p->splits * (size_t)p->n * (size_t)p->vec * acc : 0;
}

static size_t bwd_pack(const bwd_plan *p, const DLTensor *dy, const DLTensor *dx, void *partial,
                       int64_t *words) {
  size_t n = 0;
  words[n++] = (int64_t)(uintptr_t)jitops__tensor_ptr(dy);
  words[n++] = (int64_t)(uintptr_t)jitops__tensor_ptr(dx);
  words[n++] = (int64_t)(uintptr_t)partial;
  words[n++] = p->n;
  words[n++] = p->combos;
  words[n++] = p->split_len;
  for (int part = 0; part < 5; ++part)
    for (int i = 0; i < p->g.n; ++i) {
      const rdim *d = &p->g.d[i];
      const int64_t v[5] = {d->in, d->rep, d->in_stride, d->out_stride, d->in * d->out_stride};
      words[n++] = v[part];
    }
  return n;
}

static jitops_status bwd_check(const char *fn, jitops_runtime_t *rt, const DLTensor *dy,
                               const int64_t *repeats, int num_repeats, const DLTensor *dx) {
  return check_pair(fn, rt, dx, "dx", dy, "dy", repeats, num_repeats, 1);
}

jitops_status jitops_repeat_backward(jitops_runtime_t *runtime, const DLTensor *dy,
                                     const int64_t *repeats, int num_repeats, DLTensor *dx,
                                     const jitops_workspace *workspace, void *stream) {
  static const char fn[] = "jitops_repeat_backward";
  JITOPS__TRY(bwd_check(fn, runtime, dy, repeats, num_repeats, dx));
  if (jitops__tensor_numel(dx) == 0)
    return JITOPS_SUCCESS;
  bwd_plan p;
  bwd_plan_make(&p, runtime, dy, repeats, num_repeats, dx);
  const char *t = jitops__dtype_cname(jitops__dtype_of(dy->dtype));
  const int split = p.splits > 1;
  const char *wide =
      needs_wide(&p.g, p.combos > p.n * p.vec ? p.combos : p.n * p.vec) ? "true" : "false";
  char name[128], finish_name[128];
  snprintf(name, sizeof name, "jitops::repeat::bwd<%s, %d, %d, %d, %s>", t, p.g.n, p.vec, split,
           wide);
  snprintf(finish_name, sizeof finish_name, "jitops::repeat::bwd_finish<%s, %d, %d, %s>", t, p.g.n,
           p.vec, wide);
  jitops_kernel_t *kernel, *finish = NULL;
  JITOPS__TRY(jitops_kernel_get(runtime, SOURCE, name, NULL, 0, &kernel));
  if (split)
    JITOPS__TRY(jitops_kernel_get(runtime, SOURCE, finish_name, NULL, 0, &finish));
  jitops__scratch scratch;
  JITOPS__TRY(jitops__scratch_acquire(runtime, stream, workspace, p.scratch_bytes, &scratch));
  int64_t words[6 + 5 * MAX_RANK];
  bwd_pack(&p, dy, dx, scratch.ptr, words);
  const int64_t blocks = (p.n + THREADS - 1) / THREADS;
  jitops_status status = JITOPS_SUCCESS;
  if (blocks > 2147483647ll)
    status = jitops__fail(JITOPS_ERR_UNSUPPORTED, "%s: dx is too large for one grid", fn);
  void *args[] = {words};
  if (status == JITOPS_SUCCESS)
    status = jitops__launch(kernel, (uint32_t)blocks, (uint32_t)p.splits, 1, THREADS, 1, 1, 0,
                            stream, args);
  if (status == JITOPS_SUCCESS && split) {
    void *finish_args[] = {words, &p.splits};
    status = jitops__launch(finish, (uint32_t)blocks, 1, 1, THREADS, 1, 1, 0, stream, finish_args);
  }
  jitops__scratch_release(runtime, stream, &scratch);
  return status;
}

jitops_status jitops_repeat_backward_workspace_size(jitops_runtime_t *runtime, const DLTensor *dy,
                                                    const int64_t *repeats, int num_repeats,
                                                    const DLTensor *dx, size_t *bytes) {
  static const char fn[] = "jitops_repeat_backward_workspace_size";
  JITOPS__REQUIRE_NONNULL(fn, bytes);
  JITOPS__TRY(bwd_check(fn, runtime, dy, repeats, num_repeats, dx));
  *bytes = 0;
  if (jitops__tensor_numel(dx) == 0)
    return JITOPS_SUCCESS;
  bwd_plan p;
  bwd_plan_make(&p, runtime, dy, repeats, num_repeats, dx);
  *bytes = p.scratch_bytes;
  return JITOPS_SUCCESS;
}

/* ---- prewarm catalogue --------------------------------------------------------------------- */

/* Forward: a matrix of 2- or 4-byte elements repeated along both dimensions (vectorized), and
 * a 4-byte vector. Backward: f32 and bf16 on a matrix repeated along both dimensions. */
static const struct {
  size_t elem;
  int nb;
} fwd_entries[] = {{4, 1}, {2, 1}, {4, 0}};
static const char *const bwd_types[] = {"float", "jitops::bfloat16"};
enum { N_FWD = 3, N_BWD = 2 };

static size_t repeat_count(void) {
  return N_FWD + N_BWD;
}

static void repeat_entry(size_t index, char *buf, size_t size) {
  if (index < N_FWD) {
    const size_t elem = fwd_entries[index].elem;
    fwd_name(elem, fwd_entries[index].nb, (int)(16 / elem), 0, buf, size);
  } else {
    const size_t i = index - N_FWD;
    snprintf(buf, size, "jitops::repeat::bwd<%s, 2, %d, 0, false>", bwd_types[i], i == 0 ? 4 : 8);
  }
}

static const char *repeat_describe(size_t index) {
  static _Thread_local char text[128];
  repeat_entry(index, text, sizeof text);
  return text;
}

static jitops_status repeat_compile(jitops_runtime_t *runtime, size_t index) {
  char name[128];
  repeat_entry(index, name, sizeof name);
  jitops_kernel_t *kernel;
  return jitops_kernel_get(runtime, SOURCE, name, NULL, 0, &kernel);
}

const jitops__catalogue_family jitops__catalogue_repeat = {"repeat", repeat_count, repeat_describe,
                                                           repeat_compile};
