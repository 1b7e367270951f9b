"""Segment reductions with TensorFlow's semantics (``include/jitops/segment.h``):
``out[s] = reduce{data[i] : segment_ids[i] == s}`` for ``s`` in ``[0, num_segments)``.

Rows with a negative id, or an id >= num_segments, are dropped (``return_dropped=True``
also returns how many ids were >= num_segments, as a 0-d int64 tensor on the device).
Empty segments give 0 (sum, mean) or ``fill`` (max, min; default the dtype's lowest for max
and highest for min, as TensorFlow). ``sorted=True`` promises non-decreasing ids and takes a
faster path. Results and gradients are bit-identical from run to run: no floating-point
atomics. The max/min gradient splits among ties, as TensorFlow does.

``num_segments`` is required: inferring it (``ids.max() + 1``) would synchronize the host with
the GPU on every call.
"""

from __future__ import annotations

from typing import Optional, Union

import torch

from .. import errors
from .._lib import C
from . import _torch

_CODES = {"sum": 0, "mean": 1, "max": 2, "min": 3}
_ALGORITHM_AUTO = 0


def _output(data: torch.Tensor, num_segments: int) -> torch.Tensor:
    if data.dim() < 1:
        raise errors.InvalidShapeError("jitops.segment_reduce: data must have rank >= 1 (rows first)")
    return data.new_empty((num_segments, *data.shape[1:]))


def _forward(data, segment_ids, num_segments, reduction, sorted, fill, dropped, validate):
    out = _output(data, num_segments)
    args = (_CODES[reduction], data, segment_ids, num_segments, out, sorted, fill, dropped, _ALGORITHM_AUTO)
    if not validate or _torch.static([num_segments]):
        _torch.call(validate, f"segment_{reduction}", C.segment_reduce, data, *args)
    return out


def _counted(data, segment_ids, num_segments, reduction, sorted, fill, validate):
    dropped = torch.zeros((), dtype=torch.int64, device=data.device)
    return _forward(data, segment_ids, num_segments, reduction, sorted, fill, dropped, validate), dropped


def _backward_op(grad, data, out, segment_ids, data_shape, num_segments, reduction, sorted, validate):
    grad_data = grad.new_empty(data_shape)
    args = (_CODES[reduction], grad, data, out, segment_ids, num_segments, grad_data, sorted, False)
    if not validate or _torch.static([num_segments, *data_shape]):
        _torch.call(validate, f"segment_{reduction}_backward", C.segment_reduce_backward, grad, *args)
    return grad_data


_segment_reduce_backward = _torch.define(
    "segment_reduce_backward(Tensor grad, Tensor? data, Tensor? out, Tensor segment_ids, SymInt[] data_shape, "
    "SymInt num_segments, str reduction, bool sorted) -> Tensor",
    lambda *a: _backward_op(*a, validate=False),
    lambda *a: _backward_op(*a, validate=True),
)


def _setup_context(ctx, inputs, output):
    data, segment_ids, num_segments, reduction, sorted = inputs[:5]
    out = output[0] if isinstance(output, tuple) else output
    keeps_values = reduction in ("max", "min")
    ctx.save_for_backward(segment_ids, data if keeps_values else None, out if keeps_values else None)
    ctx.data_shape, ctx.num_segments, ctx.reduction, ctx.sorted = list(data.shape), num_segments, reduction, sorted
    if isinstance(output, tuple):
        ctx.mark_non_differentiable(output[1])


def _backward(ctx, grad, *unused):
    segment_ids, data, out = ctx.saved_tensors
    # The library reads rows of grad whole (compact trailing dims); autograd may hand over an
    # expanded one (the backward of a sum is a stride-0 view).
    grad_data = _segment_reduce_backward(grad.contiguous(), data, out, segment_ids, ctx.data_shape,
                                         ctx.num_segments, ctx.reduction, ctx.sorted)
    return (grad_data,) + (None,) * 5


_SCHEMA_ARGS = "Tensor data, Tensor segment_ids, SymInt num_segments, str reduction, bool sorted, float? fill"
_segment_reduce = _torch.define(
    f"segment_reduce({_SCHEMA_ARGS}) -> Tensor",
    lambda *a: _forward(*a, None, False),
    lambda *a: _forward(*a, None, True),
    _backward,
    _setup_context,
)
_segment_reduce_counted = _torch.define(
    f"segment_reduce_counted({_SCHEMA_ARGS}) -> (Tensor out, Tensor dropped)",
    lambda *a: _counted(*a, False),
    lambda *a: _counted(*a, True),
    _backward,
    _setup_context,
)


def segment_reduce(data: torch.Tensor, segment_ids: torch.Tensor, num_segments: int, reduction: str, *,
                   sorted: bool = False, fill: Optional[float] = None,
                   return_dropped: bool = False) -> Union[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """The ``reduction`` ("sum", "mean", "max" or "min") of the rows of ``data`` ([N, ...],
    f32, f64, f16 or bf16) grouped by ``segment_ids`` ([N], int32 or int64, on the device or
    the host); see the module's documentation."""
    _torch.reduction_code(reduction, _CODES, "segment_reduce")
    if fill is not None and reduction not in ("max", "min"):
        raise errors.InvalidArgumentError("jitops.segment_reduce: fill applies to max and min only")
    op = _segment_reduce_counted if return_dropped else _segment_reduce
    return op(data, segment_ids, num_segments, reduction, sorted, fill)


def segment_sum(data, segment_ids, num_segments, *, sorted=False, return_dropped=False):
    """``tf.math.unsorted_segment_sum`` (``tf.math.segment_sum`` with ``sorted=True``)."""
    return segment_reduce(data, segment_ids, num_segments, "sum", sorted=sorted, return_dropped=return_dropped)


def segment_mean(data, segment_ids, num_segments, *, sorted=False, return_dropped=False):
    """``tf.math.unsorted_segment_mean``: the sum over the segment's row count; 0 when empty."""
    return segment_reduce(data, segment_ids, num_segments, "mean", sorted=sorted, return_dropped=return_dropped)


def segment_max(data, segment_ids, num_segments, *, sorted=False, fill=None, return_dropped=False):
    """``tf.math.unsorted_segment_max``; empty segments get ``fill`` (default: the lowest value)."""
    return segment_reduce(data, segment_ids, num_segments, "max", sorted=sorted, fill=fill,
                          return_dropped=return_dropped)


def segment_min(data, segment_ids, num_segments, *, sorted=False, fill=None, return_dropped=False):
    """``tf.math.unsorted_segment_min``; empty segments get ``fill`` (default: the highest value)."""
    return segment_reduce(data, segment_ids, num_segments, "min", sorted=sorted, fill=fill,
                          return_dropped=return_dropped)
