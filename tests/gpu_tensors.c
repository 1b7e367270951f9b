#include "gpu_tensors.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const gt_dtype gt_dtypes[GT_COUNT] = {
    {"f32", {kDLFloat, 32, 1}, 4, 0, 0x1p-24, 0x1p-24, 0},
    {"f64", {kDLFloat, 64, 1}, 8, 0, 0x1p-53, 0x1p-53, 0},
    {"f16", {kDLFloat, 16, 1}, 2, 0, 0x1p-11, 0x1p-24, 0x1p-24},
    {"bf16", {kDLBfloat, 16, 1}, 2, 0, 0x1p-8, 0x1p-24, 0x1p-133},
    {"i32", {kDLInt, 32, 1}, 4, 1, 0, 0, 0},
    {"i64", {kDLInt, 64, 1}, 8, 1, 0, 0, 0},
};

const char *const gt_layout_names[GT_ALL_LAYOUTS] = {"contiguous", "permuted", "sliced", "padded"};

/* ---- 16-bit floats, round to nearest even -------------------------------------------------- */

static uint16_t f16_from_f32(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u)
    return (uint16_t)(sign | (a > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (a >= 0x477ff000u) /* 65520 and up round to infinity */
    return (uint16_t)(sign | 0x7c00u);
  if (a < 0x38800000u) { /* below 2^-14: a subnormal half (exact scaling, then RNE) */
    float v;
    memcpy(&v, &a, 4);
    return (uint16_t)(sign | (uint32_t)nearbyintf(v * 16777216.0f));
  }
  uint32_t r = a - 0x38000000u;
  r += 0xfffu + ((r >> 13) & 1u);
  return (uint16_t)(sign | (r >> 13));
}

static float f16_to_f32(uint16_t h) {
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  float v;
  if (e == 0)
    v = ldexpf((float)m, -24);
  else if (e == 31)
    v = m ? NAN : INFINITY;
  else
    v = ldexpf((float)(m | 0x400u), (int)e - 25);
  return (h & 0x8000u) ? -v : v;
}

static uint16_t bf16_from_f32(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

static float bf16_to_f32(uint16_t b) {
  const uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

void gt_put(int dt, void *base, int64_t idx, double v, int64_t iv) {
  switch (dt) {
  case GT_F32:
    ((float *)base)[idx] = (float)v;
    break;
  case GT_F64:
    ((double *)base)[idx] = v;
    break;
  case GT_F16:
    ((uint16_t *)base)[idx] = f16_from_f32((float)v);
    break;
  case GT_BF16:
    ((uint16_t *)base)[idx] = bf16_from_f32((float)v);
    break;
  case GT_I32:
    ((int32_t *)base)[idx] = (int32_t)(uint32_t)(uint64_t)iv;
    break;
  default:
    ((int64_t *)base)[idx] = iv;
    break;
  }
}

double gt_getf(int dt, const void *base, int64_t idx) {
  switch (dt) {
  case GT_F32:
    return ((const float *)base)[idx];
  case GT_F64:
    return ((const double *)base)[idx];
  case GT_F16:
    return f16_to_f32(((const uint16_t *)base)[idx]);
  case GT_BF16:
    return bf16_to_f32(((const uint16_t *)base)[idx]);
  case GT_I32:
    return ((const int32_t *)base)[idx];
  default:
    return (double)((const int64_t *)base)[idx];
  }
}

int64_t gt_geti(int dt, const void *base, int64_t idx) {
  return dt == GT_I32 ? ((const int32_t *)base)[idx] : ((const int64_t *)base)[idx];
}

double gt_round(int dt, double v) {
  unsigned char buf[8];
  gt_put(dt, buf, 0, v, 0);
  return gt_getf(dt, buf, 0);
}

/* ---- views ------------------------------------------------------------------------------- */

void gt_view_make(gt_view *v, int ndim, const int64_t *shape, int layout) {
  memset(v, 0, sizeof *v);
  v->ndim = ndim;
  v->layout = layout;
  v->numel = 1;
  for (int d = 0; d < ndim; ++d) {
    v->shape[d] = shape[d];
    v->numel *= shape[d];
  }
  int64_t base[8];
  for (int d = 0; d < ndim; ++d)
    base[d] = shape[d];
  if (layout == GT_PADDED && ndim > 0)
    base[ndim - 1] = shape[ndim - 1] + 1;
  if (layout == GT_SLICED) {
    /* One extra row in every dimension and every other element of the last one, starting one
     * row and one element in: gaps everywhere, a byte offset, a non-unit inner stride. */
    for (int d = 0; d < ndim; ++d)
      base[d] = d == ndim - 1 ? 2 * shape[d] + 1 : shape[d] + 1;
  }
  int64_t stride = 1;
  if (layout == GT_PERMUTED) {
    for (int d = 0; d < ndim; ++d) { /* column-major: the first dimension is unit-stride */
      v->strides[d] = stride;
      stride *= base[d] > 0 ? base[d] : 1;
    }
  } else {
    for (int d = ndim - 1; d >= 0; --d) {
      v->strides[d] = stride;
      stride *= base[d] > 0 ? base[d] : 1;
    }
  }
  v->extent = stride;
  if (layout == GT_SLICED && ndim > 0) {
    v->strides[ndim - 1] *= 2;
    v->offset = 1 + (ndim > 1 ? v->strides[0] : 0);
  }
}

/* Calls visit(user, logical index, base index) over the view, row-major. */
static void walk(const gt_view *v, void (*visit)(void *, int64_t, int64_t), void *user) {
  if (v->numel == 0)
    return;
  if (v->layout == GT_CONTIGUOUS && v->offset == 0) {
    for (int64_t i = 0; i < v->numel; ++i)
      visit(user, i, i);
    return;
  }
  int64_t idx[8] = {0}, off = v->offset;
  for (int64_t i = 0; i < v->numel; ++i) {
    visit(user, i, off);
    for (int d = v->ndim - 1; d >= 0; --d) {
      if (++idx[d] < v->shape[d]) {
        off += v->strides[d];
        break;
      }
      off -= (v->shape[d] - 1) * v->strides[d];
      idx[d] = 0;
    }
  }
}

static void describe_view(gt_tensor *t, int dt, const gt_view *view, void *data) {
  memset(t, 0, sizeof *t);
  t->dt = dt;
  t->view = *view;
  t->dl.data = data;
  t->dl.device.device_type = kDLCUDA;
  t->dl.device.device_id = 0;
  t->dl.ndim = view->ndim;
  t->dl.dtype = gt_dtypes[dt].dl;
  t->dl.shape = t->view.shape;
  t->dl.strides = view->layout == GT_CONTIGUOUS ? NULL : t->view.strides;
  t->dl.byte_offset = (uint64_t)view->offset * gt_dtypes[dt].size;
}

int gt_alloc(gt_tensor *t, int dt, const gt_view *view) {
  const size_t bytes = (size_t)view->extent * gt_dtypes[dt].size;
  void *device = NULL;
  if (cudaMalloc(&device, bytes) != cudaSuccess) {
    describe_view(t, dt, view, NULL);
    return 0;
  }
  describe_view(t, dt, view, device);
  t->device = device;
  t->host = malloc(bytes);
  return t->host != NULL;
}

void gt_fake(gt_tensor *t, int dt, const gt_view *view) {
  describe_view(t, dt, view, (void *)(uintptr_t)0x7f0000000000ull);
}

void gt_free(gt_tensor *t) {
  if (t->device)
    cudaFree(t->device);
  free(t->host);
  memset(t, 0, sizeof *t);
}

typedef struct put_ctx {
  const gt_tensor *t;
  const double *v;
  const int64_t *iv;
} put_ctx;

static void put_visit(void *user, int64_t logical, int64_t at) {
  const put_ctx *c = user;
  gt_put(c->t->dt, c->t->host, at, c->v ? c->v[logical] : 0.0, c->iv ? c->iv[logical] : 0);
}

int gt_upload(gt_tensor *t, const double *v, const int64_t *iv, void *stream) {
  const size_t bytes = (size_t)t->view.extent * gt_dtypes[t->dt].size;
  memset(t->host, 0x5a, bytes);
  put_ctx c = {t, v, iv};
  walk(&t->view, put_visit, &c);
  return cudaMemcpyAsync(t->device, t->host, bytes, cudaMemcpyHostToDevice, (cudaStream_t)stream) ==
             cudaSuccess &&
         cudaStreamSynchronize((cudaStream_t)stream) == cudaSuccess;
}

int gt_poison(gt_tensor *t, void *stream) {
  return cudaMemsetAsync(t->device, 0xff, (size_t)t->view.extent * gt_dtypes[t->dt].size,
                         (cudaStream_t)stream) == cudaSuccess;
}

typedef struct get_ctx {
  const gt_tensor *t;
  double *v;
  int64_t *iv;
  unsigned char *seen;
} get_ctx;

static void get_visit(void *user, int64_t logical, int64_t at) {
  const get_ctx *c = user;
  if (c->v)
    c->v[logical] = gt_getf(c->t->dt, c->t->host, at);
  if (c->iv)
    c->iv[logical] = gt_geti(c->t->dt, c->t->host, at);
  if (c->seen)
    c->seen[at] = 1;
}

int64_t gt_download(gt_tensor *t, double *v, int64_t *iv, void *stream) {
  const size_t esize = gt_dtypes[t->dt].size;
  const size_t bytes = (size_t)t->view.extent * esize;
  if (cudaMemcpyAsync(t->host, t->device, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)stream) !=
          cudaSuccess ||
      cudaStreamSynchronize((cudaStream_t)stream) != cudaSuccess)
    return -1;
  const int dense = t->view.layout == GT_CONTIGUOUS && t->view.extent == t->view.numel;
  unsigned char *seen = dense ? NULL : calloc((size_t)t->view.extent, 1);
  get_ctx c = {t, gt_dtypes[t->dt].is_int ? NULL : v, gt_dtypes[t->dt].is_int ? iv : NULL, seen};
  walk(&t->view, get_visit, &c);
  int64_t stray = 0;
  if (seen != NULL) {
    for (int64_t e = 0; e < t->view.extent; ++e) {
      if (seen[e])
        continue;
      for (size_t b = 0; b < esize; ++b)
        if (t->host[(size_t)e * esize + b] != 0xff) {
          ++stray;
          break;
        }
    }
    free(seen);
  }
  return stray;
}
