"""ctypes access to libjitops, for what the jitops package does not expose: the library, a
runtime, DLPack tensors over torch tensors and status checks. Used by segment_buckets_sweep.py
only (the other bench scripts use the package)."""
import ctypes
import os

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

