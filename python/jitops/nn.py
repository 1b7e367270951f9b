"""Loss modules over :mod:`jitops.ops`, drop-in replacements for the ones a training script
already uses: :class:`CTCLoss` for ``torch.nn.CTCLoss`` and
:class:`FusedLinearCrossEntropyLoss` for Liger-Kernel's ``LigerFusedLinearCrossEntropyLoss``."""

from __future__ import annotations

from typing import Optional, Union

import torch

from . import errors
from .ops import ctc as _ctc
from .ops import flce as _flce

__all__ = ["CTCLoss", "FusedLinearCrossEntropyLoss"]


class CTCLoss(torch.nn.Module):
    """``torch.nn.CTCLoss(blank, reduction, zero_infinity)`` on :func:`jitops.ops.ctc_loss`:
    the same arguments and results, plus f16/bf16 inputs, device lengths without a host
    synchronization, and a deterministic exact gradient."""

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> None:
        super().__init__()
        self.blank = blank
        self.reduction = reduction
        self.zero_infinity = zero_infinity

    def forward(self, log_probs: torch.Tensor, targets: torch.Tensor, input_lengths: _ctc.Lengths,
                target_lengths: _ctc.Lengths) -> torch.Tensor:
        return _ctc.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                             self.zero_infinity)

    def extra_repr(self) -> str:
        return f"blank={self.blank}, reduction={self.reduction!r}, zero_infinity={self.zero_infinity}"


class FusedLinearCrossEntropyLoss(torch.nn.Module):
    """Liger-Kernel's ``LigerFusedLinearCrossEntropyLoss`` on
    :func:`jitops.ops.fused_linear_cross_entropy`: the same constructor and
    ``forward(lin_weight, _input, target, bias=None)``. ``lse_square_scale`` is the z-loss
    scale; with ``return_z_loss`` the forward returns ``(loss, z_loss)``, the z-loss term
    reduced like the loss (for logging; it is already part of the loss).

    Not supported, and refused with :class:`jitops.UnsupportedError`: per-class weights
    (``ce_weight``), ``use_token_scaling`` and ``return_token_accuracy``. Accumulation is
    always f32 (``accum_dtype`` may be None or torch.float32).

    With a ``torch.distributed`` ``process_group``, ``lin_weight`` (and ``bias``) are this
    rank's shard of the vocabulary, ``target`` holds global indices, and every rank gets the
    loss and its own shard's gradients (:mod:`jitops.ops.flce_parallel`)."""

    def __init__(self, ce_weight: Optional[torch.Tensor] = None, ignore_index: int = -100,
                 lse_square_scale: float = 0.0, label_smoothing: float = 0.0, reduction: str = "mean",
                 softcap: Optional[float] = None, return_z_loss: bool = False,
                 accum_dtype: Optional[torch.dtype] = None, use_token_scaling: bool = False,
                 return_token_accuracy: bool = False, *, process_group: Optional[torch.distributed.ProcessGroup] = None,
                 vocab_range: Optional[tuple[int, int]] = None) -> None:
        super().__init__()
        refused = {"ce_weight": ce_weight is not None, "use_token_scaling": use_token_scaling,
                   "return_token_accuracy": return_token_accuracy,
                   "accum_dtype": accum_dtype not in (None, torch.float32)}
        for name, given in refused.items():
            if given:
                raise errors.UnsupportedError(f"jitops.nn.FusedLinearCrossEntropyLoss: {name} is not supported")
        if not 0.0 <= label_smoothing <= 1.0:
            raise errors.InvalidArgumentError(f"label_smoothing must be in [0, 1]; got {label_smoothing}")
        self.ignore_index = ignore_index
        self.lse_square_scale = lse_square_scale
        self.label_smoothing = label_smoothing
        self.reduction = reduction
        self.softcap = softcap
        self.return_z_loss = return_z_loss
        # With a process group, forward's lin_weight (and bias) is this rank's vocabulary
        # shard (jitops.ops.flce_parallel).
        self.process_group = process_group
        self.vocab_range = vocab_range

    def forward(self, lin_weight: torch.Tensor, _input: torch.Tensor, target: torch.Tensor,
                bias: Optional[torch.Tensor] = None) -> Union[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        loss, lse = _flce.fused_linear_cross_entropy_with_lse(
            _input, lin_weight, target, bias, self.ignore_index, self.label_smoothing, self.softcap,
            self.lse_square_scale, self.reduction, process_group=self.process_group, vocab_range=self.vocab_range)
        if not self.return_z_loss:
            return loss
        return loss, self._z_loss(lse.detach(), target)

    def _z_loss(self, lse: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        z = self.lse_square_scale * lse.square()  # 0 for ignored rows (their lse is 0)
        if self.reduction == "none":
            return z
        total = z.sum()
        if self.reduction == "sum":
            return total
        return total / (target != self.ignore_index).sum()  # on the device: no synchronization

    def extra_repr(self) -> str:
        return (f"ignore_index={self.ignore_index}, lse_square_scale={self.lse_square_scale}, "
                f"label_smoothing={self.label_smoothing}, reduction={self.reduction!r}, softcap={self.softcap}")
