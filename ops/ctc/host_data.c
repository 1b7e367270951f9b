#include "ops/ctc/host_data.h"

#include <stdlib.h>
#include <string.h>

/* Element i of a host vector of lengths (i32 or i64). */
static int64_t read_host_int(const DLTensor *t, int64_t stride, int64_t i) {
  const char *base = (const char *)jitops__tensor_ptr(t);
  if (jitops__dtype_of(t->dtype) == JITOPS__DTYPE_I32)
    return ((const int32_t *)base)[i * stride];
  return ((const int64_t *)base)[i * stride];
}

/* Sizes and allocates the staging buffer: three int64 vectors of N, then the targets when they
 * are in host memory. (The targets passed check_addressable, so their bytes fit int64; the
 * checks below only make that explicit.) */
static jitops_status stage_alloc(jitops__ctc_call *call) {
  const char *fn = call->fn;
  jitops__ctc_staging *stage = &call->stage;
  size_t lengths_bytes, targets_bytes = 0;
  if (__builtin_mul_overflow((size_t)call->N, 3 * sizeof(int64_t), &lengths_bytes) ||
      !jitops__ctc_align_up(lengths_bytes, &stage->targets_at) ||
      (call->host_targets &&
       __builtin_mul_overflow((size_t)call->tgt_numel, jitops__dtype_size(call->ti),
                              &targets_bytes)) ||
      __builtin_add_overflow(stage->targets_at, targets_bytes, &stage->size))
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE,
                        "%s: targets (%lld elements) and lengths (N = %lld) are too large to stage",
                        fn, (long long)call->tgt_numel, (long long)call->N);
  stage->bytes = malloc(stage->size ? stage->size : 1);
  if (stage->bytes == NULL)
    return jitops__fail(JITOPS_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes of staging", fn,
                        stage->size);
  return JITOPS_SUCCESS;
}

/* Reads and checks every length into the staging buffer, with each sample's offset into
 * concatenated targets, and sets call->s_max. */
static jitops_status stage_lengths(jitops__ctc_call *call, const DLTensor *il, const DLTensor *tl) {
  const char *fn = call->fn;
  const int64_t N = call->N;
  int64_t il_st[1], tl_st[1];
  jitops__tensor_strides(il, il_st);
  jitops__tensor_strides(tl, tl_st);
  int64_t *in_len = (int64_t *)call->stage.bytes, *tgt_len = in_len + N, *offset = in_len + 2 * N;
  int64_t total = 0, longest = 0;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t a = read_host_int(il, il_st[0], n), b = read_host_int(tl, tl_st[0], n);
    if (a < 0 || a > call->T)
      return jitops__fail(JITOPS_ERR_OUT_OF_RANGE,
                          "%s: input_lengths[%lld] = %lld is outside [0, T] with T = %lld", fn,
                          (long long)n, (long long)a, (long long)call->T);
    if (b < 0 || (!call->concat && b > call->S))
      return jitops__fail(JITOPS_ERR_OUT_OF_RANGE,
                          "%s: target_lengths[%lld] = %lld is outside [0, S] with S = %lld", fn,
                          (long long)n, (long long)b, (long long)call->S);
    /* total <= S here, so neither side overflows. */
    if (call->concat && b > call->S - total)
      return jitops__fail(JITOPS_ERR_OUT_OF_RANGE,
                          "%s: target_lengths[0..%lld] add up past the %lld concatenated targets",
                          fn, (long long)n, (long long)call->S);
    in_len[n] = a;
    tgt_len[n] = b;
    offset[n] = total;
    if (call->concat)
      total += b;
    if (b > longest)
      longest = b;
  }
  call->s_max = longest;
  return JITOPS_SUCCESS;
}

/* Copies the whole targets tensor, compact row-major, to the staging buffer, and points the
 * call's target strides at that copy. */
static void stage_targets(jitops__ctc_call *call) {
  const size_t size = jitops__dtype_size(call->ti);
  const char *src = (const char *)call->tgt;
  char *dst = (char *)call->stage.bytes + call->stage.targets_at;
  const int64_t rows = call->concat ? 1 : call->N, cols = call->S;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t at = r * call->tgt_st[0] + c * call->tgt_st[1];
      memcpy(dst + (size_t)(r * cols + c) * size, src + at * (int64_t)size, size);
    }
  call->tgt_st[0] = call->concat ? 0 : cols;
  call->tgt_st[1] = 1;
}

/* Every used label of the staged targets: in [0, C) and not blank. */
static jitops_status check_labels(const jitops__ctc_call *call) {
  const int64_t N = call->N;
  const int64_t *tgt_len = (const int64_t *)call->stage.bytes + N, *offset = tgt_len + N;
  const char *targets = (const char *)call->stage.bytes + call->stage.targets_at;
  const bool i32 = call->ti == JITOPS__DTYPE_I32;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < tgt_len[n]; ++j) {
      const int64_t idx = call->concat ? offset[n] + j : n * call->S + j;
      const int64_t v = i32 ? ((const int32_t *)targets)[idx] : ((const int64_t *)targets)[idx];
      if (v < 0 || v >= call->C || v == call->opt.blank)
        return jitops__fail(JITOPS_ERR_OUT_OF_RANGE,
                            "%s: targets of sample %lld, position %lld, is %lld: labels must lie "
                            "in [0, C) with C = %lld and differ from blank = %lld",
                            call->fn, (long long)n, (long long)j, (long long)v, (long long)call->C,
                            (long long)call->opt.blank);
    }
  return JITOPS_SUCCESS;
}

jitops_status jitops__ctc_stage_host_data(jitops__ctc_call *call, const DLTensor *input_lengths,
                                          const DLTensor *target_lengths) {
  JITOPS__TRY(stage_alloc(call));
  JITOPS__TRY(stage_lengths(call, input_lengths, target_lengths));
  if (!call->host_targets)
    return JITOPS_SUCCESS;
  stage_targets(call);
  return check_labels(call);
}
