/* The element types the built-in ops take, their names (for messages and for name
 * expressions), their sizes, and the families the ops' rules are written in. */
#ifndef JITOPS_RUNTIME_DTYPE_H
#define JITOPS_RUNTIME_DTYPE_H

#include <stdbool.h>
#include <stddef.h>

#include "jitops/jitops.h"

typedef enum jitops__dtype {
  JITOPS__DTYPE_INVALID = 0,
  JITOPS__DTYPE_F16,
  JITOPS__DTYPE_BF16,
  JITOPS__DTYPE_F32,
  JITOPS__DTYPE_F64,
  JITOPS__DTYPE_I32,
  JITOPS__DTYPE_I64
} jitops__dtype;

/* The library's dtype for a DLDataType (lanes must be 1), or JITOPS__DTYPE_INVALID. */
jitops__dtype jitops__dtype_of(DLDataType dtype);

/* The template type's spelling, as used in name expressions: "jitops::half",
 * "jitops::bfloat16", "float", "double", "int", "long long". */
const char *jitops__dtype_cname(jitops__dtype dtype);

/* "f16", "bf16", "f32", "f64", "i32", "i64" for messages. */
const char *jitops__dtype_name(jitops__dtype dtype);

/* Bytes per element; 0 for JITOPS__DTYPE_INVALID. */
size_t jitops__dtype_size(jitops__dtype dtype);

/* f16, bf16, f32 or f64: what every op's floating-point data may be. */
bool jitops__dtype_is_float(jitops__dtype dtype);

/* i32 or i64: ids, lengths and targets, and the integer data some ops take. */
bool jitops__dtype_is_int(jitops__dtype dtype);

/* f16 or bf16: storage-only types whose arithmetic happens in f32. */
bool jitops__dtype_is_half(jitops__dtype dtype);

/* The type arithmetic on `dtype` happens in (acc_t in templates/common.cuh): f32 for f16 and
 * bf16, the type itself otherwise. */
jitops__dtype jitops__dtype_accumulator(jitops__dtype dtype);

#endif
