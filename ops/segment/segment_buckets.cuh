// jitops/segment_buckets.cuh — unsorted max/min over many segments: the rows go into buckets of
// P consecutive segments, and each bucket is reduced with integer atomics in a shared-memory
// table of P x D codes (the order-preserving encoding of segment_atomic.cuh).
//
// Why: with about one row a segment (N = 2^20, S = 10^6) a stable radix sort costs three passes
// and the reduction's per-segment bookkeeping (bounds, gaps, a fixup) costs as much again, while
// max and min need no order at all — an integer max does not depend on the order of its updates.
// So a bucket only has to hold its rows, in any order. A counting sort by bucket puts them there
// without global atomics (2^20 atomics on a few thousand counters took 35-60 us a pass on an
// H100, where the L2 serializes them):
//   segment_bucket_count   — block k counts its rows of each bucket in shared memory into row k
//                            of a blocks x B matrix, and counts the dropped ids;
//   segment_bucket_offsets — turns column b into each block's first slot in bucket b (an
//                            exclusive prefix over the blocks) and counts the bucket's rows;
//   segment_bucket_scatter — every block lays out the buckets in shared memory (their first
//                            rows; each split into tiles of at most `tile_rows` rows, one block's
//                            work in the reduction), writes the tiles of the buckets it owns and
//                            sets the output rows of those of more than one tile to the "no row"
//                            code; then it puts each of its rows' {row, segment within the
//                            bucket} in the next of its slots (shared atomics: slot order varies
//                            from run to run, results do not);
//   segment_bucket_extreme — one block a tile: its rows go into the block's table by shared
//                            atomics; a bucket of one tile is decoded straight into `out`, the
//                            tiles of a larger bucket merge their tables into `out` itself (read
//                            as codes, which is why only 4- and 8-byte value types take this
//                            path) by global atomics, and the last of them decodes it in place.
// The tiles bound every block's work, so a bucket holding most rows (skewed ids) is spread over
// the grid like any other.
#pragma once
#include "jitops/segment_atomic.cuh"
#include "jitops/segment_sort.cuh"

namespace jitops {
namespace segment {

constexpr int BUCKET_THREADS = JITOPS__SEGMENT_BUCKET_THREADS; // the offsets pass and the reduction
// Threads a block of the counting and scattering passes, and the rows a thread loads at a time:
// a block takes `block_rows` consecutive rows (a multiple of COUNTING_THREADS x COUNTING_ITEMS),
// the same ones in both passes.
constexpr int COUNTING_THREADS = JITOPS__SEGMENT_COUNTING_THREADS;
constexpr int COUNTING_ITEMS = JITOPS__SEGMENT_COUNTING_ITEMS;
// Loads in flight a thread, where a thread walks an array of per-bucket or per-block values.
constexpr int BUCKET_BATCH = 16;
// Block counts the offsets pass loads at once, walking a bucket's column.
constexpr int BUCKET_COLUMN_BATCH = JITOPS__SEGMENT_BUCKET_COLUMN_BATCH;
// Blocks of the reduction an SM holds: its 48 KB tables would allow four, but three leave ptxas
// the registers for eight rows in flight a group (at four blocks, 64 registers, it spills them).
constexpr int BUCKET_MIN_BLOCKS = 3;

// A row in its bucket ({row, the segment's index within the bucket}), and one block's work in
// the reduction: rows [first, end) of the entries, all of bucket `bucket`, which has `tiles`
// tiles in all (segment_abi.h).
typedef jitops__segment_bucket_entry bucket_entry;
typedef jitops__segment_bucket_tile bucket_tile;

template <class I> __device__ __forceinline__ int bucket_of(I id, int S, int P) {
  return id >= 0 && id < (I)S ? (int)id / P : -1;
}

// Calls f(row, id) for each of the block's rows [blockIdx.x * block_rows, ...) below N,
// COUNTING_ITEMS ids of a thread loaded at once (coalesced).
template <class I, class F>
__device__ __forceinline__ void for_block_rows(const I *ids, i64 id_stride, int N, int block_rows,
                                               F &&f) {
  const i64 first = (i64)blockIdx.x * block_rows;
  const i64 end = min((i64)N, first + block_rows);
  for (i64 j0 = first + threadIdx.x; j0 < end; j0 += COUNTING_THREADS * COUNTING_ITEMS) {
    I id[COUNTING_ITEMS];
#pragma unroll
    for (int k = 0; k < COUNTING_ITEMS; ++k) {
      const i64 j = j0 + (i64)k * COUNTING_THREADS;
      id[k] = j < end ? ids[j * id_stride] : (I)-1;
    }
#pragma unroll
    for (int k = 0; k < COUNTING_ITEMS; ++k)
      if (j0 + (i64)k * COUNTING_THREADS < end)
        f((int)(j0 + (i64)k * COUNTING_THREADS), id[k]);
  }
}

// For b = threadIdx.x, + COUNTING_THREADS, ... below n: put(b, get(b)), BUCKET_BATCH gets in
// flight a thread before the first put (a plain loop waits for each load in turn: at 256
// threads and B = 5209, 21 round trips a thread, 12 us).
template <class Get, class Put>
__device__ __forceinline__ void for_each_bucket(int n, Get &&get, Put &&put) {
  for (int b0 = threadIdx.x; b0 < n; b0 += COUNTING_THREADS * BUCKET_BATCH) {
    decltype(get(0)) v[BUCKET_BATCH];
#pragma unroll
    for (int i = 0; i < BUCKET_BATCH; ++i) {
      const int b = b0 + i * COUNTING_THREADS;
      if (b < n)
        v[i] = get(b);
    }
#pragma unroll
    for (int i = 0; i < BUCKET_BATCH; ++i)
      if (b0 + i * COUNTING_THREADS < n)
        put(b0 + i * COUNTING_THREADS, v[i]);
  }
}

// Row k of the blocks x B matrix: block k's count of each bucket. Dynamic shared memory: B ints.
template <class I>
__global__ void __launch_bounds__(COUNTING_THREADS)
    segment_bucket_count(const jitops__segment_bucket_args a) {
  const I *__restrict__ ids = (const I *)a.ids.ptr;
  const i64 id_stride = a.ids.stride;
  const int N = a.ids.rows, S = a.ids.segments, P = a.bucket_segments, B = a.buckets;
  const int block_rows = a.block_rows;
  int *__restrict__ matrix = a.matrix;
  extern __shared__ int block_counts[];
  for (int b = threadIdx.x; b < B; b += COUNTING_THREADS)
    block_counts[b] = 0;
  __syncthreads();
  int dropped = 0;
  for_block_rows(ids, id_stride, N, block_rows, [&](int, I id) {
    dropped += id >= (I)S;
    const int b = bucket_of(id, S, P);
    if (b >= 0)
      atomicAdd(block_counts + b, 1);
  });
  dropped = warp_sum(dropped);
  if ((threadIdx.x & 31) == 0)
    add_to_counter(a.counter.count64, a.counter.count32, dropped);
  __syncthreads();
  int *row = matrix + (i64)blockIdx.x * B;
  for (int b = threadIdx.x; b < B; b += COUNTING_THREADS)
    row[b] = block_counts[b];
}

// The offsets pass splits each column into OFFSETS_PARTS parts of at most BUCKET_COLUMN_BATCH
// blocks, a thread each, so that a column takes one round of loads (a thread a column took
// four: 9.4 us at 128 blocks and 5209 buckets on an H100). The host keeps the counting passes
// to at most OFFSETS_PARTS * BUCKET_COLUMN_BATCH blocks.
constexpr int OFFSETS_PARTS = JITOPS__SEGMENT_OFFSETS_PARTS;
constexpr int OFFSETS_BUCKETS = JITOPS__SEGMENT_OFFSETS_BUCKETS; // a block's columns

// Column b of the matrix becomes each block's first slot within bucket b (an exclusive prefix
// over the blocks), counts[b] the bucket's rows, and the reduction's ticket for the bucket 0.
// A column's parts add up in shared memory.
__global__ void __launch_bounds__(BUCKET_THREADS)
    segment_bucket_offsets(const jitops__segment_bucket_args a) {
  int *__restrict__ matrix = a.matrix;
  int *__restrict__ counts = a.counts;
  unsigned *__restrict__ bucket_done = a.done;
  const int blocks = a.blocks, B = a.buckets;
  __shared__ int part_sums[OFFSETS_PARTS][OFFSETS_BUCKETS];
  wait_for_previous_grid();
  const int part = threadIdx.x / OFFSETS_BUCKETS, column = threadIdx.x % OFFSETS_BUCKETS;
  const int b = blockIdx.x * OFFSETS_BUCKETS + column;
  const int first = part * BUCKET_COLUMN_BATCH;
  int v[BUCKET_COLUMN_BATCH];
  int sum = 0;
#pragma unroll
  for (int i = 0; i < BUCKET_COLUMN_BATCH; ++i) {
    v[i] = b < B && first + i < blocks ? matrix[(i64)(first + i) * B + b] : 0;
    sum += v[i];
  }
  part_sums[part][column] = sum;
  __syncthreads();
  if (b >= B)
    return;
  int running = 0;
  for (int p = 0; p < part; ++p)
    running += part_sums[p][column];
  if (part == OFFSETS_PARTS - 1) {
    counts[b] = running + sum;
    bucket_done[b] = 0;
  }
#pragma unroll
  for (int i = 0; i < BUCKET_COLUMN_BATCH; ++i)
    if (first + i < blocks) {
      matrix[(i64)(first + i) * B + b] = running;
      running += v[i];
    }
}

__device__ __forceinline__ int tiles_of(int rows, int tile_rows) {
  return rows <= tile_rows ? 1 : (rows + tile_rows - 1) / tile_rows;
}

__device__ __forceinline__ bool owns_bucket(int b) {
  return b % (int)gridDim.x == (int)blockIdx.x;
}

// Every block of segment_bucket_scatter lays out all the buckets in its shared memory — `start`
// holds the counts and becomes each bucket's first row, with start[B] the rows in all — and
// writes the tiles (each bucket split into tiles_of(rows) of them, in bucket order) of the
// buckets it owns (b = blockIdx.x mod gridDim.x: interleaved, so that a run of large buckets is
// spread over the grid); block 0 writes their number. Thread t takes the buckets
// [t * per, (t + 1) * per). Why every block: one block laying them all out for the others took
// 28 us at 5209 buckets (H200); every block doing it made the scatter 7 us longer (39 -> 46).
__device__ void lay_out_buckets(int *start, int B, int tile_rows, bucket_tile *tiles,
                                int *tile_count) {
  __shared__ u64 warp_sums[COUNTING_THREADS / 32];
  const int per = (B + COUNTING_THREADS - 1) / COUNTING_THREADS;
  const int b0 = min(B, (int)threadIdx.x * per), b1 = min(B, b0 + per);
  u64 mine = 0; // rows in the high half, tiles in the low (neither sum reaches 2^32)
  for (int b = b0; b < b1; ++b)
    mine += ((u64)start[b] << 32) | (u64)tiles_of(start[b], tile_rows);
  const u64 before = block_exclusive_sum(mine, warp_sums);
  int row = (int)(before >> 32), tile = (int)(unsigned)before;
  for (int b = b0; b < b1; ++b) {
    const int n = start[b], count = tiles_of(n, tile_rows);
    start[b] = row;
    if (owns_bucket(b))
      for (int i = 0; i < count; ++i)
        tiles[tile + i] =
            bucket_tile{b, row + i * tile_rows, row + min(n, (i + 1) * tile_rows), count};
    row += n;
    tile += count;
  }
  if (b1 == B && b0 < b1) {
    start[B] = row;
    if (blockIdx.x == 0)
      *tile_count = tile;
  }
  __syncthreads();
}

// The output rows of the block's buckets of more than one tile set to the "no row" code: those
// tiles' atomics merge into them.
template <class T, int OP>
__device__ void clear_merged_buckets(const int *start, int B, int P, int S, int tile_rows, T *out,
                                     i64 out_stride, int D) {
  typedef typename ordered<acc_t<T>>::type K;
  static_assert(sizeof(K) == sizeof(T), "the output doubles as the code table");
  for (int b = blockIdx.x; b < B; b += gridDim.x) {
    if (start[b + 1] - start[b] <= tile_rows)
      continue;
    const int rows = min(P, S - b * P);
    for (int cell = threadIdx.x; cell < rows * D; cell += COUNTING_THREADS) {
      const i64 s = (i64)b * P + cell / D;
      reinterpret_cast<K *>(out + s * out_stride)[cell % D] = empty_code<OP, K>();
    }
  }
}

// Lays the buckets out (above), then puts each of the block's rows in the next of its slots in
// its bucket (row k of the matrix holds where they start within the bucket). Dynamic shared
// memory: 2B + 1 ints (at most 128 blocks: about one an SM on an H100 or H200).
template <class T, class I, int OP>
__global__ void __launch_bounds__(COUNTING_THREADS)
    segment_bucket_scatter(const jitops__segment_bucket_args a) {
  const I *__restrict__ ids = (const I *)a.ids.ptr;
  const i64 id_stride = a.ids.stride, out_stride = a.tensors.out_stride;
  const int N = a.ids.rows, S = a.ids.segments, P = a.bucket_segments, B = a.buckets;
  const int block_rows = a.block_rows, tile_rows = a.tile_rows, D = a.cols;
  const int *__restrict__ matrix = a.matrix;
  const int *__restrict__ counts = a.counts;
  bucket_entry *__restrict__ entries = a.entries;
  bucket_tile *__restrict__ tiles = a.tiles;
  int *__restrict__ tile_count = a.tile_count;
  T *__restrict__ out = (T *)a.tensors.out;
  wait_for_previous_grid();
  extern __shared__ int next_slot[];
  int *in_bucket = next_slot + B + 1; // where the block's rows start within each bucket
  const int *row = matrix + (i64)blockIdx.x * B;
  // Both loads of a bucket in flight together: one round of round trips before the layout, not
  // a second after it.
  for_each_bucket(
      B, [&](int b) { return make_int2(counts[b], row[b]); },
      [&](int b, int2 v) {
        next_slot[b] = v.x;
        in_bucket[b] = v.y;
      });
  __syncthreads();
  lay_out_buckets(next_slot, B, tile_rows, tiles, tile_count);
  clear_merged_buckets<T, OP>(next_slot, B, P, S, tile_rows, out, out_stride, D);
  __syncthreads(); // before the starts become slots
  for (int b = threadIdx.x; b < B; b += COUNTING_THREADS)
    next_slot[b] += in_bucket[b];
  __syncthreads();
  for_block_rows(ids, id_stride, N, block_rows, [&](int j, I id) {
    const int b = bucket_of(id, S, P);
    if (b >= 0)
      entries[atomicAdd(next_slot + b, 1)] = bucket_entry{j, (int)id - b * P};
  });
}

// Rows a group of G lanes takes at a time: enough loads in flight within about 32 values a lane.
template <int VEC, int CPL> struct bucket_rows_in_flight {
  static constexpr int value = CPL * VEC >= 32 ? 1 : (32 / (CPL * VEC) > 8 ? 8 : 32 / (CPL * VEC));
};

// The bucket's P x D table (row l = segment b * P + l) written to `out`: decoded from the shared
// table (`from_out` false), or decoded in place from the codes merged into `out` (true). Group g
// takes rows g, g + groups, ...; its lanes take VEC columns at a time.
template <class T, int OP, int VEC, int G, bool FROM_OUT>
__device__ __forceinline__ void write_bucket(const typename ordered<acc_t<T>>::type *table, int b,
                                             int P, int S, int D, T *out, i64 out_stride,
                                             acc_t<T> fill) {
  typedef acc_t<T> A;
  typedef typename ordered<A>::type K;
  constexpr int GROUPS = BUCKET_THREADS / G;
  const int group = threadIdx.x / G, lane = threadIdx.x % G;
  const int rows = min(P, S - b * P);
  for (int l = group; l < rows; l += GROUPS) {
    T *o = out + ((i64)b * P + l) * out_stride;
    for (int col = lane * VEC; col < D; col += G * VEC) {
      K k[VEC];
      if constexpr (FROM_OUT) {
        // Other blocks' atomics wrote these: read them from L2, past this SM's L1.
        const volatile K *p = reinterpret_cast<const volatile K *>(o + col);
#pragma unroll
        for (int e = 0; e < VEC; ++e)
          k[e] = p[e];
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e)
          k[e] = table[l * D + col + e];
      }
      A v[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        v[e] = value_or_fill<OP, A>(k[e], fill);
      store_pack<T, VEC>(o + col, v);
    }
  }
}

// The tile's table merged into the bucket's codes in `out` (global atomics, cells no row
// reached skipped).
template <class T, int OP, int G>
__device__ __forceinline__ void merge_bucket(const typename ordered<acc_t<T>>::type *table, int b,
                                             int P, int S, int D, T *out, i64 out_stride) {
  typedef typename ordered<acc_t<T>>::type K;
  constexpr int GROUPS = BUCKET_THREADS / G;
  const int group = threadIdx.x / G, lane = threadIdx.x % G;
  const int rows = min(P, S - b * P);
  for (int l = group; l < rows; l += GROUPS) {
    K *o = reinterpret_cast<K *>(out + ((i64)b * P + l) * out_stride);
    for (int col = lane; col < D; col += G) {
      const K k = table[l * D + col];
      if (k != empty_code<OP, K>())
        atomic_extreme<OP, K>(o + col, k);
    }
  }
}

// f(u, k, col) for each row u of a batch that exists and each access k of the lane (columns
// col .. col + VEC - 1, from c0) that lies inside the row.
template <int U, int CPL, int G, int VEC, class F>
__device__ __forceinline__ void for_each_access(const bucket_entry (&en)[U], int c0, int lane,
                                                int D, F &&f) {
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int k = 0; k < CPL; ++k) {
      const int col = c0 + (k * G + lane) * VEC;
      if (en[u].row >= 0 && col < D)
        f(u, k, col);
    }
}

template <class T, int OP, int VEC, int G, int CPL>
__global__ void __launch_bounds__(BUCKET_THREADS, BUCKET_MIN_BLOCKS)
    segment_bucket_extreme(const jitops__segment_bucket_args a) {
  typedef acc_t<T> A;
  typedef typename ordered<A>::type K;
  const T *__restrict__ data = (const T *)a.tensors.data;
  const i64 data_stride = a.tensors.data_stride, out_stride = a.tensors.out_stride;
  const int D = a.cols, P = a.bucket_segments, S = a.ids.segments;
  const bucket_entry *__restrict__ entries = a.entries;
  const bucket_tile *__restrict__ tiles = a.tiles;
  const int *__restrict__ tile_count = a.tile_count;
  T *__restrict__ out = (T *)a.tensors.out;
  const A fill = fill_value<A>(a.fill);
  unsigned *bucket_done = a.done;
  constexpr int U = bucket_rows_in_flight<VEC, CPL>::value;
  constexpr int GROUPS = BUCKET_THREADS / G;
  constexpr int COLS = G * CPL * VEC;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  K *table = reinterpret_cast<K *>(smem_raw);
  __shared__ bool last;

  wait_for_previous_grid();
  // The grid covers the most tiles any ids could make; the tile's bounds come in one load (a
  // search of the buckets' first tiles took a dozen round trips a block).
  const int tile_index = blockIdx.x;
  if (tile_index >= *tile_count)
    return;
  const bucket_tile tile = tiles[tile_index];
  for (int i = threadIdx.x; i < P * D; i += BUCKET_THREADS)
    table[i] = empty_code<OP, K>();
  __syncthreads();
  const int b = tile.bucket, tiles_of_bucket = tile.tiles;
  const int r0 = tile.first, r1 = tile.end;

  const int group = threadIdx.x / G, lane = threadIdx.x % G;
  for (int e0 = r0 + group * U; e0 < r1; e0 += GROUPS * U) {
    bucket_entry en[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      en[u] = e0 + u < r1 ? entries[e0 + u] : bucket_entry{-1, 0};
    for (int c0 = 0; c0 < D; c0 += COLS) {
      // Every load of the batch goes out before the first atomic.
      A v[U][CPL][VEC];
      for_each_access<U, CPL, G, VEC>(en, c0, lane, D, [&](int u, int k, int col) {
        load_pack<T, VEC>(data + (i64)en[u].row * data_stride + col, v[u][k]);
      });
      for_each_access<U, CPL, G, VEC>(en, c0, lane, D, [&](int u, int k, int col) {
        K *cell = table + en[u].local * D + col;
#pragma unroll
        for (int e = 0; e < VEC; ++e)
          atomic_extreme<OP, K>(cell + e, code_of<OP, A>(v[u][k][e]));
      });
    }
  }
  __syncthreads();

  if (tiles_of_bucket == 1) {
    write_bucket<T, OP, VEC, G, false>(table, b, P, S, D, out, out_stride, fill);
    return;
  }
  merge_bucket<T, OP, G>(table, b, P, S, D, out, out_stride);
  // The last tile of the bucket to merge decodes it: every tile's atomics, then its fence, then
  // its ticket.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0)
    last = atomicAdd(bucket_done + b, 1u) == (unsigned)tiles_of_bucket - 1;
  __syncthreads();
  if (!last)
    return;
  __threadfence();
  write_bucket<T, OP, VEC, G, true>(nullptr, b, P, S, D, out, out_stride, fill);
}

} // namespace segment
} // namespace jitops
