/* The checks every op makes of its DLPack tensors, in one place so that one rule reads and
 * fails the same way in every family: where a tensor lives (device or host memory), its rank
 * and shape, its element count, its element alignment, and whether an output's strides would
 * make it overlap itself. Each check names the entry point (`fn`) and the argument (`arg`) in
 * its message. Also the small accessors the checks and the plans share. */
#ifndef JITOPS_RUNTIME_TENSOR_CHECKS_H
#define JITOPS_RUNTIME_TENSOR_CHECKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jitops/jitops.h"

/* ---- where a tensor lives, its rank and shape --------------------------------------------- */

/* Checks that `tensor` is non-NULL, lives on the runtime's device (kDLCUDA or
 * kDLCUDAManaged with the runtime's device_id; compile-only runtimes accept any CUDA device),
 * has 0 ≤ ndim ≤ max_ndim, non-negative shape, and non-NULL data unless it is empty. */
jitops_status jitops__tensor_check(const char *fn, const char *arg, const DLTensor *tensor,
                                   const jitops_runtime_t *runtime, int max_ndim);

/* Checks that `tensor` lives in host memory (kDLCPU or kDLCUDAHost) with the given rank. */
jitops_status jitops__host_tensor_check(const char *fn, const char *arg, const DLTensor *tensor,
                                        int ndim);

/* Whether `tensor` is non-NULL and in host memory (kDLCPU or kDLCUDAHost): for arguments
 * that may be on either side (lengths, ids). */
bool jitops__tensor_in_host_memory(const DLTensor *tensor);

/* Fails with JITOPS_ERR_OUT_OF_RANGE when the element count of `tensor` overflows int64. */
jitops_status jitops__check_numel(const char *fn, const char *arg, const DLTensor *tensor);

/* ---- layout ------------------------------------------------------------------------------- */

/* Fails with JITOPS_ERR_INVALID_LAYOUT unless data + byte_offset is a multiple of the element
 * size of the tensor's dtype (a kernel reading a misaligned element would fault). */
jitops_status jitops__check_aligned(const char *fn, const char *arg, const DLTensor *tensor);

/* What every tensor passes before its strides or its data pointer are used in arithmetic:
 * an element count that fits int64 (JITOPS_ERR_OUT_OF_RANGE), elements whose byte offsets
 * from the first fit int64 (JITOPS_ERR_INVALID_LAYOUT when its strides put one further,
 * JITOPS_ERR_INVALID_SHAPE when a compact shape does), a byte_offset of at most 2^63 - 1, and
 * addresses from data + byte_offset to its last byte inside the address space
 * (JITOPS_ERR_INVALID_LAYOUT). Once it passes, no element or byte offset of the tensor, and
 * no address computed from them, overflows. For a tensor whose rank
 * jitops__tensor_check has bounded. */
jitops_status jitops__check_addressable(const char *fn, const char *arg, const DLTensor *tensor);

/* The byte offsets, from its first element, of the lowest element of non-empty `t` and of
 * the end of its highest into [*low, *high); false when one does not fit int64. Needs an
 * element count that fits int64 (jitops__check_numel), so that compact strides do; true for
 * every tensor that passed jitops__check_addressable. */
bool jitops__tensor_byte_extent(const DLTensor *t, int64_t *low, int64_t *high);

/* Whether two elements of `tensor` may share an address. Sorting the dimensions of more than
 * one element by |stride|, each stride must be at least the span of the smaller ones (their
 * largest offset plus one); that accepts every permuted, sliced or flipped view of a dense
 * tensor and rejects a zero stride on a dimension longer than 1. An empty tensor never
 * overlaps; strides whose offsets overflow int64 count as overlapping. */
bool jitops__tensor_overlaps_self(const DLTensor *tensor);

/* Fails with JITOPS_ERR_INVALID_LAYOUT when `tensor` overlaps itself: an output written by
 * many threads would race. */
jitops_status jitops__check_no_self_overlap(const char *fn, const char *arg,
                                            const DLTensor *tensor);

/* ---- checked arithmetic ------------------------------------------------------------------- */

/* *out = a * b, or a + b, when the exact result fits the type; false (*out then unspecified)
 * when it does not. For every size, stride, byte count and workspace size computed from a
 * caller's tensors or options: a product that wrapped around would pass the very check it was
 * computed for. */
static inline bool jitops__mul_i64(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
static inline bool jitops__add_i64(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_add_overflow(a, b, out);
}
static inline bool jitops__mul_size(size_t a, size_t b, size_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
static inline bool jitops__add_size(size_t a, size_t b, size_t *out) {
  return !__builtin_add_overflow(a, b, out);
}

/* ---- accessors ---------------------------------------------------------------------------- */

/* Element strides of `tensor` (its own, or compact row-major when NULL) into out[ndim]. */
void jitops__tensor_strides(const DLTensor *tensor, int64_t *out);

/* The element count; INT64_MAX when it overflows (jitops__check_numel rejects that). */
int64_t jitops__tensor_numel(const DLTensor *tensor);

/* The first element's address: data + byte_offset, added as integers (a byte_offset that
 * runs past the address space wraps around instead of being undefined behaviour). */
void *jitops__tensor_ptr(const DLTensor *tensor);

/* 1 when both have the same ndim and shape. */
int jitops__same_shape(const DLTensor *a, const DLTensor *b);

/* "[2, 3, 4]" for messages; returns buf. */
const char *jitops__shape_text(const int64_t *dims, int ndim, char *buf, size_t size);

#endif
