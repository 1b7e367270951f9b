"""Prefix scans along one dimension (``include/jitops/scan.h``): cumsum, cumprod, cummax,
cummin and logcumsumexp, each with ``reverse``, and their backward passes.

Results match ``torch.cumsum`` and friends (ties in cummax/cummin take the later index, NaN
propagates with its own index) and are bit-identical from run to run. Floats of 16 bits
accumulate in f32. cumsum and cumprod also take int32 and int64. Tensors have rank 0 to 8.
"""

from __future__ import annotations

from typing import Optional

import torch

from .._lib import C
from . import _torch

_CODES = {"cumsum": 0, "cumprod": 1, "cummax": 2, "cummin": 3, "logcumsumexp": 4}
# The saved forward tensors each backward reads.
_SAVES = {"cumsum": (), "cumprod": ("x", "y"), "cummax": ("indices",), "cummin": ("indices",),
          "logcumsumexp": ("x", "y")}


def _as_rank1(x: torch.Tensor) -> torch.Tensor:
    # The library scans tensors of rank >= 1; a 0-d tensor is its own one-element scan.
    return x.reshape(1) if x.dim() == 0 else x


# ---- the backward op ------------------------------------------------------------------------


def _backward_op(op, grad, x, y, indices, dim, reverse, validate):
    grad_x = torch.empty_like(grad)
    _torch.call(validate, f"{op}_backward", C.scan_backward, grad, _CODES[op], _as_rank1(grad), _opt_rank1(x),
                _opt_rank1(y), _opt_rank1(indices), dim, reverse, _as_rank1(grad_x))
    return grad_x


def _opt_rank1(t: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    return None if t is None else _as_rank1(t)


_scan_backward = _torch.define(
    "scan_backward(str op, Tensor grad, Tensor? x, Tensor? y, Tensor? indices, int dim, bool reverse) -> Tensor",
    lambda *a: _backward_op(*a, validate=False),
    lambda *a: _backward_op(*a, validate=True),
)

# ---- the forward ops ------------------------------------------------------------------------


def _forward(op: str, x: torch.Tensor, dim: int, reverse: bool, validate: bool):
    y = torch.empty_like(x)
    indices = torch.empty_like(x, dtype=torch.int64) if op in ("cummax", "cummin") else None
    args = (_CODES[op], _as_rank1(x), dim, reverse, _as_rank1(y), _opt_rank1(indices))
    _torch.call(validate, op, C.scan, x, *args)
    return y if indices is None else (y, indices)


def _setup_context(op: str):
    saves = _SAVES[op]

    def setup_context(ctx, inputs, output):
        x, dim, reverse = inputs
        y, indices = (output, None) if not isinstance(output, tuple) else output
        named = {"x": x, "y": y, "indices": indices}
        ctx.save_for_backward(*(named[name] for name in saves))
        ctx.dim, ctx.reverse = dim, reverse
        if indices is not None:
            ctx.mark_non_differentiable(indices)

    return setup_context


def _backward(op: str):
    saves = _SAVES[op]

    def backward(ctx, grad, *unused):
        named = dict(zip(saves, ctx.saved_tensors))
        grad_x = _scan_backward(op, grad, named.get("x"), named.get("y"), named.get("indices"), ctx.dim, ctx.reverse)
        return grad_x, None, None

    return backward


def _define_forward(op: str):
    returns = "(Tensor values, Tensor indices)" if op in ("cummax", "cummin") else "Tensor"
    return _torch.define(
        f"{op}(Tensor x, int dim, bool reverse=False) -> {returns}",
        lambda x, dim, reverse=False: _forward(op, x, dim, reverse, False),
        lambda x, dim, reverse=False: _forward(op, x, dim, reverse, True),
        _backward(op),
        _setup_context(op),
    )


_ops = {op: _define_forward(op) for op in _CODES}
_cumsum, _cumprod, _cummax, _cummin, _logcumsumexp = (_ops[op] for op in _CODES)


def cumsum(x: torch.Tensor, dim: int, *, reverse: bool = False) -> torch.Tensor:
    """Cumulative sum of ``x`` along ``dim`` (from the end with ``reverse``), like
    ``torch.cumsum``; the output has ``x``'s dtype. Floats, int32 and int64."""
    return _cumsum(x, dim, reverse)


def cumprod(x: torch.Tensor, dim: int, *, reverse: bool = False) -> torch.Tensor:
    """Cumulative product along ``dim``, like ``torch.cumprod``; its backward is exact at
    zeros (no division by x)."""
    return _cumprod(x, dim, reverse)


def cummax(x: torch.Tensor, dim: int, *, reverse: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Running maximum and its int64 indices along ``dim``, like ``torch.cummax``."""
    return _cummax(x, dim, reverse)


def cummin(x: torch.Tensor, dim: int, *, reverse: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Running minimum and its int64 indices along ``dim``, like ``torch.cummin``."""
    return _cummin(x, dim, reverse)


def logcumsumexp(x: torch.Tensor, dim: int, *, reverse: bool = False) -> torch.Tensor:
    """``log(cumsum(exp(x)))`` along ``dim``, computed stably, like ``torch.logcumsumexp``."""
    return _logcumsumexp(x, dim, reverse)
