#include "runtime/tensor_checks.h"

#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "runtime/dtype.h"
#include "runtime/runtime_internal.h"

/* The most dimensions a layout check looks at: far more than any op takes (they stop at 16),
 * so a tensor with more is simply not proven disjoint. */
enum { MAX_NDIM = 64 };

/* ---- where a tensor lives, its rank and shape --------------------------------------------- */

static jitops_status check_shape(const char *fn, const char *arg, const DLTensor *t, int max_ndim) {
  if (t->ndim < 0 || t->ndim > max_ndim)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: %s has rank %d; expected 0..%d", fn, arg,
                        t->ndim, max_ndim);
  if (t->ndim > 0 && t->shape == NULL)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: %s->shape is NULL", fn, arg);
  for (int i = 0; i < t->ndim; ++i)
    if (t->shape[i] < 0)
      return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: %s->shape[%d] is %lld, negative", fn, arg,
                          i, (long long)t->shape[i]);
  if (t->data == NULL && jitops__tensor_numel(t) > 0)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: %s->data is NULL", fn, arg);
  return JITOPS_SUCCESS;
}

jitops_status jitops__tensor_check(const char *fn, const char *arg, const DLTensor *t,
                                   const jitops_runtime_t *rt, int max_ndim) {
  if (t == NULL)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, arg);
  if (t->device.device_type != kDLCUDA && t->device.device_type != kDLCUDAManaged)
    return jitops__fail(JITOPS_ERR_INVALID_DEVICE,
                        "%s: %s is not in CUDA device memory (DLPack device type %d)", fn, arg,
                        (int)t->device.device_type);
  if (rt->device >= 0 && t->device.device_id != rt->device)
    return jitops__fail(JITOPS_ERR_INVALID_DEVICE,
                        "%s: %s is on CUDA device %d, but the runtime is bound to device %d", fn,
                        arg, (int)t->device.device_id, rt->device);
  return check_shape(fn, arg, t, max_ndim);
}

bool jitops__tensor_in_host_memory(const DLTensor *t) {
  return t != NULL && (t->device.device_type == kDLCPU || t->device.device_type == kDLCUDAHost);
}

jitops_status jitops__host_tensor_check(const char *fn, const char *arg, const DLTensor *t,
                                        int ndim) {
  if (t == NULL)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, arg);
  if (!jitops__tensor_in_host_memory(t))
    return jitops__fail(JITOPS_ERR_INVALID_DEVICE,
                        "%s: %s must be in host memory (DLPack device type %d)", fn, arg,
                        (int)t->device.device_type);
  if (t->ndim != ndim)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: %s has rank %d; expected %d", fn, arg,
                        t->ndim, ndim);
  return check_shape(fn, arg, t, ndim);
}

/* The element count into *n; false when it overflows int64. */
static bool numel_fits(const DLTensor *t, int64_t *n) {
  *n = 0;
  for (int d = 0; d < t->ndim; ++d)
    if (t->shape[d] == 0)
      return true;
  int64_t count = 1;
  for (int d = 0; d < t->ndim; ++d)
    if (__builtin_mul_overflow(count, t->shape[d], &count))
      return false;
  *n = count;
  return true;
}

jitops_status jitops__check_numel(const char *fn, const char *arg, const DLTensor *t) {
  int64_t n;
  if (!numel_fits(t, &n))
    return jitops__fail(JITOPS_ERR_OUT_OF_RANGE, "%s: %s has more than 2^63 elements", fn, arg);
  return JITOPS_SUCCESS;
}

/* ---- layout ------------------------------------------------------------------------------- */

jitops_status jitops__check_aligned(const char *fn, const char *arg, const DLTensor *t) {
  const size_t element = jitops__dtype_size(jitops__dtype_of(t->dtype));
  const uintptr_t first = (uintptr_t)jitops__tensor_ptr(t);
  if (element > 1 && first % element != 0)
    return jitops__fail(JITOPS_ERR_INVALID_LAYOUT,
                        "%s: %s's first element is not aligned to its %zu-byte element size "
                        "(data + byte_offset, with byte_offset %llu)",
                        fn, arg, element, (unsigned long long)t->byte_offset);
  return JITOPS_SUCCESS;
}

bool jitops__tensor_byte_extent(const DLTensor *t, int64_t *low, int64_t *high) {
  int64_t strides[MAX_NDIM], below = 0, above = 0;
  jitops__tensor_strides(t, strides);
  for (int d = 0; d < t->ndim; ++d) {
    int64_t reach;
    if (t->shape[d] < 2)
      continue;
    if (!jitops__mul_i64(strides[d], t->shape[d] - 1, &reach))
      return false;
    int64_t *side = reach < 0 ? &below : &above;
    if (!jitops__add_i64(*side, reach, side))
      return false;
  }
  const int64_t element = (int64_t)jitops__dtype_size(jitops__dtype_of(t->dtype));
  return jitops__mul_i64(below, element, low) && jitops__mul_i64(above, element, high) &&
         jitops__add_i64(*high, element, high);
}

/* Fails unless data + byte_offset, and every element around it ([low, high) bytes from it),
 * lie inside the address space, with a byte_offset that a pointer may be offset by. */
static jitops_status check_address(const char *fn, const char *arg, const DLTensor *t, int64_t low,
                                   int64_t high) {
  const uint64_t data = (uint64_t)(uintptr_t)t->data;
  uint64_t first, last;
  if (t->byte_offset > (uint64_t)INT64_MAX)
    return jitops__fail(JITOPS_ERR_INVALID_LAYOUT, "%s: %s's byte_offset %llu is above 2^63 - 1",
                        fn, arg, (unsigned long long)t->byte_offset);
  if (__builtin_add_overflow(data, t->byte_offset, &first))
    return jitops__fail(JITOPS_ERR_INVALID_LAYOUT,
                        "%s: %s's byte_offset %llu takes its data pointer past the end of the "
                        "address space",
                        fn, arg, (unsigned long long)t->byte_offset);
  if ((uint64_t)0 - (uint64_t)low > first || __builtin_add_overflow(first, (uint64_t)high, &last))
    return jitops__fail(JITOPS_ERR_INVALID_LAYOUT,
                        "%s: %s's elements would lie outside the address space (from data + "
                        "byte_offset, by its shape and strides)",
                        fn, arg);
  return JITOPS_SUCCESS;
}

jitops_status jitops__check_addressable(const char *fn, const char *arg, const DLTensor *t) {
  if (t->ndim > MAX_NDIM)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: %s has rank %d; at most %d are supported",
                        fn, arg, t->ndim, MAX_NDIM);
  JITOPS__TRY(jitops__check_numel(fn, arg, t));
  int64_t low = 0, high = 0;
  if (jitops__tensor_numel(t) > 0 && !jitops__tensor_byte_extent(t, &low, &high)) {
    char shape[160];
    jitops__shape_text(t->shape, t->ndim, shape, sizeof shape);
    if (t->strides == NULL)
      return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: %s's shape %s spans more than 2^63 bytes",
                          fn, arg, shape);
    return jitops__fail(JITOPS_ERR_INVALID_LAYOUT,
                        "%s: %s's strides (shape %s) put elements more than 2^63 bytes from its "
                        "first",
                        fn, arg, shape);
  }
  return check_address(fn, arg, t, low, high);
}

typedef struct dim_extent {
  int64_t stride; /* absolute */
  int64_t size;   /* > 1 */
} dim_extent;

/* The dimensions of more than one element, by increasing |stride|; -1 when a stride has no
 * absolute value in int64 or there are more than MAX_NDIM, 0 when the tensor is empty. */
static int sorted_extents(const DLTensor *t, dim_extent *dims) {
  if (t->ndim > MAX_NDIM)
    return -1;
  int n = 0;
  for (int d = 0; d < t->ndim; ++d) {
    if (t->shape[d] == 0)
      return 0;
    if (t->shape[d] == 1)
      continue;
    if (t->strides[d] == INT64_MIN)
      return -1;
    dim_extent e = {t->strides[d] < 0 ? -t->strides[d] : t->strides[d], t->shape[d]};
    int i = n++;
    for (; i > 0 && dims[i - 1].stride > e.stride; --i) /* insertion sort: ndim is small */
      dims[i] = dims[i - 1];
    dims[i] = e;
  }
  return n;
}

bool jitops__tensor_overlaps_self(const DLTensor *t) {
  if (t->strides == NULL) /* compact row-major */
    return false;
  dim_extent dims[MAX_NDIM];
  const int n = sorted_extents(t, dims);
  if (n < 0)
    return true;
  /* `span`: how many addresses the dimensions seen so far reach (their largest offset + 1). */
  int64_t span = 1;
  for (int i = 0; i < n; ++i) {
    int64_t reach;
    if (dims[i].stride < span || __builtin_mul_overflow(dims[i].stride, dims[i].size - 1, &reach) ||
        __builtin_add_overflow(reach, span, &span))
      return true;
  }
  return false;
}

jitops_status jitops__check_no_self_overlap(const char *fn, const char *arg, const DLTensor *t) {
  if (jitops__tensor_overlaps_self(t))
    return jitops__fail(JITOPS_ERR_INVALID_LAYOUT,
                        "%s: %s's strides make several elements share an address; an output "
                        "must not overlap itself",
                        fn, arg);
  return JITOPS_SUCCESS;
}

/* ---- accessors ---------------------------------------------------------------------------- */

void jitops__tensor_strides(const DLTensor *t, int64_t *out) {
  if (t->strides != NULL) {
    memcpy(out, t->strides, (size_t)t->ndim * sizeof *out);
    return;
  }
  int64_t stride = 1;
  for (int i = t->ndim - 1; i >= 0; --i) {
    out[i] = stride;
    stride *= t->shape[i];
  }
}

int64_t jitops__tensor_numel(const DLTensor *t) {
  int64_t n;
  return numel_fits(t, &n) ? n : INT64_MAX;
}

void *jitops__tensor_ptr(const DLTensor *t) {
  return (void *)((uintptr_t)t->data + (uintptr_t)t->byte_offset);
}

int jitops__same_shape(const DLTensor *a, const DLTensor *b) {
  if (a->ndim != b->ndim)
    return 0;
  for (int i = 0; i < a->ndim; ++i)
    if (a->shape[i] != b->shape[i])
      return 0;
  return 1;
}

const char *jitops__shape_text(const int64_t *dims, int ndim, char *buf, size_t size) {
  size_t used = 0;
  used += (size_t)snprintf(buf, size, "[");
  for (int d = 0; d < ndim && used < size; ++d)
    used += (size_t)snprintf(buf + used, size - used, d ? ", %lld" : "%lld", (long long)dims[d]);
  if (used < size)
    snprintf(buf + used, size - used, "]");
  return buf;
}
