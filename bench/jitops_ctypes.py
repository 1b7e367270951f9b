"""ctypes access to libjitops for the bench scripts: the library, a runtime, DLPack tensors
over torch tensors, status checks and CUDA-event timing. Shared by every bench_<op>.py."""
import ctypes
import os
import statistics

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def load_library(path=None):
    """build/libjitops.so next to bench/, or $JITOPS_LIB, or `path`."""
    path = path or os.environ.get("JITOPS_LIB") or os.path.join(HERE, "..", "build", "libjitops.so")
    lib = ctypes.CDLL(path)
    lib.jitops_status_string.restype = ctypes.c_char_p
    lib.jitops_last_error.restype = ctypes.c_char_p
    return lib


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class Workspace(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p), ("bytes", ctypes.c_size_t)]


K_DL_CUDA = 2
_DTYPES = {
    torch.float16: (2, 16),
    torch.bfloat16: (4, 16),
    torch.float32: (2, 32),
    torch.float64: (2, 64),
    torch.int32: (0, 32),
    torch.int64: (0, 64),
    torch.uint8: (1, 8),
}


class Tensor:
    """A DLTensor describing a torch CUDA tensor (which must outlive it)."""

    def __init__(self, t):
        self.torch = t
        n = t.dim()
        self._shape = (ctypes.c_int64 * max(n, 1))(*t.shape)
        self._strides = (ctypes.c_int64 * max(n, 1))(*t.stride())
        code, bits = _DTYPES[t.dtype]
        self.dl = DLTensor(
            ctypes.c_void_p(t.data_ptr()),
            DLDevice(K_DL_CUDA, t.device.index or 0),
            n,
            DLDataType(code, bits, 1),
            self._shape,
            self._strides,
            0,
        )

    @property
    def ref(self):
        return ctypes.byref(self.dl)


def tensor_ptr(t):
    """A DLTensor* for a torch tensor, or NULL for None (keep the returned holder alive)."""
    if t is None:
        return None, None
    holder = Tensor(t)
    return holder, ctypes.pointer(holder.dl)


def check(lib, status, what):
    if status != 0:
        raise RuntimeError(
            "%s: %s: %s"
            % (what, lib.jitops_status_string(status).decode(), lib.jitops_last_error().decode())
        )


def create_runtime(lib):
    rt = ctypes.c_void_p()
    check(lib, lib.jitops_runtime_create(None, ctypes.byref(rt)), "jitops_runtime_create")
    return rt


def current_stream():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


def time_ms(fn, warmup=3, iters=10):
    """Median milliseconds of fn() on the current stream, by CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def time_interleaved(fns, warmup=3, iters=10):
    """Median milliseconds of each fn, measured in rounds (one call of each per round) so that
    clock and thermal drift affect every fn alike. A fn that raises during warm-up (say, out of
    memory) gets NaN."""
    alive = []
    for fn in fns:
        try:
            for _ in range(warmup):
                fn()
            torch.cuda.synchronize()
            alive.append(True)
        except torch.cuda.OutOfMemoryError:
            alive.append(False)
            torch.cuda.empty_cache()
    times = [[] for _ in fns]
    for _ in range(iters):
        for i, fn in enumerate(fns):
            if not alive[i]:
                continue
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times[i].append(start.elapsed_time(end))
    return [statistics.median(t) if t else float("nan") for t in times]


def peak_bytes(fn):
    """Peak bytes torch's allocator held above what it held before fn() (fn's allocations,
    the workspace it hands to libjitops included)."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base
