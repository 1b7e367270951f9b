#include "runtime/dtype.h"

jitops__dtype jitops__dtype_of(DLDataType t) {
  static const struct {
    uint8_t code, bits;
    jitops__dtype dtype;
  } known[] = {{kDLFloat, 16, JITOPS__DTYPE_F16}, {kDLBfloat, 16, JITOPS__DTYPE_BF16},
               {kDLFloat, 32, JITOPS__DTYPE_F32}, {kDLFloat, 64, JITOPS__DTYPE_F64},
               {kDLInt, 32, JITOPS__DTYPE_I32},   {kDLInt, 64, JITOPS__DTYPE_I64}};
  if (t.lanes != 1)
    return JITOPS__DTYPE_INVALID;
  for (size_t i = 0; i < sizeof known / sizeof known[0]; ++i)
    if (t.code == known[i].code && t.bits == known[i].bits)
      return known[i].dtype;
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

bool jitops__dtype_is_float(jitops__dtype d) {
  return d == JITOPS__DTYPE_F16 || d == JITOPS__DTYPE_BF16 || d == JITOPS__DTYPE_F32 ||
         d == JITOPS__DTYPE_F64;
}

bool jitops__dtype_is_int(jitops__dtype d) {
  return d == JITOPS__DTYPE_I32 || d == JITOPS__DTYPE_I64;
}

bool jitops__dtype_is_half(jitops__dtype d) {
  return d == JITOPS__DTYPE_F16 || d == JITOPS__DTYPE_BF16;
}

jitops__dtype jitops__dtype_accumulator(jitops__dtype d) {
  return jitops__dtype_is_half(d) ? JITOPS__DTYPE_F32 : d;
}
