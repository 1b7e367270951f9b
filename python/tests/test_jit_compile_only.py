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
    with pytest.raises(ValueError, match="grid takes 1 to 3 dimensions; got 4"):
        kernel((1, 1, 1, 1), 32, ())
    with pytest.raises(ValueError, match="each must be in"):
        kernel(0, 32, ())


def test_scalars_become_their_own_bytes():
    from jitops.jit import _Arguments

    arguments = _Arguments(0, -1, 0)
    scalars = (np.int8(-7), np.uint16(65000), np.int32(-2), np.int64(-(2**40)), np.uint64(2**63 + 5),
               np.float16(0.1), np.float32(3.25), np.float64(-1.5e300), np.bool_(True), np.complex64(1 - 2j),
               ctypes.c_int32(-2), ctypes.c_double(0.1), ctypes.c_void_p(4096))
    for round in range(2):  # the second round through the packers cached by type
        for position, scalar in enumerate(scalars):
            assert arguments.value(scalar, position) == bytes(memoryview(scalar).cast("B")), scalar


def test_float_scalars_keep_their_nan_bits():
    from jitops.jit import _Arguments

    arguments = _Arguments(0, -1, 0)
    for dtype, bits in ((np.float16, (0x7C01, 0xFE7F, 0x7D55)), (np.float32, (0x7F800001, 0xFFA00000)),
                        (np.float64, (0x7FF0000000000001,))):
        for pattern in bits:
            scalar = np.array([pattern], dtype=f"u{np.dtype(dtype).itemsize}").view(dtype)[0]
            for _ in range(2):  # the first call picks the type's packer, the second uses it
                assert arguments.value(scalar, 0) == scalar.tobytes(), (dtype, hex(pattern))


def test_values_are_checked_in_c_before_the_launch():
    """The C side reads ints as 8-byte addresses and bytes as they are, and checks their
    number and sizes against the kernel's parameters before anything is launched (here a
    NULL kernel, which the launch itself refuses)."""
    from jitops._lib import C

    values = (b"\x07", b"\0" * 8, b"\xfe\xff\xff\xff", b"\0" * 4, 1 << 40)

    def launch(sizes, values=values):
        C.kernel_launch(0, 1, 1, 0, 0, values, sizes, "k", 0, ())

    with pytest.raises(jitops.InvalidArgumentError, match="kernel is NULL"):
        launch((1, 8, 4, 4, 8))  # every size right: the launch is reached
    with pytest.raises(jitops.InvalidArgumentError, match="kernel is NULL"):
        launch(None)  # the driver could not say: nothing checked
    with pytest.raises(TypeError, match="argument 2 of k is 4 bytes; its parameter takes 8"):
        launch((1, 8, 8, 4, 8))
    with pytest.raises(TypeError, match="k takes 4 arguments; got 5"):
        launch((1, 8, 4, 4))
    with pytest.raises(TypeError, match="value 0 must be an int address or bytes"):
        launch(None, (np.int32(1),))


class _DLPackOn:
    """A DLPack producer claiming to live on (device_type, device); it records the stream it
    is asked to order itself before, and exports a real capsule of host data."""

    def __init__(self, device_type, device):
        self.device = (device_type, device)
        self.asked = []
        self.data = np.arange(4, dtype=np.float32)

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None):
        self.asked.append(stream)
        return self.data.__dlpack__()


def test_dlpack_producers_are_given_the_launch_stream():
    from jitops.jit import _Arguments

    for launch, expected in ((0, 1), (1, 1), (2, 2), (0x7F00, 0x7F00)):
        producer = _DLPackOn(2, 0)
        arguments = _Arguments(0, 0, launch)
        assert arguments.value(producer, 0) == producer.data.ctypes.data
        assert producer.asked == [expected] and arguments.producers == []
    managed = _DLPackOn(13, 5)  # managed memory: any device reaches it
    _Arguments(0, 0, 0).value(managed, 0)
    assert managed.asked == [1]
    pinned = _DLPackOn(3, 0)  # page-locked host memory: no stream to order
    _Arguments(0, 0, 0).value(pinned, 0)
    assert pinned.asked == [None]

    class Versioned(_DLPackOn):  # DLPack 1.0: copy=False forbids a copy, which the capsule would own
        def __dlpack__(self, stream=None, copy=None):
            self.asked.append((stream, copy))
            return self.data.__dlpack__()

    versioned = Versioned(2, 0)
    _Arguments(0, 0, 77).value(versioned, 0)
    assert versioned.asked == [(77, False)]


def test_arrays_on_another_device_are_refused_before_export():
    from jitops.jit import _Arguments

    producer = _DLPackOn(2, 1)
    with pytest.raises(jitops.InvalidDeviceError, match="argument 3 is on cuda:1; the kernel runs on cuda:0"):
        _Arguments(0, 0, 0).value(producer, 3)
    assert producer.asked == []  # refused before the producer synchronized anything

    with pytest.raises(TypeError, match="not in CUDA memory"):
        _Arguments(0, 0, 0).value(_DLPackOn(1, 0), 0)


def test_torch_tensors_outside_cuda_memory_are_refused():
    torch = pytest.importorskip("torch")
    from jitops.jit import _Arguments

    for tensor in (torch.ones(4), torch.ones(4, device="meta")):
        with pytest.raises(TypeError, match=f"argument 1 is a tensor on {tensor.device.type}.*not in CUDA memory"):
            _Arguments(0, 0, 0).value(tensor, 1)

    class DuckTyped:  # data_ptr() and get_device() alone do not make a torch tensor
        def data_ptr(self):
            return 4096

        def get_device(self):
            return 0

    with pytest.raises(TypeError, match="neither an array nor a typed scalar"):
        _Arguments(0, 0, 0).value(DuckTyped(), 0)


def test_masked_cuda_array_interfaces_are_refused(runtime):
    class Masked:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (4096, False), "version": 3,
                                    "mask": object(), "stream": None}

    jitops.register_source("tests/masked.cu", "extern \"C\" __global__ void touch(float *x) { x[0] = 1; }")
    kernel = jitops.get_kernel("tests/masked.cu", "touch", runtime=runtime)
    with pytest.raises(TypeError, match="argument 0 is a masked array"):
        kernel(1, 1, (Masked(),))


def test_grid_sizes_take_numpy_integers_and_overflow_says_so(runtime):
    jitops.register_source("tests/empty.cu", "extern \"C\" __global__ void empty() {}")
    kernel = jitops.get_kernel("tests/empty.cu", "empty", runtime=runtime)
    with pytest.raises(jitops.NoDeviceError):  # the launch is reached: the sizes were accepted
        kernel(np.int64(4), (np.int32(32), np.uint8(2)), ())
    with pytest.raises(jitops.NoDeviceError):  # arrays of sizes, and a 0-d one
        kernel(np.array([4, 2]), np.array(32), ())
    with pytest.raises(OverflowError, match="grid does not fit int64"):
        kernel(2**70, 32, ())
    with pytest.raises(TypeError, match="grid takes an int or a sequence"):
        kernel(1.5, 32, ())


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


def test_close_leaves_the_runtime_to_the_last_call_in_flight(cache_dir):
    """close() from another thread used to destroy a private runtime under a call that had
    released the GIL (a compile, a launch): a use after free. Now the runtime is closed to new
    calls at once and destroyed by the last call in flight, and close() never blocks (a
    thread may close the runtime it is itself calling)."""
    rt = jitops.Runtime(arch="sm_90", cache_dir=cache_dir, cache_mode="off")
    handle = rt.handle
    first, second = rt._hold(), rt._hold()  # what compiles or launches hold with the GIL released
    assert first == second == (handle, True)
    rt.close()
    assert rt.handle == 0 and rt._doomed == handle  # closed to new calls, not yet destroyed
    with pytest.raises(ValueError, match="closed"):
        rt.stats()
    rt._release(True)
    assert rt._doomed == handle
    rt._release(True)  # the last one destroys it
    assert rt._doomed == 0 and rt._holders == 0
    rt.close()  # twice: nothing


def test_a_compile_in_flight_survives_close(cache_dir):
    """A real compile in one thread, close() in another while it runs: the compile finishes
    (or, had it not started yet, is refused as closed); nothing crashes."""
    import threading

    body = "\n".join(f"template <int K> __device__ float f{i}(float x) {{ return x * K + {i}; }}" for i in range(300))
    calls = " + ".join(f"f{i}<{i}>(x)" for i in range(300))
    jitops.register_source("tests/slow.cu", f'{body}\nextern "C" __global__ void slow(float *p) {{ float x = p[0]; p[0] = {calls}; }}')
    rt = jitops.Runtime(arch="sm_90", cache_dir=cache_dir, cache_mode="off")
    outcome = []

    def compile_it():
        try:
            outcome.append(jitops.get_kernel("tests/slow.cu", "slow", runtime=rt).lowered_name)
        except ValueError as error:
            outcome.append(str(error))

    worker = threading.Thread(target=compile_it)
    worker.start()
    rt.close()
    worker.join(60)
    assert outcome in (["slow"], ["this runtime was closed"])
    assert rt.handle == 0


def test_private_runtimes_close(cache_dir):
    rt = jitops.Runtime(arch="sm_90", cache_dir=cache_dir, cache_mode="off")
    assert rt.info.cache_path == "" and rt.info.cache_state == "off"
    rt.close()
    with pytest.raises(ValueError, match="closed"):
        rt.stats()
    with pytest.raises(ValueError, match="cache_mode"):
        jitops.Runtime(arch="sm_90", cache_mode="sometimes")
