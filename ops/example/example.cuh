// jitops/example.cuh — the example kernel: out[i] = a * x[i] + y[i], with the element type,
// and the number of elements each thread handles, fixed at compile time. It is what
// examples/quickstart.c, the JIT tests and the overhead benchmark compile and launch.
#pragma once
#include "jitops/common.cuh"

namespace jitops {

template <class T, int ITEMS>
__global__ void example_axpy(i64 n, acc_t<T> a, const T *__restrict__ x, const T *__restrict__ y,
                             T *__restrict__ out) {
  i64 base = ((i64)blockIdx.x * blockDim.x) * ITEMS + threadIdx.x;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    i64 i = base + (i64)k * blockDim.x;
    if (i < n)
      store(out + i, a * load(x + i) + load(y + i));
  }
}

} // namespace jitops
