"""Segment reductions with TensorFlow's semantics (``include/jitops/segment.h``):
``out[s] = reduce{data[i] : segment_ids[i] == s}`` for ``s`` in ``[0, num_segments)``.

Rows with a negative id, or an id >= num_segments, are dropped (``return_dropped=True``
also returns how many ids were >= num_segments, as a 0-d int64 tensor on the device).
Empty segments give 0 (sum, mean) or ``fill`` (max, min; default the dtype's lowest for max
and highest for min, as TensorFlow). ``sorted=True`` promises non-decreasing ids and takes a
faster path. Results and gradients are bit-identical from run to run: no floating-point
atomics. Unsorted sum and mean over rows of at most 8 columns and at least 16384 segments
(f32, f16, bf16) add in 64-bit fixed point, exactly and in any order, after rounding each value
to about 2^-41 of the call's largest |x| (``include/jitops/segment.h``, "Determinism"). The
max/min gradient splits among ties, as TensorFlow does.

``num_segments`` is required: inferring it (``ids.max() + 1``) would synchronize the host with
the GPU on every call.
"""

from __future__ import annotations

from typing import Literal, Optional, Union, overload

import torch

from .. import _direct, errors
from .._lib import C
from . import _torch

_CODES = {"sum": 0, "mean": 1, "max": 2, "min": 3}
_ALGORITHM_AUTO = 0

# With return_dropped=True, (out, dropped): the public functions are overloaded on that literal flag, so that a
# caller's result type follows from it (typing only: a call runs the one function below the overloads).
_Counted = tuple[torch.Tensor, torch.Tensor]


def _fake_reduce(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: _torch.SymInt, reduction: str,
                 sorted: bool, fill: Optional[float], dropped: Optional[torch.Tensor] = None) -> torch.Tensor:
    if data.dim() < 1:
        raise errors.InvalidShapeError(f"jitops.segment_{reduction}: data must have rank >= 1 (rows first)")
    out = data.new_empty((num_segments, *data.shape[1:]))
    if _torch.static([num_segments]):
        _torch.validate(f"segment_{reduction}", C.segment_reduce, _CODES[reduction], data, segment_ids, num_segments,
                        out, sorted, fill, dropped, _ALGORITHM_AUTO)
    return out


@_torch.fake("segment_reduce")
def _fake_segment_reduce(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: _torch.SymInt, reduction: str,
                         sorted: bool, fill: Optional[float]) -> torch.Tensor:
    return _fake_reduce(data, segment_ids, num_segments, reduction, sorted, fill)


@_torch.fake("segment_reduce_counted")
def _fake_segment_reduce_counted(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: _torch.SymInt,
                                 reduction: str, sorted: bool, fill: Optional[float]) -> _Counted:
    dropped = data.new_zeros((), dtype=torch.int64)
    return _fake_reduce(data, segment_ids, num_segments, reduction, sorted, fill, dropped), dropped


@_torch.fake("segment_reduce_backward")
def _fake_segment_reduce_backward(grad: torch.Tensor, data: Optional[torch.Tensor], out: Optional[torch.Tensor],
                                  segment_ids: torch.Tensor, num_segments: _torch.SymInt, reduction: str,
                                  sorted: bool) -> torch.Tensor:
    grad_data = grad.new_empty((segment_ids.shape[0], *grad.shape[1:]))
    if _torch.static([num_segments]):
        _torch.validate(f"segment_{reduction}_backward", C.segment_reduce_backward, _CODES[reduction], grad, data,
                        out, segment_ids, num_segments, grad_data, sorted, False)
    return grad_data


_REDUCE = torch.ops.jitops.segment_reduce.default
_COUNTED = torch.ops.jitops.segment_reduce_counted.default


@overload
def segment_reduce(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: int, reduction: str, *,
                   sorted: bool = False, fill: Optional[float] = None,
                   return_dropped: Literal[False] = False) -> torch.Tensor: ...
@overload
def segment_reduce(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: int, reduction: str, *,
                   sorted: bool = False, fill: Optional[float] = None,
                   return_dropped: Literal[True]) -> _Counted: ...
@overload
def segment_reduce(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: int, reduction: str, *,
                   sorted: bool = False, fill: Optional[float] = None,
                   return_dropped: bool = False) -> Union[torch.Tensor, _Counted]: ...


def segment_reduce(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: int, reduction: str, *,
                   sorted: bool = False, fill: Optional[float] = None,
                   return_dropped: bool = False) -> Union[torch.Tensor, _Counted]:
    """The ``reduction`` ("sum", "mean", "max" or "min") of the rows of ``data`` ([N, ...],
    f32, f64, f16 or bf16) grouped by ``segment_ids`` ([N], int32 or int64, on the device or
    the host); see the module's documentation."""
    if reduction not in _CODES:  # the check costs a call only when it fails
        _torch.reduction_code(reduction, _CODES, "segment_reduce")  # raises, naming the choices
    if fill is not None and reduction not in ("max", "min"):
        raise errors.InvalidArgumentError("jitops.segment_reduce: fill applies to max and min only")
    if return_dropped:
        return _torch.call(_COUNTED, _direct.segment_reduce_counted, data, segment_ids, num_segments, reduction,
                           sorted, fill)
    return _torch.call(_REDUCE, _direct.segment_reduce, data, segment_ids, num_segments, reduction, sorted, fill)


@overload
def segment_sum(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: int, *, sorted: bool = False,
                return_dropped: Literal[False] = False) -> torch.Tensor: ...
@overload
def segment_sum(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: int, *, sorted: bool = False,
                return_dropped: Literal[True]) -> _Counted: ...
@overload
def segment_sum(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: int, *, sorted: bool = False,
                return_dropped: bool = False) -> Union[torch.Tensor, _Counted]: ...


def segment_sum(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: int, *, sorted: bool = False,
                return_dropped: bool = False) -> Union[torch.Tensor, _Counted]:
    """``tf.math.unsorted_segment_sum`` (``tf.math.segment_sum`` with ``sorted=True``)."""
    return segment_reduce(data, segment_ids, num_segments, "sum", sorted=sorted, return_dropped=return_dropped)


@overload
def segment_mean(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: int, *, sorted: bool = False,
                 return_dropped: Literal[False] = False) -> torch.Tensor: ...
@overload
def segment_mean(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: int, *, sorted: bool = False,
                 return_dropped: Literal[True]) -> _Counted: ...
@overload
def segment_mean(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: int, *, sorted: bool = False,
                 return_dropped: bool = False) -> Union[torch.Tensor, _Counted]: ...


def segment_mean(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: int, *, sorted: bool = False,
                 return_dropped: bool = False) -> Union[torch.Tensor, _Counted]:
    """``tf.math.unsorted_segment_mean``: the sum over the segment's row count; 0 when empty."""
    return segment_reduce(data, segment_ids, num_segments, "mean", sorted=sorted, return_dropped=return_dropped)


@overload
def segment_max(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: int, *, sorted: bool = False,
                fill: Optional[float] = None, return_dropped: Literal[False] = False) -> torch.Tensor: ...
@overload
def segment_max(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: int, *, sorted: bool = False,
                fill: Optional[float] = None, return_dropped: Literal[True]) -> _Counted: ...
@overload
def segment_max(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: int, *, sorted: bool = False,
                fill: Optional[float] = None, return_dropped: bool = False) -> Union[torch.Tensor, _Counted]: ...


def segment_max(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: int, *, sorted: bool = False,
                fill: Optional[float] = None, return_dropped: bool = False) -> Union[torch.Tensor, _Counted]:
    """``tf.math.unsorted_segment_max``; empty segments get ``fill`` (default: the lowest value)."""
    return segment_reduce(data, segment_ids, num_segments, "max", sorted=sorted, fill=fill,
                          return_dropped=return_dropped)


@overload
def segment_min(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: int, *, sorted: bool = False,
                fill: Optional[float] = None, return_dropped: Literal[False] = False) -> torch.Tensor: ...
@overload
def segment_min(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: int, *, sorted: bool = False,
                fill: Optional[float] = None, return_dropped: Literal[True]) -> _Counted: ...
@overload
def segment_min(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: int, *, sorted: bool = False,
                fill: Optional[float] = None, return_dropped: bool = False) -> Union[torch.Tensor, _Counted]: ...


def segment_min(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: int, *, sorted: bool = False,
                fill: Optional[float] = None, return_dropped: bool = False) -> Union[torch.Tensor, _Counted]:
    """``tf.math.unsorted_segment_min``; empty segments get ``fill`` (default: the highest value)."""
    return segment_reduce(data, segment_ids, num_segments, "min", sorted=sorted, fill=fill,
                          return_dropped=return_dropped)
