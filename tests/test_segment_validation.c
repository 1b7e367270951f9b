/* Every bad argument of the segment family gives its own status and a message naming the
 * argument, checked on a compile-only runtime (no GPU). Valid calls there get as far as the
 * launch: every kernel they need compiles, then the launch reports JITOPS_ERR_NO_DEVICE —
 * which also compiles the family's templates for sm_90 in CI. Also checks the planner's
 * automatic choice for unsorted max/min, which the GPU tests would pass either way. */
#include <stdbool.h>

#include "ops/segment/args.h"
#include "runtime/device.h"
#include "testutil.h"

/* A DLTensor with its own shape and strides storage. */
typedef struct tensor {
  DLTensor t;
  int64_t shape[4];
  int64_t strides[4];
} tensor;

static char device_block[1 << 12]; /* fake device addresses: never dereferenced */
static void *const DEV = device_block;

static tensor make(void *data, DLDataTypeCode code, int bits, int ndim, int64_t d0, int64_t d1,
                   int64_t d2) {
  tensor x;
  memset(&x, 0, sizeof x);
  x.t.data = data;
  x.t.device.device_type = kDLCUDA;
  x.t.device.device_id = 0;
  x.t.ndim = ndim;
  x.t.dtype.code = (uint8_t)code;
  x.t.dtype.bits = (uint8_t)bits;
  x.t.dtype.lanes = 1;
  x.shape[0] = d0;
  x.shape[1] = d1;
  x.shape[2] = d2;
  x.t.shape = x.shape;
  x.t.strides = NULL;
  return x;
}

/* Rebinds the pointers after a struct copy. */
static DLTensor *T(tensor *x) {
  x->t.shape = x->shape;
  if (x->t.strides != NULL)
    x->t.strides = x->strides;
  return &x->t;
}

static void with_strides(tensor *x, int64_t s0, int64_t s1, int64_t s2) {
  x->strides[0] = s0;
  x->strides[1] = s1;
  x->strides[2] = s2;
  x->t.strides = x->strides;
}

enum { N = 8, D = 4, S = 5 };

typedef struct fixture {
  tensor data, ids, out;
} fixture;

static fixture good(void) {
  fixture f;
  f.data = make(DEV, kDLFloat, 32, 2, N, D, 0);
  f.ids = make(DEV, kDLInt, 64, 1, N, 0, 0);
  f.out = make(DEV, kDLFloat, 32, 2, S, D, 0);
  return f;
}

static jitops_status reduce(jitops_runtime_t *rt, jitops_segment_reduction r, fixture *f,
                            int64_t segments, const jitops_segment_options *o) {
  return jitops_segment_reduce(rt, r, T(&f->data), T(&f->ids), segments, T(&f->out), o, NULL, NULL);
}

static void forward_pointers_and_scalars(jitops_runtime_t *rt) {
  fixture f = good();
  CHECK_FAILS(reduce(NULL, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_ARGUMENT,
              "jitops_segment_reduce: runtime is NULL");
  CHECK_FAILS(reduce(rt, (jitops_segment_reduction)7, &f, S, NULL), JITOPS_ERR_INVALID_ARGUMENT,
              "reduction 7");
  CHECK_FAILS(reduce(rt, (jitops_segment_reduction)-1, &f, S, NULL), JITOPS_ERR_INVALID_ARGUMENT,
              "reduction -1");
  CHECK_FAILS(jitops_segment_reduce(rt, JITOPS_SEGMENT_SUM, NULL, T(&f.ids), S, T(&f.out), NULL,
                                    NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "data is NULL");
  CHECK_FAILS(jitops_segment_reduce(rt, JITOPS_SEGMENT_SUM, T(&f.data), NULL, S, T(&f.out), NULL,
                                    NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "segment_ids is NULL");
  CHECK_FAILS(jitops_segment_reduce(rt, JITOPS_SEGMENT_SUM, T(&f.data), T(&f.ids), S, NULL, NULL,
                                    NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "out is NULL");
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, -1, NULL), JITOPS_ERR_INVALID_ARGUMENT,
              "num_segments is -1");
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, (int64_t)1 << 31, NULL), JITOPS_ERR_UNSUPPORTED,
              "num_segments 2147483648");
  jitops_workspace ws = {NULL, 64};
  CHECK_FAILS(jitops_segment_reduce(rt, JITOPS_SEGMENT_SUM, T(&f.data), T(&f.ids), S, T(&f.out),
                                    NULL, &ws, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "workspace->ptr is NULL");
  size_t bytes = 0;
  CHECK_FAILS(jitops_segment_reduce_workspace_size(rt, JITOPS_SEGMENT_SUM, T(&f.data), T(&f.ids), S,
                                                   T(&f.out), NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "bytes is NULL");
  CHECK_FAILS(jitops_segment_reduce_workspace_size(rt, JITOPS_SEGMENT_SUM, T(&f.data), T(&f.ids),
                                                   -3, T(&f.out), NULL, &bytes),
              JITOPS_ERR_INVALID_ARGUMENT, "jitops_segment_reduce_workspace_size: num_segments");
}

static void forward_shapes_and_dtypes(jitops_runtime_t *rt) {
  fixture f = good();
  f.data.t.ndim = 0;
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_SHAPE,
              "data is a scalar");
  f = good();
  f.data = make(DEV, kDLInt, 32, 2, N, D, 0);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_DTYPE,
              "data has dtype i32; expected f32, f64, f16 or bf16");
  f = good();
  f.data = make(DEV, kDLFloat, 8, 2, N, D, 0);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_DTYPE,
              "data has dtype (code 2, 8 bits");
  f = good();
  f.out = make(DEV, kDLFloat, 16, 2, S, D, 0);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_DTYPE,
              "out has dtype f16; expected f32");
  f = good();
  f.ids = make(DEV, kDLFloat, 32, 1, N, 0, 0);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_DTYPE,
              "segment_ids has dtype f32; expected i32 or i64");
  f = good();
  f.ids = make(DEV, kDLInt, 64, 2, N, 1, 0);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_SHAPE,
              "segment_ids has rank 2");
  f = good();
  f.ids = make(DEV, kDLInt, 32, 1, N - 3, 0, 0);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_SHAPE,
              "segment_ids has 5 entries; expected one per row (8)");
  f = good();
  f.out = make(DEV, kDLFloat, 32, 2, S - 1, D, 0);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_SHAPE,
              "out has 4 rows; expected num_segments = 5");
  f = good();
  f.out = make(DEV, kDLFloat, 32, 2, S, D + 1, 0);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_SHAPE,
              "out's dim 1 is 5; expected 4 as in data");
  f = good();
  f.out = make(DEV, kDLFloat, 32, 3, S, D, 1);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_SHAPE,
              "out has rank 3; expected 2");
  f = good();
  f.data = make(DEV, kDLFloat, 32, 2, (int64_t)1 << 31, D, 0);
  f.ids = make(DEV, kDLInt, 64, 1, (int64_t)1 << 31, 0, 0);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_UNSUPPORTED,
              "2147483648 rows is above the supported");
  f = good();
  f.data = make(DEV, kDLFloat, 32, 2, N, (int64_t)1 << 32, 0);
  f.out = make(DEV, kDLFloat, 32, 2, S, (int64_t)1 << 32, 0);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_UNSUPPORTED,
              "rows of 4294967296 elements");
}

static void forward_layouts_and_devices(jitops_runtime_t *rt) {
  fixture f = good();
  with_strides(&f.data, D, 2, 0);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_LAYOUT,
              "data's dim 1 has stride 2; the dims after the first must be compact");
  f = good();
  with_strides(&f.out, 2, 1, 0);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_LAYOUT,
              "out's rows overlap: its leading stride 2 is below its row length 4");
  f = good();
  f.data.t.byte_offset = 2;
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_LAYOUT,
              "data's first element is not aligned");
  f = good();
  f.ids.t.byte_offset = 4;
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_LAYOUT,
              "segment_ids's first element is not aligned");
  f = good();
  f.data.t.device.device_type = kDLCPU;
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_DEVICE,
              "data is not in CUDA device memory");
  f = good();
  f.out.t.device.device_type = kDLCUDAHost;
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_DEVICE,
              "out is not in CUDA device memory");
  f = good();
  f.ids.t.device.device_type = kDLROCM;
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_DEVICE,
              "segment_ids is not in CUDA device memory");
  f = good();
  f.data.t.data = NULL;
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_ARGUMENT,
              "data->data is NULL");
  f = good();
  f.data.shape[1] = -1;
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_SHAPE,
              "data->shape[1] is -1");
}

static void forward_options(jitops_runtime_t *rt) {
  fixture f = good();
  jitops_segment_options o;
  jitops_segment_options_init(&o);
  o.has_fill = 1;
  o.fill = 3.0;
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, &o), JITOPS_ERR_INVALID_ARGUMENT,
              "fill applies to max and min only");
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_MEAN, &f, S, &o), JITOPS_ERR_INVALID_ARGUMENT,
              "options->has_fill is set");
  jitops_segment_options_init(&o);
  o.sorted = 2;
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, &o), JITOPS_ERR_INVALID_ARGUMENT,
              "options->sorted is 2; expected 0 or 1");
  jitops_segment_options_init(&o);
  o.first_occurrence = -1;
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_MAX, &f, S, &o), JITOPS_ERR_INVALID_ARGUMENT,
              "options->first_occurrence is -1");
  jitops_segment_options_init(&o);
  o.algorithm = (jitops_segment_algorithm)9;
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_MAX, &f, S, &o), JITOPS_ERR_INVALID_ARGUMENT,
              "options->algorithm 9");
  o.algorithm = JITOPS_SEGMENT_ALGORITHM_ATOMIC;
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, &o), JITOPS_ERR_INVALID_ARGUMENT,
              "JITOPS_SEGMENT_ALGORITHM_ATOMIC, which is for max and min only");
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_MEAN, &f, S, &o), JITOPS_ERR_INVALID_ARGUMENT,
              "for max and min only");

  jitops_segment_options_init(&o);
  tensor counter = make(DEV, kDLFloat, 32, 1, 1, 0, 0);
  o.dropped_count = T(&counter);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, &o), JITOPS_ERR_INVALID_DTYPE,
              "options->dropped_count has dtype f32; expected i32 or i64");
  counter = make(DEV, kDLInt, 64, 1, 2, 0, 0);
  o.dropped_count = T(&counter);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, &o), JITOPS_ERR_INVALID_SHAPE,
              "options->dropped_count has 2 elements; expected 1");
  counter = make(DEV, kDLInt, 64, 0, 0, 0, 0);
  counter.t.device.device_type = kDLCPU;
  o.dropped_count = T(&counter);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, &o), JITOPS_ERR_INVALID_DEVICE,
              "options->dropped_count is not in CUDA device memory");
  counter = make(DEV, kDLInt, 32, 0, 0, 0, 0);
  counter.t.byte_offset = 2;
  o.dropped_count = T(&counter);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, &o), JITOPS_ERR_INVALID_LAYOUT,
              "options->dropped_count's first element is not aligned");
}

static void forward_host_ids(jitops_runtime_t *rt) {
  fixture f = good();
  int64_t ids[N] = {0, 4, 9, 1, 2, 3, 0, 1};
  f.ids = make(ids, kDLInt, 64, 1, N, 0, 0);
  f.ids.t.device.device_type = kDLCPU;
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_OUT_OF_RANGE,
              "segment_ids[2] = 9 is not below num_segments 5");
  int32_t sorted_ids[N] = {-1, -1, 0, 2, 2, 1, 3, 4};
  f.ids = make(sorted_ids, kDLInt, 32, 1, N, 0, 0);
  f.ids.t.device.device_type = kDLCUDAHost;
  jitops_segment_options o;
  jitops_segment_options_init(&o);
  o.sorted = 1;
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, &o), JITOPS_ERR_OUT_OF_RANGE,
              "segment_ids is not sorted: segment_ids[5] = 1 follows 2");
  /* Unsorted, the same ids are fine (negatives are dropped); the call gets to its launch. */
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_NO_DEVICE, NULL);
  /* Strided host ids are read with their stride: every other entry of `ids` is valid. */
  int64_t strided[2 * N] = {0, 99, 1, 99, 2, 99, 3, 99, 4, 99, 0, 99, 1, 99, 2, 99};
  f.ids = make(strided, kDLInt, 64, 1, N, 0, 0);
  f.ids.t.device.device_type = kDLCPU;
  with_strides(&f.ids, 2, 0, 0);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_NO_DEVICE, NULL);
  with_strides(&f.ids, 1, 0, 0);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_OUT_OF_RANGE,
              "segment_ids[1] = 99");
}

typedef struct bfixture {
  tensor dy, x, y, ids, dx;
} bfixture;

static bfixture bgood(void) {
  bfixture b;
  b.dy = make(DEV, kDLFloat, 32, 2, S, D, 0);
  b.x = make(DEV, kDLFloat, 32, 2, N, D, 0);
  b.y = make(DEV, kDLFloat, 32, 2, S, D, 0);
  b.ids = make(DEV, kDLInt, 32, 1, N, 0, 0);
  b.dx = make(DEV, kDLFloat, 32, 2, N, D, 0);
  return b;
}

static jitops_status backward(jitops_runtime_t *rt, jitops_segment_reduction r, bfixture *b,
                              bool with_x, bool with_y) {
  return jitops_segment_reduce_backward(rt, r, T(&b->dy), with_x ? T(&b->x) : NULL,
                                        with_y ? T(&b->y) : NULL, T(&b->ids), S, T(&b->dx), NULL,
                                        NULL, NULL);
}

static void backward_arguments(jitops_runtime_t *rt) {
  bfixture b = bgood();
  CHECK_FAILS(backward(NULL, JITOPS_SEGMENT_MAX, &b, true, true), JITOPS_ERR_INVALID_ARGUMENT,
              "jitops_segment_reduce_backward: runtime is NULL");
  CHECK_FAILS(backward(rt, (jitops_segment_reduction)4, &b, true, true),
              JITOPS_ERR_INVALID_ARGUMENT, "reduction 4");
  CHECK_FAILS(backward(rt, JITOPS_SEGMENT_MAX, &b, false, true), JITOPS_ERR_INVALID_ARGUMENT,
              "data is NULL; the max and min backward needs the forward's input");
  CHECK_FAILS(backward(rt, JITOPS_SEGMENT_MIN, &b, true, false), JITOPS_ERR_INVALID_ARGUMENT,
              "out is NULL");
  CHECK_FAILS(jitops_segment_reduce_backward(rt, JITOPS_SEGMENT_SUM, NULL, NULL, NULL, T(&b.ids), S,
                                             T(&b.dx), NULL, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "grad_out is NULL");
  CHECK_FAILS(jitops_segment_reduce_backward(rt, JITOPS_SEGMENT_SUM, T(&b.dy), NULL, NULL,
                                             T(&b.ids), S, NULL, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "grad_data is NULL");
  b = bgood();
  b.x = make(DEV, kDLFloat, 32, 2, N - 1, D, 0);
  CHECK_FAILS(backward(rt, JITOPS_SEGMENT_MAX, &b, true, true), JITOPS_ERR_INVALID_SHAPE,
              "data has 7 rows; expected grad_data's rows = 8");
  b = bgood();
  b.y = make(DEV, kDLFloat, 32, 2, S, D + 2, 0);
  CHECK_FAILS(backward(rt, JITOPS_SEGMENT_MAX, &b, true, true), JITOPS_ERR_INVALID_SHAPE,
              "out's dim 1 is 6; expected 4 as in grad_out");
  b = bgood();
  b.x = make(DEV, kDLFloat, 64, 2, N, D, 0);
  CHECK_FAILS(backward(rt, JITOPS_SEGMENT_MAX, &b, true, true), JITOPS_ERR_INVALID_DTYPE,
              "data has dtype f64; expected f32");
  b = bgood();
  b.dy = make(DEV, kDLFloat, 32, 2, S + 1, D, 0);
  CHECK_FAILS(backward(rt, JITOPS_SEGMENT_SUM, &b, false, false), JITOPS_ERR_INVALID_SHAPE,
              "grad_out has 6 rows; expected num_segments = 5");
  b = bgood();
  b.dy = make(DEV, kDLFloat, 32, 2, S, D - 1, 0);
  CHECK_FAILS(backward(rt, JITOPS_SEGMENT_MEAN, &b, false, false), JITOPS_ERR_INVALID_SHAPE,
              "grad_out's dim 1 is 3; expected 4 as in grad_data");
  b = bgood();
  b.dy = make(DEV, kDLFloat, 16, 2, S, D, 0);
  CHECK_FAILS(backward(rt, JITOPS_SEGMENT_SUM, &b, false, false), JITOPS_ERR_INVALID_DTYPE,
              "grad_out has dtype f16; expected f32, as grad_data");
  b = bgood();
  b.ids = make(DEV, kDLInt, 32, 1, N + 1, 0, 0);
  CHECK_FAILS(backward(rt, JITOPS_SEGMENT_SUM, &b, false, false), JITOPS_ERR_INVALID_SHAPE,
              "segment_ids has 9 entries");
  b = bgood();
  with_strides(&b.dx, 0, 1, 0);
  CHECK_FAILS(backward(rt, JITOPS_SEGMENT_SUM, &b, false, false), JITOPS_ERR_INVALID_LAYOUT,
              "grad_data's rows overlap");
  b = bgood();
  with_strides(&b.x, D, 3, 0);
  CHECK_FAILS(backward(rt, JITOPS_SEGMENT_MIN, &b, true, true), JITOPS_ERR_INVALID_LAYOUT,
              "data's dim 1 has stride 3");
  CHECK_FAILS(jitops_segment_reduce_backward(rt, JITOPS_SEGMENT_SUM, T(&b.dy), NULL, NULL,
                                             T(&b.ids), -2, T(&b.dx), NULL, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "num_segments is -2");
  b = bgood();
  jitops_segment_options o;
  jitops_segment_options_init(&o);
  o.has_fill = 1;
  CHECK_FAILS(jitops_segment_reduce_backward(rt, JITOPS_SEGMENT_SUM, T(&b.dy), NULL, NULL,
                                             T(&b.ids), S, T(&b.dx), &o, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "fill applies to max and min only");
  /* Sum and mean need neither data nor out; with a bad algorithm value too, since the
   * backward ignores the forward-only options. */
  o.has_fill = 0;
  o.algorithm = (jitops_segment_algorithm)42;
  CHECK_FAILS(jitops_segment_reduce_backward(rt, JITOPS_SEGMENT_SUM, T(&b.dy), NULL, NULL,
                                             T(&b.ids), S, T(&b.dx), &o, NULL, NULL),
              JITOPS_ERR_NO_DEVICE, NULL);
  size_t bytes = 1;
  CHECK_FAILS(jitops_segment_reduce_backward_workspace_size(
                  rt, JITOPS_SEGMENT_SUM, T(&b.dy), NULL, NULL, T(&b.ids), S, T(&b.dx), NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "bytes is NULL");
  CHECK_OK(jitops_segment_reduce_backward_workspace_size(
      rt, JITOPS_SEGMENT_SUM, T(&b.dy), NULL, NULL, T(&b.ids), S, T(&b.dx), NULL, &bytes));
  CHECK(bytes == 0);
  CHECK_OK(jitops_segment_reduce_backward_workspace_size(
      rt, JITOPS_SEGMENT_MAX, T(&b.dy), T(&b.x), T(&b.y), T(&b.ids), S, T(&b.dx), NULL, &bytes));
  CHECK(bytes >= (size_t)S * D * 4 + 4);
}

/* Valid calls compile every kernel they need, then stop at the launch. */
static void valid_calls_reach_the_launch(jitops_runtime_t *rt) {
  static const struct {
    DLDataTypeCode code;
    int bits;
    int64_t cols;
    int64_t segments;
  } shapes[] = {{kDLFloat, 32, 64, 10000},
                {kDLBfloat, 16, 1, 100},
                {kDLFloat, 64, 3, 70000},
                {kDLFloat, 16, 1024, 7},
                {kDLFloat, 32, 10, 300}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
    for (int r = 0; r < 4; ++r) {
      for (int sorted = 0; sorted < 2; ++sorted) {
        fixture f;
        f.data = make(DEV, shapes[i].code, shapes[i].bits, 2, 1 << 16, shapes[i].cols, 0);
        f.ids = make(DEV, kDLInt, i % 2 ? 32 : 64, 1, 1 << 16, 0, 0);
        f.out = make(DEV, shapes[i].code, shapes[i].bits, 2, shapes[i].segments, shapes[i].cols, 0);
        jitops_segment_options o;
        jitops_segment_options_init(&o);
        o.sorted = sorted;
        CHECK_FAILS(reduce(rt, (jitops_segment_reduction)r, &f, shapes[i].segments, &o),
                    JITOPS_ERR_NO_DEVICE, NULL);
        size_t bytes = 0;
        CHECK_OK(jitops_segment_reduce_workspace_size(rt, (jitops_segment_reduction)r, T(&f.data),
                                                      T(&f.ids), shapes[i].segments, T(&f.out), &o,
                                                      &bytes));
        CHECK(bytes > 0);
        CHECK_FAILS(jitops_segment_reduce_backward(rt, (jitops_segment_reduction)r, T(&f.out),
                                                   T(&f.data), T(&f.out), T(&f.ids),
                                                   shapes[i].segments, T(&f.data), &o, NULL, NULL),
                    JITOPS_ERR_NO_DEVICE, NULL);
      }
    }
  }
  /* An empty output needs no kernel unless dropped ids are to be counted. */
  fixture f = good();
  f.out = make(DEV, kDLFloat, 32, 2, 0, D, 0);
  CHECK_OK(reduce(rt, JITOPS_SEGMENT_MAX, &f, 0, NULL));
  jitops_segment_options o;
  jitops_segment_options_init(&o);
  tensor counter = make(DEV, kDLInt, 32, 1, 1, 0, 0);
  o.dropped_count = T(&counter);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_MAX, &f, 0, &o), JITOPS_ERR_NO_DEVICE, NULL);
}

static void workspace_sizes(jitops_runtime_t *rt) {
  fixture f = good();
  f.data = make(DEV, kDLFloat, 32, 2, 1 << 20, 64, 0);
  f.ids = make(DEV, kDLInt, 64, 1, 1 << 20, 0, 0);
  f.out = make(DEV, kDLFloat, 32, 2, 10000, 64, 0);
  jitops_segment_options o;
  jitops_segment_options_init(&o);
  size_t unsorted = 0, sorted = 0, atomic = 0;
  CHECK_OK(jitops_segment_reduce_workspace_size(rt, JITOPS_SEGMENT_SUM, T(&f.data), T(&f.ids),
                                                10000, T(&f.out), &o, &unsorted));
  o.sorted = 1;
  CHECK_OK(jitops_segment_reduce_workspace_size(rt, JITOPS_SEGMENT_SUM, T(&f.data), T(&f.ids),
                                                10000, T(&f.out), &o, &sorted));
  o.sorted = 0;
  o.algorithm = JITOPS_SEGMENT_ALGORITHM_ATOMIC;
  CHECK_OK(jitops_segment_reduce_workspace_size(rt, JITOPS_SEGMENT_MAX, T(&f.data), T(&f.ids),
                                                10000, T(&f.out), &o, &atomic));
  /* The radix sort keeps keys and rows twice (ping-pong): at least 16 bytes a row. */
  CHECK(unsorted >= sorted + ((size_t)16 << 20));
  CHECK(sorted >= 10001 * 4);
  /* f32 max/min with atomics over many segments: buckets of 192 segments (48 KB tables), an
   * 8-byte entry a row plus a count per bucket and counting block (at most 128) and 16 bytes a
   * tile; f16 (whose output cannot hold the codes): the global table of S x D codes. */
  CHECK(atomic >= (size_t)8 << 20 &&
        atomic < ((size_t)8 << 20) + 53 * (128 + 5) * 4 + 16 * (53 + 256) + 4096);
  f.data = make(DEV, kDLFloat, 16, 2, 1 << 20, 64, 0);
  f.out = make(DEV, kDLFloat, 16, 2, 10000, 64, 0);
  CHECK_OK(jitops_segment_reduce_workspace_size(rt, JITOPS_SEGMENT_MAX, T(&f.data), T(&f.ids),
                                                10000, T(&f.out), &o, &atomic));
  CHECK(atomic >= (size_t)10000 * 64 * 4 && atomic < (size_t)10000 * 64 * 4 + 4096);
}

/* Unsorted rows of at most 8 columns over many segments take the narrow path, whose workspace
 * is its global table: max/min 4-byte codes; sum/mean 64-bit fixed-point cells, 2 bits of
 * non-finite marks a cell and a word a prepare block (at most 8 blocks an SM), mean also a count
 * a segment. f64 sums, fewer than 16384 segments and 9 columns keep the sort (16 bytes a row). */
static void narrow_workspace_sizes(jitops_runtime_t *rt) {
  const int64_t rows = 1 << 20;
  fixture f = good();
  f.ids = make(DEV, kDLInt, 64, 1, rows, 0, 0);
  jitops_segment_options o;
  jitops_segment_options_init(&o);
  const struct {
    jitops_segment_reduction r;
    int bits;
    int64_t D, S;
    size_t least, most;
  } want[] = {
      {JITOPS_SEGMENT_MAX, 32, 3, 1000000, 12000000, 12000000 + 256},
      {JITOPS_SEGMENT_MIN, 32, 1, 100000, 400000, 400000 + 256},
      {JITOPS_SEGMENT_SUM, 32, 3, 1000000, 24750000, 24750000 + 8192},
      {JITOPS_SEGMENT_MEAN, 32, 3, 1000000, 28750000, 28750000 + 8192},
      {JITOPS_SEGMENT_SUM, 16, 8, 16384, 16384 * 8 * 8 + 32768, 16384 * 8 * 8 + 32768 + 8192},
      {JITOPS_SEGMENT_SUM, 64, 3, 1000000, (size_t)16 << 20, SIZE_MAX},
      {JITOPS_SEGMENT_SUM, 32, 3, 16383, (size_t)16 << 20, SIZE_MAX},
      {JITOPS_SEGMENT_SUM, 32, 9, 100000, (size_t)16 << 20, SIZE_MAX},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; ++i) {
    f.data = make(DEV, kDLFloat, want[i].bits, 2, rows, want[i].D, 0);
    f.out = make(DEV, kDLFloat, want[i].bits, 2, want[i].S, want[i].D, 0);
    size_t bytes = 0;
    CHECK_OK(jitops_segment_reduce_workspace_size(rt, want[i].r, T(&f.data), T(&f.ids), want[i].S,
                                                  T(&f.out), &o, &bytes));
    if (bytes < want[i].least || bytes >= want[i].most) {
      fprintf(stderr, "narrow_workspace_sizes[%zu]: %zu bytes, expected [%zu, %zu)\n", i, bytes,
              want[i].least, want[i].most);
      ++test_failures;
    }
  }
}

/* Max/min on the narrow path build their code table in the output when nothing else lies in
 * its bytes: no table in the workspace then. f16 (f32 codes), and data that reaches into the
 * output (here through a negative row stride, from above it) keep the 12 MB table. */
static void narrow_table_in_output(jitops_runtime_t *rt) {
  const int64_t rows = 1 << 20, cols = 3, segs = 1000000;
  const size_t table = (size_t)segs * cols * 4;
  char *const base = (char *)((uintptr_t)1 << 40); /* fake device addresses, never read */
  fixture f = good();
  f.ids = make(base + ((size_t)1 << 32), kDLInt, 64, 1, rows, 0, 0);
  f.data = make(base + ((size_t)2 << 32), kDLFloat, 32, 2, rows, cols, 0);
  f.out = make(base, kDLFloat, 32, 2, segs, cols, 0);
  jitops_segment_options o;
  jitops_segment_options_init(&o);
  size_t bytes = 0;
  CHECK_OK(jitops_segment_reduce_workspace_size(rt, JITOPS_SEGMENT_MAX, T(&f.data), T(&f.ids), segs,
                                                T(&f.out), &o, &bytes));
  CHECK(bytes < 4096);
  f.data = make(base + (8 << 20), kDLFloat, 32, 2, rows, cols, 0);
  with_strides(&f.data, -cols, 1, 0);
  CHECK_OK(jitops_segment_reduce_workspace_size(rt, JITOPS_SEGMENT_MIN, T(&f.data), T(&f.ids), segs,
                                                T(&f.out), &o, &bytes));
  CHECK(bytes >= table);
  f.data = make(base + ((size_t)2 << 32), kDLFloat, 16, 2, rows, cols, 0);
  f.out = make(base, kDLFloat, 16, 2, segs, cols, 0);
  CHECK_OK(jitops_segment_reduce_workspace_size(rt, JITOPS_SEGMENT_MAX, T(&f.data), T(&f.ids), segs,
                                                T(&f.out), &o, &bytes));
  CHECK(bytes >= table);
}

/* Hostile tensors: sizes, strides and byte offsets whose products or sums overflow int64, or
 * that wrap the address space, are refused with a status and a message naming the argument
 * (the core's addressability rule), before any of that arithmetic overflows (the test runs
 * clean under UBSan) and before host ids are read. */
static void hostile_forward_tensors(jitops_runtime_t *rt) {
  const int64_t big = (int64_t)1 << 62;
  fixture f = good();
  f.data = make(DEV, kDLFloat, 32, 2, big, big, 0);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_OUT_OF_RANGE,
              "data has more than 2^63 elements");
  f = good(); /* empty, but its row length overflows */
  f.data = make(DEV, kDLFloat, 32, 3, 0, big, big);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_SHAPE,
              "data's row length overflows");
  f = good();
  f.data = make(DEV, kDLFloat, 32, 2, INT64_MAX, 1, 0);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_SHAPE,
              "data's shape [9223372036854775807, 1] spans more than 2^63 bytes");
  f = good();
  f.data = make(DEV, kDLFloat, 64, 2, 4, (int64_t)1 << 60, 0);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_SHAPE,
              "data's shape [4, 1152921504606846976] spans more than 2^63 bytes");
  f = good();
  with_strides(&f.out, big, 1, 0);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_LAYOUT,
              "out's strides (shape [5, 4]) put elements more than 2^63 bytes from its first");
  const int64_t hostile_strides[][2] = {{big, 1}, {INT64_MIN, 1}, {-(big / 2), 1}, {D, INT64_MIN}};
  for (size_t i = 0; i < sizeof hostile_strides / sizeof hostile_strides[0]; ++i) {
    f = good();
    with_strides(&f.data, hostile_strides[i][0], hostile_strides[i][1], 0);
    CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_MAX, &f, S, NULL), JITOPS_ERR_INVALID_LAYOUT,
                "data's strides (shape [8, 4]) put elements more than 2^63 bytes from its first");
  }
  f = good();
  with_strides(&f.out, INT64_MIN, 1, 0);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_LAYOUT,
              "out's strides (shape [5, 4]) put elements");
  f = good();
  with_strides(&f.ids, big, 0, 0);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_LAYOUT,
              "segment_ids's strides (shape [8]) put elements more than 2^63 bytes");
  with_strides(&f.ids, INT64_MIN, 0, 0);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_LAYOUT,
              "segment_ids's strides (shape [8]) put elements more than 2^63 bytes");
  f = good();
  f.data.t.byte_offset = UINT64_MAX - 3;
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_LAYOUT,
              "data's byte_offset 18446744073709551612 is above 2^63 - 1");
  f = good(); /* data + byte_offset past the top of the address space */
  f.data.t.data = (void *)(uintptr_t)(UINT64_MAX - 7);
  f.data.t.byte_offset = 64;
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_LAYOUT,
              "data's byte_offset 64 takes its data pointer past the end of the address space");
  f = good(); /* a first element just below the top of the address space, its last above */
  f.out.t.data = (void *)(uintptr_t)(UINT64_MAX - 15);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_LAYOUT,
              "out's elements would lie outside the address space");
  f = good(); /* rows walking backwards below the bottom of the address space */
  f.data.t.data = (void *)(uintptr_t)64;
  with_strides(&f.data, -D, 1, 0);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_LAYOUT,
              "data's elements would lie outside the address space");
  f = good();
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, INT64_MAX, NULL), JITOPS_ERR_UNSUPPORTED,
              "num_segments 9223372036854775807 is above the supported");

  /* Host ids are read on the host: a bad layout is refused before the first read. */
  int64_t ids[N] = {0, 1, 2, 3, 4, 0, 1, 2};
  f = good();
  f.ids = make(ids, kDLInt, 64, 1, N, 0, 0);
  f.ids.t.device.device_type = kDLCPU;
  with_strides(&f.ids, big, 0, 0);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_LAYOUT,
              "segment_ids's strides (shape [8]) put elements");
  with_strides(&f.ids, 1, 0, 0);
  f.ids.t.byte_offset = UINT64_MAX - 7;
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, NULL), JITOPS_ERR_INVALID_LAYOUT,
              "segment_ids's byte_offset 18446744073709551608 is above 2^63 - 1");

  jitops_segment_options o;
  jitops_segment_options_init(&o);
  tensor counter = make(DEV, kDLInt, 64, 2, big, big, 0);
  o.dropped_count = T(&counter);
  f = good();
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, &o), JITOPS_ERR_OUT_OF_RANGE,
              "options->dropped_count has more than 2^63 elements");
  counter = make(DEV, kDLInt, 64, 1, 1, 0, 0);
  counter.t.byte_offset = UINT64_MAX - 7;
  o.dropped_count = T(&counter);
  CHECK_FAILS(reduce(rt, JITOPS_SEGMENT_SUM, &f, S, &o), JITOPS_ERR_INVALID_LAYOUT,
              "options->dropped_count's byte_offset 18446744073709551608 is above 2^63 - 1");
}

static void hostile_backward_tensors(jitops_runtime_t *rt) {
  const int64_t big = (int64_t)1 << 62;
  bfixture b = bgood();
  with_strides(&b.dy, big, 1, 0);
  CHECK_FAILS(backward(rt, JITOPS_SEGMENT_SUM, &b, false, false), JITOPS_ERR_INVALID_LAYOUT,
              "grad_out's strides (shape [5, 4]) put elements");
  b = bgood();
  with_strides(&b.x, INT64_MIN, 1, 0);
  CHECK_FAILS(backward(rt, JITOPS_SEGMENT_MAX, &b, true, true), JITOPS_ERR_INVALID_LAYOUT,
              "data's strides (shape [8, 4]) put elements");
  b = bgood();
  with_strides(&b.y, big, 1, 0);
  CHECK_FAILS(backward(rt, JITOPS_SEGMENT_MIN, &b, true, true), JITOPS_ERR_INVALID_LAYOUT,
              "out's strides (shape [5, 4]) put elements");
  b = bgood();
  with_strides(&b.dx, INT64_MIN, 1, 0);
  CHECK_FAILS(backward(rt, JITOPS_SEGMENT_SUM, &b, false, false), JITOPS_ERR_INVALID_LAYOUT,
              "grad_data's strides (shape [8, 4]) put elements");
  b = bgood();
  b.dx = make(DEV, kDLFloat, 32, 2, big, big, 0);
  CHECK_FAILS(backward(rt, JITOPS_SEGMENT_SUM, &b, false, false), JITOPS_ERR_OUT_OF_RANGE,
              "grad_data has more than 2^63 elements");
  b = bgood();
  b.dx.t.byte_offset = UINT64_MAX - 3;
  CHECK_FAILS(backward(rt, JITOPS_SEGMENT_MEAN, &b, false, false), JITOPS_ERR_INVALID_LAYOUT,
              "grad_data's byte_offset 18446744073709551612 is above 2^63 - 1");
  b = bgood();
  with_strides(&b.ids, big, 0, 0);
  CHECK_FAILS(backward(rt, JITOPS_SEGMENT_MEAN, &b, false, false), JITOPS_ERR_INVALID_LAYOUT,
              "segment_ids's strides (shape [8]) put elements");
}

/* The largest valid tables plan without wrapping: f16 max by atomics over 2^31 - 2 segments of
 * 2^31 - 1 columns needs a code table of 4 S D bytes, just below 2^64. */
static void extreme_workspace(jitops_runtime_t *rt) {
  const int64_t segments = ((int64_t)1 << 31) - 2, cols = ((int64_t)1 << 31) - 1;
  fixture f = good();
  f.data = make(DEV, kDLFloat, 16, 2, N, cols, 0);
  f.out = make(DEV, kDLFloat, 16, 2, segments, cols, 0);
  jitops_segment_options o;
  jitops_segment_options_init(&o);
  o.algorithm = JITOPS_SEGMENT_ALGORITHM_ATOMIC;
  size_t bytes = 0;
  CHECK_OK(jitops_segment_reduce_workspace_size(rt, JITOPS_SEGMENT_MAX, T(&f.data), T(&f.ids),
                                                segments, T(&f.out), &o, &bytes));
  CHECK(bytes == (((size_t)segments * (size_t)cols * 4 + 255) & ~(size_t)255));
  bfixture b = bgood();
  b.dy = f.out;
  b.y = f.out;
  b.x = f.data;
  b.dx = f.data;
  CHECK_OK(jitops_segment_reduce_backward_workspace_size(rt, JITOPS_SEGMENT_MAX, T(&b.dy), T(&b.x),
                                                         T(&b.y), T(&b.ids), segments, T(&b.dx),
                                                         NULL, &bytes));
  CHECK(bytes > 0 && bytes < ((size_t)1 << 40));
}

static void catalogue(jitops_runtime_t *rt) {
  size_t total = jitops_catalogue_size(), found = 0, compiled = 0;
  for (size_t i = 0; i < total; ++i) {
    const char *op = NULL, *text = NULL;
    CHECK_OK(jitops_catalogue_describe(i, &op, &text));
    if (op == NULL || strcmp(op, "segment") != 0)
      continue;
    ++found;
    /* Compile a few: the unsorted max entries exercise both forward algorithms. */
    if (strstr(text, "unsorted max, f32 data, i64 ids, D=64") != NULL ||
        strstr(text, "sorted mean, bf16 data, i32 ids, D=1") != NULL) {
      CHECK_OK(jitops_catalogue_compile(rt, i));
      ++compiled;
    }
  }
  CHECK(found == 96);
  CHECK(compiled == 3); /* "sorted mean" also matches "unsorted mean" */
}

/* ---- the planner's choice for unsorted max/min (ops/segment/plan.c states the measurements) */

/* The plan of `reduction` over `segments` of rows [rows, cols] of a float type of `bits` (kDLBfloat
 * with 16) and int64 ids, validated as the entry does. */
static void plan_of(jitops_runtime_t *rt, jitops_segment_reduction reduction, DLDataTypeCode code,
                    int bits, int64_t rows, int64_t cols, int64_t segments, bool sorted,
                    jitops__segment_forward_plan *plan) {
  fixture f;
  f.data = make(DEV, code, bits, 2, rows, cols, 0);
  f.ids = make(DEV, kDLInt, 64, 1, rows, 0, 0);
  f.out = make(DEV, code, bits, 2, segments, cols, 0);
  jitops_segment_options options;
  jitops_segment_options_init(&options);
  options.sorted = sorted;
  jitops__segment_call call;
  CHECK_OK(jitops__segment_check_forward("test", rt, reduction, T(&f.data), T(&f.ids), segments,
                                         T(&f.out), &options, &call));
  CHECK_OK(jitops__segment_plan_forward(jitops__runtime_props(rt), &call, plan));
}

/* One planner check: the path planned for `reduction` over rows [rows, cols] of a float type
 * of `bits` (kDLBfloat with 16) over `segments`, with sorted ids or not. */
typedef struct planned_case {
  jitops_segment_reduction reduction;
  DLDataTypeCode code;
  int bits;
  int64_t rows, cols, segments;
  bool sorted;
  jitops__segment_path path;
} planned_case;

static void check_planned(jitops_runtime_t *rt, const char *table, const planned_case *cases,
                          size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const planned_case *c = &cases[i];
    jitops__segment_forward_plan plan;
    plan_of(rt, c->reduction, c->code, c->bits, c->rows, c->cols, c->segments, c->sorted, &plan);
    if (plan.path != c->path)
      fprintf(stderr, "%s, case %zu: N %lld, D %lld, S %lld planned path %d, wanted %d\n", table, i,
              (long long)c->rows, (long long)c->cols, (long long)c->segments, (int)plan.path,
              (int)c->path);
    CHECK(plan.path == c->path);
  }
}

/* Each shape's planned path, N = 2^20 rows: f32 takes buckets when the segments fit in at most
 * 30 bucket tables of 48 KB, f64 when rows have at most 32 columns (however many tables). What
 * held before those rules holds too: 2-byte values never take buckets (their codes are wider
 * than the values, which the tables' merge through the output needs equal), rows of at most 8
 * columns take the narrow path, and segments of at most 2 rows take buckets at any width. */
static void planner_choices(jitops_runtime_t *rt) {
  static const planned_case cases[] = {
      /* 2 tables */
      {JITOPS_SEGMENT_MAX, kDLFloat, 32, 1 << 20, 16, 1000, false, JITOPS__SEGMENT_PATH_BUCKETS},
      /* 27 */
      {JITOPS_SEGMENT_MAX, kDLFloat, 32, 1 << 20, 32, 10000, false, JITOPS__SEGMENT_PATH_BUCKETS},
      /* 11 */
      {JITOPS_SEGMENT_MAX, kDLFloat, 32, 1 << 20, 128, 1000, false, JITOPS__SEGMENT_PATH_BUCKETS},
      /* 53: the benchmark table's */
      {JITOPS_SEGMENT_MAX, kDLFloat, 32, 1 << 20, 64, 10000, false, JITOPS__SEGMENT_PATH_SORT},
      /* 33 */
      {JITOPS_SEGMENT_MAX, kDLFloat, 32, 1 << 20, 40, 10000, false, JITOPS__SEGMENT_PATH_SORT},
      /* 834 */
      {JITOPS_SEGMENT_MAX, kDLFloat, 32, 1 << 20, 1024, 10000, false, JITOPS__SEGMENT_PATH_SORT},
      /* 521 */
      {JITOPS_SEGMENT_MAX, kDLFloat, 64, 1 << 20, 32, 100000, false, JITOPS__SEGMENT_PATH_BUCKETS},
      {JITOPS_SEGMENT_MAX, kDLFloat, 64, 1 << 20, 12, 1000, false, JITOPS__SEGMENT_PATH_BUCKETS},
      {JITOPS_SEGMENT_MAX, kDLFloat, 64, 1 << 20, 40, 10000, false, JITOPS__SEGMENT_PATH_SORT},
      {JITOPS_SEGMENT_MAX, kDLFloat, 64, 1 << 20, 64, 1000, false, JITOPS__SEGMENT_PATH_SORT},
      {JITOPS_SEGMENT_MAX, kDLBfloat, 16, 1 << 20, 16, 1000, false, JITOPS__SEGMENT_PATH_SORT},
      {JITOPS_SEGMENT_MAX, kDLFloat, 32, 1 << 20, 8, 10000, false, JITOPS__SEGMENT_PATH_NARROW},
      {JITOPS_SEGMENT_MAX, kDLFloat, 32, 1 << 20, 64, 1000000, false, JITOPS__SEGMENT_PATH_BUCKETS},
  };
  check_planned(rt, "unsorted max, 2^20 rows", cases, sizeof cases / sizeof cases[0]);
}

/* A small call's chunked reduction takes chunks of one batch (8 rows): its walk of a chunk is
 * its latency. A call of 2^20 rows still plans one wave of longer chunks. */
static void small_calls_take_short_chunks(jitops_runtime_t *rt) {
  jitops__segment_forward_plan plan;
  plan_of(rt, JITOPS_SEGMENT_MAX, kDLFloat, 32, 1024, 128, 64, true, &plan);
  CHECK(plan.path == JITOPS__SEGMENT_PATH_BOUNDARIES);
  CHECK(plan.chunk_rows == 8 && plan.chunks == 128);
  plan_of(rt, JITOPS_SEGMENT_MAX, kDLFloat, 32, 1 << 20, 64, 10000, true, &plan);
  CHECK(plan.chunk_rows > 32 && plan.chunks * plan.chunk_rows >= (1 << 20));
}

/* Unsorted sum and mean of rows of at most 8 columns take the fixed-point narrow path when the
 * call is small (at most 16384 rows) or its segments average at most 64 rows, whatever S, and
 * rows of up to 64 columns (max and min too) when the call is small and its table at most 2^18
 * cells; the per-tile sums keep one column over few segments of many rows, the sort the rest
 * and f64 sums. */
static void small_or_sparse_sums_take_the_narrow_path(jitops_runtime_t *rt) {
  static const planned_case cases[] = {
      /* small */
      {JITOPS_SEGMENT_SUM, kDLFloat, 32, 1024, 8, 64, false, JITOPS__SEGMENT_PATH_NARROW},
      /* small, one col */
      {JITOPS_SEGMENT_MEAN, kDLFloat, 32, 16384, 1, 16, false, JITOPS__SEGMENT_PATH_NARROW},
      /* 64 a segment */
      {JITOPS_SEGMENT_SUM, kDLFloat, 32, 262144, 4, 4096, false, JITOPS__SEGMENT_PATH_NARROW},
      /* 105 a segment */
      {JITOPS_SEGMENT_SUM, kDLFloat, 32, 1 << 20, 1, 10000, false, JITOPS__SEGMENT_PATH_TILES},
      {JITOPS_SEGMENT_MEAN, kDLFloat, 32, 1 << 20, 2, 256, false, JITOPS__SEGMENT_PATH_SORT},
      /* small, 16 columns */
      {JITOPS_SEGMENT_SUM, kDLFloat, 32, 1024, 16, 64, false, JITOPS__SEGMENT_PATH_NARROW},
      /* 2^18 cells */
      {JITOPS_SEGMENT_MEAN, kDLFloat, 32, 16384, 64, 4096, false, JITOPS__SEGMENT_PATH_NARROW},
      {JITOPS_SEGMENT_SUM, kDLFloat, 32, 16384, 64, 4097, false, JITOPS__SEGMENT_PATH_SORT},
      {JITOPS_SEGMENT_SUM, kDLFloat, 32, 16385, 16, 64, false, JITOPS__SEGMENT_PATH_SORT},
      {JITOPS_SEGMENT_SUM, kDLFloat, 32, 1024, 65, 64, false, JITOPS__SEGMENT_PATH_SORT},
      /* max, small */
      {JITOPS_SEGMENT_MAX, kDLFloat, 32, 4096, 64, 256, false, JITOPS__SEGMENT_PATH_NARROW},
      {JITOPS_SEGMENT_MIN, kDLFloat, 32, 16384, 12, 16, false, JITOPS__SEGMENT_PATH_NARROW},
      /* f64 */
      {JITOPS_SEGMENT_SUM, kDLFloat, 64, 1024, 8, 64, false, JITOPS__SEGMENT_PATH_SORT},
      /* 105 a segment */
      {JITOPS_SEGMENT_SUM, kDLFloat, 32, 1 << 20, 8, 10000, false, JITOPS__SEGMENT_PATH_SORT},
  };
  check_planned(rt, "small or sparse", cases, sizeof cases / sizeof cases[0]);
}

/* Small calls with sorted ids take the narrow path too (max and min under the small bounds; sum
 * and mean also at most 2^18 elements); the rest, and forced algorithms, the boundaries. */
static void small_sorted_calls_take_the_narrow_path(jitops_runtime_t *rt) {
  static const planned_case cases[] = {
      {JITOPS_SEGMENT_SUM, kDLFloat, 32, 1024, 8, 64, true, JITOPS__SEGMENT_PATH_NARROW},
      {JITOPS_SEGMENT_MEAN, kDLFloat, 32, 4096, 64, 256, true, JITOPS__SEGMENT_PATH_NARROW},
      {JITOPS_SEGMENT_SUM, kDLFloat, 32, 16384, 64, 256, true, JITOPS__SEGMENT_PATH_BOUNDARIES},
      {JITOPS_SEGMENT_MAX, kDLFloat, 32, 16384, 64, 256, true, JITOPS__SEGMENT_PATH_NARROW},
      {JITOPS_SEGMENT_MIN, kDLFloat, 32, 16385, 8, 256, true, JITOPS__SEGMENT_PATH_BOUNDARIES},
      {JITOPS_SEGMENT_SUM, kDLFloat, 32, 1024, 128, 16, true, JITOPS__SEGMENT_PATH_BOUNDARIES},
  };
  check_planned(rt, "sorted", cases, sizeof cases / sizeof cases[0]);
}

int main(void) {
  jitops_runtime_config cfg = test_offline_config("sm_90", NULL);
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(&cfg, &rt));
  if (rt == NULL)
    return test_finish("test_segment_validation");
  jitops_segment_options_init(NULL); /* a no-op */
  forward_pointers_and_scalars(rt);
  forward_shapes_and_dtypes(rt);
  forward_layouts_and_devices(rt);
  forward_options(rt);
  forward_host_ids(rt);
  backward_arguments(rt);
  hostile_forward_tensors(rt);
  hostile_backward_tensors(rt);
  extreme_workspace(rt);
  valid_calls_reach_the_launch(rt);
  workspace_sizes(rt);
  narrow_workspace_sizes(rt);
  narrow_table_in_output(rt);
  catalogue(rt);
  planner_choices(rt);
  small_calls_take_short_chunks(rt);
  small_or_sparse_sums_take_the_narrow_path(rt);
  small_sorted_calls_take_the_narrow_path(rt);
  jitops_runtime_destroy(rt);
  return test_finish("test_segment_validation");
}
