/* Grids and blocks of the flce kernels. */
#include "ops/flce/launches.h"

/* A 2-D block's threads; the kernels read blockDim, so only the host knows it. */
#define BLOCK_2D_THREADS 256
/* The 2-D kernels loop over rows beyond this many blocks. */
#define BLOCKS_2D_MAX ((int64_t)1 << 20)
/* Grid-stride kernels: enough blocks to fill every SM this many times. */
#define FLAT_BLOCKS_PER_SM 16

/* One kernel argument: the struct itself. */
static jitops_status launch(const jitops_kernel_t *kernel, uint32_t grid, uint32_t bx, uint32_t by,
                            const void *args, void *stream) {
  void *params[] = {(void *)args};
  return jitops__launch(kernel, grid, 1, 1, bx, by, 1, 0, stream, params);
}

jitops_status jitops__flce_launch_rows(const jitops_kernel_t *kernel, int block, int64_t nrows,
                                       const jitops__flce_rows_args *args, void *stream) {
  return launch(kernel, (uint32_t)nrows, (uint32_t)block, 1, args, stream);
}

jitops_status jitops__flce_launch_count(const jitops_kernel_t *kernel,
                                        const jitops__flce_count_args *args, void *stream) {
  return launch(kernel, 1, JITOPS__FLCE_REDUCE_THREADS, 1, args, stream);
}

jitops_status jitops__flce_launch_reduce(const jitops_kernel_t *kernel,
                                         const jitops__flce_reduce_args *args, void *stream) {
  return launch(kernel, 1, JITOPS__FLCE_REDUCE_THREADS, 1, args, stream);
}

jitops_status jitops__flce_launch_colsum(const jitops_kernel_t *kernel,
                                         const jitops__flce_colsum_args *args, void *stream) {
  const int64_t threads = JITOPS__FLCE_FLAT_THREADS;
  return launch(kernel, (uint32_t)((args->ncols + threads - 1) / threads), (uint32_t)threads, 1,
                args, stream);
}

/* Elementwise kernels over nrows x ncols: threads (x, y) cover (columns, rows). */
static jitops_status launch_2d(const jitops_kernel_t *kernel, int64_t nrows, int64_t ncols,
                               const void *args, void *stream) {
  uint32_t bx = 1;
  while (bx < BLOCK_2D_THREADS && (int64_t)bx < ncols)
    bx *= 2;
  uint32_t by = BLOCK_2D_THREADS / bx;
  int64_t blocks = (nrows + by - 1) / by;
  if (blocks > BLOCKS_2D_MAX)
    blocks = BLOCKS_2D_MAX;
  if (blocks < 1)
    blocks = 1;
  return launch(kernel, (uint32_t)blocks, bx, by, args, stream);
}

jitops_status jitops__flce_launch_convert(const jitops_kernel_t *kernel,
                                          const jitops__flce_convert_args *args, void *stream) {
  return launch_2d(kernel, args->nrows, args->ncols, args, stream);
}

jitops_status jitops__flce_launch_scale(const jitops_kernel_t *kernel,
                                        const jitops__flce_scale_args *args, void *stream) {
  return launch_2d(kernel, args->nrows, args->ncols, args, stream);
}

/* Grid-stride kernels over n contiguous elements, `per_thread` per access. */
static jitops_status launch_flat(jitops_runtime_t *runtime, const jitops_kernel_t *kernel,
                                 int64_t n, int64_t per_thread, const void *args, void *stream) {
  const int64_t threads = JITOPS__FLCE_FLAT_THREADS;
  int64_t blocks = (n / per_thread + threads - 1) / threads;
  int64_t most = (int64_t)jitops__runtime_props(runtime)->sm_count * FLAT_BLOCKS_PER_SM;
  if (most > 0 && blocks > most)
    blocks = most;
  if (blocks < 1)
    blocks = 1;
  return launch(kernel, (uint32_t)blocks, (uint32_t)threads, 1, args, stream);
}

jitops_status jitops__flce_launch_convert_flat(jitops_runtime_t *runtime,
                                               const jitops_kernel_t *kernel,
                                               const jitops__flce_convert_flat_args *args,
                                               void *stream) {
  return launch_flat(runtime, kernel, args->n, JITOPS__FLCE_CONVERT_FLAT_VEC, args, stream);
}

jitops_status jitops__flce_launch_scale_flat(jitops_runtime_t *runtime,
                                             const jitops_kernel_t *kernel,
                                             const jitops__flce_scale_flat_args *args, size_t elem,
                                             void *stream) {
  return launch_flat(runtime, kernel, args->n, (int64_t)(JITOPS__FLCE_VECTOR_BYTES / elem), args,
                     stream);
}
