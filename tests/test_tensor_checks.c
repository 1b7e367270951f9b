/* The core's tensor checks that every op family uses (runtime/tensor_checks.h): the one
 * self-overlap rule on the layouts that matter (permuted, sliced, flipped, broadcast, empty,
 * huge strides), element alignment, the element count's overflow, and addressability (byte
 * offsets and addresses that wrap). No GPU, no runtime. */
#include "runtime/tensor_checks.h"
#include "testutil.h"

static const DLDataType F32 = {kDLFloat, 32, 1};

static DLTensor view(int ndim, int64_t *shape, int64_t *strides) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = (void *)(uintptr_t)0x100000;
  t.device.device_type = kDLCUDA;
  t.ndim = ndim;
  t.dtype = F32;
  t.shape = shape;
  t.strides = strides;
  return t;
}

static int overlaps(int ndim, int64_t *shape, int64_t *strides) {
  DLTensor t = view(ndim, shape, strides);
  return jitops__tensor_overlaps_self(&t);
}

static void self_overlap(void) {
  int64_t s23[2] = {2, 3}, s234[3] = {2, 3, 4};
  /* Dense layouts in any order, flipped or sliced, are disjoint. */
  CHECK(!overlaps(2, s23, NULL));
  CHECK(!overlaps(2, s23, (int64_t[]){3, 1}));
  CHECK(!overlaps(2, s23, (int64_t[]){1, 2}));       /* column-major */
  CHECK(!overlaps(2, s23, (int64_t[]){-3, 1}));      /* flipped rows */
  CHECK(!overlaps(2, s23, (int64_t[]){-1, -2}));     /* both flipped */
  CHECK(!overlaps(3, s234, (int64_t[]){1, 8, 2}));   /* permuted */
  CHECK(!overlaps(2, s23, (int64_t[]){10, 2}));      /* sliced: gaps */
  CHECK(!overlaps(3, s234, (int64_t[]){100, 1, 3})); /* interleaved, disjoint */
  /* Several index tuples on one address. */
  CHECK(overlaps(2, s23, (int64_t[]){0, 1})); /* broadcast rows */
  CHECK(overlaps(2, s23, (int64_t[]){2, 1})); /* rows run into each other */
  CHECK(overlaps(2, s23, (int64_t[]){1, 1}));
  CHECK(overlaps(3, s234, (int64_t[]){12, 4, 2})); /* inner dims interleave */
  CHECK(overlaps(2, s23, (int64_t[]){-2, 1}));
  /* Size-1 dimensions never step, so their strides do not matter; an empty tensor has no
   * element to share. */
  int64_t s13[2] = {1, 3}, s03[2] = {0, 3}, s1[1] = {1};
  CHECK(!overlaps(2, s13, (int64_t[]){0, 1}));
  CHECK(!overlaps(1, s1, (int64_t[]){0}));
  CHECK(!overlaps(2, s03, (int64_t[]){0, 0}));
  CHECK(!overlaps(0, NULL, NULL));
  /* Offsets beyond int64 cannot address memory: treated as overlapping. */
  int64_t s33[2] = {3, 3};
  CHECK(overlaps(2, s33, (int64_t[]){INT64_MAX / 2, 1}));
  CHECK(overlaps(2, s23, (int64_t[]){INT64_MIN, 1}));
  CHECK(!overlaps(2, s33, (int64_t[]){INT64_MAX / 4, 1}));
}

static void layout_failures(void) {
  int64_t s23[2] = {2, 3};
  DLTensor t = view(2, s23, (int64_t[]){0, 1});
  CHECK_FAILS(jitops__check_no_self_overlap("fn", "y", &t), JITOPS_ERR_INVALID_LAYOUT,
              "fn: y's strides make several elements share an address");
  t = view(2, s23, NULL);
  CHECK_OK(jitops__check_no_self_overlap("fn", "y", &t));
  CHECK_OK(jitops__check_aligned("fn", "x", &t));
  t.byte_offset = 6;
  CHECK_FAILS(jitops__check_aligned("fn", "x", &t), JITOPS_ERR_INVALID_LAYOUT,
              "fn: x's first element is not aligned to its 4-byte element size");
  t.byte_offset = 8;
  CHECK_OK(jitops__check_aligned("fn", "x", &t));
}

static void element_counts(void) {
  int64_t huge[3] = {INT64_MAX / 2, 3, 1}, empty[3] = {INT64_MAX / 2, 3, 0};
  DLTensor t = view(3, huge, NULL);
  CHECK(jitops__tensor_numel(&t) == INT64_MAX);
  CHECK_FAILS(jitops__check_numel("fn", "x", &t), JITOPS_ERR_OUT_OF_RANGE,
              "fn: x has more than 2^63 elements");
  t = view(3, empty, NULL);
  CHECK(jitops__tensor_numel(&t) == 0);
  CHECK_OK(jitops__check_numel("fn", "x", &t));
  char text[32];
  CHECK(strcmp(jitops__shape_text(huge + 1, 2, text, sizeof text), "[3, 1]") == 0);
}

/* Element counts, byte offsets and addresses that overflow, each refused with its status. */
static void addressable(void) {
  int64_t s23[2] = {2, 3}, s33[2] = {3, 3}, s3[1] = {3}, s03[2] = {0, 3};
  int64_t many[2] = {(int64_t)1 << 61, 4}, wide[2] = {(int64_t)1 << 60, 2};
  int64_t empty_huge[3] = {0, (int64_t)1 << 62, 4};
  DLTensor t = view(2, s23, NULL);
  CHECK_OK(jitops__check_addressable("fn", "x", &t));
  t = view(2, many, NULL);
  CHECK_FAILS(jitops__check_addressable("fn", "x", &t), JITOPS_ERR_OUT_OF_RANGE,
              "fn: x has more than 2^63 elements");
  t = view(2, wide, NULL); /* 2^61 elements of 4 bytes */
  CHECK_FAILS(jitops__check_addressable("fn", "x", &t), JITOPS_ERR_INVALID_SHAPE,
              "fn: x's shape [1152921504606846976, 2] spans more than 2^63 bytes");
  t = view(2, s33, (int64_t[]){(int64_t)1 << 62, 1});
  CHECK_FAILS(jitops__check_addressable("fn", "x", &t), JITOPS_ERR_INVALID_LAYOUT,
              "fn: x's strides (shape [3, 3]) put elements more than 2^63 bytes from its first");
  t = view(1, s3, (int64_t[]){INT64_MIN});
  CHECK_FAILS(jitops__check_addressable("fn", "x", &t), JITOPS_ERR_INVALID_LAYOUT, "strides");
  t = view(1, s3, (int64_t[]){-((int64_t)1 << 40)}); /* below address 0 */
  CHECK_FAILS(jitops__check_addressable("fn", "x", &t), JITOPS_ERR_INVALID_LAYOUT,
              "fn: x's elements would lie outside the address space");
  t = view(2, s23, NULL);
  t.byte_offset = (uint64_t)1 << 63;
  CHECK_FAILS(jitops__check_addressable("fn", "x", &t), JITOPS_ERR_INVALID_LAYOUT,
              "fn: x's byte_offset 9223372036854775808 is above 2^63 - 1");
  t.data = (void *)(UINTPTR_MAX - 0xfff);
  t.byte_offset = 0x2000;
  CHECK_FAILS(jitops__check_addressable("fn", "x", &t), JITOPS_ERR_INVALID_LAYOUT,
              "takes its data pointer past the end of the address space");
  t.byte_offset = 0xff8; /* the first element fits, the other five do not */
  CHECK_FAILS(jitops__check_addressable("fn", "x", &t), JITOPS_ERR_INVALID_LAYOUT,
              "would lie outside the address space");
  /* Empty tensors: no element, so only data + byte_offset counts; compact strides that would
   * overflow are never formed. */
  t = view(2, s03, NULL);
  t.data = NULL;
  t.byte_offset = 8;
  CHECK_OK(jitops__check_addressable("fn", "x", &t));
  t = view(3, empty_huge, NULL);
  CHECK_OK(jitops__check_addressable("fn", "x", &t));
}

int main(void) {
  self_overlap();
  layout_failures();
  element_counts();
  addressable();
  return test_finish("test_tensor_checks");
}
