"""Fused linear cross-entropy (``include/jitops/flce.h``): the loss of a language model's
output layer, ``cross_entropy(input @ weight.T + bias, target)``, with its gradients, without
ever storing the [BT, V] logits. Liger-Kernel's semantics: ``ignore_index``,
``label_smoothing``, a logit ``softcap`` (Gemma 2) and a z-loss (``z_loss_scale * lse**2``).

How autograd is served. With reduction "mean" or "sum", the forward already computes the
gradients for dy = 1 (that is where the fusion saves its time and memory), and the backward
multiplies them in place by the upstream scalar on the device (no host synchronization). A
backward that keeps the graph (``retain_graph=True``), or one that torch.compile traces,
scales copies instead, so a second backward finds the saved gradients intact. With reduction
"none", each row's dy must scale its row before the sum over rows that grad_weight is, so the
backward runs the fused pass again with dy.

The loss is f32 for f16 and bf16 inputs (f64 for f64); gradients have their parameter's dtype.
"""

from __future__ import annotations

from typing import Literal, Optional, Sequence, overload

import torch

from .. import _direct, errors
from .._lib import C
from . import _torch, flce_parallel

_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


_NO_GRADS = (False, False, False)


def _present(t: torch.Tensor) -> Optional[torch.Tensor]:
    return None if t.dim() == 1 and t.numel() == 0 else t


def _accumulation(input: torch.Tensor) -> torch.dtype:
    return torch.float64 if input.dtype == torch.float64 else torch.float32


def _gradient_of(param: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(param, memory_format=torch.contiguous_format)


def _gradient_like(wanted: bool, param: torch.Tensor, input: torch.Tensor) -> torch.Tensor:
    """A gradient, or the empty tensor that stands for one not asked for."""
    return _gradient_of(param) if wanted else input.new_empty(0)


def _validate(name: str, input: torch.Tensor, weight: torch.Tensor, target: torch.Tensor,
              bias: Optional[torch.Tensor], grad_output: Optional[torch.Tensor], loss: torch.Tensor,
              lse: Optional[torch.Tensor], grads: Sequence[Optional[torch.Tensor]],
              options: tuple[int, float, float, float], reduction: str) -> None:
    _torch.validate(name, C.flce_forward, input, weight, bias, target, grad_output, loss, lse, *grads,
                    _REDUCTIONS[reduction], *options, 0, 0)


@_torch.fake("fused_linear_cross_entropy")
def _fake_flce(input: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, bias: Optional[torch.Tensor],
               ignore_index: int, label_smoothing: float, softcap: float, z_loss_scale: float, reduction: str,
               grads: Sequence[bool], lse: bool, shared_gradients: bool = False) -> list[torch.Tensor]:
    _torch.reduction_code(reduction, _REDUCTIONS, "fused_linear_cross_entropy")
    rows = input.shape[0] if input.dim() >= 1 else 0
    loss = input.new_empty((rows,) if reduction == "none" else (), dtype=_accumulation(input))
    lse_rows = input.new_empty((rows,), dtype=_accumulation(input)) if lse else None
    made: list[Optional[torch.Tensor]] = [None, None, None]  # the gradients the forward makes (reduction mean or sum)
    if reduction != "none":
        for i, param in enumerate((input, weight, bias)):
            if grads[i] and param is not None:
                made[i] = _gradient_of(param)
    _validate("fused_linear_cross_entropy", input, weight, target, bias, None, loss, lse_rows, made,
              (ignore_index, label_smoothing, softcap, z_loss_scale), reduction)
    return [t for t in (loss, lse_rows, *made) if t is not None]


@_torch.fake("fused_linear_cross_entropy_grads")
def _fake_flce_grads(grad: torch.Tensor, input: torch.Tensor, weight: torch.Tensor, target: torch.Tensor,
                     bias: Optional[torch.Tensor], ignore_index: int, label_smoothing: float, softcap: float,
                     z_loss_scale: float, grads: Sequence[bool]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    outputs = (_gradient_like(grads[0], input, input), _gradient_like(grads[1], weight, input),
               _gradient_like(grads[2], bias, input) if bias is not None else input.new_empty(0))
    loss = input.new_empty((input.shape[0],), dtype=_accumulation(input))
    _validate("fused_linear_cross_entropy_backward", input, weight, target, bias, grad, loss, None,
              [_present(t) for t in outputs], (ignore_index, label_smoothing, softcap, z_loss_scale), "none")
    return outputs


@_torch.fake("fused_linear_cross_entropy_scale")
def _fake_flce_scale(grad: torch.Tensor, grad_input: torch.Tensor, grad_weight: torch.Tensor,
                     grad_bias: torch.Tensor) -> None:
    _torch.validate("fused_linear_cross_entropy_backward", C.flce_backward, grad, _present(grad_input),
                    _present(grad_weight), _present(grad_bias))


_OP = torch.ops.jitops.fused_linear_cross_entropy.default


# Overloaded on the literal `lse` flag, so that each caller's result type follows from it (typing only: a call runs
# the one function below).
@overload
def _forward(input: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, bias: Optional[torch.Tensor],
             ignore_index: int, label_smoothing: float, softcap: Optional[float], z_loss_scale: float,
             reduction: str, lse: Literal[False]) -> torch.Tensor: ...
@overload
def _forward(input: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, bias: Optional[torch.Tensor],
             ignore_index: int, label_smoothing: float, softcap: Optional[float], z_loss_scale: float,
             reduction: str, lse: Literal[True]) -> tuple[torch.Tensor, torch.Tensor]: ...


def _forward(input: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, bias: Optional[torch.Tensor],
             ignore_index: int, label_smoothing: float, softcap: Optional[float], z_loss_scale: float,
             reduction: str, lse: bool) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """The loss, or (loss, lse) when asked for. (The op also returns the gradients autograd will
    want, computed here with reduction mean or sum; the autograd graph keeps them, and the
    direct entry leaves them out.)"""
    if softcap is not None and not softcap > 0:
        raise errors.InvalidArgumentError(
            f"jitops.fused_linear_cross_entropy: softcap must be None or > 0; got {softcap}")
    args = (input, weight, target, bias, ignore_index, label_smoothing, softcap or 0.0, z_loss_scale, reduction)
    # The direct entry reads which gradients autograd wants itself (grads None): FLCE is the op
    # whose Python call costs the most above its C call, and these reads are part of it.
    out = _torch.call_direct(_direct.fused_linear_cross_entropy, *args, None, lse)
    if out is not NotImplemented:
        return out
    grads = _NO_GRADS
    if torch.is_grad_enabled():
        grads = (input.requires_grad, weight.requires_grad, bias is not None and bias.requires_grad)
    out = _torch.call(_OP, _torch.declined, *args, grads, lse)
    return (out[0], out[1]) if lse else out[0]


def fused_linear_cross_entropy_with_lse(input: torch.Tensor, weight: torch.Tensor, target: torch.Tensor,
                                        bias: Optional[torch.Tensor] = None, ignore_index: int = -100,
                                        label_smoothing: float = 0.0, softcap: Optional[float] = None,
                                        z_loss_scale: float = 0.0, reduction: str = "mean", *,
                                        process_group: Optional[torch.distributed.ProcessGroup] = None,
                                        vocab_range: Optional[tuple[int, int]] = None
                                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`fused_linear_cross_entropy` and each row's log-sum-exp of the logits ([BT], 0 for
    ignored rows), from which a z-loss can be reported."""
    if process_group is not None:
        return flce_parallel.vocab_parallel_cross_entropy(input, weight, target, bias, ignore_index, label_smoothing,
                                                          softcap, z_loss_scale, reduction, process_group, vocab_range)
    return _forward(input, weight, target, bias, ignore_index, label_smoothing, softcap, z_loss_scale, reduction,
                    True)


def fused_linear_cross_entropy(input: torch.Tensor, weight: torch.Tensor, target: torch.Tensor,
                               bias: Optional[torch.Tensor] = None, ignore_index: int = -100,
                               label_smoothing: float = 0.0, softcap: Optional[float] = None,
                               z_loss_scale: float = 0.0, reduction: str = "mean", *,
                               process_group: Optional[torch.distributed.ProcessGroup] = None,
                               vocab_range: Optional[tuple[int, int]] = None) -> torch.Tensor:
    """``cross_entropy(input @ weight.T + bias, target)`` without the logits: ``input``
    [BT, H], ``weight`` [V, H] (as ``nn.Linear`` stores it), int64 ``target`` [BT], optional
    ``bias`` [V]; f32, f64, f16 or bf16. Gradients for input, weight and bias.

    With a ``torch.distributed`` ``process_group``, ``weight`` (and ``bias``) are this rank's
    shard of the vocabulary and ``target`` holds global indices: see
    :mod:`jitops.ops.flce_parallel` (``vocab_range`` names an uneven split)."""
    if process_group is not None:
        return flce_parallel.vocab_parallel_cross_entropy(input, weight, target, bias, ignore_index, label_smoothing,
                                                          softcap, z_loss_scale, reduction, process_group,
                                                          vocab_range)[0]
    return _forward(input, weight, target, bias, ignore_index, label_smoothing, softcap, z_loss_scale, reduction,
                    False)
