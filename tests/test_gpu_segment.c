/* On a GPU: segment sum/mean/max/min, forward and backward, against a CPU reference in
 * double precision, for every dtype, int32 and int64 ids, sorted and unsorted ids, both
 * forward algorithms, and the adversarial cases: every row in one segment, all segments
 * empty but one, many empty segments, negative and too-large ids (counted), heavy ties (split
 * and first occurrence), NaNs, 0 rows, 0 segments, 0 columns, rows of 1 to 1024 columns,
 * padded rows, strided ids, host ids and a million rows. Outputs are poisoned before every
 * run, and every run is repeated and compared bit for bit. The repeat follows
 * jitops_runtime_wait_builds: on an empty cache a kernel's first run is its quick build and the
 * repeat its full build, so the comparison holds quick builds to the full builds' bits. First,
 * the digit path's cold calls on fresh runtimes: with and without its fallback flag raised,
 * which a cold call reads before it builds the fallback's kernels (cold_digit_calls), and once
 * while another thread captures a graph (cold_digit_call_beside_a_capture); then the narrow
 * max/min built in a float output itself against a scratch table, bit for bit, over NaNs,
 * zeros and infinities (narrow_in_place_matches_table).
 *
 * Data are multiples of 1/8 in most cases, so that every sum is exact in any order and any
 * lost or doubled row shows; the "random" cases use full-precision values and a tolerance.
 *
 *   test_gpu_segment            all cases (exits 77 without a GPU)
 *   test_gpu_segment --quick    a subset that still reaches every kernel variant, each call
 *                               once (for compute-sanitizer)
 *   test_gpu_segment --match TEXT
 *                               the cases whose name contains TEXT (all of their calls, twice);
 *                               "cold digit" runs only the digit path's cold calls, "narrow in
 *                               place" only narrow_in_place_matches_table
 *   test_gpu_segment --prewarm DIR
 *                               no GPU: runs every case's calls on a compile-only sm_90
 *                               runtime caching in DIR, so a later GPU run finds its kernels */
#include <cuda_runtime_api.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>

#include "cuda_check.h"
#include "testutil.h"

typedef struct vtype {
  const char *name;
  DLDataTypeCode code;
  int bits;
  size_t size;
  double acc_u;   /* unit roundoff of the accumulation type */
  double out_rel; /* relative rounding of the output type (0 when it is the accumulation) */
  double out_abs; /* absolute rounding below the output type's normal range (subnormals) */
} vtype;

enum { F32, F64, F16, BF16 };
static const vtype vtypes[] = {{"f32", kDLFloat, 32, 4, 0x1p-24, 0, 0x1p-150},
                               {"f64", kDLFloat, 64, 8, 0x1p-53, 0, 0},
                               {"f16", kDLFloat, 16, 2, 0x1p-24, 0x1p-11, 0x1p-25},
                               {"bf16", kDLBfloat, 16, 2, 0x1p-24, 0x1p-8, 0x1p-134}};

static void put(int t, void *base, size_t i, double v) {
  switch (t) {
  case F32:
    ((float *)base)[i] = (float)v;
    break;
  case F64:
    ((double *)base)[i] = v;
    break;
  case F16:
    ((uint16_t *)base)[i] = test_f32_to_f16((float)v);
    break;
  default:
    ((uint16_t *)base)[i] = test_f32_to_bf16((float)v);
  }
}

static double get(int t, const void *base, size_t i) {
  switch (t) {
  case F32:
    return ((const float *)base)[i];
  case F64:
    return ((const double *)base)[i];
  case F16:
    return test_f16_to_f32(((const uint16_t *)base)[i]);
  default:
    return test_bf16_to_f32(((const uint16_t *)base)[i]);
  }
}

/* The value rounded to the dtype, as stored. */
static double rounded(int t, double v) {
  unsigned char buf[8];
  put(t, buf, 0, v);
  return get(t, buf, 0);
}

typedef enum {
  IDS_RANDOM,
  IDS_ONE,
  IDS_BAD,
  IDS_SKEWED,
  IDS_NEGATIVE,
  IDS_FEW_BAD,
  IDS_HOT
} id_dist;
typedef enum { VALS_EIGHTHS, VALS_RANDOM, VALS_TIES, VALS_SOME_TIES, VALS_NAN, VALS_INF } val_dist;

typedef struct seg_case {
  const char *name;
  int vt;
  bool id64;
  int64_t N, D, S;
  id_dist ids;
  val_dist vals;
  bool sorted;
  jitops_segment_algorithm algorithm;
  int64_t data_pad, out_pad, id_stride; /* row padding in elements; id stride (0 means 1) */
  bool host_ids;
  bool fill;
  int counter_bits; /* 0, 32 or 64 */
  bool first_occurrence;
  bool workspace; /* pass a caller workspace of the queried size */
  bool quick;     /* in the --quick subset, which covers every kernel variant */
} seg_case;

#define ATOMIC         .algorithm = JITOPS_SEGMENT_ALGORITHM_ATOMIC
#define SORT           .algorithm = JITOPS_SEGMENT_ALGORITHM_SORT
#define SHAPE(n, d, s) .N = (n), .D = (d), .S = (s)
static const seg_case cases[] = {
    {"random f32 i64 D64", F32, .id64 = true, SHAPE(1000, 64, 37), .ids = IDS_RANDOM,
     .quick = true},
    {"random f32 i64 D64 sorted", F32, .id64 = true, SHAPE(1000, 64, 37), .sorted = true},
    {"random f64 i32 D3 full precision", F64, SHAPE(5000, 3, 100), .vals = VALS_RANDOM,
     .quick = true},
    {"random f32 D7 full precision sorted", F32, SHAPE(4000, 7, 60), .vals = VALS_RANDOM,
     .sorted = true},
    {"random f16 i64 D8", F16, .id64 = true, SHAPE(3000, 8, 50)},
    {"random bf16 i32 D8 sorted", BF16, SHAPE(3000, 8, 50), .sorted = true, .quick = true},
    {"bad ids f32 i64 D5 fill counter64", F32, .id64 = true, SHAPE(4000, 5, 40), .ids = IDS_BAD,
     .fill = true, .counter_bits = 64, .quick = true},
    {"bad ids f32 i32 D1 sorted counter32", F32, SHAPE(4000, 1, 40), .ids = IDS_BAD, .sorted = true,
     .counter_bits = 32, .quick = true},
    {"bad ids bf16 i64 D16 atomic counter64", BF16, .id64 = true, SHAPE(3000, 16, 33),
     .ids = IDS_BAD, ATOMIC, .fill = true, .counter_bits = 64, .quick = true},
    {"one segment f32 D16", F32, .id64 = true, SHAPE(20000, 16, 7), .ids = IDS_ONE, .quick = true},
    {"one segment f16 D2 sorted", F16, SHAPE(20000, 2, 7), .ids = IDS_ONE, .sorted = true},
    {"all empty but one f32 D4", F32, SHAPE(3000, 4, 100000), .ids = IDS_ONE, .quick = true},
    {"all empty but one f64 D4 sorted", F64, .id64 = true, SHAPE(3000, 4, 100000), .ids = IDS_ONE,
     .sorted = true},
    {"many empty f64 D2", F64, .id64 = true, SHAPE(500, 2, 50000)},
    {"ties f32 D8 split", F32, SHAPE(2000, 8, 20), .vals = VALS_TIES, .quick = true},
    {"ties f32 D8 first occurrence", F32, .id64 = true, SHAPE(2000, 8, 20), .vals = VALS_TIES,
     .first_occurrence = true, .quick = true},
    {"ties bf16 D64 sort algorithm", BF16, .id64 = true, SHAPE(2000, 64, 20), .vals = VALS_TIES,
     SORT},
    {"ties f64 D3 sorted first occurrence", F64, SHAPE(2000, 3, 20), .vals = VALS_TIES,
     .sorted = true, .first_occurrence = true, .quick = true},
    {"nan f32 D4", F32, .id64 = true, SHAPE(1000, 4, 30), .vals = VALS_NAN, .quick = true},
    {"nan f16 D4 sort algorithm", F16, .id64 = true, SHAPE(1000, 4, 30), .vals = VALS_NAN, SORT},
    {"nan f64 D2 sorted", F64, SHAPE(1000, 2, 30), .vals = VALS_NAN, .sorted = true},
    {"wide f32 D1024", F32, .id64 = true, SHAPE(3000, 1024, 50), .quick = true},
    {"wide bf16 D1024 sorted", BF16, SHAPE(2000, 1024, 500), .sorted = true},
    {"wide f64 D1000 sort algorithm", F64, .id64 = true, SHAPE(1500, 1000, 40), SORT},
    {"padded f16 D100 strided ids", F16, .id64 = true, SHAPE(5000, 100, 300), .data_pad = 3,
     .out_pad = 5, .id_stride = 3, .quick = true},
    {"padded f32 D12 sorted strided ids", F32, SHAPE(5000, 12, 300), .ids = IDS_BAD, .sorted = true,
     .data_pad = 1, .out_pad = 2, .id_stride = 2},
    {"zero rows", F32, .id64 = true, SHAPE(0, 8, 10), .fill = true, .counter_bits = 64,
     .quick = true},
    {"zero rows sorted", BF16, SHAPE(0, 8, 10), .sorted = true},
    {"one row", F64, SHAPE(1, 1, 1)},
    {"zero segments counter", F32, .id64 = true, SHAPE(100, 4, 0), .ids = IDS_BAD,
     .counter_bits = 64, .quick = true},
    {"zero columns counter", F32, SHAPE(50, 0, 5), .ids = IDS_BAD, .counter_bits = 32,
     .quick = true},
    {"host ids f32 D32", F32, .id64 = true, SHAPE(2000, 32, 60), .ids = IDS_NEGATIVE,
     .host_ids = true, .quick = true},
    {"host ids f16 i32 D3 sorted strided", F16, SHAPE(2000, 3, 60), .ids = IDS_NEGATIVE,
     .sorted = true, .id_stride = 2, .host_ids = true},
    {"atomic global f16 D64", F16, .id64 = true, SHAPE(20000, 64, 5000), ATOMIC},
    {"atomic shared f16 D4", F16, SHAPE(50000, 4, 20), ATOMIC, .quick = true},
    {"sort forced few segments f32 D64", F32, .id64 = true, SHAPE(20000, 64, 10), SORT},
    {"workspace f32 D64", F32, .id64 = true, SHAPE(3000, 64, 37), .ids = IDS_BAD,
     .counter_bits = 64, .workspace = true},
    {"skewed f32 D32", F32, .id64 = true, SHAPE(200000, 32, 1000), .ids = IDS_SKEWED},
    {"bench shape f32 i64 D64", F32, .id64 = true, SHAPE(1 << 20, 64, 10000), .counter_bits = 64},
    {"million segments f32 D1", F32, .id64 = true, SHAPE(1 << 20, 1, 1000000)},
    /* One column, sum and mean, up to 16384 segments: per-tile sorts and sums (one huge run
     * crossing every thread of a tile; skewed ids; many tiles). */
    {"tiles f16 i32 D1", F16, SHAPE(70000, 1, 300), .vals = VALS_RANDOM, .quick = true},
    {"tiles one segment f32 D1", F32, SHAPE(50000, 1, 5), .ids = IDS_ONE},
    {"tiles skewed f32 i64 D1 counter64", F32, .id64 = true, SHAPE(1 << 20, 1, 10000),
     .ids = IDS_SKEWED, .counter_bits = 64},
    /* One column, more segments: the global sort carries the values (not f64, which gathers
     * rows). 2, 3 and 4 radix passes, many tiles (look-back), dropped ids. */
    {"carried values bf16 i64 D1 bad ids", BF16, .id64 = true, SHAPE(300000, 1, 20000),
     .ids = IDS_BAD, .counter_bits = 64, SORT},
    {"three passes f64 i64 D1", F64, .id64 = true, SHAPE(100000, 1, 70000), .vals = VALS_RANDOM,
     SORT},
    {"four passes f32 D1", F32, SHAPE(20000, 1, (1 << 24) + 5), .counter_bits = 32, .ids = IDS_BAD,
     SORT},
    {"one segment f32 D1 million rows sorted", F32, SHAPE((1 << 20) + 3, 1, 3), .ids = IDS_ONE,
     .sorted = true},
    {"one segment f32 D64 unsorted", F32, .id64 = true, SHAPE(300000, 64, 1), .ids = IDS_ONE},
    {"f64 D64 atomic u64", F64, SHAPE(300000, 64, 3000), .vals = VALS_RANDOM},
    /* max/min backward with at least 2^22 result cells: over rows grouped by segment (the
     * forward's sort, or sorted ids), tie counts in registers; segments crossing chunks are
     * finished by the fix pass (one segment over every chunk; skewed ids; ties everywhere). */
    {"runs f32 i64 D1024", F32, .id64 = true, SHAPE(6000, 1024, 4096), .quick = true},
    {"runs bf16 D512 sorted first occurrence bad ids", BF16, SHAPE(6000, 512, 8192), .ids = IDS_BAD,
     .sorted = true, .first_occurrence = true, .quick = true},
    {"runs one segment f32 i64 D512 ties", F32, .id64 = true, SHAPE(8000, 512, 8192),
     .ids = IDS_ONE, .vals = VALS_TIES, .quick = true},
    {"runs one segment f32 D64 ties", F32, SHAPE(20000, 64, 65536), .ids = IDS_ONE,
     .vals = VALS_TIES},
    {"runs one segment f16 D64 ties first occurrence", F16, SHAPE(20000, 64, 65536), .ids = IDS_ONE,
     .vals = VALS_TIES, .first_occurrence = true},
    {"runs one segment f64 D64 ties sorted", F64, SHAPE(20000, 64, 65536), .ids = IDS_ONE,
     .vals = VALS_TIES, .sorted = true},
    {"runs skewed f64 i64 D32 padded", F64, .id64 = true, SHAPE(30000, 32, 131072),
     .ids = IDS_SKEWED, .data_pad = 1, .out_pad = 2},
    {"runs nan f32 D64 host ids", F32, SHAPE(5000, 64, 65536), .ids = IDS_NEGATIVE,
     .vals = VALS_NAN, .host_ids = true},
    {"runs ties bf16 i64 D8 many segments", BF16, .id64 = true, SHAPE(40000, 8, 600000),
     .vals = VALS_TIES},
    /* Whole segments with tied columns inside one chunk: a few (the mark pass lists them for
     * the fix pass) or ties everywhere (the lists overflow and the fix pass walks the chunks
     * again), split and first occurrence, sorted and unsorted ids. */
    {"runs few ties f32 D64 sorted small segments", F32, SHAPE(20000, 64, 4000),
     .vals = VALS_SOME_TIES, .sorted = true, .quick = true},
    {"runs ties f32 D64 sorted small segments", F32, SHAPE(20000, 64, 4000), .vals = VALS_TIES,
     .sorted = true, .quick = true},
    {"runs few ties f64 i64 D64 small segments", F64, .id64 = true, SHAPE(330000, 64, 65536),
     .vals = VALS_SOME_TIES},
    {"runs ties f16 D64 small segments", F16, SHAPE(330000, 64, 65536), .vals = VALS_TIES},
    {"runs ties f16 D64 small segments first occurrence", F16, SHAPE(330000, 64, 65536),
     .vals = VALS_TIES, .first_occurrence = true},
    {"runs few ties f32 D1024 sorted", F32, SHAPE(6000, 1024, 1200), .vals = VALS_SOME_TIES,
     .sorted = true},
    /* Unsorted max/min over many segments: rows into buckets of segments, a shared table a
     * bucket. Buckets of one tile decode their table; larger ones (one segment, skewed ids)
     * merge tiles through the output and the last tile decodes it. */
    {"buckets f32 i64 D64", F32, .id64 = true, SHAPE(200000, 64, 100000), .vals = VALS_RANDOM,
     .quick = true},
    {"buckets one segment f64 D12 atomic", F64, SHAPE(100000, 12, 50000), .ids = IDS_ONE, ATOMIC,
     .quick = true},
    {"buckets skewed f32 i64 D32 ties", F32, .id64 = true, SHAPE(300000, 32, 200000),
     .ids = IDS_SKEWED, .vals = VALS_TIES},
    {"buckets bad ids f32 D16 fill counter32 padded", F32, SHAPE(50000, 16, 30000), .ids = IDS_BAD,
     .fill = true, .counter_bits = 32, .data_pad = 2, .out_pad = 3, .id_stride = 2, .quick = true},
    {"buckets nan f64 i64 D12", F64, .id64 = true, SHAPE(4000, 12, 3000), .vals = VALS_NAN},
    {"buckets wide f32 D1000 atomic", F32, .id64 = true, SHAPE(20000, 1000, 500), ATOMIC},
    {"buckets bench shape f32 i64 D64", F32, .id64 = true, SHAPE(1 << 20, 64, 1000000),
     .counter_bits = 64},
    /* Few buckets (segments fitting at most 30 tables) of many rows each: the automatic choice
     * for 4-byte values, every bucket split into many tiles that merge through the output; and
     * 8-byte values of at most 32 columns, however many buckets. */
    {"buckets few f32 D16 200 rows a segment", F32, SHAPE(200000, 16, 1000), .vals = VALS_RANDOM,
     .quick = true},
    {"buckets few skewed f32 i64 D64 ties", F32, .id64 = true, SHAPE(300000, 64, 4000),
     .ids = IDS_SKEWED, .vals = VALS_TIES},
    {"buckets f64 D24 25 rows a segment", F64, SHAPE(250000, 24, 10000), .vals = VALS_RANDOM,
     .quick = true},
    /* Unsorted sum and mean over many segments: the rows scattered into parts of 1024, 512 or
     * 256 segments, a block a part orders its rows by (segment, row) and reduces them. A part
     * over its cap (skewed ids, one segment) sends the call through the full sort and the chunked
     * reduction instead; bad ids are dropped before the parts. */
    {"digit f32 i64 D64", F32, .id64 = true, SHAPE(250000, 64, 200000), .vals = VALS_RANDOM,
     .quick = true},
    {"digit few bad ids f16 D16 fill counter32 padded", F16, SHAPE(200000, 16, 150000),
     .ids = IDS_FEW_BAD, .fill = true, .counter_bits = 32, .data_pad = 2, .out_pad = 3,
     .id_stride = 2, .quick = true},
    {"digit few bad ids bf16 i64 D8 counter64 strided ids", BF16, .id64 = true,
     SHAPE(300000, 8, 400000), .ids = IDS_FEW_BAD, .counter_bits = 64, .id_stride = 3},
    {"digit hot segment f32 D64", F32, SHAPE(100000, 64, 200000), .ids = IDS_HOT,
     .vals = VALS_RANDOM, .quick = true},
    {"digit four rows a segment f32 D16", F32, SHAPE(600000, 16, 150000), .vals = VALS_RANDOM},
    {"digit sparse f64 i64 D16", F64, .id64 = true, SHAPE(5000, 16, 600000), .vals = VALS_RANDOM},
    {"digit f32 D100 (idle lanes)", F32, .id64 = true, SHAPE(100000, 100, 140000),
     .vals = VALS_RANDOM},
    {"digit f64 D120 workspace", F64, SHAPE(100000, 120, 140000), .workspace = true},
    {"digit bench shape f32 i64 D64 counter64", F32, .id64 = true, SHAPE(1 << 20, 64, 1000000),
     .ids = IDS_FEW_BAD, .counter_bits = 64},
    {"digit skewed f32 i64 D64 counter64", F32, .id64 = true, SHAPE(250000, 64, 200000),
     .ids = IDS_SKEWED, .counter_bits = 64, .quick = true},
    {"digit one segment f16 D32", F16, SHAPE(100000, 32, 300000), .ids = IDS_ONE},
    {"digit bad ids f32 i64 D16 counter64", F32, .id64 = true, SHAPE(200000, 16, 150000),
     .ids = IDS_BAD, .counter_bits = 64},
    /* Rows of at most 8 columns over many unsorted segments: a thread an element, integer
     * atomics into a global table (max/min: codes; sum/mean: 64-bit fixed point from a scale
     * the prepare pass finds; non-finite values as marks). Every row length 1 to 8 (3, 5, 7:
     * rows not aligned to packs), both id types, dropped ids, padded rows, strided ids, skewed
     * and hot ids (long runs of same-cell atomics), NaN and infinities, the bench's shape. */
    {"narrow f32 i64 D3 bench shape counter64", F32, .id64 = true, SHAPE(1 << 20, 3, 1000000),
     .vals = VALS_RANDOM, .counter_bits = 64},
    {"narrow f16 i32 D1 bad ids fill counter32 padded", F16, SHAPE(200000, 1, 100000),
     .ids = IDS_BAD, .fill = true, .counter_bits = 32, .data_pad = 1, .out_pad = 2, .id_stride = 2,
     .vals = VALS_RANDOM, .quick = true},
    {"narrow bf16 i64 D8 nan", BF16, .id64 = true, SHAPE(100000, 8, 50000), .vals = VALS_NAN,
     .quick = true},
    {"narrow f32 D5 inf", F32, SHAPE(100000, 5, 30000), .vals = VALS_INF, .quick = true},
    {"narrow f32 i64 D2 skewed", F32, .id64 = true, SHAPE(300000, 2, 200000), .ids = IDS_SKEWED,
     .vals = VALS_RANDOM},
    {"narrow f32 D4 hot segment host ids", F32, SHAPE(200000, 4, 100000), .ids = IDS_HOT,
     .vals = VALS_RANDOM, .host_ids = true},
    {"narrow f64 i64 D7 (max/min; sum/mean sort)", F64, .id64 = true, SHAPE(100000, 7, 100000),
     .vals = VALS_RANDOM, .quick = true},
    {"narrow f32 D6 negative ids workspace", F32, SHAPE(100000, 6, 20000), .ids = IDS_NEGATIVE,
     .workspace = true},
};
#undef ATOMIC
#undef SORT
#undef SHAPE

/* ---- modes ----------------------------------------------------------------------------- */

static bool prewarm = false; /* compile-only runtime, fake device addresses */
static int runs = 2;         /* every call twice, to compare bits; once with --quick */
static uintptr_t fake_next = 0x7f0000000000u;

static void *dev_alloc(size_t bytes) {
  if (bytes == 0)
    bytes = 256;
  if (prewarm) {
    void *p = (void *)fake_next;
    fake_next += (bytes + 255) & ~(size_t)255;
    return p;
  }
  void *p = NULL;
  CUDA_OK(cudaMalloc(&p, bytes));
  return p;
}

static void dev_free(void *p) {
  if (!prewarm)
    CUDA_OK(cudaFree(p));
}

static void to_dev(void *dst, const void *src, size_t bytes) {
  if (!prewarm && bytes > 0)
    CUDA_OK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  if (!prewarm) /* a pageable copy may still be in flight, unordered with the test's stream */
    CUDA_OK(cudaDeviceSynchronize());
}

static void to_host(void *dst, const void *src, size_t bytes) {
  if (!prewarm && bytes > 0)
    CUDA_OK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

static void poison(void *p, size_t bytes) {
  /* 0x7b in every byte: a large finite value in every float type, never a result here. */
  if (!prewarm && bytes > 0)
    CUDA_OK(cudaMemset(p, 0x7b, bytes));
  if (!prewarm) /* cudaMemset is asynchronous, and the test's stream does not wait for it */
    CUDA_OK(cudaDeviceSynchronize());
}

/* A call's status: success on a GPU; on the compile-only runtime, kernels compile and the
 * launch reports no device (or, when nothing needs launching, success). */
static bool call_ok(jitops_status s, const char *what, const char *name) {
  if (prewarm) {
    if (s != JITOPS_SUCCESS && s != JITOPS_ERR_NO_DEVICE) {
      fprintf(stderr, "%s: %s: %s: %s\n", name, what, jitops_status_string(s), jitops_last_error());
      ++test_failures;
    }
    return false;
  }
  if (s != JITOPS_SUCCESS) {
    fprintf(stderr, "%s: %s: %s: %s\n", name, what, jitops_status_string(s), jitops_last_error());
    ++test_failures;
    return false;
  }
  return true;
}

/* ---- host data --------------------------------------------------------------------------- */

static int64_t make_id(const seg_case *c, uint64_t *seed) {
  const int64_t S = c->S;
  const uint64_t r = test_rand_u64(seed);
  switch (c->ids) {
  case IDS_ONE:
    return S / 2;
  case IDS_BAD: {
    const int kind = (int)(r % 10);
    if (kind < 2)
      return -1 - (int64_t)(test_rand_u64(seed) % 1000);
    if (kind == 2)
      return S + (int64_t)(test_rand_u64(seed) % 1000);
    if (kind == 3)
      return (c->id64 ? INT64_MAX : INT32_MAX) - (int64_t)(test_rand_u64(seed) % 5);
    return S > 0 ? (int64_t)(test_rand_u64(seed) % (uint64_t)S) : 0;
  }
  case IDS_SKEWED: {
    const double u = test_rand_uniform(seed, 0, 1);
    return (int64_t)(S * u * u * u * u);
  }
  case IDS_FEW_BAD: /* one in 500 negative or too large: buckets of segments stay small */
    if (r % 1000 == 0)
      return -1 - (int64_t)(r % 7);
    if (r % 1000 == 1)
      return S + (int64_t)(r % 7);
    return (int64_t)(test_rand_u64(seed) % (uint64_t)S);
  case IDS_HOT: /* one row in 100 in one segment, which spreads over a block's lane groups */
    return r % 100 == 0 ? S / 2 : (int64_t)(test_rand_u64(seed) % (uint64_t)S);
  case IDS_NEGATIVE:
    if (r % 5 == 0)
      return -1 - (int64_t)(r % 7);
    return S > 0 ? (int64_t)(test_rand_u64(seed) % (uint64_t)S) : -1;
  default:
    return S > 0 ? (int64_t)(r % (uint64_t)S) : (int64_t)(r % 10);
  }
}

static double make_value(const seg_case *c, uint64_t *seed) {
  const double sign = test_rand_u64(seed) & 1 ? -1.0 : 1.0;
  switch (c->vals) {
  case VALS_RANDOM:
    return rounded(c->vt, sign * test_rand_uniform(seed, 0.25, 1.0));
  case VALS_TIES: {
    static const double set[] = {-1.0, 0.5, 1.0};
    return set[test_rand_u64(seed) % 3];
  }
  case VALS_SOME_TIES: /* full precision, but 1 in 64 values is the largest: a few tied maxima */
    if (test_rand_u64(seed) % 64 == 0)
      return 1.0;
    return rounded(c->vt, sign * test_rand_uniform(seed, 0.25, 1.0));
  case VALS_NAN:
    if (test_rand_u64(seed) % 32 == 0)
      return NAN;
    return sign * (double)(2 + test_rand_u64(seed) % 7) / 8.0;
  case VALS_INF: /* 1 in 32 values infinite, of either sign: sums of both signs are NaN */
    if (test_rand_u64(seed) % 32 == 0)
      return sign * INFINITY;
    /* fall through */
  default:
    return sign * (double)(2 + test_rand_u64(seed) % 7) / 8.0;
  }
}

static int cmp_i64(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* TensorFlow's fill of empty max (lowest) and min (max) segments. */
static double default_fill(int vt, int r) {
  const double m = vt == F16 ? 65504.0 : vt == BF16 ? 0x1.fep127 : vt == F32 ? FLT_MAX : DBL_MAX;
  return r == JITOPS_SEGMENT_MAX ? -m : m;
}

/* ---- references -------------------------------------------------------------------------- */

typedef struct problem {
  const seg_case *c;
  int64_t *ids;  /* logical ids, N */
  double *x;     /* N x D values as stored */
  double *dy;    /* S x D */
  int64_t *rows; /* rows per segment */
  int64_t too_large;
} problem;

static bool valid_id(const problem *p, int64_t id) {
  return id >= 0 && id < p->c->S;
}

/* out[s, d] and its tolerance. */
static void reference_forward(const problem *p, int r, double fill, double *ref, double *tol) {
  const seg_case *c = p->c;
  const int64_t S = c->S, D = c->D;
  double *abs_sum = calloc((size_t)(S * D) + 1, sizeof *abs_sum);
  for (int64_t k = 0; k < S * D; ++k)
    ref[k] = r == JITOPS_SEGMENT_MAX ? -INFINITY : r == JITOPS_SEGMENT_MIN ? INFINITY : 0.0;
  for (int64_t i = 0; i < c->N; ++i) {
    if (!valid_id(p, p->ids[i]))
      continue;
    for (int64_t d = 0; d < D; ++d) {
      const int64_t k = p->ids[i] * D + d;
      const double v = p->x[i * D + d];
      if (r <= JITOPS_SEGMENT_MEAN) {
        ref[k] += v;
        abs_sum[k] += fabs(v);
      } else if (isnan(v) || isnan(ref[k])) {
        ref[k] = NAN;
      } else if (r == JITOPS_SEGMENT_MAX ? v > ref[k] : v < ref[k]) {
        ref[k] = v;
      }
    }
  }
  const vtype *t = &vtypes[c->vt];
  for (int64_t s = 0; s < S; ++s) {
    const int64_t n = p->rows[s];
    for (int64_t d = 0; d < D; ++d) {
      const int64_t k = s * D + d;
      if (n == 0)
        ref[k] = r <= JITOPS_SEGMENT_MEAN ? 0.0 : fill;
      else if (r == JITOPS_SEGMENT_MEAN)
        ref[k] /= (double)n;
      /* Sums of eighths are exact in any order; other sums get a rounding bound. */
      const bool exact = c->vals != VALS_RANDOM && c->vals != VALS_SOME_TIES;
      double acc = exact ? 0.0 : t->acc_u * abs_sum[k] * (4 + 2 * log2((double)n + 1));
      if (r == JITOPS_SEGMENT_MEAN)
        acc = acc / (n > 0 ? (double)n : 1.0) + 2 * t->acc_u * fabs(ref[k]);
      tol[k] = r <= JITOPS_SEGMENT_MEAN ? acc + fabs(ref[k]) * t->out_rel + t->out_abs : 0.0;
    }
  }
  free(abs_sum);
}

/* dx[i, d] from the device's forward result y (max/min). */
static void reference_backward(const problem *p, int r, const double *y, double *ref, double *tol) {
  const seg_case *c = p->c;
  const int64_t S = c->S, D = c->D, N = c->N;
  const vtype *t = &vtypes[c->vt];
  int64_t *ties = calloc((size_t)(S * D) + 1, sizeof *ties);
  int64_t *first = malloc(((size_t)(S * D) + 1) * sizeof *first);
  for (int64_t k = 0; k < S * D; ++k)
    first[k] = -1;
  if (r >= JITOPS_SEGMENT_MAX)
    for (int64_t i = 0; i < N; ++i)
      if (valid_id(p, p->ids[i]))
        for (int64_t d = 0; d < D; ++d) {
          const int64_t k = p->ids[i] * D + d;
          if (p->x[i * D + d] == y[k]) {
            ++ties[k];
            if (first[k] < 0)
              first[k] = i;
          }
        }
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t d = 0; d < D; ++d) {
      double v = 0.0;
      const int64_t id = p->ids[i];
      if (valid_id(p, id)) {
        const int64_t k = id * D + d;
        const double g = p->dy[k];
        if (r == JITOPS_SEGMENT_SUM)
          v = g;
        else if (r == JITOPS_SEGMENT_MEAN)
          v = g / (double)p->rows[id];
        else if (p->x[i * D + d] == y[k])
          v = c->first_occurrence ? (first[k] == i ? g : 0.0) : g / (double)ties[k];
      }
      ref[i * D + d] = v;
      tol[i * D + d] = fabs(v) * (2 * t->acc_u + t->out_rel) + t->out_abs;
    }
  }
  free(ties);
  free(first);
}

static int64_t compare(const char *name, const char *what, int vt, const double *ref,
                       const double *tol, const void *got, int64_t rows, int64_t cols,
                       int64_t pitch) {
  int64_t bad = 0;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t d = 0; d < cols; ++d) {
      const double want = ref[i * cols + d];
      const double g = get(vt, got, (size_t)(i * pitch + d));
      const bool ok = isnan(want) ? isnan(g) : g == want || fabs(g - want) <= tol[i * cols + d];
      if (!ok && bad++ < 5)
        fprintf(stderr, "%s: %s[%lld, %lld] = %.9g, expected %.9g (tolerance %.3g)\n", name, what,
                (long long)i, (long long)d, g, want, tol[i * cols + d]);
    }
  if (bad > 0) {
    fprintf(stderr, "%s: %s: %lld wrong cells\n", name, what, (long long)bad);
    ++test_failures;
  }
  return bad;
}

static void same_bits(const char *name, const char *what, const void *a, const void *b,
                      int64_t rows, int64_t cols, int64_t pitch, size_t elem) {
  for (int64_t i = 0; i < rows; ++i)
    if (memcmp((const char *)a + (size_t)(i * pitch) * elem,
               (const char *)b + (size_t)(i * pitch) * elem, (size_t)cols * elem) != 0) {
      fprintf(stderr, "%s: %s differs between two runs (row %lld)\n", name, what, (long long)i);
      ++test_failures;
      return;
    }
}

/* ---- one case ---------------------------------------------------------------------------- */

typedef struct buffers {
  void *data, *ids, *out, *dy, *dx, *counter;
  size_t data_bytes, out_bytes, dx_bytes;
  void *host_ids; /* for host-id cases */
} buffers;

static DLTensor tensor2(void *ptr, const vtype *t, int64_t *shape, int64_t *strides, int64_t rows,
                        int64_t cols, int64_t pitch) {
  DLTensor x;
  memset(&x, 0, sizeof x);
  x.data = ptr;
  x.device.device_type = kDLCUDA;
  x.ndim = 2;
  x.dtype.code = (uint8_t)t->code;
  x.dtype.bits = (uint8_t)t->bits;
  x.dtype.lanes = 1;
  shape[0] = rows;
  shape[1] = cols;
  strides[0] = pitch;
  strides[1] = 1;
  x.shape = shape;
  x.strides = strides;
  return x;
}

/* A 1-D int32 or int64 id tensor at `ptr`, on the host or the device. */
static DLTensor ids_tensor(void *ptr, bool host, bool id64, int64_t *shape, int64_t *stride) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = ptr;
  t.device.device_type = host ? kDLCPU : kDLCUDA;
  t.ndim = 1;
  t.dtype.code = kDLInt;
  t.dtype.bits = id64 ? 64 : 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  t.strides = stride;
  return t;
}

typedef struct views {
  int64_t shape[5][2], strides[5][2];
  DLTensor data, out, dy, dx, ids, counter;
  int64_t id_shape, id_stride, counter_shape;
} views;

static void make_views(const seg_case *c, const buffers *b, views *v) {
  const vtype *t = &vtypes[c->vt];
  v->data = tensor2(b->data, t, v->shape[0], v->strides[0], c->N, c->D, c->D + c->data_pad);
  v->out = tensor2(b->out, t, v->shape[1], v->strides[1], c->S, c->D, c->D + c->out_pad);
  v->dy = tensor2(b->dy, t, v->shape[2], v->strides[2], c->S, c->D, c->D);
  v->dx = tensor2(b->dx, t, v->shape[3], v->strides[3], c->N, c->D, c->D + c->data_pad);
  v->id_shape = c->N;
  v->id_stride = c->id_stride > 0 ? c->id_stride : 1;
  v->ids = ids_tensor(c->host_ids ? b->host_ids : b->ids, c->host_ids, c->id64, &v->id_shape,
                      &v->id_stride);
  memset(&v->counter, 0, sizeof v->counter);
  v->counter.data = b->counter;
  v->counter.device.device_type = kDLCUDA;
  v->counter.ndim = 1;
  v->counter.dtype.code = kDLInt;
  v->counter.dtype.bits = (uint8_t)(c->counter_bits ? c->counter_bits : 64);
  v->counter.dtype.lanes = 1;
  v->counter_shape = 1;
  v->counter.shape = &v->counter_shape;
}

static void set_counter(const seg_case *c, void *counter, int64_t value) {
  if (c->counter_bits == 64)
    to_dev(counter, &value, 8);
  else if (c->counter_bits == 32) {
    int32_t v32 = (int32_t)value;
    to_dev(counter, &v32, 4);
  }
}

static int64_t read_counter(const seg_case *c, const void *counter) {
  int64_t v64 = 0;
  int32_t v32 = 0;
  if (c->counter_bits == 64)
    to_host(&v64, counter, 8);
  else {
    to_host(&v32, counter, 4);
    v64 = v32;
  }
  return v64;
}

typedef struct run_ctx {
  jitops_runtime_t *rt;
  cudaStream_t stream;
  const seg_case *c;
  problem *p;
  buffers *b;
  views *v;
  jitops_segment_options options;
  void *workspace;
  size_t workspace_bytes;
  uint64_t first_quick[4]; /* quick builds each reduction's first forward call made */
} run_ctx;

static jitops_status forward(run_ctx *x, int r) {
  jitops_workspace ws = {x->workspace, x->workspace_bytes};
  return jitops_segment_reduce(x->rt, (jitops_segment_reduction)r, &x->v->data, &x->v->ids, x->c->S,
                               &x->v->out, &x->options, x->workspace != NULL ? &ws : NULL,
                               (void *)x->stream);
}

static jitops_status backward(run_ctx *x, int r) {
  jitops_workspace ws = {x->workspace, x->workspace_bytes};
  return jitops_segment_reduce_backward(x->rt, (jitops_segment_reduction)r, &x->v->dy, &x->v->data,
                                        &x->v->out, &x->v->ids, x->c->S, &x->v->dx, &x->options,
                                        x->workspace != NULL ? &ws : NULL, (void *)x->stream);
}

static void sync_stream(run_ctx *x) {
  if (!prewarm)
    CUDA_OK(cudaStreamSynchronize(x->stream));
}

/* A caller workspace of exactly the queried size (the largest of this case's calls). */
static void prepare_workspace(run_ctx *x) {
  size_t most = 0;
  for (int r = 0; r < 4; ++r) {
    size_t f = 0, g = 0;
    CHECK_OK(jitops_segment_reduce_workspace_size(x->rt, (jitops_segment_reduction)r, &x->v->data,
                                                  &x->v->ids, x->c->S, &x->v->out, &x->options,
                                                  &f));
    CHECK_OK(jitops_segment_reduce_backward_workspace_size(
        x->rt, (jitops_segment_reduction)r, &x->v->dy, &x->v->data, &x->v->out, &x->v->ids, x->c->S,
        &x->v->dx, &x->options, &g));
    most = f > most ? f : most;
    most = g > most ? g : most;
  }
  x->workspace_bytes = most;
  x->workspace = dev_alloc(most);
}

static void run_reduction(run_ctx *x, int r) {
  static const char *const names[] = {"sum", "mean", "max", "min"};
  const seg_case *c = x->c;
  const vtype *t = &vtypes[c->vt];
  const int64_t S = c->S, D = c->D, N = c->N;
  char what[160];
  snprintf(what, sizeof what, "%s %s", c->name, names[r]);
  const bool custom_fill = r >= JITOPS_SEGMENT_MAX && c->fill;
  const double fill = custom_fill ? (r == JITOPS_SEGMENT_MAX ? -7.5 : 7.5) : default_fill(c->vt, r);
  x->options.has_fill = custom_fill;
  x->options.fill = r == JITOPS_SEGMENT_MAX ? -7.5 : 7.5;
  /* The atomic algorithm is max/min's only; the sort algorithm is every reduction's. */
  x->options.algorithm =
      r >= JITOPS_SEGMENT_MAX || c->algorithm == JITOPS_SEGMENT_ALGORITHM_SORT ? c->algorithm : 0;
  if (prewarm) {
    call_ok(forward(x, r), "forward", what);
    call_ok(backward(x, r), "backward", what);
    return;
  }

  /* forward, twice */
  unsigned char *got[2] = {malloc(x->b->out_bytes + 1), malloc(x->b->out_bytes + 1)};
  const int64_t opitch = D + c->out_pad;
  for (int run = 0; run < runs; ++run) {
    poison(x->b->out, x->b->out_bytes);
    set_counter(c, x->b->counter, 5);
    jitops_stats before, after;
    CHECK_OK(jitops_runtime_get_stats(x->rt, &before));
    const jitops_status status = forward(x, r);
    CHECK_OK(jitops_runtime_get_stats(x->rt, &after));
    if (run == 0)
      x->first_quick[r] = after.quick_compiles - before.quick_compiles;
    if (!call_ok(status, "forward", what)) {
      free(got[0]);
      free(got[1]);
      return;
    }
    sync_stream(x);
    to_host(got[run], x->b->out, x->b->out_bytes);
    CHECK_OK(jitops_runtime_wait_builds(x->rt)); /* the repeat runs full builds */
    if (c->counter_bits != 0) {
      const int64_t counted = read_counter(c, x->b->counter);
      if (counted != 5 + x->p->too_large) {
        fprintf(stderr, "%s: dropped_count %lld, expected 5 + %lld\n", what, (long long)counted,
                (long long)x->p->too_large);
        ++test_failures;
      }
    }
  }
  double *ref = malloc(((size_t)(S * D) + 1) * sizeof *ref);
  double *tol = malloc(((size_t)(S * D) + 1) * sizeof *tol);
  reference_forward(x->p, r, fill, ref, tol);
  compare(what, "out", c->vt, ref, tol, got[0], S, D, opitch);
  if (runs == 2)
    same_bits(what, "out", got[0], got[1], S, D, opitch, t->size);
  double *y = malloc(((size_t)(S * D) + 1) * sizeof *y);
  for (int64_t s = 0; s < S; ++s)
    for (int64_t d = 0; d < D; ++d)
      y[s * D + d] = get(c->vt, got[0], (size_t)(s * opitch + d));
  free(ref);
  free(tol);

  /* backward, twice, from the device's own forward result */
  unsigned char *dx[2] = {malloc(x->b->dx_bytes + 1), malloc(x->b->dx_bytes + 1)};
  const int64_t dpitch = D + c->data_pad;
  for (int run = 0; run < runs; ++run) {
    poison(x->b->dx, x->b->dx_bytes);
    if (!call_ok(backward(x, r), "backward", what))
      break;
    sync_stream(x);
    to_host(dx[run], x->b->dx, x->b->dx_bytes);
    CHECK_OK(jitops_runtime_wait_builds(x->rt));
  }
  ref = malloc(((size_t)(N * D) + 1) * sizeof *ref);
  tol = malloc(((size_t)(N * D) + 1) * sizeof *tol);
  reference_backward(x->p, r, y, ref, tol);
  compare(what, "grad_data", c->vt, ref, tol, dx[0], N, D, dpitch);
  if (runs == 2)
    same_bits(what, "grad_data", dx[0], dx[1], N, D, dpitch, t->size);
  free(ref);
  free(tol);
  free(y);
  free(dx[0]);
  free(dx[1]);
  free(got[0]);
  free(got[1]);
}

static void fill_host(const seg_case *c, problem *p, buffers *b, unsigned char **host_data,
                      unsigned char **host_dy, unsigned char **ids_buf, size_t *ids_bytes) {
  const vtype *t = &vtypes[c->vt];
  const int64_t N = c->N, D = c->D, S = c->S;
  uint64_t seed = 0x5e6de11u ^ (uint64_t)(N * 31 + D * 7 + S);
  p->c = c;
  p->ids = malloc(((size_t)N + 1) * sizeof *p->ids);
  p->x = malloc(((size_t)(N * D) + 1) * sizeof *p->x);
  p->dy = malloc(((size_t)(S * D) + 1) * sizeof *p->dy);
  p->rows = calloc((size_t)S + 1, sizeof *p->rows);
  p->too_large = 0;
  for (int64_t i = 0; i < N; ++i)
    p->ids[i] = make_id(c, &seed);
  if (c->sorted)
    qsort(p->ids, (size_t)N, sizeof *p->ids, cmp_i64);
  for (int64_t i = 0; i < N; ++i) {
    if (valid_id(p, p->ids[i]))
      ++p->rows[p->ids[i]];
    else if (p->ids[i] >= S)
      ++p->too_large;
  }
  const int64_t dpitch = D + c->data_pad;
  b->data_bytes = (size_t)(N * dpitch) * t->size;
  *host_data = malloc(b->data_bytes + 1);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t d = 0; d < dpitch; ++d) {
      /* Padding holds huge values: a kernel that read it would show. */
      const double v = d < D ? make_value(c, &seed) : 1e4;
      if (d < D)
        p->x[i * D + d] = v;
      put(c->vt, *host_data, (size_t)(i * dpitch + d), v);
    }
  *host_dy = malloc((size_t)(S * D) * t->size + 1);
  for (int64_t k = 0; k < S * D; ++k) {
    p->dy[k] = (double)(1 + test_rand_u64(&seed) % 15) / 4.0;
    put(c->vt, *host_dy, (size_t)k, p->dy[k]);
  }
  const int64_t stride = c->id_stride > 0 ? c->id_stride : 1;
  const size_t elem = c->id64 ? 8 : 4;
  *ids_bytes = (size_t)(N * stride) * elem;
  *ids_buf = malloc(*ids_bytes + 1);
  memset(*ids_buf, 0x55, *ids_bytes + 1); /* the gaps of strided ids: never read */
  for (int64_t i = 0; i < N; ++i) {
    if (c->id64)
      ((int64_t *)*ids_buf)[i * stride] = p->ids[i];
    else
      ((int32_t *)*ids_buf)[i * stride] = (int32_t)p->ids[i];
  }
}

/* Runs every reduction of `c`, forward and backward; `first_quick`, when not NULL, receives the
 * quick builds each reduction's first forward call made. */
static void run_case(jitops_runtime_t *rt, cudaStream_t stream, const seg_case *c,
                     uint64_t *first_quick) {
  const vtype *t = &vtypes[c->vt];
  problem p;
  buffers b;
  memset(&b, 0, sizeof b);
  unsigned char *host_data, *host_dy, *ids_buf;
  size_t ids_bytes;
  fill_host(c, &p, &b, &host_data, &host_dy, &ids_buf, &ids_bytes);
  b.data = dev_alloc(b.data_bytes);
  b.out_bytes = (size_t)(c->S * (c->D + c->out_pad)) * t->size;
  b.out = dev_alloc(b.out_bytes);
  b.dy = dev_alloc((size_t)(c->S * c->D) * t->size);
  b.dx_bytes = b.data_bytes;
  b.dx = dev_alloc(b.dx_bytes);
  b.counter = dev_alloc(8);
  b.ids = c->host_ids ? NULL : dev_alloc(ids_bytes);
  b.host_ids = c->host_ids ? ids_buf : NULL;
  to_dev(b.data, host_data, b.data_bytes);
  to_dev(b.dy, host_dy, (size_t)(c->S * c->D) * t->size);
  if (!c->host_ids)
    to_dev(b.ids, ids_buf, ids_bytes);

  views v;
  make_views(c, &b, &v);
  run_ctx x;
  memset(&x, 0, sizeof x);
  x.rt = rt;
  x.stream = stream;
  x.c = c;
  x.p = &p;
  x.b = &b;
  x.v = &v;
  jitops_segment_options_init(&x.options);
  x.options.sorted = c->sorted;
  x.options.first_occurrence = c->first_occurrence;
  x.options.dropped_count = c->counter_bits ? &v.counter : NULL;
  if (c->workspace)
    prepare_workspace(&x);
  for (int r = 0; r < 4; ++r)
    run_reduction(&x, r);
  if (first_quick != NULL)
    memcpy(first_quick, x.first_quick, sizeof x.first_quick);

  if (x.workspace != NULL)
    dev_free(x.workspace);
  dev_free(b.data);
  dev_free(b.out);
  dev_free(b.dy);
  dev_free(b.dx);
  dev_free(b.counter);
  if (b.ids != NULL)
    dev_free(b.ids);
  free(host_data);
  free(host_dy);
  free(ids_buf);
  free(p.ids);
  free(p.x);
  free(p.dy);
  free(p.rows);
}

static const seg_case *case_named(const char *name) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
    if (strcmp(cases[i].name, name) == 0)
      return &cases[i];
  return NULL;
}

/* The digit path's cold calls, each case on a fresh runtime and cache directory: a cold call
 * defers the fallback's four kernels (runtime/kernel_batch.h) where it takes quick builds.
 * Uniform ids raise no fallback flag, and the sum's first call builds the scatter and the
 * digit reduction alone; skewed ids raise it, and the call then gets the four kernels itself
 * (quick builds) and launches them. run_case holds both to the reference and to the full
 * builds' rerun. */
static void cold_digit_calls(cudaStream_t stream) {
  static const struct {
    const char *name;
    uint64_t sum_quick; /* the sum's first call's quick builds */
  } cold[] = {{"digit f32 i64 D64", 2}, {"digit skewed f32 i64 D64 counter64", 6}};
  for (size_t i = 0; i < sizeof cold / sizeof cold[0]; ++i) {
    char dir[1024];
    jitops_runtime_t *rt = test_gpu_runtime_on_fresh_dir("segment-cold-digit", dir, sizeof dir);
    const seg_case *c = case_named(cold[i].name);
    CHECK(c != NULL);
    if (rt == NULL || c == NULL) {
      jitops_runtime_destroy(rt);
      test_remove_tree(dir);
      continue;
    }
    const int before = test_failures;
    uint64_t first_quick[4] = {0};
    run_case(rt, stream, c, first_quick);
    /* Without quick builds ($JITOPS_QUICK_BUILDS, a remote tier, an NVRTC before 12.8) nothing
     * is deferred either, and there is no count to check. */
    jitops_stats stats;
    CHECK_OK(jitops_runtime_get_stats(rt, &stats));
    if (stats.quick_compiles > 0 && first_quick[JITOPS_SEGMENT_SUM] != cold[i].sum_quick) {
      fprintf(stderr, "cold %s: the sum's first call made %llu quick builds, expected %llu\n",
              c->name, (unsigned long long)first_quick[JITOPS_SEGMENT_SUM],
              (unsigned long long)cold[i].sum_quick);
      ++test_failures;
    }
    printf("cold %-40s %s\n", c->name, test_failures == before ? "ok" : "FAILED");
    jitops_runtime_destroy(rt);
    test_remove_tree(dir);
  }
}

/* Another thread's capture in the global mode, which refuses synchronizing calls from every
 * thread, around the cold call of cold_digit_call_beside_a_capture. */
typedef struct capture_beside {
  cudaStream_t stream;
  void *buffer;
  int phase; /* 1: capturing; 2: the cold call returned */
  pthread_mutex_t lock;
  pthread_cond_t changed;
  cudaError_t end; /* cudaStreamEndCapture's */
} capture_beside;

static void set_phase(capture_beside *c, int phase) {
  pthread_mutex_lock(&c->lock);
  c->phase = phase;
  pthread_cond_broadcast(&c->changed);
  pthread_mutex_unlock(&c->lock);
}

static void wait_phase(capture_beside *c, int phase) {
  pthread_mutex_lock(&c->lock);
  while (c->phase < phase)
    pthread_cond_wait(&c->changed, &c->lock);
  pthread_mutex_unlock(&c->lock);
}

static void *capture_around_the_call(void *arg) {
  capture_beside *c = arg;
  cudaGraph_t graph = NULL;
  c->end = cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeGlobal);
  if (c->end == cudaSuccess)
    c->end = cudaMemsetAsync(c->buffer, 0x5a, 256, c->stream);
  set_phase(c, 1);
  wait_phase(c, 2);
  const cudaError_t end = cudaStreamEndCapture(c->stream, &graph);
  if (c->end == cudaSuccess)
    c->end = end;
  if (graph != NULL)
    CUDA_OK(cudaGraphDestroy(graph));
  return NULL;
}

/* A cold digit call reads its fallback flag (a copy to the host and a stream synchronization)
 * while another thread captures a graph in the global mode: the call must succeed, the capture
 * too (the read runs in the relaxed mode), and the result must be the reference's and the full
 * builds' rerun's. Sums of multiples of 1/8 are exact in any order. */
static void cold_digit_call_beside_a_capture(void) {
  enum { N = 250000, D = 64, S = 200000 };
  const int before = test_failures;
  char dir[1024];
  jitops_runtime_t *rt = test_gpu_runtime_on_fresh_dir("segment-cold-capture", dir, sizeof dir);
  if (rt == NULL) {
    test_remove_tree(dir);
    return;
  }
  float *x = malloc(sizeof(float) * N * D), *ref = calloc((size_t)S * D, sizeof(float));
  float *got[2] = {malloc(sizeof(float) * S * D), malloc(sizeof(float) * S * D)};
  int64_t *ids = malloc(sizeof(int64_t) * N);
  uint64_t seed = 0xc0ffee;
  for (int64_t i = 0; i < N; ++i) {
    ids[i] = (int64_t)(test_rand_u64(&seed) % S);
    for (int64_t d = 0; d < D; ++d) {
      x[i * D + d] = (float)((int64_t)(test_rand_u64(&seed) % 64) - 32) / 8.0f;
      ref[ids[i] * D + d] += x[i * D + d];
    }
  }
  int64_t data_shape[2] = {N, D}, ids_shape[1] = {N}, out_shape[2] = {S, D};
  DLTensor data = {
      dev_alloc(sizeof(float) * N * D), {kDLCUDA, 0}, 2, {kDLFloat, 32, 1}, data_shape, NULL, 0};
  DLTensor id = {
      dev_alloc(sizeof(int64_t) * N), {kDLCUDA, 0}, 1, {kDLInt, 64, 1}, ids_shape, NULL, 0};
  DLTensor out = {
      dev_alloc(sizeof(float) * S * D), {kDLCUDA, 0}, 2, {kDLFloat, 32, 1}, out_shape, NULL, 0};
  to_dev(data.data, x, sizeof(float) * N * D);
  to_dev(id.data, ids, sizeof(int64_t) * N);
  jitops_workspace ws = {NULL,
                         0}; /* allocated now: the call allocates nothing beside the capture */
  CHECK_OK(jitops_segment_reduce_workspace_size(rt, JITOPS_SEGMENT_SUM, &data, &id, S, &out, NULL,
                                                &ws.bytes));
  ws.ptr = dev_alloc(ws.bytes);
  capture_beside c = {.phase = 0, .end = cudaSuccess};
  pthread_mutex_init(&c.lock, NULL);
  pthread_cond_init(&c.changed, NULL);
  c.buffer = dev_alloc(256);
  cudaStream_t mine = NULL;
  CUDA_OK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking));
  for (int run = 0; run < 2; ++run) {
    pthread_t thread;
    const bool beside = run == 0 && pthread_create(&thread, NULL, capture_around_the_call, &c) == 0;
    CHECK(beside || run == 1);
    if (beside)
      wait_phase(&c, 1);
    CHECK_OK(jitops_segment_reduce(rt, JITOPS_SEGMENT_SUM, &data, &id, S, &out, NULL, &ws,
                                   (void *)mine));
    if (beside) {
      set_phase(&c, 2);
      pthread_join(thread, NULL);
      if (c.end != cudaSuccess)
        fprintf(stderr, "cold digit call beside a capture: the capture failed: %s\n",
                cudaGetErrorString(c.end));
      CHECK(c.end == cudaSuccess);
    }
    CUDA_OK(cudaStreamSynchronize(mine));
    to_host(got[run], out.data, sizeof(float) * S * D);
    CHECK_OK(jitops_runtime_wait_builds(rt)); /* the rerun launches full builds */
  }
  CHECK(memcmp(got[0], ref, sizeof(float) * S * D) == 0);
  CHECK(memcmp(got[1], ref, sizeof(float) * S * D) == 0);
  printf("cold digit call beside a capture %s\n", test_failures == before ? "ok" : "FAILED");
  CUDA_OK(cudaStreamDestroy(mine));
  CUDA_OK(cudaStreamDestroy(c.stream));
  pthread_mutex_destroy(&c.lock);
  pthread_cond_destroy(&c.changed);
  dev_free(c.buffer);
  dev_free(ws.ptr);
  dev_free(data.data);
  dev_free(id.data);
  dev_free(out.data);
  free(x);
  free(ref);
  free(got[0]);
  free(got[1]);
  free(ids);
  jitops_runtime_destroy(rt);
  test_remove_tree(dir);
}

/* ---- max/min's codes in the output itself --------------------------------------------------- */

/* The narrow path builds max/min of a packed f32 or f64 output in the output itself (the codes
 * decoded in place, plan.c's narrow_in_place); a padded output takes a scratch table of codes.
 * Both must give the same bits, and the bits of segment_atomic.cuh's order: checked here
 * against a host reference of that order, over values where a scheme could slip: both zeros,
 * both infinities, NaNs of either sign and of several payloads (every NaN comes out as the
 * one pattern its code decodes to), subnormals, the extremes, and ties; the default fill and a
 * custom one; dropped ids on both sides. */
typedef struct in_place_case {
  int vt;
  bool id64;
  int64_t D;
} in_place_case;

static uint64_t special_value(int vt, uint64_t *seed) {
  static const uint32_t f32[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                                 0xffc00000u, 0x7f800001u, 0xffffffffu, 0x7fffffffu, 0x00000001u,
                                 0x80000001u, 0x7f7fffffu, 0xff7fffffu, 0x3f800000u, 0xbf800000u};
  static const uint64_t f64[] = {0x0ull,
                                 0x8000000000000000ull,
                                 0x7ff0000000000000ull,
                                 0xfff0000000000000ull,
                                 0x7ff8000000000000ull,
                                 0xfff8000000000000ull,
                                 0x7ff0000000000001ull,
                                 0xffffffffffffffffull,
                                 0x7fffffffffffffffull,
                                 0x7fffffff7fffffffull,
                                 0x1ull,
                                 0x8000000000000001ull,
                                 0x7fefffffffffffffull,
                                 0xffefffffffffffffull,
                                 0x3ff0000000000000ull};
  const uint64_t u = test_rand_u64(seed);
  const double tie = (double)((int64_t)(u >> 8) % 17 - 8) / 4.0; /* -2 .. 2 by quarters */
  if (vt == F32) {
    if (u % 4 == 0)
      return f32[(u >> 2) % (sizeof f32 / sizeof f32[0])];
    float f = (float)tie;
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
  }
  if (u % 4 == 0)
    return f64[(u >> 2) % (sizeof f64 / sizeof f64[0])];
  uint64_t b;
  memcpy(&b, &tie, 8);
  return b;
}

/* segment_atomic.cuh's code of a value's bits (w = 32 or 64), NaN at the end that wins. */
static uint64_t order_code(uint64_t b, int w, bool max) {
  const uint64_t sign = 1ull << (w - 1), all = w == 64 ? ~0ull : 0xffffffffull;
  const uint64_t exponent = w == 64 ? 0x7ff0000000000000ull : 0x7f800000ull;
  const uint64_t mantissa = w == 64 ? 0x000fffffffffffffull : 0x007fffffull;
  if ((b & exponent) == exponent && (b & mantissa) != 0)
    return max ? all : 0;
  return (b & sign) ? ~b & all : b | sign;
}

static uint64_t order_decode(uint64_t k, int w) {
  const uint64_t sign = 1ull << (w - 1), all = w == 64 ? ~0ull : 0xffffffffull;
  return (k & sign) ? k & ~sign : ~k & all;
}

/* want[s, c]: the bits of the reduction of column c over the rows of segment s in the codes'
 * order, `fill_bits` where no row came. */
static void order_reference(const unsigned char *x, const int64_t *ids, int64_t N, int64_t D,
                            int64_t S, size_t elem, bool max, uint64_t fill_bits, uint64_t *want) {
  const int w = (int)elem * 8;
  bool *seen = calloc((size_t)(S * D), 1);
  CHECK(seen != NULL);
  for (int64_t row = 0; row < N; ++row) {
    if (ids[row] < 0 || ids[row] >= S)
      continue;
    for (int64_t c = 0; c < D; ++c) {
      uint64_t b = 0;
      memcpy(&b, x + (size_t)(row * D + c) * elem, elem); /* little-endian: the low bytes */
      const uint64_t k = order_code(b, w, max);
      const int64_t cell = ids[row] * D + c;
      if (!seen[cell] || (max ? k > want[cell] : k < want[cell]))
        want[cell] = k;
      seen[cell] = true;
    }
  }
  for (int64_t cell = 0; cell < S * D; ++cell)
    want[cell] = seen[cell] ? order_decode(want[cell], w) : fill_bits;
  free(seen);
}

/* The packed [S, D] and padded [S, D + 1] results against want, bit for bit. */
static void compare_layouts(const char *name, const unsigned char *packed,
                            const unsigned char *padded, const uint64_t *want, int64_t S, int64_t D,
                            size_t elem) {
  int64_t bad = 0;
  for (int64_t s = 0; s < S; ++s)
    for (int64_t c = 0; c < D; ++c) {
      uint64_t a = 0, b = 0;
      memcpy(&a, packed + (size_t)(s * D + c) * elem, elem);
      memcpy(&b, padded + (size_t)(s * (D + 1) + c) * elem, elem);
      if ((a != want[s * D + c] || b != want[s * D + c]) && bad++ < 5)
        fprintf(stderr, "%s: out[%lld, %lld]: packed %#llx, padded %#llx, expected %#llx\n", name,
                (long long)s, (long long)c, (unsigned long long)a, (unsigned long long)b,
                (unsigned long long)want[s * D + c]);
    }
  if (bad > 0)
    ++test_failures;
  printf("%-45s %s\n", name, bad == 0 ? "ok" : "FAILED");
}

static void narrow_in_place_case(jitops_runtime_t *rt, cudaStream_t stream,
                                 const in_place_case *k) {
  const int64_t N = 60000, S = 50000, D = k->D; /* 1.2 rows a segment: about 30% empty */
  const vtype *t = &vtypes[k->vt];
  const size_t elem = t->size, x_bytes = (size_t)(N * D) * elem;
  const size_t packed_bytes = (size_t)(S * D) * elem, padded_bytes = (size_t)(S * (D + 1)) * elem;
  uint64_t seed = 0x5eed0000u + (uint64_t)(k->vt * 16 + D);
  unsigned char *x = malloc(x_bytes), *packed = malloc(packed_bytes),
                *padded = malloc(padded_bytes);
  int64_t *ids = malloc((size_t)N * sizeof(int64_t));
  int32_t *ids32 = malloc((size_t)N * sizeof(int32_t));
  uint64_t *want = malloc((size_t)(S * D) * sizeof(uint64_t));
  CHECK(x != NULL && packed != NULL && padded != NULL && ids != NULL && ids32 != NULL &&
        want != NULL);
  for (int64_t i = 0; i < N * D; ++i) {
    const uint64_t b = special_value(k->vt, &seed);
    memcpy(x + (size_t)i * elem, &b, elem);
  }
  for (int64_t r = 0; r < N; ++r) {
    ids[r] = (int64_t)(test_rand_u64(&seed) % (uint64_t)(S + 100)) - 50; /* some dropped */
    ids32[r] = (int32_t)ids[r];
  }
  void *d_x = dev_alloc(x_bytes), *d_ids = dev_alloc((size_t)N * 8);
  void *d_packed = dev_alloc(packed_bytes), *d_padded = dev_alloc(padded_bytes);
  to_dev(d_x, x, x_bytes);
  to_dev(d_ids, k->id64 ? (void *)ids : (void *)ids32, (size_t)N * (k->id64 ? 8 : 4));
  int64_t shape[3][2], strides[3][2], id_shape = N, id_stride = 1;
  DLTensor data = tensor2(d_x, t, shape[0], strides[0], N, D, D);
  DLTensor out_packed = tensor2(d_packed, t, shape[1], strides[1], S, D, D);
  DLTensor out_padded = tensor2(d_padded, t, shape[2], strides[2], S, D, D + 1);
  DLTensor id_view = ids_tensor(d_ids, false, k->id64, &id_shape, &id_stride);
  for (int r = JITOPS_SEGMENT_MAX; r <= JITOPS_SEGMENT_MIN; ++r)
    for (int custom = 0; custom < 2; ++custom) {
      const bool max = r == JITOPS_SEGMENT_MAX;
      char name[96];
      snprintf(name, sizeof name, "narrow in place %s %s D%lld %s%s", t->name,
               k->id64 ? "i64" : "i32", (long long)D, max ? "max" : "min", custom ? " fill" : "");
      jitops_segment_options options;
      jitops_segment_options_init(&options);
      options.has_fill = custom;
      options.fill = max ? -0.0 : 2.5; /* -0.0: a fill that a +0.0 row beats in max */
      poison(d_packed, packed_bytes);
      poison(d_padded, padded_bytes);
      const bool ran_packed =
          call_ok(jitops_segment_reduce(rt, (jitops_segment_reduction)r, &data, &id_view, S,
                                        &out_packed, &options, NULL, (void *)stream),
                  "packed", name);
      const bool ran_padded =
          call_ok(jitops_segment_reduce(rt, (jitops_segment_reduction)r, &data, &id_view, S,
                                        &out_padded, &options, NULL, (void *)stream),
                  "padded", name);
      if (!ran_packed || !ran_padded)
        continue;
      CUDA_OK(cudaStreamSynchronize(stream));
      to_host(packed, d_packed, packed_bytes);
      to_host(padded, d_padded, padded_bytes);
      const double fill = custom ? options.fill : default_fill(k->vt, r);
      const float fill32 = (float)fill;
      uint64_t fill_bits = 0;
      memcpy(&fill_bits, k->vt == F32 ? (const void *)&fill32 : (const void *)&fill, elem);
      order_reference(x, ids, N, D, S, elem, max, fill_bits, want);
      compare_layouts(name, packed, padded, want, S, D, elem);
    }
  dev_free(d_x), dev_free(d_ids), dev_free(d_packed), dev_free(d_padded);
  free(x), free(packed), free(padded), free(ids), free(ids32), free(want);
}

static void narrow_in_place_matches_table(jitops_runtime_t *rt, cudaStream_t stream) {
  static const in_place_case shapes[] = {{F32, true, 1},  {F32, false, 3}, {F32, true, 8},
                                         {F64, false, 1}, {F64, true, 4},  {F64, true, 8}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i)
    narrow_in_place_case(rt, stream, &shapes[i]);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* keep the log when a time limit stops the test */
  bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  prewarm = argc > 2 && strcmp(argv[1], "--prewarm") == 0;
  const char *match = argc > 2 && strcmp(argv[1], "--match") == 0 ? argv[2] : NULL;
  if (quick)
    runs = 1;
  jitops_runtime_t *rt = NULL;
  cudaStream_t stream = NULL;
  if (prewarm) {
    setenv("JITOPS_QUICK_BUILDS", "0", 1); /* the full builds only, for the GPU run to find */
    jitops_runtime_config cfg = test_offline_config("sm_90", argv[2]);
    CHECK_OK(jitops_runtime_create(&cfg, &rt));
    if (rt == NULL)
      return test_finish("test_gpu_segment --prewarm");
  } else {
    rt = test_gpu_runtime_or_skip("test_gpu_segment");
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  /* First: a runtime finds the kernels another runtime of the process built, so later they
   * would not be cold. */
  if (!prewarm && (match == NULL || strstr("cold digit", match) != NULL)) {
    cold_digit_calls(stream);
    cold_digit_call_beside_a_capture();
  }
  if (match == NULL || strstr("narrow in place", match) != NULL)
    narrow_in_place_matches_table(rt, stream);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    if ((quick && !cases[i].quick) || (match != NULL && strstr(cases[i].name, match) == NULL))
      continue;
    const int before = test_failures;
    run_case(rt, stream, &cases[i], NULL);
    if (!prewarm)
      printf("%-45s %s\n", cases[i].name, test_failures == before ? "ok" : "FAILED");
  }
  if (stream != NULL)
    CUDA_OK(cudaStreamDestroy(stream));
  jitops_stats stats;
  CHECK_OK(jitops_runtime_get_stats(rt, &stats));
  printf("%llu kernels compiled, %llu of them quick builds first\n",
         (unsigned long long)(stats.compiles - stats.quick_compiles),
         (unsigned long long)stats.quick_compiles);
  jitops_runtime_destroy(rt);
  return test_finish(prewarm ? "test_gpu_segment --prewarm" : "test_gpu_segment");
}
