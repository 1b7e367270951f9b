"""``Tensor.repeat`` and its backward (``include/jitops/repeat.h``): the forward copies bits;
the backward sums each element's copies in one fixed order, in f32 for 16-bit floats, so it
is bit-identical from run to run (PyTorch's backward sums with a reduction whose order it
does not promise)."""

from __future__ import annotations

from typing import Sequence

import torch

from .. import errors
from .._lib import C
from . import _torch


def _repeated_shape(x: torch.Tensor, repeats: Sequence[int]) -> list[int]:
    if len(repeats) < x.dim():
        raise errors.InvalidShapeError(
            f"jitops.repeat: {len(repeats)} repeats for a tensor of rank {x.dim()}; give at least one per dimension"
        )
    padded = [1] * (len(repeats) - x.dim()) + list(x.shape)
    return [size * count for size, count in zip(padded, repeats)]


def _forward(x: torch.Tensor, repeats: Sequence[int], validate: bool) -> torch.Tensor:
    if any(r < 0 for r in repeats):  # before the shape, which a negative count would make nonsense
        raise errors.OutOfRangeError(f"jitops.repeat: repeats {list(repeats)} has a negative count")
    y = x.new_empty(_repeated_shape(x, repeats))
    if not validate or _torch.static(repeats):
        _torch.call(validate, "repeat", C.repeat, x, x, list(repeats), y)
    return y


def _backward_op(grad: torch.Tensor, repeats: Sequence[int], input_shape: Sequence[int], validate: bool):
    grad_x = grad.new_empty(input_shape)
    if not validate or _torch.static(repeats):
        _torch.call(validate, "repeat_backward", C.repeat_backward, grad, grad, list(repeats), grad_x)
    return grad_x


_repeat_backward = _torch.define(
    "repeat_backward(Tensor grad, SymInt[] repeats, SymInt[] input_shape) -> Tensor",
    lambda grad, repeats, input_shape: _backward_op(grad, repeats, input_shape, False),
    lambda grad, repeats, input_shape: _backward_op(grad, repeats, input_shape, True),
)


def _setup_context(ctx, inputs, output):
    x, repeats = inputs
    ctx.repeats, ctx.input_shape = list(repeats), list(x.shape)


def _backward(ctx, grad):
    return _repeat_backward(grad, ctx.repeats, ctx.input_shape), None


_repeat = _torch.define(
    "repeat(Tensor x, SymInt[] repeats) -> Tensor",
    lambda x, repeats: _forward(x, repeats, False),
    lambda x, repeats: _forward(x, repeats, True),
    _backward,
    _setup_context,
)


def repeat(x: torch.Tensor, *sizes) -> torch.Tensor:
    """``x.repeat(*sizes)``: ``sizes`` as separate ints or one sequence, at least one per
    dimension of ``x`` (leading ones pad ``x``'s shape), at most 8. Any dtype the library
    takes (floats, int32, int64) forward; floats backward."""
    repeats = list(sizes[0]) if len(sizes) == 1 and not isinstance(sizes[0], int) else list(sizes)
    return _repeat(x, repeats)
