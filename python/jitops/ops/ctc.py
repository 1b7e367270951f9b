"""CTC loss (``include/jitops/ctc.h``) with the signature and results of
``torch.nn.functional.ctc_loss``, plus f16 and bf16 log-probabilities (accumulated in f32,
loss in f32), and an exact, deterministic gradient.

Lengths. ``input_lengths`` and ``target_lengths`` may be sequences of ints or tensors. On the
device (with the targets), nothing is read by the host: the call never synchronizes and can be
captured in a CUDA graph, and an invalid length makes that sample's loss NaN instead of raising.
On the host (a list, or CPU tensors), every length is checked first and a bad one raises
:class:`jitops.OutOfRangeError` naming the sample. With concatenated 1-D targets and device
lengths, pass ``max_target_length`` (the longest target) to size the kernel; otherwise the
targets' total length is assumed, which is safe but slower.

Gradient. ``backward`` computes the true derivative with respect to ``log_probs`` (it passes
``torch.autograd.gradcheck``). PyTorch's own ctc_loss returns ``exp(log_probs) * g - ...``
instead, which equals it only after a ``log_softmax``'s backward: with ``log_probs =
x.log_softmax(-1)``, ``x.grad`` is the same either way.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

import torch

from .. import _direct, errors
from .._lib import C
from . import _torch

_REDUCTIONS = {"none": 0, "sum": 1, "mean": 2}
_GRADIENT_EXACT = 0

Lengths = Union[torch.Tensor, Sequence[int]]


@_torch.fake("ctc_loss")
def _fake_ctc_loss(log_probs: torch.Tensor, targets: torch.Tensor, input_lengths: torch.Tensor,
                   target_lengths: torch.Tensor, blank: int, reduction: str, zero_infinity: bool,
                   max_target_length: int) -> torch.Tensor:
    if log_probs.dim() != 3:
        raise errors.InvalidShapeError(f"jitops.ctc_loss: log_probs has rank {log_probs.dim()}; expected [T, N, C]")
    dtype = torch.float32 if log_probs.dtype in (torch.float16, torch.bfloat16) else log_probs.dtype
    loss = log_probs.new_empty((log_probs.shape[1],) if reduction == "none" else (), dtype=dtype)
    _torch.validate("ctc_loss", C.ctc_loss, log_probs, targets, input_lengths, target_lengths, blank,
                    _torch.reduction_code(reduction, _REDUCTIONS, "ctc_loss"), zero_infinity, max_target_length, loss)
    return loss


@_torch.fake("ctc_loss_backward")
def _fake_ctc_loss_backward(grad: torch.Tensor, log_probs: torch.Tensor, targets: torch.Tensor,
                            input_lengths: torch.Tensor, target_lengths: torch.Tensor, blank: int, reduction: str,
                            zero_infinity: bool, max_target_length: int) -> torch.Tensor:
    grad_log_probs = torch.empty_like(log_probs)
    _torch.validate("ctc_loss_backward", C.ctc_loss_backward, log_probs, targets, input_lengths, target_lengths,
                    blank, _torch.reduction_code(reduction, _REDUCTIONS, "ctc_loss"), zero_infinity,
                    max_target_length, _GRADIENT_EXACT, grad, grad_log_probs, None)
    return grad_log_probs


_OP = torch.ops.jitops.ctc_loss.default


def _lengths(lengths: Lengths, name: str) -> torch.Tensor:
    if isinstance(lengths, torch.Tensor):
        return lengths
    try:
        return torch.tensor(list(lengths), dtype=torch.int64)
    except (TypeError, ValueError, RuntimeError) as error:
        raise errors.InvalidArgumentError(f"jitops.ctc_loss: {name} must be a tensor or a sequence of ints") from error


def ctc_loss(log_probs: torch.Tensor, targets: torch.Tensor, input_lengths: Lengths, target_lengths: Lengths,
             blank: int = 0, reduction: str = "mean", zero_infinity: bool = False, *,
             max_target_length: Optional[int] = None) -> torch.Tensor:
    """The CTC loss of ``log_probs`` ([T, N, C], or [T, C] for one sample) against
    ``targets`` (padded [N, S], or concatenated 1-D; int32 or int64), as
    ``torch.nn.functional.ctc_loss``. ``reduction``: "none" ([N]), "sum", or "mean" (each
    loss over its target length, then the batch mean)."""
    # The checks cost a call only when they fail: this wrapper is part of every call's host time.
    if reduction not in _REDUCTIONS:
        _torch.reduction_code(reduction, _REDUCTIONS, "ctc_loss")  # raises, naming the choices
    if not isinstance(input_lengths, torch.Tensor):
        input_lengths = _lengths(input_lengths, "input_lengths")
    if not isinstance(target_lengths, torch.Tensor):
        target_lengths = _lengths(target_lengths, "target_lengths")
    unbatched = log_probs.dim() == 2
    if unbatched:  # one sample, as torch accepts: [T, C], targets [S], scalar lengths
        log_probs, targets = log_probs.unsqueeze(1), targets.reshape(1, -1)
        input_lengths, target_lengths = input_lengths.reshape(1), target_lengths.reshape(1)
    loss = _torch.call(_OP, _direct.ctc_loss, log_probs, targets, input_lengths, target_lengths, blank, reduction,
                       zero_infinity, max_target_length or 0)
    return loss.squeeze(0) if unbatched and reduction == "none" else loss
