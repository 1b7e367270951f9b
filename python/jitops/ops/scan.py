"""Prefix scans along one dimension (``include/jitops/scan.h``): cumsum, cumprod, cummax,
cummin and logcumsumexp, each with ``reverse``, and their backward passes.

Results match ``torch.cumsum`` and friends (ties in cummax/cummin take the later index, NaN
propagates with its own index) and are bit-identical from run to run. Floats of 16 bits
accumulate in f32. cumsum and cumprod also take int32 and int64. Tensors have rank 0 to 8.
"""

from __future__ import annotations

from typing import Optional, Union

import torch

from .. import _direct
from .._lib import C
from . import _torch

_CODES = {"cumsum": 0, "cumprod": 1, "cummax": 2, "cummin": 3, "logcumsumexp": 4}

_Values = Union[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]  # cummax and cummin: (values, indices)


def _rank1(t: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    # The library scans tensors of rank >= 1; a 0-d tensor is its own one-element scan.
    return t.reshape(1) if t is not None and t.dim() == 0 else t


def _fake_scan(op: str, x: torch.Tensor, dim: int, reverse: bool) -> _Values:
    y = torch.empty_like(x)
    indices = torch.empty_like(x, dtype=torch.int64) if op in ("cummax", "cummin") else None
    _torch.validate(op, C.scan, _CODES[op], _rank1(x), dim, reverse, _rank1(y), _rank1(indices))
    return y if indices is None else (y, indices)


for _op in _CODES:
    def _fake_values(x: torch.Tensor, dim: int, reverse: bool = False, _op: str = _op) -> _Values:
        return _fake_scan(_op, x, dim, reverse)

    _torch.fake(_op)(_fake_values)


@_torch.fake("scan_backward")
def _fake_backward(op: str, grad: torch.Tensor, x: Optional[torch.Tensor], y: Optional[torch.Tensor],
                   indices: Optional[torch.Tensor], dim: int, reverse: bool) -> torch.Tensor:
    grad_x = torch.empty_like(grad)
    _torch.validate(f"{op}_backward", C.scan_backward, _CODES[op], _rank1(grad), _rank1(x), _rank1(y),
                    _rank1(indices), dim, reverse, _rank1(grad_x))
    return grad_x


_jops = torch.ops.jitops
_CUMSUM, _CUMPROD, _CUMMAX, _CUMMIN, _LOGCUMSUMEXP = (
    _jops.cumsum.default, _jops.cumprod.default, _jops.cummax.default, _jops.cummin.default,
    _jops.logcumsumexp.default)


def cumsum(x: torch.Tensor, dim: int, *, reverse: bool = False) -> torch.Tensor:
    """Cumulative sum of ``x`` along ``dim`` (from the end with ``reverse``), like
    ``torch.cumsum``; the output has ``x``'s dtype. Floats, int32 and int64."""
    return _torch.call(_CUMSUM, _direct.cumsum, x, dim, reverse)


def cumprod(x: torch.Tensor, dim: int, *, reverse: bool = False) -> torch.Tensor:
    """Cumulative product along ``dim``, like ``torch.cumprod``; its backward is exact at
    zeros (no division by x)."""
    return _torch.call(_CUMPROD, _direct.cumprod, x, dim, reverse)


def cummax(x: torch.Tensor, dim: int, *, reverse: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Running maximum and its int64 indices along ``dim``, like ``torch.cummax``."""
    return _torch.call(_CUMMAX, _direct.cummax, x, dim, reverse)


def cummin(x: torch.Tensor, dim: int, *, reverse: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Running minimum and its int64 indices along ``dim``, like ``torch.cummin``."""
    return _torch.call(_CUMMIN, _direct.cummin, x, dim, reverse)


def logcumsumexp(x: torch.Tensor, dim: int, *, reverse: bool = False) -> torch.Tensor:
    """``log(cumsum(exp(x)))`` along ``dim``, computed stably, like ``torch.logcumsumexp``."""
    return _torch.call(_LOGCUMSUMEXP, _direct.logcumsumexp, x, dim, reverse)
