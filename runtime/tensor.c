/* DLPack tensor checks and dtype names shared by the op families. */
#include <string.h>

#include "runtime/op_support.h"
#include "runtime/runtime_internal.h"

jitops__dtype jitops__dtype_of(DLDataType t) {
  if (t.lanes != 1)
    return JITOPS__DTYPE_INVALID;
  if (t.code == kDLFloat && t.bits == 16)
    return JITOPS__DTYPE_F16;
  if (t.code == kDLBfloat && t.bits == 16)
    return JITOPS__DTYPE_BF16;
  if (t.code == kDLFloat && t.bits == 32)
    return JITOPS__DTYPE_F32;
  if (t.code == kDLFloat && t.bits == 64)
    return JITOPS__DTYPE_F64;
  if (t.code == kDLInt && t.bits == 32)
    return JITOPS__DTYPE_I32;
  if (t.code == kDLInt && t.bits == 64)
    return JITOPS__DTYPE_I64;
  return JITOPS__DTYPE_INVALID;
}

const char *jitops__dtype_cname(jitops__dtype d) {
  static const char *const names[] = {"",       "jitops::half", "jitops::bfloat16", "float",
                                      "double", "int",          "long long"};
  return (unsigned)d < sizeof names / sizeof names[0] ? names[d] : "";
}

const char *jitops__dtype_name(jitops__dtype d) {
  static const char *const names[] = {"invalid", "f16", "bf16", "f32", "f64", "i32", "i64"};
  return (unsigned)d < sizeof names / sizeof names[0] ? names[d] : "invalid";
}

size_t jitops__dtype_size(jitops__dtype d) {
  static const size_t sizes[] = {0, 2, 2, 4, 8, 4, 8};
  return (unsigned)d < sizeof sizes / sizeof sizes[0] ? sizes[d] : 0;
}

int64_t jitops__tensor_numel(const DLTensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i)
    n *= t->shape[i];
  return n;
}

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

void *jitops__tensor_ptr(const DLTensor *t) {
  return (char *)t->data + t->byte_offset;
}

int jitops__same_shape(const DLTensor *a, const DLTensor *b) {
  if (a->ndim != b->ndim)
    return 0;
  for (int i = 0; i < a->ndim; ++i)
    if (a->shape[i] != b->shape[i])
      return 0;
  return 1;
}

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

jitops_status jitops__host_tensor_check(const char *fn, const char *arg, const DLTensor *t,
                                        int ndim) {
  if (t == NULL)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, arg);
  if (t->device.device_type != kDLCPU && t->device.device_type != kDLCUDAHost)
    return jitops__fail(JITOPS_ERR_INVALID_DEVICE,
                        "%s: %s must be in host memory (DLPack device type %d)", fn, arg,
                        (int)t->device.device_type);
  if (t->ndim != ndim)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: %s has rank %d; expected %d", fn, arg,
                        t->ndim, ndim);
  return check_shape(fn, arg, t, ndim);
}
