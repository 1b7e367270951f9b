"""``Tensor.repeat`` and its backward (``include/jitops/repeat.h``): the forward copies bits;
the backward sums each element's copies in one fixed order, in f32 for 16-bit floats, so it
is bit-identical from run to run (PyTorch's backward sums with a reduction whose order it
does not promise)."""

from __future__ import annotations

from typing import Sequence, Union

import torch

from .. import _direct, errors
from .._lib import C
from . import _torch


def _repeated_shape(x: torch.Tensor, repeats: Sequence[_torch.SymInt]) -> list[_torch.SymInt]:
    if len(repeats) < x.dim():
        raise errors.InvalidShapeError(
            f"jitops.repeat: {len(repeats)} repeats for a tensor of rank {x.dim()}; give at least one per dimension"
        )
    if any(r < 0 for r in repeats):
        raise errors.OutOfRangeError(f"jitops.repeat: repeats {list(repeats)} has a negative count")
    padded = [1] * (len(repeats) - x.dim()) + list(x.shape)
    return [size * count for size, count in zip(padded, repeats)]


@_torch.fake("repeat")
def _fake_repeat(x: torch.Tensor, repeats: Sequence[_torch.SymInt]) -> torch.Tensor:
    y = x.new_empty(_repeated_shape(x, repeats))
    if _torch.static(repeats):
        _torch.validate("repeat", C.repeat, x, list(repeats), y)
    return y


@_torch.fake("repeat_backward")
def _fake_repeat_backward(grad: torch.Tensor, repeats: Sequence[_torch.SymInt], input_shape: Sequence[_torch.SymInt]
                          ) -> torch.Tensor:
    grad_x = grad.new_empty(input_shape)
    if _torch.static(repeats):
        _torch.validate("repeat_backward", C.repeat_backward, grad, list(repeats), grad_x)
    return grad_x


_OP = torch.ops.jitops.repeat.default


def repeat(x: torch.Tensor, *sizes: Union[int, Sequence[int]]) -> torch.Tensor:
    """``x.repeat(*sizes)``: ``sizes`` as separate ints or one sequence, at least one per
    dimension of ``x`` (leading ones pad ``x``'s shape), at most 8. Any dtype the library
    takes (floats, int32, int64) forward; floats backward."""
    repeats = list(sizes[0]) if len(sizes) == 1 and not isinstance(sizes[0], int) else list(sizes)
    return _torch.call(_OP, _direct.repeat, x, repeats)
