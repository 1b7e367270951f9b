/* Host-side helpers the scan and repeat GPU tests share: dtypes with their encodings (f16 and
 * bf16 rounded to nearest even), strided views over a base buffer (contiguous, permuted,
 * sliced), device buffers that are poisoned, uploaded and checked for stray writes. */
#ifndef JITOPS_TESTS_GPU_TENSORS_H
#define JITOPS_TESTS_GPU_TENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "jitops/jitops.h"

enum { GT_F32, GT_F64, GT_F16, GT_BF16, GT_I32, GT_I64, GT_COUNT };

typedef struct gt_dtype {
  const char *name;
  DLDataType dl;
  size_t size;
  int is_int;
  double eps_out; /* relative rounding of one stored value */
  double eps_acc; /* relative rounding of the accumulation type */
  double tiny;    /* absolute rounding near zero: a 16-bit float's subnormal spacing (a bf16
                   * cumprod gradient of 1e-129 in f64 is 0 in bf16) */
} gt_dtype;

extern const gt_dtype gt_dtypes[GT_COUNT];

/* Stores a value (v for floats, iv for ints) as element idx of a host buffer. */
void gt_put(int dt, void *base, int64_t idx, double v, int64_t iv);
double gt_getf(int dt, const void *base, int64_t idx);
int64_t gt_geti(int dt, const void *base, int64_t idx);
/* v rounded to the dtype (what storing and loading it gives). */
double gt_round(int dt, double v);

/* Layouts of a view over its base buffer. The sweeps iterate over the first GT_LAYOUTS;
 * GT_PADDED (rows of unit stride, each followed by one unused element, so that an odd row length
 * has an even row stride) is for the cases that name it. */
enum { GT_CONTIGUOUS = 0, GT_PERMUTED = 1, GT_SLICED = 2, GT_LAYOUTS = 3 };
enum { GT_PADDED = GT_LAYOUTS, GT_ALL_LAYOUTS };
extern const char *const gt_layout_names[GT_ALL_LAYOUTS];

typedef struct gt_view {
  int ndim;
  int layout;
  int64_t shape[8];
  int64_t strides[8];
  int64_t offset; /* elements */
  int64_t extent; /* elements of the base buffer, ≥ 1 */
  int64_t numel;
} gt_view;

void gt_view_make(gt_view *v, int ndim, const int64_t *shape, int layout);

/* A device tensor: the base buffer, its host mirror and the DLTensor over the view. */
typedef struct gt_tensor {
  int dt;
  gt_view view;
  void *device;        /* base buffer */
  unsigned char *host; /* host copy of the base buffer */
  DLTensor dl;
} gt_tensor;

/* Allocates the base buffer (cudaMalloc); returns 0 on failure. */
int gt_alloc(gt_tensor *t, int dt, const gt_view *view);
void gt_free(gt_tensor *t);
/* A tensor over a fake device address (256-byte aligned, as cudaMalloc's are), for compiling
 * kernels on a compile-only runtime: nothing is allocated. */
void gt_fake(gt_tensor *t, int dt, const gt_view *view);
/* Writes logical values (row-major over the view's shape) into the host base, garbage
 * elsewhere, and uploads it. */
int gt_upload(gt_tensor *t, const double *v, const int64_t *iv, void *stream);
/* Fills the base with 0xFF bytes (NaN for floats, -1 for ints) on the device. */
int gt_poison(gt_tensor *t, void *stream);
/* Downloads the base; checks that every element outside the view is still poisoned (returns
 * the count of stray writes) and gathers the view's values row-major into v / iv. */
int64_t gt_download(gt_tensor *t, double *v, int64_t *iv, void *stream);

#endif
