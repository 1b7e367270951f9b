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
"""

from __future__ import annotations

import ctypes
import re
import sys
import threading
from typing import Any, Iterable, Optional, Sequence, Union

from . import errors
from ._lib import C

Dim3 = Union[int, Sequence[int]]

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
                 "_param_sizes")

    def __init__(self, runtime: Runtime, source: str, name_expression: str, options: tuple[str, ...],
                 handle: int, lowered_name: str) -> None:
        self.runtime = runtime
        self.source = source
        self.name_expression = name_expression
        self.options = options
        self.lowered_name = lowered_name
        self._handle = handle
        self._param_sizes: Optional[tuple[int, ...]] = None

    def __call__(self, grid: Dim3, block: Dim3, args: Iterable[Any], shared_mem: int = 0,
                 stream: Any = None) -> None:
        """Launches on ``stream``, asynchronously. ``grid`` and ``block`` are an int or up to
        three ints; ``shared_mem`` is the dynamic shared memory in bytes. Raises TypeError when
        the arguments' number, or one argument's size, is not what the kernel declares (the
        driver would read past them); ValueError once the runtime is closed."""
        self.runtime._live()  # a closed runtime has freed this kernel
        packed, offsets, sizes = _pack_arguments(args)
        self._check_arguments(sizes)
        C.kernel_launch(self._handle, _dim3(grid), _dim3(block), shared_mem, stream_handle(stream),
                        packed, offsets)

    def _check_arguments(self, sizes: tuple[int, ...]) -> None:
        """Compares the packed arguments' sizes with the kernel's parameters, which the driver
        describes (CUDA 12.4 and newer; with an older driver nothing is checked)."""
        if self._param_sizes is None:
            self._param_sizes = C.kernel_params(self._handle)
            if self._param_sizes is None:
                return
        want = self._param_sizes
        if len(sizes) != len(want):
            raise TypeError(f"{self.name_expression} takes {len(want)} arguments; got {len(sizes)}")
        for position, (got, expected) in enumerate(zip(sizes, want)):
            if got != expected:
                raise TypeError(f"kernel argument {position} of {self.name_expression} is {got} "
                                f"bytes; its parameter takes {expected}")

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
    handle, lowered = C.kernel_get(runtime._live(), source, name_expression, options)
    return Kernel(runtime, source, name_expression, options, handle, lowered)


def _register_pending_sources(runtime: Runtime) -> None:
    with _sources_lock:
        pending = [(n, c) for n, c in _sources.items() if n not in runtime._registered]
    for name, code in pending:
        runtime.register_source(name, code)


def _dim3(value: Dim3) -> tuple[int, ...]:
    dims = (value,) if isinstance(value, int) else tuple(value)
    if not 1 <= len(dims) <= 3:
        raise ValueError(f"grid and block take 1 to 3 dimensions; got {value!r}")
    return dims


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

_POINTER = ctypes.sizeof(ctypes.c_void_p)


def _array_address(arg: Any, position: int) -> Optional[int]:
    """The device address of an array argument, or None when ``arg`` is not an array."""
    data_ptr = getattr(arg, "data_ptr", None)
    get_device = getattr(arg, "get_device", None)
    if callable(data_ptr) and callable(get_device):  # PyTorch: the fast path
        if get_device() < 0:
            raise TypeError(f"kernel argument {position} is a tensor in host memory")
        return int(data_ptr())
    interface = getattr(arg, "__cuda_array_interface__", None)
    if interface is not None:
        return int(interface["data"][0])
    if hasattr(arg, "__dlpack__") and hasattr(arg, "__dlpack_device__"):
        device_type, _ = arg.__dlpack_device__()
        if int(device_type) not in (2, 13):  # kDLCUDA, kDLCUDAManaged
            raise TypeError(f"kernel argument {position} is not in CUDA memory (DLPack device {int(device_type)})")
        return C.dlpack_address(arg.__dlpack__())
    return None


def _scalar_bytes(arg: Any, position: int) -> tuple[bytes, int]:
    if isinstance(arg, ctypes._SimpleCData):
        return bytes(arg), ctypes.alignment(type(arg))
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(arg, numpy.generic):
        return arg.tobytes(), arg.dtype.alignment
    if isinstance(arg, (bool, int, float)):
        raise TypeError(
            f"kernel argument {position} is a Python {type(arg).__name__}, whose C type is ambiguous; "
            f"pass a NumPy scalar (np.int32, np.int64, np.float32, ...) or a ctypes value"
        )
    raise TypeError(f"kernel argument {position} ({type(arg).__name__}) is neither an array nor a typed scalar")


def _pack_arguments(args: Iterable[Any]) -> tuple[bytes, tuple[int, ...], tuple[int, ...]]:
    """The arguments laid out one after another, each at its alignment, their offsets and
    their sizes."""
    packed = bytearray()
    offsets = []
    sizes = []
    for position, arg in enumerate(args):
        address = _array_address(arg, position)
        data, alignment = (address.to_bytes(_POINTER, sys.byteorder), _POINTER) if address is not None \
            else _scalar_bytes(arg, position)
        packed.extend(b"\0" * (-len(packed) % alignment))
        offsets.append(len(packed))
        sizes.append(len(data))
        packed.extend(data)
    return bytes(packed) or b"\0", tuple(offsets), tuple(sizes)


from .runtime import Runtime  # noqa: E402  (circular, as at the end of runtime.py: annotations name Runtime)
