"""jitops: GPU operations whose CUDA kernels are compiled at run time (NVRTC) for the exact
GPU and case, cached in memory and on disk, and launched on the caller's stream.

The top level needs no framework: runtimes, the JIT service (register CUDA C++ source, get a
kernel by name expression, launch it on any framework's arrays), the kernel cache and the
exceptions. With PyTorch installed, ``jitops.ops`` holds the built-in ops as PyTorch custom
ops (``torch.ops.jitops.*``, with autograd and torch.compile support) and ``jitops.nn`` their
modules; both load on first access.

    import jitops, torch
    loss = jitops.ops.ctc_loss(log_probs, targets, input_lengths, target_lengths)
    y = jitops.ops.cumsum(x, dim=1)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import cache, errors
from ._lib import C as _C
from .errors import *  # noqa: F401,F403  (the exception classes, at the top level)
from .jit import Kernel, get_kernel, register_source, stream_handle
from .runtime import Runtime, RuntimeInfo, RuntimeStats

#: The version of the package, which is the version of the libjitops it carries.
__version__: str = _C.version()

_LAZY = ("ops", "nn")

if TYPE_CHECKING:  # what type checkers see for the lazy submodules (at run time: __getattr__ below)
    from . import nn, ops


def __getattr__(name: str) -> Any:
    # jitops.ops and jitops.nn import torch (about a second): only when first used.
    if name in _LAZY:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Runtime",
    "RuntimeInfo",
    "RuntimeStats",
    "Kernel",
    "register_source",
    "get_kernel",
    "stream_handle",
    "cache",
    "errors",
    "ops",
    "nn",
    *errors.__all__,
]
