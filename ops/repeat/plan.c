#include "ops/repeat/plan.h"

#include <stdio.h>
#include <string.h>

/* ---- collapsing --------------------------------------------------------------------------- */

/* Drops dimensions of size 1 in both tensors and merges a dimension into its outer neighbour
 * when the inner one is not repeated and both tensors are contiguous across the two, or when
 * both have input size 1 (two repeat counts over one block). */
static void collapse(jitops__repeat_geom *g, const DLTensor *small, const DLTensor *big,
                     const int64_t *repeats, int num_repeats) {
  int64_t ss[JITOPS__REPEAT_MAX_RANK], bs[JITOPS__REPEAT_MAX_RANK];
  jitops__tensor_strides(small, ss);
  jitops__tensor_strides(big, bs);
  const int pad = num_repeats - small->ndim;
  g->n = 0;
  for (int i = 0; i < num_repeats; ++i) {
    jitops__repeat_dim d = {i < pad ? 1 : small->shape[i - pad], repeats[i],
                            i < pad ? 0 : ss[i - pad], bs[i]};
    if (d.in == 1 && d.rep == 1)
      continue;
    if (g->n > 0) {
      jitops__repeat_dim *o = &g->d[g->n - 1];
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
    g->d[0] = (jitops__repeat_dim){1, 1, 1, 1};
  }
}

/* The widest VEC (elements per access, at most 16 bytes) that every access of the innermost
 * dimension allows: unit strides, whole vectors per copy, and aligned addresses. */
static int vector_width(const jitops__repeat_geom *g, size_t elem, const void *a, const void *b) {
  const jitops__repeat_dim *in = &g->d[g->n - 1];
  if (in->in_stride != 1 || in->out_stride != 1)
    return 1;
  int vec = (int)(16 / elem);
  for (; vec > 1; vec /= 2) {
    const size_t bytes = (size_t)vec * elem;
    int ok = in->in % vec == 0 && (uintptr_t)a % bytes == 0 && (uintptr_t)b % bytes == 0;
    for (int i = 0; ok && i < g->n - 1; ++i) {
      const jitops__repeat_dim *d = &g->d[i];
      ok = (d->in_stride * (int64_t)elem) % (int64_t)bytes == 0 &&
           (d->out_stride * (int64_t)elem) % (int64_t)bytes == 0;
    }
    if (ok)
      return vec;
  }
  return 1;
}

static int64_t numel_of(const jitops__repeat_geom *g, int out) {
  int64_t n = 1;
  for (int i = 0; i < g->n; ++i)
    n *= out ? g->d[i].in * g->d[i].rep : g->d[i].in;
  return n;
}

/* ---- names -------------------------------------------------------------------------------- */

static const char *bits_type(size_t elem) {
  return elem == 2 ? "unsigned short" : elem == 4 ? "unsigned int" : "unsigned long long";
}

void jitops__repeat_fwd_name(size_t elem, int nb, int vec, int wide, char *buf, size_t size) {
  snprintf(buf, size, "jitops::repeat::fwd<%s, %d, %d, %s>", bits_type(elem), nb, vec,
           wide ? "true" : "false");
}

void jitops__repeat_bwd_name(jitops__dtype dtype, int dims, int vec, int split, int wide, char *buf,
                             size_t size) {
  snprintf(buf, size, "jitops::repeat::bwd<%s, %d, %d, %d, %s>", jitops__dtype_cname(dtype), dims,
           vec, split, wide ? "true" : "false");
}

/* Index arithmetic needs 64 bits only when an extent reaches 2^31. */
static int needs_wide(const jitops__repeat_geom *g, int64_t extra) {
  int64_t biggest = extra;
  for (int i = 0; i < g->n; ++i) {
    const int64_t v[3] = {g->d[i].in, g->d[i].rep, g->d[i].in * g->d[i].rep};
    for (int k = 0; k < 3; ++k)
      biggest = v[k] > biggest ? v[k] : biggest;
  }
  return biggest >= ((int64_t)1 << 31);
}

/* ---- forward ------------------------------------------------------------------------------- */

jitops_status jitops__repeat_plan_forward(const char *fn, const DLTensor *x, const int64_t *repeats,
                                          int num_repeats, const DLTensor *y,
                                          jitops__repeat_fwd_plan *p) {
  jitops__repeat_geom *g = &p->g;
  collapse(g, x, y, repeats, num_repeats);
  const size_t elem = jitops__dtype_size(jitops__dtype_of(x->dtype));
  p->vec = vector_width(g, elem, jitops__tensor_ptr(x), jitops__tensor_ptr(y));
  const jitops__repeat_dim *w = &g->d[g->n - 1];
  p->width = w->in * w->rep;
  p->rows = numel_of(g, 1) / p->width;
  /* Threads per row: enough for the row's vectors, so narrow rows share a block. */
  p->tc = 1;
  while (p->tc < JITOPS__REPEAT_THREADS && p->tc * p->vec < p->width)
    p->tc *= 2;
  const int64_t per_block = p->tc * JITOPS__REPEAT_UNROLL * p->vec;
  p->col_blocks = (p->width + per_block - 1) / per_block;
  const int64_t rows_per_block = JITOPS__REPEAT_THREADS / p->tc;
  p->row_blocks = (p->rows + rows_per_block - 1) / rows_per_block;
  if (p->col_blocks > 2147483647ll / p->row_blocks)
    return jitops__fail(JITOPS_ERR_UNSUPPORTED, "%s: the output is too large for one grid", fn);
  const int64_t blocks = p->col_blocks * p->row_blocks;
  jitops__repeat_fwd_name(elem, g->n - 1, p->vec,
                          needs_wide(g, blocks > p->rows ? blocks : p->rows), p->name,
                          sizeof p->name);
  return JITOPS_SUCCESS;
}

/* ---- backward ------------------------------------------------------------------------------ */

void jitops__repeat_plan_backward(const jitops__device_props *props, const DLTensor *dy,
                                  const int64_t *repeats, int num_repeats, const DLTensor *dx,
                                  jitops__repeat_bwd_plan *p) {
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
  int sms = props->sm_count;
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
  const int wide = needs_wide(&p->g, p->combos > p->n * p->vec ? p->combos : p->n * p->vec);
  jitops__repeat_bwd_name(dt, p->g.n, p->vec, p->splits > 1, wide, p->name, sizeof p->name);
  snprintf(p->finish_name, sizeof p->finish_name, "jitops::repeat::bwd_finish<%s, %d, %d, %s>",
           jitops__dtype_cname(dt), p->g.n, p->vec, wide ? "true" : "false");
}
