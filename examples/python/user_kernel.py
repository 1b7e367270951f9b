#!/usr/bin/env python3
"""Your own CUDA kernel through jitops' JIT service: register a templated source once, get
an instance by name expression, launch it on PyTorch tensors and on CuPy arrays, on a stream
of your own, with scalars typed by NumPy.

Then a compile-only runtime (``jitops.Runtime(arch="sm_90")``) compiles the same kernel for
sm_90 without a GPU, as a build machine would to fill a cache that GPU machines then use.

Without a GPU only that last part runs (and the script says so). CuPy is optional: that part
is skipped with a message when ``import cupy`` fails.

    PYTHONPATH=build/python python3 examples/python/user_kernel.py
"""

from __future__ import annotations

import numpy as np

import jitops

SOURCE_NAME = "examples/saxpy.cu"
# jitops/common.cuh is the library's own header: 16-bit float storage types (jitops::half,
# jitops::bfloat16) and load/store, which convert to and from the accumulation type (float
# for the 16-bit types), so one template serves every dtype without the CUDA headers.
SOURCE = r"""
#include "jitops/common.cuh"

template <class T>
__global__ void saxpy(long long n, float a, const T *x, const T *y, T *out) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n)
    jitops::store(out + i, a * jitops::load(x + i) + jitops::load(y + i));
}
"""

N = 1_000_003  # not a multiple of the block: the bounds check matters
A = 2.5
BLOCK = 256
GRID = (N + BLOCK - 1) // BLOCK
ARGS_DOC = "(np.int64(n), np.float32(a), x, y, out): long long n, float a, then device pointers"


def run_torch() -> None:
    """saxpy<float> and saxpy<jitops::half> on torch tensors, on a torch.cuda.Stream."""
    import torch

    stream = torch.cuda.Stream()
    for dtype, expression, tolerance in ((torch.float32, "saxpy<float>", 1e-5),
                                         (torch.float16, "saxpy<jitops::half>", 1e-2)):
        x = torch.randn(N, device="cuda", dtype=dtype)
        y = torch.randn(N, device="cuda", dtype=dtype)
        out = torch.empty_like(x)
        kernel = jitops.get_kernel(SOURCE_NAME, expression)
        # x and y were written on the default stream; our stream must wait for that work.
        stream.wait_stream(torch.cuda.current_stream())
        kernel(grid=GRID, block=BLOCK, args=(np.int64(N), np.float32(A), x, y, out), stream=stream)
        stream.synchronize()
        want = (A * x.float() + y.float()).to(dtype)
        assert torch.allclose(out, want, rtol=tolerance, atol=tolerance), f"torch {dtype}: wrong result"
        print(f"  torch {str(dtype):14} {kernel.name_expression:20} {N} elements: correct")


def run_cupy() -> None:
    """saxpy<float> and saxpy<double> on CuPy arrays, on a cupy.cuda.Stream."""
    try:
        import cupy as cp
    except ImportError as error:
        print(f"  CuPy part skipped: import cupy failed ({error})")
        return
    stream = cp.cuda.Stream(non_blocking=True)
    for dtype, expression in ((cp.float32, "saxpy<float>"), (cp.float64, "saxpy<double>")):
        with stream:  # the arrays are made on our stream, so the kernel is ordered after them
            x = cp.random.standard_normal(N, dtype=cp.float64).astype(dtype)
            y = cp.random.standard_normal(N, dtype=cp.float64).astype(dtype)
            out = cp.empty_like(x)
        kernel = jitops.get_kernel(SOURCE_NAME, expression)
        kernel(grid=GRID, block=BLOCK, args=(np.int64(N), np.float32(A), x, y, out), stream=stream)
        stream.synchronize()
        want = np.float32(A) * cp.asnumpy(x) + cp.asnumpy(y)
        assert np.allclose(cp.asnumpy(out), want, rtol=1e-6, atol=1e-6), f"cupy {dtype}: wrong result"
        print(f"  cupy  {np.dtype(dtype).name:14} {kernel.name_expression:20} {N} elements: correct")


def compile_only() -> None:
    """The same kernel compiled for sm_90 by a runtime that has no device; launching it raises
    jitops.NoDeviceError."""
    with jitops.Runtime(arch="sm_90") as runtime:
        kernel = runtime.get_kernel(SOURCE_NAME, "saxpy<jitops::bfloat16>")
        stats = runtime.stats()
        print(f"  {runtime!r}: {kernel.name_expression} -> {kernel.lowered_name}")
        print(f"  compiled {stats.compiles}, from the disk cache {stats.disk_hits}, "
              f"in memory {stats.memory_hits}")
        assert stats.compiles + stats.disk_hits == 1, stats
        try:
            null = np.uint64(0)  # a pointer argument: 8 bytes
            kernel(grid=1, block=1, args=(np.int64(0), np.float32(A), null, null, null))
        except jitops.NoDeviceError as error:
            print(f"  launching it raises NoDeviceError, as it should: {error}")
        else:
            raise AssertionError("a compile-only runtime launched a kernel")


def main() -> int:
    jitops.register_source(SOURCE_NAME, SOURCE)
    print(f"jitops {jitops.__version__}; kernel arguments {ARGS_DOC}")
    try:
        runtime = jitops.Runtime()  # the current device's shared runtime
    except jitops.NoDeviceError as error:
        print(f"no GPU here ({error}): only the compile-only part runs")
    else:
        print(f"on {runtime!r}:")
        run_torch()
        run_cupy()
        print(f"  runtime stats: {runtime.stats()}")
    print("compile-only:")
    compile_only()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
