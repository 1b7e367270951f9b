/* Argument validation of jitops_repeat and jitops_repeat_backward on a compile-only runtime:
 * every bad argument gets its status and a message naming the argument; valid calls compile
 * their kernel and stop at the launch with JITOPS_ERR_NO_DEVICE; empty outputs succeed. */
#include "testutil.h"

static const DLDataType F32 = {kDLFloat, 32, 1}, F16 = {kDLFloat, 16, 1}, I32 = {kDLInt, 32, 1},
                        I64 = {kDLInt, 64, 1}, U8 = {kDLUInt, 8, 1};

static DLTensor tensor(int ndim, int64_t *shape, int64_t *strides, DLDataType dtype) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = (void *)(uintptr_t)0x100000;
  t.device.device_type = kDLCUDA;
  t.ndim = ndim;
  t.dtype = dtype;
  t.shape = shape;
  t.strides = strides;
  return t;
}

static void forward_arguments(jitops_runtime_t *rt) {
  int64_t sx[2] = {3, 4}, sy[3] = {2, 6, 4}, sy_bad[3] = {2, 6, 5};
  const int64_t rep[3] = {2, 2, 1};
  DLTensor x = tensor(2, sx, NULL, F32), y = tensor(3, sy, NULL, F32);

  CHECK_FAILS(jitops_repeat(NULL, &x, rep, 3, &y, NULL), JITOPS_ERR_INVALID_ARGUMENT,
              "jitops_repeat: runtime is NULL");
  CHECK_FAILS(jitops_repeat(rt, NULL, rep, 3, &y, NULL), JITOPS_ERR_INVALID_ARGUMENT,
              "jitops_repeat: x is NULL");
  CHECK_FAILS(jitops_repeat(rt, &x, rep, 3, NULL, NULL), JITOPS_ERR_INVALID_ARGUMENT,
              "jitops_repeat: y is NULL");
  CHECK_FAILS(jitops_repeat(rt, &x, NULL, 3, &y, NULL), JITOPS_ERR_INVALID_ARGUMENT,
              "repeats is NULL but num_repeats is 3");
  CHECK_FAILS(jitops_repeat(rt, &x, rep, 1, &y, NULL), JITOPS_ERR_INVALID_SHAPE,
              "repeats has 1 entries, fewer than x's 2 dimensions");
  CHECK_FAILS(jitops_repeat(rt, &x, rep, 9, &y, NULL), JITOPS_ERR_INVALID_SHAPE,
              "num_repeats is 9; expected 0..8");
  CHECK_FAILS(jitops_repeat(rt, &x, rep, -1, &y, NULL), JITOPS_ERR_INVALID_SHAPE,
              "num_repeats is -1");
  const int64_t negative[3] = {2, -3, 1};
  CHECK_FAILS(jitops_repeat(rt, &x, negative, 3, &y, NULL), JITOPS_ERR_OUT_OF_RANGE,
              "repeats[1] is -3");
  DLTensor yb = tensor(3, sy_bad, NULL, F32);
  CHECK_FAILS(jitops_repeat(rt, &x, rep, 3, &yb, NULL), JITOPS_ERR_INVALID_SHAPE,
              "y has shape [2, 6, 5]; x repeated gives [2, 6, 4]");
  DLTensor y2 = tensor(2, sx, NULL, F32);
  CHECK_FAILS(jitops_repeat(rt, &x, rep, 3, &y2, NULL), JITOPS_ERR_INVALID_SHAPE,
              "y has shape [3, 4]");
  const int64_t huge[2] = {INT64_MAX / 2, 1};
  CHECK_FAILS(jitops_repeat(rt, &x, huge, 2, &y2, NULL), JITOPS_ERR_OUT_OF_RANGE,
              "dimension 0 of the output");
  DLTensor y16 = tensor(3, sy, NULL, F16);
  CHECK_FAILS(jitops_repeat(rt, &x, rep, 3, &y16, NULL), JITOPS_ERR_INVALID_DTYPE,
              "y has dtype f16 but x has f32");
  DLTensor xu = tensor(2, sx, NULL, U8), yu = tensor(3, sy, NULL, U8);
  CHECK_FAILS(jitops_repeat(rt, &xu, rep, 3, &yu, NULL), JITOPS_ERR_INVALID_DTYPE,
              "x has dtype invalid");
  DLTensor host = x;
  host.device.device_type = kDLCPU;
  CHECK_FAILS(jitops_repeat(rt, &host, rep, 3, &y, NULL), JITOPS_ERR_INVALID_DEVICE,
              "x is not in CUDA device memory");
  DLTensor misaligned = x;
  misaligned.byte_offset = 6;
  CHECK_FAILS(jitops_repeat(rt, &misaligned, rep, 3, &y, NULL), JITOPS_ERR_INVALID_LAYOUT,
              "x's first element");
  int64_t bad_strides[3] = {24, 1, 1};
  DLTensor yo = tensor(3, sy, bad_strides, F32);
  CHECK_FAILS(jitops_repeat(rt, &x, rep, 3, &yo, NULL), JITOPS_ERR_INVALID_LAYOUT,
              "y's strides make several elements share an address");

  /* Valid: ints are copied too; reaches the launch. */
  DLTensor xi = tensor(2, sx, NULL, I64), yi = tensor(3, sy, NULL, I64);
  CHECK_FAILS(jitops_repeat(rt, &xi, rep, 3, &yi, NULL), JITOPS_ERR_NO_DEVICE, NULL);
  CHECK_FAILS(jitops_repeat(rt, &x, rep, 3, &y, NULL), JITOPS_ERR_NO_DEVICE, NULL);
  /* A zero repeat: an empty output, nothing to launch. */
  int64_t sz[3] = {2, 0, 4};
  const int64_t zero[3] = {2, 0, 1};
  DLTensor ye = tensor(3, sz, NULL, F32);
  CHECK_OK(jitops_repeat(rt, &x, zero, 3, &ye, NULL));
  /* A scalar with no repeats is a one-element copy. */
  DLTensor s = tensor(0, NULL, NULL, F32);
  CHECK_FAILS(jitops_repeat(rt, &s, NULL, 0, &s, NULL), JITOPS_ERR_NO_DEVICE, NULL);
}

static void backward_arguments(jitops_runtime_t *rt) {
  int64_t sx[2] = {3, 4}, sy[3] = {2, 6, 4}, sx_bad[2] = {3, 5};
  const int64_t rep[3] = {2, 2, 1};
  DLTensor dx = tensor(2, sx, NULL, F32), dy = tensor(3, sy, NULL, F32);
  CHECK_FAILS(jitops_repeat_backward(NULL, &dy, rep, 3, &dx, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "jitops_repeat_backward: runtime is NULL");
  CHECK_FAILS(jitops_repeat_backward(rt, NULL, rep, 3, &dx, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "dy is NULL");
  CHECK_FAILS(jitops_repeat_backward(rt, &dy, rep, 3, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "dx is NULL");
  DLTensor dxb = tensor(2, sx_bad, NULL, F32);
  CHECK_FAILS(jitops_repeat_backward(rt, &dy, rep, 3, &dxb, NULL, NULL), JITOPS_ERR_INVALID_SHAPE,
              "dy has shape [2, 6, 4]; dx repeated gives [2, 6, 5]");
  CHECK_FAILS(jitops_repeat_backward(rt, &dy, rep, 1, &dx, NULL, NULL), JITOPS_ERR_INVALID_SHAPE,
              "repeats has 1 entries, fewer than dx's 2 dimensions");
  const int64_t negative[3] = {-1, 2, 1};
  CHECK_FAILS(jitops_repeat_backward(rt, &dy, negative, 3, &dx, NULL, NULL),
              JITOPS_ERR_OUT_OF_RANGE, "repeats[0] is -1");
  DLTensor dyi = tensor(3, sy, NULL, I32), dxi = tensor(2, sx, NULL, I32);
  CHECK_FAILS(jitops_repeat_backward(rt, &dyi, rep, 3, &dxi, NULL, NULL), JITOPS_ERR_INVALID_DTYPE,
              "dy has dtype i32; jitops_repeat_backward takes f32");
  DLTensor dx16 = tensor(2, sx, NULL, F16);
  CHECK_FAILS(jitops_repeat_backward(rt, &dy, rep, 3, &dx16, NULL, NULL), JITOPS_ERR_INVALID_DTYPE,
              "dx has dtype f16 but dy has f32");
  int64_t zero_stride[2] = {0, 1};
  DLTensor dxo = tensor(2, sx, zero_stride, F32);
  CHECK_FAILS(jitops_repeat_backward(rt, &dy, rep, 3, &dxo, NULL, NULL), JITOPS_ERR_INVALID_LAYOUT,
              "dx's strides make several elements share an address");

  CHECK_FAILS(jitops_repeat_backward(rt, &dy, rep, 3, &dx, NULL, NULL), JITOPS_ERR_NO_DEVICE, NULL);
  /* A zero repeat: dy is empty and dx is all zeros, which still needs the kernel. */
  int64_t sz[3] = {2, 0, 4};
  const int64_t zero[3] = {2, 0, 1};
  DLTensor dye = tensor(3, sz, NULL, F32);
  CHECK_FAILS(jitops_repeat_backward(rt, &dye, zero, 3, &dx, NULL, NULL), JITOPS_ERR_NO_DEVICE,
              NULL);

  size_t bytes = 7;
  CHECK_FAILS(jitops_repeat_backward_workspace_size(rt, &dy, rep, 3, &dx, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "bytes is NULL");
  CHECK_OK(jitops_repeat_backward_workspace_size(rt, &dy, rep, 3, &dx, &bytes));
  CHECK(bytes == 0);
  /* 16 elements repeated 100000 times: the copies are split, with partial sums. */
  int64_t s16[1] = {16}, sbig[1] = {1600000};
  const int64_t many[1] = {100000};
  DLTensor dxs = tensor(1, s16, NULL, F32), dys = tensor(1, sbig, NULL, F32);
  CHECK_OK(jitops_repeat_backward_workspace_size(rt, &dys, many, 1, &dxs, &bytes));
  CHECK(bytes > 0 && bytes % (16 * 4) == 0);
}

int main(void) {
  jitops_runtime_config cfg = test_offline_config("sm_90", NULL);
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(&cfg, &rt));
  if (rt == NULL)
    return test_finish("test_repeat_validation");
  forward_arguments(rt);
  backward_arguments(rt);
  jitops_runtime_destroy(rt);
  return test_finish("test_repeat_validation");
}
