"""What the torch ops of jitops share: loading the torch layer, the runtime it uses on each
device, the fake kernels' registration and argument checks, and the mapping of its errors to
jitops' exception classes.

The ops themselves (schemas, CUDA kernels, autograd formulas) are C++, in libjitops_torch
(python/torch/): a Python kernel costs tens of microseconds a call in dispatch, autograd and
allocation (measured on an H100 host: 33 us where the C call takes 5), which is more than
many of these ops take on the GPU. Their fake kernels (shapes and dtypes for FakeTensor, meta
tensors and torch.compile) are here, and run the library's own validation on a compile-only
runtime, so a bad call fails while tracing with the error the real call would raise.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from typing import Any, Callable, Iterable, Iterator, Optional, TypeVar, Union

import torch
from torch.compiler import is_compiling

from .. import _direct, errors
from .. import runtime as runtime_module
from .._lib import C
from ..runtime import Runtime


def _load_torch_layer() -> None:
    from .. import _torch_build

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(here, "libjitops_torch.so")
    built_for: Optional[str] = _torch_build.TORCH_VERSION  # _torch_build: written by the build, untyped
    if built_for is None or not os.path.exists(path):
        raise ImportError(
            "jitops was built without PyTorch (the torch layer needs it at build time): "
            "reinstall it in this environment, `pip install --force-reinstall --no-deps <jitops source>`"
        )
    if torch.__version__ != built_for:
        raise ImportError(
            f"jitops's torch layer was built against torch {built_for}, and this is torch {torch.__version__}: "
            "reinstall jitops in this environment (`pip install --force-reinstall --no-deps <jitops source>`)"
        )
    torch.ops.load_library(path)
    # The torch layer asks this process's shared jitops.Runtime of a device for its runtime,
    # so that the ops and the JIT service share one kernel registry per device.
    C._set_runtime_provider(lambda device: Runtime(device).handle)
    layer = ctypes.CDLL(path)
    layer.jitops_torch_set_runtime_provider(ctypes.c_void_p(C.runtime_provider_address()))
    # The layer keeps each device's runtime pointer; at exit it must drop them before the
    # shared runtimes are destroyed (an op may still be called later in the exit).
    runtime_module.before_shared_runtimes_close.append(layer.jitops_torch_forget_runtimes)


_load_torch_layer()

# The direct entries, told the exact types of a plain tensor and of the default-device mode
# (torch.set_default_device), which they see through; they stay off (declining every call)
# unless their view of torch's tensor object matches this torch's.
_DeviceContext: Optional[type]
try:
    from torch.utils._device import DeviceContext as _DeviceContext
except ImportError:  # another torch: every TorchFunctionMode goes through torch.ops
    _DeviceContext = None
_sample = torch.empty(0)
DIRECT = _direct._init(torch.Tensor, torch.nn.Parameter, _sample, _sample._cdata, _DeviceContext)
del _sample

# DLPack (code, bits) of each torch dtype, for the fake kernels' validation and the benchmarks'
# direct calls of jitops._C (the library decides which dtypes it takes, naming the argument).
C._set_dtype_table(
    {
        torch.float16: (2, 16),
        torch.bfloat16: (4, 16),
        torch.float32: (2, 32),
        torch.float64: (2, 64),
        torch.int8: (0, 8),
        torch.int16: (0, 16),
        torch.int32: (0, 32),
        torch.int64: (0, 64),
        torch.uint8: (1, 8),
    }
)
C._set_workspace_allocator(
    lambda nbytes, device: torch.empty(nbytes, dtype=torch.uint8, device=torch.device("cuda", device))
)

RUN, VALIDATE, SIZE = 0, 1, 2

# ---- errors ---------------------------------------------------------------------------------

_PREFIX = "[jitops:"


def mapped(error: BaseException) -> BaseException:
    """The jitops exception for an error of the torch layer, whose message starts
    "[jitops:<status>] " (PyTorch raises it as a ValueError, TypeError, ...); any other error
    as it is."""
    message = str(error)
    if not message.startswith(_PREFIX):
        return error
    status, _, text = message[len(_PREFIX):].partition("] ")
    cls = errors.BY_STATUS[int(status)] if status.isdigit() and int(status) < len(errors.BY_STATUS) else errors.Error
    return cls(text)


def call(op: Callable[..., Any], direct: Callable[..., Any], *args: Any) -> Any:
    """``op(*args)``, ``op`` an operator of ``torch.ops.jitops``, with the torch layer's errors
    as jitops' exception classes. ``direct`` is the op's entry in jitops._direct, which makes the
    same call for less (it skips torch.ops' argument matching in Python and pybind11) or
    declines it, returning NotImplemented (see python/torch/direct/direct.h). While
    torch.compile traces, only ``op`` is called: it is what the graph records."""
    try:
        if not is_compiling():
            out = direct(*args)
            if out is not NotImplemented:
                return out
        return op(*args)
    except (RuntimeError, ValueError, TypeError) as error:
        raise mapped(error) from None


def call_direct(direct: Callable[..., Any], *args: Any) -> Any:
    """``direct(*args)``, an entry of jitops._direct, with the torch layer's errors as jitops'
    exception classes; NotImplemented when it declines the call, or while torch.compile traces
    (the caller then calls the op through :func:`call`). For an entry that takes other arguments
    than its op (FLCE's reads autograd's wants itself)."""
    if is_compiling():
        return NotImplemented
    try:
        return direct(*args)
    except (RuntimeError, ValueError, TypeError) as error:
        raise mapped(error) from None


def declined(*args: Any) -> Any:
    """A direct entry that declines every call: what :func:`call` is given after
    :func:`call_direct` has tried the op's own entry."""
    return NotImplemented


def direct_entries(enabled: bool) -> bool:
    """Turns the direct entries on (the default, where torch's tensor layout was verified) or
    off, so that every call goes through torch.ops; returns whether they were on. For tests and
    benchmarks, which compare the two paths."""
    return _direct.enable(enabled)


@contextlib.contextmanager
def dispatcher_path() -> Iterator[None]:
    """Within it, every jitops.ops call goes through torch.ops (the direct entries off), as
    before the entries existed; for tests and benchmarks that compare the two paths."""
    was = direct_entries(False)
    try:
        yield
    finally:
        direct_entries(was)


def direct_counts() -> tuple[int, int]:
    """How many calls the direct entries made, and how many they declined (for tests)."""
    return _direct.counts()


# ---- fake kernels ---------------------------------------------------------------------------


_Function = TypeVar("_Function", bound=Callable[..., Any])

#: A ``SymInt`` argument of an op's schema, as a fake kernel gets it: an int, or a symbolic size while torch.compile
#: traces with dynamic shapes.
SymInt = Union[int, torch.SymInt]


def fake(name: str) -> Callable[[_Function], _Function]:
    """Registers the decorated function as the fake kernel of ``jitops::<name>``."""

    def register(function: _Function) -> _Function:
        torch.library.register_fake(f"jitops::{name}", function)
        return function

    return register


_validation: Optional[Runtime] = None
_validation_lock = threading.Lock()


def _validation_runtime() -> int:
    """A compile-only runtime (no disk tier) on which fake kernels validate arguments: the
    first GPU's architecture, or sm_90 without one."""
    global _validation
    with _validation_lock:
        if _validation is None:
            arch = "sm_90"
            if torch.cuda.is_available():
                major, minor = torch.cuda.get_device_capability(0)
                arch = f"sm_{major}{minor}"
            _validation = Runtime(arch=arch, cache_mode="off")
    return _validation.handle


def static(values: Iterable[object]) -> bool:
    """Whether a list of sizes holds plain ints (not torch.compile's symbolic sizes, which
    validation must not read)."""
    return all(type(v) is int for v in values)


def validate(op: str, function: Callable[..., Any], *args: Any) -> None:
    """Checks fake tensors' dtypes, shapes and layouts with a jitops._C op function, as the
    real call would, raising its exception with the op's name (skipped for symbolic sizes)."""
    try:
        function(VALIDATE, _validation_runtime(), *args, 0)
    except errors.Error as error:
        message = str(error)
        if message.startswith("jitops_") and ": " in message:
            message = message.split(": ", 1)[1]
        raise type(error)(f"jitops.{op}: {message}") from None


def reduction_code(reduction: str, codes: dict[str, int], op: str) -> int:
    code = codes.get(reduction)
    if code is None:
        raise errors.InvalidArgumentError(
            f"jitops.{op}: reduction must be one of {', '.join(repr(k) for k in codes)}; got {reduction!r}"
        )
    return code
