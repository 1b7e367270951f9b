#include "runtime/ops/scan_layout.h"

#include <stdio.h>
#include <stdlib.h>

jitops_status jitops__scan_layout_aligned(const char *fn, const char *arg, const DLTensor *t,
                                          size_t element_bytes) {
  const uintptr_t first = (uintptr_t)t->data + (uintptr_t)t->byte_offset;
  if (element_bytes > 1 && first % element_bytes != 0)
    return jitops__fail(JITOPS_ERR_INVALID_LAYOUT,
                        "%s: %s's first element (data + byte_offset %llu) is not aligned to its "
                        "%zu-byte elements",
                        fn, arg, (unsigned long long)t->byte_offset, element_bytes);
  return JITOPS_SUCCESS;
}

typedef struct dim_extent {
  int64_t stride; /* absolute */
  int64_t size;
} dim_extent;

static int by_stride(const void *a, const void *b) {
  const dim_extent *x = a, *y = b;
  return x->stride < y->stride ? -1 : x->stride > y->stride;
}

jitops_status jitops__scan_layout_no_overlap(const char *fn, const char *arg, const DLTensor *t) {
  if (t->strides == NULL || jitops__tensor_numel(t) <= 1)
    return JITOPS_SUCCESS;
  dim_extent dims[64];
  int n = 0;
  for (int d = 0; d < t->ndim && n < 64; ++d) {
    if (t->shape[d] <= 1)
      continue;
    dims[n].stride = t->strides[d] < 0 ? -t->strides[d] : t->strides[d];
    dims[n].size = t->shape[d];
    ++n;
  }
  qsort(dims, (size_t)n, sizeof dims[0], by_stride);
  /* `span` is the largest offset reachable with the dimensions seen so far, plus one. */
  int64_t span = 1;
  for (int i = 0; i < n; ++i) {
    if (dims[i].stride < span)
      return jitops__fail(JITOPS_ERR_INVALID_LAYOUT,
                          "%s: %s's strides make several elements share an address; an output "
                          "must not overlap itself",
                          fn, arg);
    span = dims[i].stride * (dims[i].size - 1) + span;
  }
  return JITOPS_SUCCESS;
}

jitops_status jitops__scan_layout_numel(const char *fn, const char *arg, const DLTensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; ++d) {
    if (t->shape[d] == 0)
      return JITOPS_SUCCESS;
    if (n > INT64_MAX / t->shape[d])
      return jitops__fail(JITOPS_ERR_OUT_OF_RANGE, "%s: %s has more than 2^63 elements", fn, arg);
    n *= t->shape[d];
  }
  return JITOPS_SUCCESS;
}

const char *jitops__scan_layout_dims(const int64_t *dims, int ndim, char *buf, size_t size) {
  size_t used = 0;
  used += (size_t)snprintf(buf, size, "[");
  for (int d = 0; d < ndim && used < size; ++d)
    used += (size_t)snprintf(buf + used, size - used, d ? ", %lld" : "%lld", (long long)dims[d]);
  if (used < size)
    snprintf(buf + used, size - used, "]");
  return buf;
}
