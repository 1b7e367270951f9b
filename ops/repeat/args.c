#include "ops/repeat/args.h"

#include "ops/repeat/repeat_abi.h"

/* Checks repeats against `small` (x or dx) and `big` (y or dy), both already tensor-checked. */
static jitops_status check_repeats(const char *fn, const DLTensor *small, const char *small_arg,
                                   const int64_t *repeats, int num_repeats, const DLTensor *big,
                                   const char *big_arg) {
  if (num_repeats < 0 || num_repeats > JITOPS__REPEAT_MAX_RANK)
    return jitops__fail(JITOPS_ERR_INVALID_SHAPE, "%s: num_repeats is %d; expected 0..%d", fn,
                        num_repeats, JITOPS__REPEAT_MAX_RANK);
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
  int64_t want[JITOPS__REPEAT_MAX_RANK];
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

/* The checks both directions share: `small` is x or dx, `big` y or dy; `backward` picks which
 * one leads the dtype rule and which one is the output. */
static jitops_status check_pair(const char *fn, jitops_runtime_t *runtime, const DLTensor *small,
                                const char *small_arg, const DLTensor *big, const char *big_arg,
                                const int64_t *repeats, int num_repeats, int backward) {
  JITOPS__REQUIRE_NONNULL(fn, runtime);
  JITOPS__TRY(jitops__tensor_check(fn, small_arg, small, runtime, JITOPS__REPEAT_MAX_RANK));
  JITOPS__TRY(jitops__tensor_check(fn, big_arg, big, runtime, JITOPS__REPEAT_MAX_RANK));
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
  /* The core's addressability rule first: it bounds every later product of sizes and strides. */
  JITOPS__TRY(jitops__check_addressable(fn, small_arg, small));
  JITOPS__TRY(jitops__check_addressable(fn, big_arg, big));
  JITOPS__TRY(jitops__check_aligned(fn, small_arg, small));
  JITOPS__TRY(jitops__check_aligned(fn, big_arg, big));
  JITOPS__TRY(
      jitops__check_no_self_overlap(fn, backward ? small_arg : big_arg, backward ? small : big));
  return JITOPS_SUCCESS;
}

jitops_status jitops__repeat_check_forward(const char *fn, jitops_runtime_t *runtime,
                                           const DLTensor *x, const int64_t *repeats,
                                           int num_repeats, const DLTensor *y) {
  return check_pair(fn, runtime, x, "x", y, "y", repeats, num_repeats, 0);
}

jitops_status jitops__repeat_check_backward(const char *fn, jitops_runtime_t *runtime,
                                            const DLTensor *dy, const int64_t *repeats,
                                            int num_repeats, const DLTensor *dx) {
  return check_pair(fn, runtime, dx, "dx", dy, "dy", repeats, num_repeats, 1);
}
