/* Argument validation for the segment family (args.h). Host-memory ids are checked value by
 * value here too (range, and order for the sorted variant); run.c uploads them. Every tensor
 * passes the core's addressability rule (jitops__check_addressable) before its strides or its
 * data pointer enter any arithmetic, so no size, offset or address computed from it overflows;
 * a row length that overflows is refused before that (an empty tensor's compact strides would
 * multiply its trailing dims). */
#include "ops/segment/args.h"

#include <float.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Tensors of rows may have any rank up to this; the trailing dims are flattened anyway. */
#define SEG_MAX_NDIM 16
/* Positions are int in the kernels, and a radix tile may run 64 Ki past the last row. */
#define SEG_MAX_ROWS ((int64_t)INT32_MAX - 65536)
/* Radix keys go up to S + 1 and offsets have S + 1 entries, all int. */
#define SEG_MAX_SEGMENTS ((int64_t)INT32_MAX - 1)

void jitops_segment_options_init(jitops_segment_options *options) {
  if (options == NULL)
    return;
  memset(options, 0, sizeof *options);
  options->algorithm = JITOPS_SEGMENT_ALGORITHM_AUTO;
}

static const char *dtype_text(DLDataType d, char *buf, size_t size) {
  jitops__dtype ours = jitops__dtype_of(d);
  if (ours != JITOPS__DTYPE_INVALID)
    return jitops__dtype_name(ours);
  snprintf(buf, size, "(code %d, %d bits, %d lanes)", d.code, d.bits, d.lanes);
  return buf;
}

/* The default fill of empty max (lowest) and min (max) segments, as TensorFlow's. */
static double dtype_max(jitops__dtype d) {
  switch (d) {
  case JITOPS__DTYPE_F16:
    return 65504.0;
  case JITOPS__DTYPE_BF16:
    return 3.3895313892515355e38;
  case JITOPS__DTYPE_F32:
    return FLT_MAX;
  default:
    return DBL_MAX;
  }
}

static jitops_status check_reduction(const char *fn, jitops_segment_reduction r) {
  if ((int)r < (int)JITOPS_SEGMENT_SUM || (int)r > (int)JITOPS_SEGMENT_MIN)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: reduction %d is not JITOPS_SEGMENT_SUM, _MEAN, _MAX or _MIN", fn,
                        (int)r);
  return JITOPS_SUCCESS;
}

static jitops_status check_flag(const char *fn, const char *name, int value) {
  if (value != 0 && value != 1)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: options->%s is %d; expected 0 or 1", fn,
                        name, value);
  return JITOPS_SUCCESS;
}

static jitops_status check_counter(const char *fn, jitops_runtime_t *runtime, const DLTensor *t,
                                   jitops__segment_call *call) {
  JITOPS__TRY(jitops__tensor_check(fn, "options->dropped_count", t, runtime, SEG_MAX_NDIM));
  JITOPS__TRY(jitops__check_addressable(fn, "options->dropped_count", t));
  if (jitops__tensor_numel(t) != 1)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: options->dropped_count has %" PRId64 " elements; expected 1", fn,
                        jitops__tensor_numel(t));
  jitops__dtype d = jitops__dtype_of(t->dtype);
  if (!jitops__dtype_is_int(d)) {
    char buf[64];
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE,
                        "%s: options->dropped_count has dtype %s; expected i32 or i64", fn,
                        dtype_text(t->dtype, buf, sizeof buf));
  }
  JITOPS__TRY(jitops__check_aligned(fn, "options->dropped_count", t));
  call->counter = jitops__tensor_ptr(t);
  call->counter64 = d == JITOPS__DTYPE_I64;
  return JITOPS_SUCCESS;
}

static jitops_status check_options(const char *fn, jitops_runtime_t *runtime,
                                   const jitops_segment_options *options,
                                   jitops__segment_call *call) {
  jitops_segment_options defaults;
  if (options == NULL) {
    jitops_segment_options_init(&defaults);
    options = &defaults;
  }
  JITOPS__TRY(check_flag(fn, "sorted", options->sorted));
  JITOPS__TRY(check_flag(fn, "has_fill", options->has_fill));
  JITOPS__TRY(check_flag(fn, "first_occurrence", options->first_occurrence));
  const bool extreme =
      call->reduction == JITOPS_SEGMENT_MAX || call->reduction == JITOPS_SEGMENT_MIN;
  if (options->has_fill && !extreme)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: options->has_fill is set, but a fill applies to max and min only "
                        "(empty sum and mean segments are 0)",
                        fn);
  call->sorted = options->sorted != 0;
  call->first_occurrence = options->first_occurrence != 0;
  call->empty_value = 0.0;
  if (extreme)
    call->empty_value = options->has_fill                       ? options->fill
                        : call->reduction == JITOPS_SEGMENT_MAX ? -dtype_max(call->dtype)
                                                                : dtype_max(call->dtype);
  if (call->backward)
    return JITOPS_SUCCESS; /* algorithm and dropped_count are the forward's */
  if ((int)options->algorithm < (int)JITOPS_SEGMENT_ALGORITHM_AUTO ||
      (int)options->algorithm > (int)JITOPS_SEGMENT_ALGORITHM_ATOMIC)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: options->algorithm %d is not JITOPS_SEGMENT_ALGORITHM_AUTO, _SORT "
                        "or _ATOMIC",
                        fn, (int)options->algorithm);
  if (options->algorithm == JITOPS_SEGMENT_ALGORITHM_ATOMIC && !extreme)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: options->algorithm is JITOPS_SEGMENT_ALGORITHM_ATOMIC, which is for "
                        "max and min only (atomic float sums would not be deterministic)",
                        fn);
  call->algorithm = options->algorithm;
  if (options->dropped_count != NULL)
    JITOPS__TRY(check_counter(fn, runtime, options->dropped_count, call));
  return JITOPS_SUCCESS;
}

/* The product of the trailing dims (a row's length), from the shape alone so that zero-row
 * tensors have it too. */
static jitops_status row_length(const char *fn, const char *arg, const DLTensor *t, int64_t *cols) {
  int64_t n = 1;
  for (int k = t->ndim - 1; k >= 1; --k)
    if (!jitops__mul_i64(n, t->shape[k], &n))
      return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: %s's row length overflows", fn, arg);
  *cols = n;
  return JITOPS_SUCCESS;
}

/* A float tensor of rows: rank >= 1, compact trailing dims, any leading stride (>= the row
 * length when `writable`, so that rows do not overlap), addressable, element-aligned. Sets its
 * rows, its dtype and its row length. */
static jitops_status check_rows(const char *fn, const char *arg, const DLTensor *t,
                                jitops_runtime_t *runtime, bool writable, jitops__segment_rows *out,
                                jitops__dtype *dtype, int64_t *row_len) {
  if (t == NULL)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, arg);
  JITOPS__TRY(jitops__tensor_check(fn, arg, t, runtime, SEG_MAX_NDIM));
  if (t->ndim < 1)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: %s is a scalar; expected [rows, ...] with rank >= 1", fn, arg);
  *dtype = jitops__dtype_of(t->dtype);
  if (!jitops__dtype_is_float(*dtype)) {
    char buf[64];
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE,
                        "%s: %s has dtype %s; expected f32, f64, f16 or bf16", fn, arg,
                        dtype_text(t->dtype, buf, sizeof buf));
  }
  int64_t cols = 0;
  JITOPS__TRY(row_length(fn, arg, t, &cols));
  JITOPS__TRY(jitops__check_addressable(fn, arg, t));
  int64_t strides[SEG_MAX_NDIM];
  jitops__tensor_strides(t, strides);
  int64_t expected = 1; /* a partial product of the row length: no overflow */
  for (int k = t->ndim - 1; k >= 1; --k) {
    if (t->shape[k] != 1 && strides[k] != expected)
      return jitops__fail(JITOPS_ERR_INVALID_LAYOUT,
                          "%s: %s's dim %d has stride %" PRId64 "; the dims after the first "
                          "must be compact (expected %" PRId64 ")",
                          fn, arg, k, strides[k], expected);
    expected *= t->shape[k];
  }
  const int64_t rows = t->shape[0];
  const int64_t lead = rows > 1 ? strides[0] : cols;
  if (writable && rows > 1 && cols > 0 && lead < cols)
    return jitops__fail(JITOPS_ERR_INVALID_LAYOUT,
                        "%s: %s's rows overlap: its leading stride %" PRId64
                        " is below its row length %" PRId64,
                        fn, arg, lead, cols);
  *row_len = cols;
  out->ptr = jitops__tensor_ptr(t);
  out->stride = lead;
  /* Rows that hold no element are never read. */
  return rows > 0 && cols > 0 ? jitops__check_aligned(fn, arg, t) : JITOPS_SUCCESS;
}

/* `t` must have `rows` rows, the dtype and the trailing dims of `like`. */
static jitops_status check_like(const char *fn, const char *arg, const DLTensor *t,
                                jitops__dtype dtype, int64_t rows, const char *rows_name,
                                const char *like_name, const DLTensor *like,
                                jitops__dtype like_dtype) {
  if (dtype != like_dtype)
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE, "%s: %s has dtype %s; expected %s, as %s", fn,
                        arg, jitops__dtype_name(dtype), jitops__dtype_name(like_dtype), like_name);
  if (t->shape[0] != rows)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: %s has %" PRId64 " rows; expected %s = %" PRId64, fn, arg, t->shape[0],
                        rows_name, rows);
  if (t->ndim != like->ndim)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: %s has rank %d; expected %d, as %s", fn, arg,
                        t->ndim, like->ndim, like_name);
  for (int k = 1; k < t->ndim; ++k)
    if (t->shape[k] != like->shape[k])
      return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                          "%s: %s's dim %d is %" PRId64 "; expected %" PRId64
                          " as in %s (the row length D must match)",
                          fn, arg, k, t->shape[k], like->shape[k], like_name);
  return JITOPS_SUCCESS;
}

static jitops_status check_segments(const char *fn, int64_t num_segments) {
  if (num_segments < 0)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: num_segments is %" PRId64 "; expected >= 0", fn, num_segments);
  if (num_segments > SEG_MAX_SEGMENTS)
    return jitops__fail(JITOPS_ERR_UNSUPPORTED,
                        "%s: num_segments %" PRId64 " is above the supported %" PRId64, fn,
                        num_segments, SEG_MAX_SEGMENTS);
  return JITOPS_SUCCESS;
}

static int64_t host_id(const DLTensor *ids, jitops__dtype d, int64_t stride, int64_t i) {
  const char *base = (const char *)jitops__tensor_ptr(ids);
  if (d == JITOPS__DTYPE_I32)
    return ((const int32_t *)base)[i * stride];
  return ((const int64_t *)base)[i * stride];
}

/* Host ids can be checked where device ids cannot: an id >= S is an error, and so is a
 * decrease when the caller promises sorted ids. */
static jitops_status check_host_id_values(const char *fn, const jitops__segment_call *call,
                                          const DLTensor *ids) {
  int64_t prev = INT64_MIN;
  for (int64_t i = 0; i < call->rows; ++i) {
    const int64_t v = host_id(ids, call->id_dtype, call->id_stride, i);
    if (v >= call->segments)
      return jitops__fail(JITOPS_ERR_OUT_OF_RANGE,
                          "%s: segment_ids[%" PRId64 "] = %" PRId64
                          " is not below num_segments %" PRId64,
                          fn, i, v, call->segments);
    if (call->sorted && v < prev)
      return jitops__fail(JITOPS_ERR_OUT_OF_RANGE,
                          "%s: segment_ids is not sorted: segment_ids[%" PRId64 "] = %" PRId64
                          " follows %" PRId64 " (options->sorted promises non-decreasing ids)",
                          fn, i, v, prev);
    prev = v;
  }
  return JITOPS_SUCCESS;
}

static jitops_status check_ids(const char *fn, jitops_runtime_t *runtime, const DLTensor *ids,
                               jitops__segment_call *call) {
  if (ids == NULL)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: segment_ids is NULL", fn);
  const bool host = jitops__tensor_in_host_memory(ids);
  if (host)
    JITOPS__TRY(jitops__host_tensor_check(fn, "segment_ids", ids, 1));
  else
    JITOPS__TRY(jitops__tensor_check(fn, "segment_ids", ids, runtime, 1));
  if (ids->ndim != 1)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: segment_ids has rank %d; expected 1", fn,
                        ids->ndim);
  call->id_dtype = jitops__dtype_of(ids->dtype);
  if (!jitops__dtype_is_int(call->id_dtype)) {
    char buf[64];
    return jitops__fail(JITOPS_ERR_INVALID_DTYPE,
                        "%s: segment_ids has dtype %s; expected i32 or i64", fn,
                        dtype_text(ids->dtype, buf, sizeof buf));
  }
  if (ids->shape[0] != call->rows)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: segment_ids has %" PRId64 " entries; expected one per row (%" PRId64
                        ")",
                        fn, ids->shape[0], call->rows);
  JITOPS__TRY(jitops__check_addressable(fn, "segment_ids", ids));
  int64_t stride = 1;
  jitops__tensor_strides(ids, &stride);
  call->id_stride = call->rows > 1 ? stride : 1;
  const void *ptr = jitops__tensor_ptr(ids);
  if (call->rows > 0)
    JITOPS__TRY(jitops__check_aligned(fn, "segment_ids", ids));
  if (host) {
    JITOPS__TRY(check_host_id_values(fn, call, ids));
    call->host_ids = ids;
    call->ids = NULL;
  } else {
    call->host_ids = NULL;
    call->ids = ptr;
  }
  return JITOPS_SUCCESS;
}

static jitops_status check_rows_limit(const char *fn, int64_t rows) {
  if (rows > SEG_MAX_ROWS)
    return jitops__fail(JITOPS_ERR_UNSUPPORTED,
                        "%s: %" PRId64 " rows is above the supported %" PRId64, fn, rows,
                        SEG_MAX_ROWS);
  return JITOPS_SUCCESS;
}

/* The widest packed access (in elements, at most 16 bytes) that the tensor's first element
 * and leading stride allow. */
static int fit_vec(int vec, const jitops__segment_rows *r, int64_t rows, size_t elem) {
  while (vec > 1) {
    const bool aligned = (uintptr_t)r->ptr % ((size_t)vec * elem) == 0;
    const bool strided = rows <= 1 || r->stride % vec == 0;
    if (aligned && strided)
      break;
    vec >>= 1;
  }
  return vec;
}

static jitops_status check_cols_limit(const char *fn, int64_t cols) {
  if (cols > INT32_MAX)
    return jitops__fail(JITOPS_ERR_UNSUPPORTED,
                        "%s: rows of %" PRId64 " elements are above the supported %d", fn, cols,
                        INT32_MAX);
  return JITOPS_SUCCESS;
}

static void begin_call(jitops__segment_call *call, const char *fn, bool backward,
                       jitops_segment_reduction reduction) {
  memset(call, 0, sizeof *call);
  call->fn = fn;
  call->backward = backward;
  call->reduction = reduction;
}

jitops_status jitops__segment_check_forward(const char *fn, jitops_runtime_t *runtime,
                                            jitops_segment_reduction reduction,
                                            const DLTensor *data, const DLTensor *segment_ids,
                                            int64_t num_segments, const DLTensor *out,
                                            const jitops_segment_options *options,
                                            jitops__segment_call *call) {
  begin_call(call, fn, false, reduction);
  if (runtime == NULL)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: runtime is NULL", fn);
  JITOPS__TRY(check_reduction(fn, reduction));
  jitops__dtype out_dtype;
  int64_t out_cols;
  JITOPS__TRY(check_rows(fn, "data", data, runtime, false, &call->data, &call->dtype, &call->cols));
  JITOPS__TRY(check_rows(fn, "out", out, runtime, true, &call->out, &out_dtype, &out_cols));
  JITOPS__TRY(check_segments(fn, num_segments));
  call->rows = data->shape[0];
  call->segments = num_segments;
  JITOPS__TRY(check_rows_limit(fn, call->rows));
  JITOPS__TRY(check_cols_limit(fn, call->cols));
  JITOPS__TRY(check_like(fn, "out", out, out_dtype, num_segments, "num_segments", "data", data,
                         call->dtype));
  JITOPS__TRY(check_options(fn, runtime, options, call));
  JITOPS__TRY(check_ids(fn, runtime, segment_ids, call));
  const size_t elem = jitops__dtype_size(call->dtype);
  int vec = (int)(16 / elem);
  vec = fit_vec(vec, &call->data, call->rows, elem);
  vec = fit_vec(vec, &call->out, call->segments, elem);
  call->vec_max = vec;
  return JITOPS_SUCCESS;
}

jitops_status jitops__segment_check_backward(const char *fn, jitops_runtime_t *runtime,
                                             jitops_segment_reduction reduction,
                                             const DLTensor *grad_out, const DLTensor *data,
                                             const DLTensor *out, const DLTensor *segment_ids,
                                             int64_t num_segments, const DLTensor *grad_data,
                                             const jitops_segment_options *options,
                                             jitops__segment_call *call) {
  begin_call(call, fn, true, reduction);
  if (runtime == NULL)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: runtime is NULL", fn);
  JITOPS__TRY(check_reduction(fn, reduction));
  jitops__dtype dx_dtype, other;
  int64_t other_cols;
  JITOPS__TRY(
      check_rows(fn, "grad_out", grad_out, runtime, false, &call->dy, &call->dtype, &other_cols));
  JITOPS__TRY(
      check_rows(fn, "grad_data", grad_data, runtime, true, &call->dx, &dx_dtype, &call->cols));
  JITOPS__TRY(check_segments(fn, num_segments));
  call->rows = grad_data->shape[0];
  call->segments = num_segments;
  JITOPS__TRY(check_rows_limit(fn, call->rows));
  JITOPS__TRY(check_cols_limit(fn, call->cols));
  JITOPS__TRY(check_like(fn, "grad_out", grad_out, call->dtype, num_segments, "num_segments",
                         "grad_data", grad_data, dx_dtype));
  const bool extreme = reduction == JITOPS_SEGMENT_MAX || reduction == JITOPS_SEGMENT_MIN;
  if (extreme) {
    if (data == NULL || out == NULL)
      return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                          "%s: %s is NULL; the max and min backward needs the forward's input "
                          "(data) and result (out)",
                          fn, data == NULL ? "data" : "out");
    JITOPS__TRY(check_rows(fn, "data", data, runtime, false, &call->x, &other, &other_cols));
    JITOPS__TRY(check_like(fn, "data", data, other, call->rows, "grad_data's rows", "grad_data",
                           grad_data, call->dtype));
    JITOPS__TRY(check_rows(fn, "out", out, runtime, false, &call->y, &other, &other_cols));
    JITOPS__TRY(check_like(fn, "out", out, other, num_segments, "num_segments", "grad_out",
                           grad_out, call->dtype));
  }
  JITOPS__TRY(check_options(fn, runtime, options, call));
  JITOPS__TRY(check_ids(fn, runtime, segment_ids, call));
  const size_t elem = jitops__dtype_size(call->dtype);
  int vec = (int)(16 / elem);
  vec = fit_vec(vec, &call->dy, call->segments, elem);
  vec = fit_vec(vec, &call->dx, call->rows, elem);
  if (extreme) {
    vec = fit_vec(vec, &call->x, call->rows, elem);
    vec = fit_vec(vec, &call->y, call->segments, elem);
  }
  call->vec_max = vec;
  return JITOPS_SUCCESS;
}

jitops_status jitops__segment_check_workspace(const char *fn, const jitops_workspace *workspace) {
  if (workspace != NULL && workspace->bytes > 0 && workspace->ptr == NULL)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: workspace->ptr is NULL but workspace->bytes is %zu", fn,
                        workspace->bytes);
  return JITOPS_SUCCESS;
}
