/* Argument validation of jitops_scan, jitops_scan_backward and their workspace queries, on a
 * compile-only runtime (no GPU): every bad argument gets its status and a message naming the
 * argument; valid calls pass validation, compile their kernel and stop at the launch with
 * JITOPS_ERR_NO_DEVICE; empty tensors succeed without a launch. Also checks the planner's
 * collapsing and kernel choice. */
#include <string.h>

#include "ops/scan/plan.h"
#include "testutil.h"

static const DLDataType F32 = {kDLFloat, 32, 1}, F16 = {kDLFloat, 16, 1}, BF16 = {kDLBfloat, 16, 1},
                        I32 = {kDLInt, 32, 1}, I64 = {kDLInt, 64, 1}, U8 = {kDLUInt, 8, 1};

/* A device tensor over a fake, well-aligned address (nothing is launched). */
static DLTensor tensor(int ndim, int64_t *shape, int64_t *strides, DLDataType dtype) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = (void *)(uintptr_t)0x100000;
  t.device.device_type = kDLCUDA;
  t.device.device_id = 0;
  t.ndim = ndim;
  t.dtype = dtype;
  t.shape = shape;
  t.strides = strides;
  return t;
}

static void forward_arguments(jitops_runtime_t *rt) {
  int64_t s3[3] = {4, 5, 6}, s3b[3] = {4, 5, 7}, s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 2};
  int64_t zero_stride[3] = {0, 6, 1};
  DLTensor x = tensor(3, s3, NULL, F32), y = tensor(3, s3, NULL, F32);
  DLTensor idx = tensor(3, s3, NULL, I64);

  CHECK_FAILS(jitops_scan(NULL, JITOPS_SCAN_CUMSUM, &x, 0, 0, &y, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "jitops_scan: runtime is NULL");
  CHECK_FAILS(jitops_scan(rt, (jitops_scan_op)5, &x, 0, 0, &y, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "op 5 is not a jitops_scan_op");
  CHECK_FAILS(jitops_scan(rt, (jitops_scan_op)-1, &x, 0, 0, &y, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "op -1");
  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMSUM, NULL, 0, 0, &y, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "jitops_scan: x is NULL");
  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMSUM, &x, 0, 0, NULL, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "jitops_scan: y is NULL");

  DLTensor host = x;
  host.device.device_type = kDLCPU;
  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMSUM, &host, 0, 0, &y, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_DEVICE, "x is not in CUDA device memory");

  DLTensor scalar = tensor(0, NULL, NULL, F32);
  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMSUM, &scalar, 0, 0, &scalar, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_SHAPE, "x has rank 0");
  DLTensor big = tensor(9, s9, NULL, F32);
  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMSUM, &big, 0, 0, &big, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_SHAPE, "x has rank 9");

  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMSUM, &x, 5, 0, &y, NULL, NULL, NULL),
              JITOPS_ERR_OUT_OF_RANGE,
              "jitops_scan: axis 5 is out of range for a tensor of rank 3");
  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMSUM, &x, -4, 0, &y, NULL, NULL, NULL),
              JITOPS_ERR_OUT_OF_RANGE, "axis -4 is out of range");
  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMSUM, &x, 3, 0, &y, NULL, NULL, NULL),
              JITOPS_ERR_OUT_OF_RANGE, "axis 3");

  DLTensor xi = tensor(3, s3, NULL, I32), yi = tensor(3, s3, NULL, I32);
  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMMAX, &xi, 0, 0, &yi, &idx, NULL, NULL),
              JITOPS_ERR_INVALID_DTYPE, "x has dtype i32, which cummax does not take");
  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_LOGCUMSUMEXP, &xi, 0, 0, &yi, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_DTYPE, "which logcumsumexp does not take");
  DLTensor xu = tensor(3, s3, NULL, U8);
  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMSUM, &xu, 0, 0, &xu, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_DTYPE, "x has dtype invalid");

  DLTensor yb = tensor(3, s3b, NULL, F32);
  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMSUM, &x, 0, 0, &yb, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_SHAPE, "y has shape [4, 5, 7] but x has [4, 5, 6]");
  DLTensor y16 = tensor(3, s3, NULL, F16);
  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMSUM, &x, 0, 0, &y16, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_DTYPE, "y has dtype f16; expected f32");

  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMMAX, &x, 0, 0, &y, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "indices is NULL; cummax writes");
  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMMIN, &x, 0, 0, &y, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "indices is NULL; cummin writes");
  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMSUM, &x, 0, 0, &y, &idx, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "indices must be NULL for cumsum");
  DLTensor idx32 = tensor(3, s3, NULL, I32), idxb = tensor(3, s3b, NULL, I64);
  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMMAX, &x, 0, 0, &y, &idx32, NULL, NULL),
              JITOPS_ERR_INVALID_DTYPE, "indices has dtype i32; expected i64");
  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMMAX, &x, 0, 0, &y, &idxb, NULL, NULL),
              JITOPS_ERR_INVALID_SHAPE, "indices has shape [4, 5, 7]");

  DLTensor misaligned = x;
  misaligned.byte_offset = 2;
  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMSUM, &misaligned, 0, 0, &y, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_LAYOUT, "x's first element");
  DLTensor overlapping = tensor(3, s3, zero_stride, F32);
  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMSUM, &x, 0, 0, &overlapping, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_LAYOUT, "y's strides make several elements share an address");
  /* A broadcast (stride 0) input is fine: it reaches the launch. */
  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMSUM, &overlapping, 1, 0, &y, NULL, NULL, NULL),
              JITOPS_ERR_NO_DEVICE, NULL);

  DLTensor nodata = x;
  nodata.data = NULL;
  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMSUM, &nodata, 0, 0, &y, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "x->data is NULL");
  int64_t negative[3] = {4, -1, 6};
  DLTensor neg = tensor(3, negative, NULL, F32);
  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMSUM, &neg, 0, 0, &y, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_SHAPE, "x->shape[1] is -1");

  /* Valid: validation passes, the kernel compiles, the launch needs a GPU. */
  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMSUM, &x, -1, 1, &y, NULL, NULL, NULL),
              JITOPS_ERR_NO_DEVICE, NULL);
  DLTensor xb = tensor(3, s3, NULL, BF16), ybf = tensor(3, s3, NULL, BF16);
  CHECK_FAILS(jitops_scan(rt, JITOPS_SCAN_CUMMAX, &xb, 0, 0, &ybf, &idx, NULL, NULL),
              JITOPS_ERR_NO_DEVICE, NULL);
  /* Empty: nothing to do, no GPU needed. */
  int64_t s_empty[2] = {3, 0};
  DLTensor e = tensor(2, s_empty, NULL, F32);
  e.data = NULL;
  CHECK_OK(jitops_scan(rt, JITOPS_SCAN_LOGCUMSUMEXP, &e, 1, 0, &e, NULL, NULL, NULL));

  size_t bytes = 1;
  CHECK_FAILS(jitops_scan_workspace_size(rt, JITOPS_SCAN_CUMSUM, &x, 0, 0, &y, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "bytes is NULL");
  CHECK_OK(jitops_scan_workspace_size(rt, JITOPS_SCAN_CUMSUM, &x, 0, 0, &y, NULL, &bytes));
  CHECK(bytes == 0);
  int64_t s_long[1] = {1 << 20};
  DLTensor xl = tensor(1, s_long, NULL, F32);
  CHECK_OK(jitops_scan_workspace_size(rt, JITOPS_SCAN_CUMSUM, &xl, 0, 0, &xl, NULL, &bytes));
  CHECK(bytes > 0 && bytes < 65536); /* 256 tiles of 4096 elements, 12 bytes each */
}

static void backward_arguments(jitops_runtime_t *rt) {
  int64_t s2[2] = {8, 300}, s2b[2] = {8, 301};
  DLTensor dy = tensor(2, s2, NULL, F32), dx = tensor(2, s2, NULL, F32);
  DLTensor x = tensor(2, s2, NULL, F32), y = tensor(2, s2, NULL, F32);
  DLTensor idx = tensor(2, s2, NULL, I64);

  CHECK_FAILS(
      jitops_scan_backward(NULL, JITOPS_SCAN_CUMSUM, &dy, NULL, NULL, NULL, 0, 0, &dx, NULL, NULL),
      JITOPS_ERR_INVALID_ARGUMENT, "jitops_scan_backward: runtime is NULL");
  CHECK_FAILS(
      jitops_scan_backward(rt, (jitops_scan_op)9, &dy, NULL, NULL, NULL, 0, 0, &dx, NULL, NULL),
      JITOPS_ERR_INVALID_ARGUMENT, "op 9");
  CHECK_FAILS(
      jitops_scan_backward(rt, JITOPS_SCAN_CUMSUM, NULL, NULL, NULL, NULL, 0, 0, &dx, NULL, NULL),
      JITOPS_ERR_INVALID_ARGUMENT, "dy is NULL");
  CHECK_FAILS(
      jitops_scan_backward(rt, JITOPS_SCAN_CUMSUM, &dy, NULL, NULL, NULL, 0, 0, NULL, NULL, NULL),
      JITOPS_ERR_INVALID_ARGUMENT, "dx is NULL");
  CHECK_FAILS(
      jitops_scan_backward(rt, JITOPS_SCAN_CUMSUM, &dy, NULL, NULL, NULL, 2, 0, &dx, NULL, NULL),
      JITOPS_ERR_OUT_OF_RANGE, "axis 2 is out of range for a tensor of rank 2");
  DLTensor dyi = tensor(2, s2, NULL, I32);
  CHECK_FAILS(
      jitops_scan_backward(rt, JITOPS_SCAN_CUMSUM, &dyi, NULL, NULL, NULL, 0, 0, &dyi, NULL, NULL),
      JITOPS_ERR_INVALID_DTYPE, "dy has dtype i32; scan backward takes");
  DLTensor dxb = tensor(2, s2b, NULL, F32);
  CHECK_FAILS(
      jitops_scan_backward(rt, JITOPS_SCAN_CUMSUM, &dy, NULL, NULL, NULL, 0, 0, &dxb, NULL, NULL),
      JITOPS_ERR_INVALID_SHAPE, "dx has shape [8, 301] but dy has [8, 300]");
  DLTensor dx16 = tensor(2, s2, NULL, F16);
  CHECK_FAILS(
      jitops_scan_backward(rt, JITOPS_SCAN_CUMSUM, &dy, NULL, NULL, NULL, 0, 0, &dx16, NULL, NULL),
      JITOPS_ERR_INVALID_DTYPE, "dx has dtype f16; expected f32, like dy");

  /* Saved tensors: each backward names what it misses. */
  CHECK_FAILS(
      jitops_scan_backward(rt, JITOPS_SCAN_CUMPROD, &dy, NULL, &y, NULL, 1, 0, &dx, NULL, NULL),
      JITOPS_ERR_INVALID_ARGUMENT,
      "x is NULL; the cumprod backward needs the saved forward input x");
  CHECK_FAILS(
      jitops_scan_backward(rt, JITOPS_SCAN_CUMPROD, &dy, &x, NULL, NULL, 1, 0, &dx, NULL, NULL),
      JITOPS_ERR_INVALID_ARGUMENT,
      "y is NULL; the cumprod backward needs the saved "
      "forward output y");
  CHECK_FAILS(jitops_scan_backward(rt, JITOPS_SCAN_LOGCUMSUMEXP, &dy, &x, NULL, NULL, 1, 0, &dx,
                                   NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "y is NULL; the logcumsumexp backward");
  CHECK_FAILS(jitops_scan_backward(rt, JITOPS_SCAN_LOGCUMSUMEXP, &dy, NULL, &y, NULL, 1, 0, &dx,
                                   NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "x is NULL; the logcumsumexp backward");
  CHECK_FAILS(
      jitops_scan_backward(rt, JITOPS_SCAN_CUMMAX, &dy, &x, &y, NULL, 1, 0, &dx, NULL, NULL),
      JITOPS_ERR_INVALID_ARGUMENT,
      "indices is NULL; the cummax backward needs the saved forward indices");
  CHECK_FAILS(
      jitops_scan_backward(rt, JITOPS_SCAN_CUMMIN, &dy, NULL, NULL, NULL, 1, 0, &dx, NULL, NULL),
      JITOPS_ERR_INVALID_ARGUMENT, "the cummin backward needs the saved forward indices");
  DLTensor xb = tensor(2, s2b, NULL, F32), x16 = tensor(2, s2, NULL, F16);
  DLTensor idx32 = tensor(2, s2, NULL, I32), idxb = tensor(2, s2b, NULL, I64);
  CHECK_FAILS(
      jitops_scan_backward(rt, JITOPS_SCAN_CUMPROD, &dy, &xb, &y, NULL, 1, 0, &dx, NULL, NULL),
      JITOPS_ERR_INVALID_SHAPE, "x has shape [8, 301] but dy has [8, 300]");
  CHECK_FAILS(jitops_scan_backward(rt, JITOPS_SCAN_LOGCUMSUMEXP, &dy, &x, &x16, NULL, 1, 0, &dx,
                                   NULL, NULL),
              JITOPS_ERR_INVALID_DTYPE, "y has dtype f16; expected f32, like dy");
  CHECK_FAILS(
      jitops_scan_backward(rt, JITOPS_SCAN_CUMMAX, &dy, NULL, NULL, &idx32, 1, 0, &dx, NULL, NULL),
      JITOPS_ERR_INVALID_DTYPE, "indices has dtype i32; expected i64");
  CHECK_FAILS(
      jitops_scan_backward(rt, JITOPS_SCAN_CUMMAX, &dy, NULL, NULL, &idxb, 1, 0, &dx, NULL, NULL),
      JITOPS_ERR_INVALID_SHAPE, "indices has shape [8, 301]");
  int64_t zero_stride[2] = {0, 1};
  DLTensor dxo = tensor(2, s2, zero_stride, F32);
  CHECK_FAILS(
      jitops_scan_backward(rt, JITOPS_SCAN_CUMSUM, &dy, NULL, NULL, NULL, 1, 0, &dxo, NULL, NULL),
      JITOPS_ERR_INVALID_LAYOUT, "dx's strides make several elements share an address");

  /* Valid calls reach the launch; unneeded saved tensors are ignored, even malformed ones. */
  CHECK_FAILS(
      jitops_scan_backward(rt, JITOPS_SCAN_CUMSUM, &dy, &xb, NULL, &idx32, 1, 1, &dx, NULL, NULL),
      JITOPS_ERR_NO_DEVICE, NULL);
  CHECK_FAILS(
      jitops_scan_backward(rt, JITOPS_SCAN_CUMMAX, &dy, NULL, NULL, &idx, 0, 0, &dx, NULL, NULL),
      JITOPS_ERR_NO_DEVICE, NULL);
  DLTensor dyh = tensor(2, s2, NULL, F16), dxh = tensor(2, s2, NULL, F16);
  DLTensor xh = tensor(2, s2, NULL, F16), yh = tensor(2, s2, NULL, F16);
  CHECK_FAILS(jitops_scan_backward(rt, JITOPS_SCAN_LOGCUMSUMEXP, &dyh, &xh, &yh, NULL, 1, 0, &dxh,
                                   NULL, NULL),
              JITOPS_ERR_NO_DEVICE, NULL);
  size_t bytes;
  CHECK_OK(jitops_scan_backward_workspace_size(rt, JITOPS_SCAN_CUMPROD, &dy, &x, &y, NULL, 1, 0,
                                               &dx, &bytes));
  CHECK(bytes == 0);
  CHECK_FAILS(jitops_scan_backward_workspace_size(rt, JITOPS_SCAN_CUMPROD, &dy, NULL, &y, NULL, 1,
                                                  0, &dx, &bytes),
              JITOPS_ERR_INVALID_ARGUMENT, "jitops_scan_backward_workspace_size: x is NULL");
}

/* Collapsing and the kernel choice. */
/* The plan of a scan over one axis of `len` positions whose input starts `offset` bytes into
 * its buffer. */
static jitops__scan_plan plan_1d(int64_t len, uint64_t offset, int reverse, jitops__scan_kop kop,
                                 jitops__dtype dtype) {
  int64_t s[1] = {len};
  DLTensor in = tensor(1, s, NULL, F32), out = tensor(1, s, NULL, F32);
  in.byte_offset = offset;
  const DLTensor *t[2] = {&in, &out};
  jitops__scan_geom g;
  jitops__scan_plan p;
  jitops__scan_geom_build(&g, 2, t, 0, reverse);
  CHECK_OK(jitops__scan_plan_make("t", &p, kop, dtype, &g, 132));
  return p;
}

/* Wide look-back tiles where they are at least two an SM: for an op that stages in place
 * (cumsum, cumprod, logcumsumexp with a state of at most 8 bytes) 8 warps of 128 bytes a lane
 * staged by cp.async (16 positions of 8 bytes, 32 of 4, 64 of 2); for the others 64 bytes a
 * lane (32 positions of 2 bytes staged as words, 16 of 4, 8 of 8), their staging in dynamic
 * shared memory; narrow tiles otherwise. */
static void wide_tiles(void) {
  int64_t s[1] = {1 << 22};
  DLTensor v = tensor(1, s, NULL, F32);
  const DLTensor *vv[2] = {&v, &v};
  jitops__scan_geom g;
  jitops__scan_plan p;
  jitops__scan_geom_build(&g, 2, vv, 0, 0);
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_CUMSUM, JITOPS__DTYPE_F32, &g, 132));
  CHECK(p.lookback && p.width == JITOPS__SCAN_WIDE && p.warps == 8 && p.items == 32);
  CHECK(p.tiles == 512 && p.grid == 512 && p.block_x == 256);
  CHECK(strstr(p.name, "rows<jitops::scan::Cumsum<float>, 0, 8, 32, true, 4>") != NULL);
  /* A 2-byte tile holds 16384 positions: two an SM from 2^23. */
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_CUMPROD, JITOPS__DTYPE_BF16, &g, 132));
  CHECK(p.lookback && p.width == JITOPS__SCAN_NARROW && p.warps == 8 && p.items == 16);
  CHECK(p.tiles == 1024 && p.grid == 1024);
  p = plan_1d(1 << 23, 0, 0, JITOPS__SCAN_K_CUMPROD, JITOPS__DTYPE_BF16);
  CHECK(p.lookback && p.width == JITOPS__SCAN_WIDE && p.items == 64 && p.tiles == 512);
  CHECK(strstr(p.name, "rows<jitops::scan::Cumprod<jitops::bfloat16>, 0, 8, 64, true, 4>"));
  /* 2-byte elements stage in 32-bit words: an odd length is fine forward (a half word at the
   * end), but in reverse its words would start off a word (narrow tiles), as would rows off
   * one. 4-byte elements are staged one by one and take wide tiles either way. */
  const int64_t odd = (1 << 23) + 1;
  p = plan_1d(odd, 0, 0, JITOPS__SCAN_K_CUMSUM, JITOPS__DTYPE_BF16);
  CHECK(p.lookback && p.width == JITOPS__SCAN_WIDE && p.items == 64);
  p = plan_1d(odd, 0, 1, JITOPS__SCAN_K_CUMSUM, JITOPS__DTYPE_BF16);
  CHECK(p.lookback && p.width == JITOPS__SCAN_NARROW && p.warps == 8 && p.items == 16);
  p = plan_1d(odd, 0, 1, JITOPS__SCAN_K_CUMSUM, JITOPS__DTYPE_F32);
  CHECK(p.lookback && p.width == JITOPS__SCAN_WIDE && p.items == 32 && p.tiles == 1025);
  p = plan_1d(1 << 23, 2, 0, JITOPS__SCAN_K_CUMSUM, JITOPS__DTYPE_BF16);
  CHECK(p.lookback && p.width == JITOPS__SCAN_NARROW && p.items == 16);
  jitops__scan_geom_build(&g, 2, vv, 0, 0);
  /* 512 wide tiles on 257 SMs are fewer than two an SM: 1024 tiles of 8 warps. */
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_CUMSUM, JITOPS__DTYPE_F32, &g, 257));
  CHECK(p.lookback && p.width == JITOPS__SCAN_NARROW && p.warps == 8 && p.items == 16);
  CHECK(p.tiles == 1024);
  /* 8-byte states in place take wide tiles too (f64 cumsum: 16 positions a lane; f32
   * logcumsumexp); 16-byte states in place (f64 logcumsumexp) take narrow ones. */
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_CUMSUM, JITOPS__DTYPE_F64, &g, 132));
  CHECK(p.lookback && p.width == JITOPS__SCAN_WIDE && p.warps == 8 && p.items == 16);
  CHECK(p.tiles == 1024 && strstr(p.name, "rows<jitops::scan::Cumsum<double>, 0, 8, 16, true, 8>"));
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_LCSE, JITOPS__DTYPE_F32, &g, 132));
  CHECK(p.lookback && p.width == JITOPS__SCAN_WIDE && p.warps == 8 && p.items == 32);
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_LCSE, JITOPS__DTYPE_F64, &g, 132));
  CHECK(p.lookback && p.width == JITOPS__SCAN_NARROW && p.warps == 8);
  CHECK(p.shared_bytes == 0);
  /* The ops not in place: 16 positions of f32 a lane (4096 a tile), 8 of f64; output 0 over
   * input 0 and the rest beside, in 33 slots per 32 positions: cummax f32 stages x (then the
   * values) and the int64 indices as 32 bits, 8 * 528 * 8 bytes, and so does its backward (dy,
   * then dx, and the indices); the cumprod backward f64 dy (then dx), x and y, 8 * 264 * 24.
   * Their narrow tiles take half as many positions. */
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_CUMMAX, JITOPS__DTYPE_F32, &g, 132));
  CHECK(p.lookback && p.width == JITOPS__SCAN_WIDE && p.warps == 8 && p.items == 16);
  CHECK(p.tiles == 1024 && p.shared_bytes == 33792);
  CHECK(strstr(p.name, "rows<jitops::scan::Extremum<float, true>, 0, 8, 16, true, 16, 33792>"));
  CHECK_OK(
      jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_EXTREMUM_BWD, JITOPS__DTYPE_F32, &g, 132));
  CHECK(p.lookback && p.width == JITOPS__SCAN_WIDE && p.items == 16 && p.shared_bytes == 33792);
  CHECK(strstr(p.name, "rows<jitops::scan::ExtremumBackward<float>, 0, 8, 16, true, 8, 33792>"));
  const DLTensor *bb[4] = {&v, &v, &v, &v};
  jitops__scan_geom_build(&g, 4, bb, 0, 0);
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_CUMPROD_BWD, JITOPS__DTYPE_F64, &g, 132));
  CHECK(p.lookback && p.width == JITOPS__SCAN_WIDE && p.items == 8 && p.tiles == 2048);
  CHECK(p.shared_bytes == 50688);
  CHECK(strstr(p.name, "rows<jitops::scan::CumprodBackward<double>, 0, 8, 8, true, 16, 50688>"));
  /* In f16 and bf16 the ops not in place stage words, 32 positions a lane (8192 a tile): 8 * 1056
   * slots * 6 bytes, the int64 indices of cummax, cummin and their backward as 32 bits (2 + 4
   * bytes a slot). */
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_LCSE_BWD, JITOPS__DTYPE_BF16, &g, 132));
  CHECK(p.lookback && p.width == JITOPS__SCAN_WIDE && p.warps == 8 && p.items == 32);
  CHECK(p.tiles == 512 && p.block_x == 256 && p.shared_bytes == 50688);
  CHECK(strstr(p.name, "rows<jitops::scan::LcseBackward<jitops::bfloat16>, 0, 8, 32, true, 8, "
                       "50688>"));
  CHECK_OK(
      jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_EXTREMUM_BWD, JITOPS__DTYPE_BF16, &g, 132));
  CHECK(p.lookback && p.width == JITOPS__SCAN_WIDE && p.warps == 8 && p.items == 32);
  CHECK(p.tiles == 512 && p.shared_bytes == 50688);
  CHECK(strstr(p.name, "rows<jitops::scan::ExtremumBackward<jitops::bfloat16>, 0, 8, 32, true, "
                       "8, 50688>"));
  const DLTensor *b3[3] = {&v, &v, &v};
  jitops__scan_geom_build(&g, 3, b3, 0, 0);
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_CUMMAX, JITOPS__DTYPE_F16, &g, 132));
  CHECK(p.lookback && p.width == JITOPS__SCAN_WIDE && p.warps == 8 && p.items == 32);
  CHECK(p.tiles == 512 && p.shared_bytes == 50688);
  CHECK(strstr(p.name, "rows<jitops::scan::Extremum<jitops::half, true>, 0, 8, 32, true, 16, "
                       "50688>"));
  /* Word pairs beside whose rows end inside a tile take wide ones where their tiles are at least
   * 85% full (132 x 21000: 85.4%; 132 x 20800: 84.6%) or at 5 tiles for every 2 SMs (330 on 132)
   * and 4 a row (100 x 26000); all of them at least 2 an SM, as the other ops. */
  static const struct {
    int64_t rows, len;
    int wide;
  } edges[] = {{1, 264 * 8192, 1}, {1, 264 * 8192 + 8, 1}, {1, 384 * 8192 + 5, 1}, {200, 10000, 0},
               {200, 20000, 0},    {200, 4 * 8192 - 6, 1}, {264, 16384, 1},        {264, 16385, 0},
               {4, 540000, 1},     {4, 68 * 8192, 1},      {1, 263 * 8192, 0},     {132, 21000, 1},
               {132, 20800, 0},    {100, 26000, 1},        {1, 262 * 8192 + 8, 0}};
  for (size_t e = 0; e < sizeof edges / sizeof edges[0]; ++e) {
    int64_t shape[2] = {edges[e].rows, edges[e].len};
    DLTensor t = tensor(2, shape, NULL, F32);
    const DLTensor *bt[3] = {&t, &t, &t};
    jitops__scan_geom_build(&g, 3, bt, 1, 0);
    CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_CUMMAX, JITOPS__DTYPE_BF16, &g, 132));
    CHECK(p.lookback && p.width == (edges[e].wide ? JITOPS__SCAN_WIDE : JITOPS__SCAN_NARROW));
    CHECK_OK(
        jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_EXTREMUM_BWD, JITOPS__DTYPE_BF16, &g, 132));
    CHECK(p.width == (edges[e].wide ? JITOPS__SCAN_WIDE : JITOPS__SCAN_NARROW));
  }
  /* Axes longer than 2^31 have indices beyond 32 bits: narrow tiles. */
  int64_t huge[1] = {(int64_t)INT32_MAX + 2};
  DLTensor vh = tensor(1, huge, NULL, F32);
  const DLTensor *bh[3] = {&vh, &vh, &vh};
  jitops__scan_geom_build(&g, 3, bh, 0, 0);
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_CUMMIN, JITOPS__DTYPE_BF16, &g, 132));
  CHECK(p.lookback && p.width == JITOPS__SCAN_NARROW && p.shared_bytes == 0);
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_CUMMIN, JITOPS__DTYPE_F32, &g, 132));
  CHECK(p.lookback && p.width == JITOPS__SCAN_NARROW && p.shared_bytes == 0);
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_LCSE_BWD, JITOPS__DTYPE_BF16, &g, 132));
  CHECK(p.lookback && p.width == JITOPS__SCAN_WIDE);
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_CUMPROD_BWD, JITOPS__DTYPE_F32, &g, 132));
  CHECK(p.lookback && p.width == JITOPS__SCAN_WIDE);
  CHECK_OK(
      jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_EXTREMUM_BWD, JITOPS__DTYPE_F32, &g, 132));
  CHECK(p.lookback && p.width == JITOPS__SCAN_NARROW && p.shared_bytes == 0);
  jitops__scan_geom_build(&g, 4, bb, 0, 0);
  /* f64 cummax and the cummax backward stage 16 bytes a slot: 8 * 264 * 16. */
  CHECK_OK(
      jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_EXTREMUM_BWD, JITOPS__DTYPE_F64, &g, 132));
  CHECK(p.lookback && p.width == JITOPS__SCAN_WIDE && p.items == 8 && p.shared_bytes == 33792);
  CHECK(strstr(p.name, "rows<jitops::scan::ExtremumBackward<double>, 0, 8, 8, true, 16, 33792>"));
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_CUMMIN, JITOPS__DTYPE_F64, &g, 132));
  CHECK(p.lookback && p.width == JITOPS__SCAN_WIDE && p.shared_bytes == 33792);
  CHECK(strstr(p.name, "rows<jitops::scan::Extremum<double, false>, 0, 8, 8, true, 16, 33792>"));
  /* A name asked for wide tiles an op does not have is the narrow kernel's, without dynamic
   * staging (the device expects none). */
  char name[256];
  jitops__scan_kernel_name(JITOPS__SCAN_K_LCSE, JITOPS__DTYPE_F64, JITOPS__SCAN_ROWS, 0, 1,
                           JITOPS__SCAN_WIDE, 0, name, sizeof name);
  CHECK(strcmp(name, "jitops::scan::rows<jitops::scan::Lcse<double>, 0, 8, 8, true, 16>") == 0);
  /* One tensor off a word (dx two bytes into its buffer) keeps 2-byte elements on narrow
   * tiles. */
  DLTensor dx_off = tensor(1, s, NULL, F32);
  dx_off.byte_offset = 2;
  const DLTensor *bo[4] = {&v, &v, &v, &dx_off};
  jitops__scan_geom_build(&g, 4, bo, 0, 0);
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_LCSE_BWD, JITOPS__DTYPE_BF16, &g, 132));
  CHECK(p.lookback && p.width == JITOPS__SCAN_NARROW && p.shared_bytes == 0);
  /* In reverse an odd length would start the words off a word: narrow tiles. */
  int64_t odd4[1] = {(1 << 22) + 1};
  DLTensor o4 = tensor(1, odd4, NULL, F32);
  const DLTensor *oo[4] = {&o4, &o4, &o4, &o4};
  jitops__scan_geom_build(&g, 4, oo, 0, 1);
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_CUMPROD_BWD, JITOPS__DTYPE_F16, &g, 132));
  CHECK(p.lookback && p.width == JITOPS__SCAN_NARROW && p.shared_bytes == 0);
  jitops__scan_geom_build(&g, 4, oo, 0, 0);
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_CUMPROD_BWD, JITOPS__DTYPE_F16, &g, 132));
  CHECK(p.lookback && p.width == JITOPS__SCAN_WIDE && p.warps == 8 && p.tiles == 513);
  p = plan_1d(1 << 20, 0, 0, JITOPS__SCAN_K_CUMMIN, JITOPS__DTYPE_F32); /* 256 wide tiles */
  CHECK(p.lookback && p.width == JITOPS__SCAN_NARROW && p.items == 8 && p.shared_bytes == 0);
  CHECK(strstr(p.name, "rows<jitops::scan::Extremum<float, false>, 0, 8, 8, true, 16>"));
  jitops__scan_geom_build(&g, 2, vv, 0, 0);
  /* 264 rows of 5000: one wide tile a row would leave nothing to look back over, and the walk
   * would take 264 long rows on 66 blocks; two tiles of 8 warps a row keep the look-back. */
  int64_t s264[2] = {264, 5000};
  DLTensor m = tensor(2, s264, NULL, F32);
  const DLTensor *mm[2] = {&m, &m};
  jitops__scan_geom_build(&g, 2, mm, 1, 0);
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_CUMSUM, JITOPS__DTYPE_F32, &g, 132));
  CHECK(p.kind == JITOPS__SCAN_ROWS && p.lookback && p.warps == 8 && p.tiles == 2);
}

/* A row that one narrow tile holds is one tile alone (no look-back, no scratch) when there is at
 * most one such row an SM and one warp would walk it in more than four chunks (cumsum, cumprod)
 * or more than one (the other ops). Shorter rows, and more of them, are walked. */
static void one_tile_rows(void) {
  jitops__scan_plan p = plan_1d(4096, 0, 0, JITOPS__SCAN_K_LCSE, JITOPS__DTYPE_F32);
  CHECK(p.lookback && p.width == JITOPS__SCAN_NARROW && p.warps == 8 && p.items == 16);
  CHECK(p.tiles == 1 && p.grid == 1 && p.block_x == 256 && p.scratch_bytes == 0);
  CHECK(strstr(p.name, ", 0, 8, 16, true, 8>") != NULL);
  p = plan_1d(4096, 0, 1, JITOPS__SCAN_K_CUMSUM, JITOPS__DTYPE_BF16);
  CHECK(p.lookback && p.tiles == 1 && p.scratch_bytes == 0);
  p = plan_1d(2049, 0, 0, JITOPS__SCAN_K_CUMSUM, JITOPS__DTYPE_F32);
  CHECK(p.lookback && p.tiles == 1 && p.grid == 1);
  p = plan_1d(2048, 0, 0, JITOPS__SCAN_K_CUMSUM, JITOPS__DTYPE_F32); /* four chunks: walked */
  CHECK(!p.lookback && p.warps == 4);
  p = plan_1d(1024, 0, 0, JITOPS__SCAN_K_LCSE, JITOPS__DTYPE_F32); /* two chunks of an exp each */
  CHECK(p.lookback && p.tiles == 1);
  p = plan_1d(512, 0, 0, JITOPS__SCAN_K_LCSE, JITOPS__DTYPE_F32); /* one chunk: walked */
  CHECK(!p.lookback);
  p = plan_1d(4097, 0, 0, JITOPS__SCAN_K_CUMSUM, JITOPS__DTYPE_F32); /* two narrow tiles */
  CHECK(p.lookback && p.width == JITOPS__SCAN_NARROW && p.tiles == 2 && p.scratch_bytes > 0);
  for (int64_t rows = 132; rows <= 133; ++rows) {
    int64_t sh[2] = {rows, 4096};
    DLTensor m = tensor(2, sh, NULL, F32);
    const DLTensor *mm[2] = {&m, &m};
    jitops__scan_geom g;
    jitops__scan_geom_build(&g, 2, mm, 1, 0);
    CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_CUMSUM, JITOPS__DTYPE_F32, &g, 132));
    CHECK(rows == 132 ? p.lookback && p.tiles == 1 && p.grid == 132 : !p.lookback);
  }
}

static void planning(void) {
  /* A contiguous rank-8 tensor scanned along axis 3 collapses to two batch dimensions. */
  int64_t s8[8] = {2, 3, 2, 200, 2, 1, 3, 2};
  DLTensor t8 = tensor(8, s8, NULL, F32);
  const DLTensor *two[2] = {&t8, &t8};
  jitops__scan_geom g;
  jitops__scan_plan p;
  jitops__scan_geom_build(&g, 2, two, 3, 0);
  CHECK(g.len == 200 && g.nb == 2 && g.chains == 12 * 12);
  CHECK(g.astride[0] == 12 && g.bshape[0] == 12 && g.bstride[0][0] == 2400);
  CHECK(g.bshape[1] == 12 && g.bstride[0][1] == 1);
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_CUMSUM, JITOPS__DTYPE_F32, &g, 132));
  CHECK(p.kind == JITOPS__SCAN_COLS && !p.lookback && p.scratch_bytes == 0);
  CHECK(strcmp(p.name, "jitops::scan::cols<jitops::scan::Cumsum<float>, 2, 32, 3, false, 4>") == 0);
  CHECK(p.shared_bytes == 3 * 8 * 32 * 32 * 4); /* three 32 KiB tile buffers */

  /* The last axis of a matrix: the rows kernel, one batch dimension. */
  int64_t s2[2] = {8192, 8192};
  DLTensor m = tensor(2, s2, NULL, F32);
  const DLTensor *mm[2] = {&m, &m};
  jitops__scan_geom_build(&g, 2, mm, 1, 1);
  CHECK(g.reverse == 1 && g.nb == 1 && g.chains == 8192 && g.astride[1] == 1);
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_LCSE, JITOPS__DTYPE_F32, &g, 132));
  CHECK(p.kind == JITOPS__SCAN_ROWS && !p.lookback && p.grid == 2048 && p.block_x == 128);
  CHECK(strcmp(p.name, "jitops::scan::rows<jitops::scan::Lcse<float>, 1, 4, 16, false, 8>") == 0);
  /* Its first axis: 8192 chains are 256 strips of 32, which two blocks per SM (three 32 KiB
   * buffers each) cover in one wave: blocks walk whole strips, no look-back, no scratch. */
  jitops__scan_geom_build(&g, 2, mm, 0, 0);
  CHECK(g.nb == 1 && g.astride[0] == 8192 && g.bstride[0][0] == 1);
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_CUMSUM, JITOPS__DTYPE_F32, &g, 132));
  CHECK(p.kind == JITOPS__SCAN_COLS && !p.lookback && p.grid == 256 && p.scratch_bytes == 0);
  CHECK(strcmp(p.name, "jitops::scan::cols<jitops::scan::Cumsum<float>, 1, 32, 3, false, 4>") == 0);
  /* A backward with three inputs stages shorter tiles. */
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_CUMPROD_BWD, JITOPS__DTYPE_F32, &g, 132));
  CHECK(p.items == 8 && p.shared_bytes == 3 * 24576 && !p.lookback);
  /* 2048 chains (64 strips) leave SMs idle: persistent blocks with look-back over tiles of 256
   * positions, three per SM (two 32 KiB buffers each), each scanning at least two tiles. */
  int64_t s2n[2] = {8192, 2048};
  DLTensor mn = tensor(2, s2n, NULL, F32);
  const DLTensor *mmn[2] = {&mn, &mn};
  jitops__scan_geom_build(&g, 2, mmn, 0, 0);
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_CUMSUM, JITOPS__DTYPE_F32, &g, 132));
  CHECK(p.kind == JITOPS__SCAN_COLS && p.lookback && p.tiles == 32 && p.grid == 3 * 132);
  CHECK(p.shared_bytes == 2 * 32768);
  CHECK(p.scratch_bytes == p.inc_offset + 32 * 2048 * 4 && p.zero_words == 4 + 32 * 2048);
  /* 520 strips: more than one wave of walking blocks, so look-back again. */
  int64_t s2w[2] = {4096, 16640};
  DLTensor mw = tensor(2, s2w, NULL, F32);
  const DLTensor *mmw[2] = {&mw, &mw};
  jitops__scan_geom_build(&g, 2, mmw, 0, 0);
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_CUMSUM, JITOPS__DTYPE_F32, &g, 132));
  CHECK(p.kind == JITOPS__SCAN_COLS && p.lookback && p.tiles == 16 && p.grid == 3 * 132);

  /* Short rows in bulk (4096 rows or more; a forward scan of 32 to 1024 positions, a backward
   * of 64 to 600): the walk in chunks of 4 positions a lane up to 768 positions, of 8 up to
   * 1024 (a backward: 4); fewer rows, longer or shorter ones keep their layouts. */
  {
    static const struct {
      int64_t rows, len;
      jitops__scan_kop kop;
      jitops__scan_kind kind;
      int items;
    } bulk[] = {
        {4096, 32, JITOPS__SCAN_K_CUMSUM, JITOPS__SCAN_ROWS, 4},
        {4096, 31, JITOPS__SCAN_K_CUMSUM, JITOPS__SCAN_COLS, 32},
        {4095, 100, JITOPS__SCAN_K_CUMSUM, JITOPS__SCAN_COLS, 32},
        {4096, 100, JITOPS__SCAN_K_CUMMAX, JITOPS__SCAN_ROWS, 4},
        {4096, 768, JITOPS__SCAN_K_LCSE, JITOPS__SCAN_ROWS, 4},
        {4096, 769, JITOPS__SCAN_K_LCSE, JITOPS__SCAN_ROWS, 8},
        {4096, 1024, JITOPS__SCAN_K_CUMPROD, JITOPS__SCAN_ROWS, 8},
        {4096, 1025, JITOPS__SCAN_K_CUMPROD, JITOPS__SCAN_ROWS, 16},
        {4095, 300, JITOPS__SCAN_K_CUMSUM, JITOPS__SCAN_ROWS, 16},
        {4096, 300, JITOPS__SCAN_K_CUMPROD_BWD, JITOPS__SCAN_ROWS, 4},
        {4095, 300, JITOPS__SCAN_K_CUMPROD_BWD, JITOPS__SCAN_ROWS, 8},
        {4096, 100, JITOPS__SCAN_K_LCSE_BWD, JITOPS__SCAN_ROWS, 4},
        {4096, 64, JITOPS__SCAN_K_EXTREMUM_BWD, JITOPS__SCAN_ROWS, 4},
        {4096, 63, JITOPS__SCAN_K_EXTREMUM_BWD, JITOPS__SCAN_COLS, 8},
        {4096, 600, JITOPS__SCAN_K_LCSE_BWD, JITOPS__SCAN_ROWS, 4},
        {4096, 601, JITOPS__SCAN_K_LCSE_BWD, JITOPS__SCAN_ROWS, 8},
    };
    for (size_t i = 0; i < sizeof bulk / sizeof bulk[0]; ++i) {
      int64_t shape[2] = {bulk[i].rows, bulk[i].len};
      DLTensor b = tensor(2, shape, NULL, F32);
      const DLTensor *bb[4] = {&b, &b, &b, &b};
      jitops__scan_geom_build(&g, jitops__scan_kop_tensors(bulk[i].kop), bb, 1, 0);
      CHECK_OK(jitops__scan_plan_make("t", &p, bulk[i].kop, JITOPS__DTYPE_F32, &g, 132));
      char want[32];
      snprintf(want, sizeof want, ", 1, 4, %d, false,", bulk[i].items);
      CHECK(p.kind == bulk[i].kind && p.items == bulk[i].items && !p.lookback);
      CHECK(p.kind != JITOPS__SCAN_ROWS || strstr(p.name, want) != NULL);
    }
  }

  /* A transposed view: lanes still run along the unit stride. */
  int64_t st[3] = {1, 40, 4000};
  int64_t s3[3] = {40, 100, 7};
  DLTensor tr = tensor(3, s3, st, F32);
  const DLTensor *tt[2] = {&tr, &tr};
  jitops__scan_geom_build(&g, 2, tt, 1, 0);
  CHECK(g.nb == 2 && g.bstride[0][1] == 1 && g.bshape[1] == 40 && g.bshape[0] == 7);

  /* One long vector: rows with look-back; a short row: cols. */
  int64_t s1[1] = {1000003}, s1b[1] = {100};
  DLTensor v = tensor(1, s1, NULL, F16), w = tensor(1, s1b, NULL, F16);
  const DLTensor *vv[2] = {&v, &v}, *ww[2] = {&w, &w};
  jitops__scan_geom_build(&g, 2, vv, 0, 0);
  CHECK(g.nb == 0 && g.chains == 1);
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_CUMSUM, JITOPS__DTYPE_F16, &g, 132));
  CHECK(p.kind == JITOPS__SCAN_ROWS && p.lookback && p.warps == 8 && p.items == 16);
  CHECK(p.tiles == (1000003 + 4095) / 4096 && p.grid == p.tiles);
  /* Its scratch: the ticket, then 245 tile words and 8 group words zeroed (8 bytes each: an
   * f32 state, f16's accumulator, with its flag), then the groups' aggregates, 16-byte aligned;
   * no per-tile state arrays. */
  CHECK(p.zero_words == 4 + 2 * (245 + 8) && p.flags_offset == 16 &&
        p.group_flags_offset == 16 + 8 * 245);
  CHECK(p.agg_offset == 0 && p.inc_offset == 0 && p.group_agg_offset == 2048);
  CHECK(p.scratch_bytes == 2048 + 8 * 4);
  /* An 8-byte state (logcumsumexp's f32 pair) takes 16-byte words: two halves. */
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_LCSE, JITOPS__DTYPE_F16, &g, 132));
  CHECK(p.kind == JITOPS__SCAN_ROWS && p.lookback && p.state_bytes == 8);
  CHECK(p.zero_words == (size_t)(4 + 4 * (p.tiles + (p.tiles + 31) / 32)) &&
        p.group_flags_offset == 16 + 16 * (size_t)p.tiles);
  jitops__scan_geom_build(&g, 2, ww, 0, 0);
  CHECK_OK(jitops__scan_plan_make("t", &p, JITOPS__SCAN_K_CUMSUM, JITOPS__DTYPE_F16, &g, 132));
  CHECK(p.kind == JITOPS__SCAN_COLS && !p.lookback && p.grid == 1);
  wide_tiles();
  one_tile_rows();
}

int main(void) {
  jitops_runtime_config cfg = test_offline_config("sm_90", NULL);
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(&cfg, &rt));
  if (rt == NULL)
    return test_finish("test_scan_validation");
  forward_arguments(rt);
  backward_arguments(rt);
  planning();
  jitops_runtime_destroy(rt);
  return test_finish("test_scan_validation");
}
