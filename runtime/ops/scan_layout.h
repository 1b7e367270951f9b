/* Strided-layout checks the scan and repeat ops share: element alignment, outputs that would
 * overlap themselves, and shapes printed for messages. */
#ifndef JITOPS_RUNTIME_OPS_SCAN_LAYOUT_H
#define JITOPS_RUNTIME_OPS_SCAN_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/op_support.h"

/* Fails with JITOPS_ERR_INVALID_LAYOUT unless data + byte_offset is a multiple of
 * `element_bytes` (a kernel reading a misaligned element would fault). */
jitops_status jitops__scan_layout_aligned(const char *fn, const char *arg, const DLTensor *t,
                                          size_t element_bytes);

/* Fails with JITOPS_ERR_INVALID_LAYOUT when two elements of `t` may share an address: a zero
 * stride on a dimension longer than 1, or strides that interleave. Writing such an output
 * would race. Sorting the dimensions by |stride|, each stride must exceed the span of the
 * smaller ones; that accepts every permuted or sliced view of a dense tensor. */
jitops_status jitops__scan_layout_no_overlap(const char *fn, const char *arg, const DLTensor *t);

/* Fails with JITOPS_ERR_OUT_OF_RANGE when the element count of `t` overflows int64. */
jitops_status jitops__scan_layout_numel(const char *fn, const char *arg, const DLTensor *t);

/* "[2, 3, 4]" for messages; returns buf. */
const char *jitops__scan_layout_dims(const int64_t *dims, int ndim, char *buf, size_t size);

#endif
