"""The JIT service on a compile-only runtime: registering sources, compiling user kernels,
argument checks and the cache tiers, all without a GPU."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import jitops

SCALE = """
#include "jitops/common.cuh"
template <class T> __global__ void scale(T *p, long long n, float s) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) jitops::store(p + i, jitops::load(p + i) * s);
}
"""


@pytest.fixture
def runtime(cache_dir):
    with jitops.Runtime(arch="sm_90", cache_dir=cache_dir) as rt:
        yield rt


def test_compile_only_runtime_describes_itself(runtime, cache_dir):
    info = runtime.info
    assert (info.device, info.has_device, info.arch, info.arch_name) == (-1, False, 90, "sm_90")
    assert info.cache_path.startswith(cache_dir) and info.cache_writable
    assert (info.cache_state, info.cache_degraded, info.cache_reason) == ("readwrite", False, "")
    assert "compile-only" in repr(runtime)


def test_user_template_compiles_then_hits_memory(runtime):
    jitops.register_source("tests/scale.cu", SCALE)
    first = jitops.get_kernel("tests/scale.cu", "scale<jitops::half>", options=("-DUNROLL=2",), runtime=runtime)
    again = jitops.get_kernel("tests/scale.cu", "scale<jitops::half>", options=("-DUNROLL=2",), runtime=runtime)
    assert first.lowered_name == again.lowered_name and first.lowered_name.startswith("_Z5scale")
    stats = runtime.stats()
    assert (stats.misses, stats.compiles, stats.memory_hits) == (1, 1, 1)
    assert stats.compile_ms > 0


def test_second_runtime_finds_the_kernel_on_disk(cache_dir):
    jitops.register_source("tests/scale.cu", SCALE)
    for expected in ("compiles", "disk_hits"):
        with jitops.Runtime(arch="sm_90", cache_dir=cache_dir) as rt:
            jitops.get_kernel("tests/scale.cu", "scale<float>", runtime=rt)
            assert getattr(rt.stats(), expected) == 1


def test_compile_error_carries_the_nvrtc_log(runtime):
    jitops.register_source("tests/broken.cu", "__global__ void broken() { undefined_name(); }")
    with pytest.raises(jitops.CompileError, match="undefined_name"):
        jitops.get_kernel("tests/broken.cu", "broken", runtime=runtime)


def test_unknown_source_is_not_found(runtime):
    with pytest.raises(jitops.NotFoundError, match="no-such-source"):
        jitops.get_kernel("no-such-source.cu", "k", runtime=runtime)


def test_source_names_and_contents_are_checked():
    with pytest.raises(jitops.InvalidArgumentError):
        jitops.register_source("bad name!", "x")
    jitops.register_source("tests/fixed.cu", "// one")
    jitops.register_source("tests/fixed.cu", "// one")  # the same text again: fine
    with pytest.raises(jitops.AlreadyExistsError):
        jitops.register_source("tests/fixed.cu", "// two")


def test_launch_on_a_compile_only_runtime_is_no_device(runtime):
    jitops.register_source("tests/scale.cu", SCALE)
    kernel = jitops.get_kernel("tests/scale.cu", "scale<float>", runtime=runtime)
    with pytest.raises(jitops.NoDeviceError):
        kernel((4,), (256,), (np.uint64(0), np.int64(1024), np.float32(2.0)))


def test_a_kernel_of_a_closed_runtime_refuses_to_launch(cache_dir):
    """Closing a runtime frees its kernels; a Kernel object kept past it used to launch through
    the freed memory (a segfault)."""
    jitops.register_source("tests/scale.cu", SCALE)
    with jitops.Runtime(arch="sm_90", cache_dir=cache_dir) as rt:
        kernel = jitops.get_kernel("tests/scale.cu", "scale<float>", runtime=rt)
    with pytest.raises(ValueError, match="closed"):
        kernel((4,), (256,), (np.uint64(0), np.int64(1024), np.float32(2.0)))


def test_scalars_must_say_their_c_type(runtime):
    jitops.register_source("tests/scale.cu", SCALE)
    kernel = jitops.get_kernel("tests/scale.cu", "scale<float>", runtime=runtime)
    with pytest.raises(TypeError, match="ambiguous"):
        kernel(1, 32, (np.uint64(0), 1024, np.float32(2.0)))
    with pytest.raises(TypeError, match="neither an array"):
        kernel(1, 32, ("x",))
    with pytest.raises(ValueError, match="dimensions"):
        kernel((1, 1, 1, 1), 32, ())
    with pytest.raises(ValueError, match="each must be in"):
        kernel(0, 32, ())


def test_arguments_are_packed_at_their_alignment():
    from jitops.jit import _pack_arguments

    packed, offsets, sizes = _pack_arguments((np.int8(7), np.float64(1.5), ctypes.c_int32(-2), np.float32(3.0)))
    assert offsets == (0, 8, 16, 20) and sizes == (1, 8, 4, 4)
    assert packed[0] == 7 and np.frombuffer(packed[8:16], np.float64)[0] == 1.5
    assert np.frombuffer(packed[16:20], np.int32)[0] == -2 and np.frombuffer(packed[20:24], np.float32)[0] == 3.0


def test_stream_handles():
    class CudaStreamProtocol:
        def __cuda_stream__(self):
            return (0, 1234)

    class CupyLike:
        ptr = 77

    assert jitops.stream_handle(None) == 0
    assert jitops.stream_handle(5) == 5
    assert jitops.stream_handle(CudaStreamProtocol()) == 1234
    assert jitops.stream_handle(CupyLike()) == 77
    with pytest.raises(TypeError):
        jitops.stream_handle("default")


def test_private_runtimes_close(cache_dir):
    rt = jitops.Runtime(arch="sm_90", cache_dir=cache_dir, cache_mode="off")
    assert rt.info.cache_path == "" and rt.info.cache_state == "off"
    rt.close()
    with pytest.raises(ValueError, match="closed"):
        rt.stats()
    with pytest.raises(ValueError, match="cache_mode"):
        jitops.Runtime(arch="sm_90", cache_mode="sometimes")
