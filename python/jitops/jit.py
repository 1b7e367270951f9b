"""The JIT service, in CuPy's shape: register CUDA C++ source once, get a kernel by name
expression, launch it on any framework's arrays.

    jitops.register_source("my/scale.cu", code)
    kernel = jitops.get_kernel("my/scale.cu", "scale<float>", options=("-DUNROLL=4",))
    kernel(grid=(blocks,), block=(256,), args=(x, np.int64(n), np.float32(2.0)), stream=s)

Kernel arguments. An array argument is any object exposing ``__cuda_array_interface__``
(CuPy, Numba, PyTorch, JAX) or ``__dlpack__`` on a CUDA device; it is passed as the device
address of its first element. A scalar must say its C type: a NumPy scalar
(``np.float32(2.0)`` is a ``float``, ``np.int64(n)`` a ``long long``) or a ctypes value
(``ctypes.c_int(3)``). Plain Python ``int`` and ``float`` are refused with a TypeError: a
kernel reads a fixed number of bytes per parameter, and guessing the width is how an
``int`` parameter ends up reading half of a 64-bit value.

Streams. ``stream=None`` is the legacy default stream (0). Otherwise pass a raw handle
(int), an object with ``__cuda_stream__`` (the CUDA stream protocol), a ``torch.cuda.Stream``
(``.cuda_stream``) or a ``cupy.cuda.Stream`` (``.ptr``).

Ordering and devices. The launch is ordered after the work that produced its arrays, as each
protocol defines it, without blocking the host: a PyTorch tensor is taken as ready on
PyTorch's current stream of its device; a ``__cuda_array_interface__`` on the stream it names
(none: no ordering); a ``__dlpack__`` producer is given the launch stream (``stream=``) and
orders itself. Where that stream is not the launch stream, the launch stream waits for an event
recorded on it. An array must be in the kernel's device memory, managed memory or page-locked
host memory: another device's memory raises :class:`jitops.InvalidDeviceError` (peer access is
not assumed), and a masked ``__cuda_array_interface__`` a TypeError.
"""

from __future__ import annotations

import ctypes
import re
import struct
import sys
import threading
from typing import Any, Callable, Iterable, Optional, Sequence, Union

from . import errors
from ._lib import C

Dim3 = Union[int, Sequence[int]]

_NOT_ASKED = object()  # a Kernel's parameter sizes before the driver was asked for them
_SOURCE_NAME = re.compile(r"[A-Za-z0-9_./-]{1,255}\Z")
_sources: dict[str, str] = {}
_sources_lock = threading.Lock()


def register_source(name: str, code: str) -> None:
    """Registers CUDA C++ source text under ``name`` for every runtime, present and future.

    Sources include each other and the built-in headers by name
    (``#include "jitops/common.cuh"``). Names are 1 to 255 characters of
    ``[A-Za-z0-9_./-]``. Registering the same text again does nothing; other text under a
    used name raises :class:`jitops.AlreadyExistsError`, because a name's text is part of
    what identifies its compiled kernels.
    """
    if not isinstance(name, str) or not _SOURCE_NAME.match(name):
        raise errors.InvalidArgumentError(
            f"register_source: name {name!r} must be 1-255 characters of [A-Za-z0-9_./-]"
        )
    if not isinstance(code, str):
        raise errors.InvalidArgumentError("register_source: code must be a str")
    with _sources_lock:
        known = _sources.get(name)
        if known is not None and known != code:
            raise errors.AlreadyExistsError(
                f"register_source: {name!r} is already registered with other contents"
            )
        _sources[name] = code


class Kernel:
    """A compiled kernel of one runtime. Call it to launch."""

    __slots__ = ("runtime", "source", "name_expression", "options", "lowered_name", "_handle",
                 "_param_sizes", "_device")

    def __init__(self, runtime: Runtime, source: str, name_expression: str, options: tuple[str, ...],
                 handle: int, lowered_name: str) -> None:
        self.runtime = runtime
        self.source = source
        self.name_expression = name_expression
        self.options = options
        self.lowered_name = lowered_name
        self._handle = handle
        self._param_sizes: Any = _NOT_ASKED
        self._device = runtime._device_index

    def __call__(self, grid: Dim3, block: Dim3, args: Iterable[Any], shared_mem: int = 0,
                 stream: Any = None) -> None:
        """Launches on ``stream``, asynchronously. ``grid`` and ``block`` are an int or up to
        three ints; ``shared_mem`` is the dynamic shared memory in bytes. Raises TypeError when
        the arguments' number, or one argument's size, is not what the kernel declares (the
        driver would read past them; checked with CUDA 12.4 and newer drivers, which describe
        a kernel's parameters); :class:`jitops.InvalidDeviceError` for an array on another
        device; ValueError once the runtime is closed."""
        owner = self.runtime
        runtime, counted = owner._hold()  # a closed runtime has freed this kernel: ValueError
        try:
            launch_stream = stream_handle(stream)
            arguments = _Arguments(runtime, self._device, launch_stream)
            values = tuple([arguments.value(arg, position) for position, arg in enumerate(args)])
            sizes = self._param_sizes
            if sizes is _NOT_ASKED:
                sizes = self._param_sizes = C.kernel_params(self._handle)
            # The C side checks the values against `sizes`, orders the stream, then launches.
            C.kernel_launch(self._handle, grid, block, shared_mem, launch_stream, values, sizes,
                            self.name_expression, runtime, tuple(arguments.producers))
        finally:
            owner._release(counted)

    def __repr__(self) -> str:
        return f"<jitops.Kernel {self.name_expression} from {self.source!r}>"


def get_kernel(source: str, name_expression: str, options: Iterable[str] = (),
               runtime: Optional[Runtime] = None) -> Kernel:
    """The kernel ``name_expression`` (a ``__global__`` function, or a template instance
    such as ``"axpy<float, 4>"``) of the registered source ``source``, compiled with the NVRTC
    ``options``. The first request compiles it (or loads it from the disk cache); later ones,
    in this process or the next, cost a table probe. ``runtime`` None is the current device's
    shared runtime. Raises :class:`jitops.NotFoundError` for an unknown source and
    :class:`jitops.CompileError` (with NVRTC's log) when compilation fails."""
    from .runtime import Runtime

    runtime = Runtime() if runtime is None else runtime
    options = tuple(options)
    _register_pending_sources(runtime)
    handle, lowered = runtime._call(C.kernel_get, source, name_expression, options)
    return Kernel(runtime, source, name_expression, options, handle, lowered)


def _register_pending_sources(runtime: Runtime) -> None:
    with _sources_lock:
        pending = [(n, c) for n, c in _sources.items() if n not in runtime._registered]
    for name, code in pending:
        runtime.register_source(name, code)


def stream_handle(stream: Any) -> int:
    """The raw CUstream of ``stream`` (see the module's documentation)."""
    if stream is None:
        return 0
    if isinstance(stream, int):
        return stream
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        return int(protocol()[1])
    for attribute in ("cuda_stream", "ptr"):
        value = getattr(stream, attribute, None)
        if isinstance(value, int):
            return value
    raise TypeError(f"stream must be None, an int handle or a CUDA stream object; got {type(stream).__name__}")


# ---- kernel arguments ---------------------------------------------------------------------

_DLPACK_CUDA, _DLPACK_CUDA_HOST, _DLPACK_CUDA_MANAGED = 2, 3, 13


def _stream_identity(handle: int) -> int:
    """0 (NULL) and 1 (CU_STREAM_LEGACY, and DLPack's and the CUDA Array Interface's value for
    it) are the same stream."""
    return 1 if handle == 0 else handle


# What an argument is, by its type: decided once per type (_kinds), since a launch asks for
# each argument and the checks are a few attribute lookups each.
_SCALAR, _TORCH, _INTERFACE, _DLPACK = range(4)
_kinds: dict[type, int] = {}
_packers: dict[type, Callable[[Any], bytes]] = {}  # a scalar type's bytes, as the kernel reads them


def _numpy_packer(scalar: Any) -> Callable[[Any], bytes]:
    """struct's native packing (5x faster than tobytes()) for the types it packs bit for bit:
    integers, bool and float64. A float32 or float16 would pass through a double, which
    quiets a signalling NaN and rewrites half's NaN payloads: those, and the rest (complex,
    say), take tobytes()."""
    dtype = scalar.dtype
    if dtype.kind in "iub" or (dtype.kind == "f" and dtype.itemsize == 8):
        packer = struct.Struct(dtype.char)
        if packer.size == dtype.itemsize and packer.pack(scalar) == scalar.tobytes():
            return packer.pack
    return type(scalar).tobytes


def _kind_of(arg: Any, position: int) -> int:
    kind = _kinds.get(type(arg))
    if kind is None:
        kind = _kinds[type(arg)] = _classify(arg, position)
    return kind


def _classify(arg: Any, position: int) -> int:
    """What ``arg``'s type is as a kernel argument; TypeError for what cannot be one."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(arg, torch.Tensor):
        return _TORCH
    if hasattr(arg, "__cuda_array_interface__"):
        return _INTERFACE
    if hasattr(arg, "__dlpack__") and hasattr(arg, "__dlpack_device__"):
        return _DLPACK
    if isinstance(arg, ctypes._SimpleCData):
        _packers[type(arg)] = bytes
        return _SCALAR
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(arg, numpy.generic):
        _packers[type(arg)] = _numpy_packer(arg)
        return _SCALAR
    if isinstance(arg, (bool, int, float)):
        raise TypeError(
            f"kernel argument {position} is a Python {type(arg).__name__}, whose C type is ambiguous; "
            f"pass a NumPy scalar (np.int32, np.int64, np.float32, ...) or a ctypes value"
        )
    raise TypeError(f"kernel argument {position} ({type(arg).__name__}) is neither an array nor a typed scalar")


class _Arguments:
    """Turns a launch's arguments into what the C side passes on (an int for an array's
    device address, bytes for a typed scalar), checking each array's device and collecting
    the streams whose work the launch must wait for."""

    __slots__ = ("runtime", "device", "stream", "producers", "torch_stream_asked")

    def __init__(self, runtime: int, device: int, stream: int) -> None:
        self.runtime = runtime
        self.device = device  # -1: compile-only, where the launch itself refuses
        self.stream = stream
        self.producers: list[int] = []
        self.torch_stream_asked = False  # every tensor is on self.device: one question will do

    def value(self, arg: Any, position: int) -> Any:
        kind = _kind_of(arg, position)
        if kind == _SCALAR:
            return _packers[type(arg)](arg)
        if kind == _TORCH:
            return self._torch_address(arg, arg.get_device(), position)
        if kind == _INTERFACE:
            return self._interface_address(arg.__cuda_array_interface__, position)
        return self._dlpack_address(arg, position)

    def _after(self, producer: Optional[int]) -> None:
        """Orders the launch after ``producer``'s work (None: nothing to wait for). Asked only
        on a device runtime: a compile-only one refuses the launch anyway."""
        if producer is None or _stream_identity(producer) == _stream_identity(self.stream):
            return
        if producer not in self.producers:
            self.producers.append(producer)

    def _torch_address(self, tensor: Any, device: int, position: int) -> int:
        if device < 0 or not tensor.is_cuda:
            raise TypeError(f"kernel argument {position} is a tensor on {tensor.device}, not in CUDA memory")
        self._check_device(device, position)
        if self.device >= 0 and not self.torch_stream_asked:
            self.torch_stream_asked = True
            self._after(_torch_current_stream(device))
        return tensor.data_ptr()

    def _interface_address(self, interface: dict[str, Any], position: int) -> int:
        if interface.get("mask") is not None:
            raise TypeError(f"kernel argument {position} is a masked array (its __cuda_array_interface__ "
                            f"has a mask): a kernel would read the masked elements too")
        address = int(interface["data"][0])
        if self.device >= 0:
            try:
                C.pointer_check(self.runtime, address)
            except errors.InvalidDeviceError as error:
                raise errors.InvalidDeviceError(f"kernel argument {position}: {error}") from None
            producer = interface.get("stream")  # version 3; absent or None: nothing to order
            self._after(None if producer is None else int(producer))
        return address

    def _dlpack_address(self, arg: Any, position: int) -> int:
        device_type, device = (int(v) for v in arg.__dlpack_device__())
        if device_type not in (_DLPACK_CUDA, _DLPACK_CUDA_HOST, _DLPACK_CUDA_MANAGED):
            raise TypeError(f"kernel argument {position} is not in CUDA memory (DLPack device {device_type})")
        if device_type == _DLPACK_CUDA:
            self._check_device(device, position)
        # The producer orders its own work before the launch stream (DLPack's contract); page-
        # locked host memory has no stream to order.
        stream = None if device_type == _DLPACK_CUDA_HOST else _stream_identity(self.stream)
        try:
            # A copy would live only as long as the capsule, not as long as the kernel runs.
            capsule = arg.__dlpack__(stream=stream, copy=False)
        except TypeError:  # a producer older than DLPack 1.0's `copy`, which never copies
            capsule = arg.__dlpack__(stream=stream)
        return C.dlpack_address(capsule)

    def _check_device(self, device: int, position: int) -> None:
        if self.device >= 0 and device != self.device:
            raise errors.InvalidDeviceError(f"kernel argument {position} is on cuda:{device}; the kernel "
                                            f"runs on cuda:{self.device}")


def _torch_current_stream(device: int) -> int:
    """PyTorch's current stream of ``device``, as a raw handle (0: the default stream)."""
    torch = sys.modules["torch"]  # a tensor exists, so torch is imported
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return int(raw(device)) if raw is not None else int(torch.cuda.current_stream(device).cuda_stream)


from .runtime import Runtime  # noqa: E402  (circular, as at the end of runtime.py: annotations name Runtime)
