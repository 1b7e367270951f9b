"""Loads the C extension (``jitops._C``) and, through it, libjitops.

libjitops needs NVRTC and cuBLASLt. A wheel finds them where it was built (the CUDA
toolkit's library folder) or wherever the dynamic loader looks; if neither has them, the
copies that pip-installed NVIDIA packages carry (PyTorch depends on them) are preloaded.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
from types import ModuleType
from typing import TYPE_CHECKING

from . import errors

_NEEDED = ("libnvrtc.so", "libcublasLt.so")


def _preload_from_pip_packages() -> bool:
    """Loads NVRTC and cuBLASLt from site-packages/nvidia/*; True when both were found."""
    found = 0
    for name in _NEEDED:
        for root in sys.path:
            candidates = sorted(glob.glob(os.path.join(root, "nvidia", "**", name + ".*"), recursive=True))
            if candidates:
                ctypes.CDLL(candidates[-1], mode=ctypes.RTLD_GLOBAL)
                found += 1
                break
    return found == len(_NEEDED)


def _load() -> ModuleType:
    try:
        from . import _C
    except ImportError as error:
        if not any(name in str(error) for name in _NEEDED) or not _preload_from_pip_packages():
            raise
        from . import _C
    _C._set_error_classes(errors.BY_STATUS)
    return _C


if TYPE_CHECKING:  # what _load returns, as its stub (_C.pyi) describes it
    from . import _C as C
else:
    C = _load()
