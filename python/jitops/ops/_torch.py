"""What every torch op of jitops shares: the operator library, each device's runtime and
current stream, workspaces from torch's caching allocator, validation of fake tensors, and
the registration of one op (its CUDA kernel, its fake kernel, its autograd formula).

Why ``torch.library.Library`` rather than the ``torch.library.custom_op`` decorator: both
register the same things with the dispatcher (a schema tagged pt2_compliant, a CUDA kernel,
a fake kernel, an autograd kernel), and ``opcheck``, FakeTensor and torch.compile treat them
alike. But custom_op wraps each kernel in Python layers of its own (device routing, an alias
check, a dynamo guard), measured at about 7 us per call on top of the dispatcher's 1.5 us; an
op that the GPU finishes in 10 us cannot afford that. So each op is defined with
``Library.define``, ``Library.impl(..., "CUDA")``, ``torch.library.register_fake`` and
``torch.library.register_autograd``: what custom_op does, without the wrappers.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional

import torch

from .. import errors
from .._lib import C
from ..runtime import Runtime

NAMESPACE = "jitops"
library = torch.library.Library(NAMESPACE, "DEF")

# DLPack (code, bits) of each torch dtype that can reach the library (the library decides
# which it takes, and says so naming the argument).
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
        torch.bool: (6, 8),
        torch.complex64: (5, 64),
        torch.complex128: (5, 128),
    }
)


def _allocate_workspace(nbytes: int, device: int) -> torch.Tensor:
    # torch's caching allocator, on the current stream: torch.cuda.max_memory_allocated sees
    # it, graphs capture it, and its reuse is ordered after the op on that stream.
    return torch.empty(nbytes, dtype=torch.uint8, device=torch.device("cuda", device))


C._set_workspace_allocator(_allocate_workspace)

RUN, VALIDATE = 0, 1

# ---- runtimes and streams -------------------------------------------------------------------

_handles: dict[int, int] = {}
_handles_lock = threading.Lock()

try:
    _raw_stream: Callable[[int], int] = torch._C._cuda_getCurrentRawStream  # what Inductor calls
except AttributeError:  # pragma: no cover  (older or newer torch)

    def _raw_stream(index: int) -> int:
        return torch.cuda.current_stream(index).cuda_stream


def runtime_handle(index: int) -> int:
    """The C runtime of device ``index``: the shared :class:`jitops.Runtime` of that device."""
    handle = _handles.get(index)
    if handle is None:
        with _handles_lock:
            handle = _handles.setdefault(index, Runtime(index).handle)
    return handle


def launch_on(tensor: torch.Tensor) -> tuple[int, int]:
    """(runtime, stream) for an op whose main tensor is ``tensor``: the tensor's device, and
    torch's current stream on that device."""
    index = tensor.get_device()
    return runtime_handle(index), _raw_stream(index)


_validation: Optional[Runtime] = None


def validation_runtime() -> int:
    """A compile-only runtime (no disk tier) on which fake kernels validate arguments: the
    first GPU's architecture, or sm_90 without one."""
    global _validation
    if _validation is None:
        with _handles_lock:
            if _validation is None:
                arch = "sm_90"
                if torch.cuda.is_available():
                    major, minor = torch.cuda.get_device_capability(0)
                    arch = f"sm_{major}{minor}"
                _validation = Runtime(arch=arch, cache_mode="off")
    return _validation.handle


def _renamed(error: errors.Error, op: str) -> errors.Error:
    """The library's error with the op's Python name in front: its messages begin with the C
    entry point ("jitops_scan_workspace_size: x has ..."), which a Python caller never called."""
    message = str(error)
    if message.startswith("jitops_") and ": " in message:
        message = message.split(": ", 1)[1]
    return type(error)(f"jitops.{op}: {message}")


def static(values) -> bool:
    """Whether a list of sizes holds plain ints (not torch.compile's symbolic sizes, which
    validation must not read)."""
    return all(type(v) is int for v in values)


def call(validate: bool, op: str, function: Callable[..., Any], tensor: torch.Tensor, *args: Any) -> None:
    """Calls a C op function (``jitops._C.scan``, say) as the op ``op``.

    For real tensors it runs on ``tensor``'s device and torch's current stream there. For fake
    tensors (``validate``) it only checks dtypes, shapes and layouts, as the real call would,
    on a compile-only runtime; sizes that are symbolic skip the check. Either way a bad
    argument raises the library's exception, with the op's Python name in front."""
    try:
        if validate:
            function(VALIDATE, validation_runtime(), *args, 0)
        else:
            runtime, stream = launch_on(tensor)
            function(RUN, runtime, *args, stream)
    except errors.Error as error:
        raise _renamed(error, op) from None


# ---- registration ---------------------------------------------------------------------------


def _reject_host_tensors(name: str) -> Callable[..., Any]:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        where = next(
            (f"argument {i}" for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.device.type == "cpu"),
            "an argument",
        )
        raise errors.InvalidDeviceError(
            f"jitops.{name}: {where} is a CPU tensor; jitops ops run on CUDA tensors"
        )

    return kernel


def define(
    schema: str,
    cuda: Callable[..., Any],
    fake: Callable[..., Any],
    backward: Optional[Callable[..., Any]] = None,
    setup_context: Optional[Callable[..., Any]] = None,
) -> torch._ops.OpOverload:
    """Defines ``jitops::<schema>`` with its CUDA kernel, its fake kernel (shapes, dtypes and
    validation, for FakeTensor, meta tensors and torch.compile) and, when given, its autograd
    formula. Returns the op's default overload, which the public functions call."""
    name = schema.split("(", 1)[0]
    qualified = f"{NAMESPACE}::{name}"
    library.define(schema, tags=(torch.Tag.pt2_compliant_tag,))
    library.impl(name, cuda, "CUDA")
    library.impl(name, _reject_host_tensors(name), "CPU")
    torch.library.register_fake(qualified, fake, lib=library)
    if backward is not None:
        torch.library.register_autograd(qualified, backward, setup_context=setup_context, lib=library)
    return getattr(getattr(torch.ops, NAMESPACE), name).default


def reduction_code(reduction: str, codes: dict[str, int], op: str) -> int:
    code = codes.get(reduction)
    if code is None:
        raise errors.InvalidArgumentError(
            f"jitops.{op}: reduction must be one of {', '.join(repr(k) for k in codes)}; got {reduction!r}"
        )
    return code
