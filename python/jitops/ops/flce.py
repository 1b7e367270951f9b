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

from typing import Optional

import torch

from .. import _direct, errors
from .._lib import C
from . import _torch, flce_parallel

_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def _present(t: torch.Tensor) -> Optional[torch.Tensor]:
    return None if t.dim() == 1 and t.numel() == 0 else t


def _fake_outputs(input, weight, bias, reduction, grads):
    rows = input.shape[0] if input.dim() >= 1 else 0
    accumulate = torch.float64 if input.dtype == torch.float64 else torch.float32
    loss = input.new_empty((rows,) if reduction == "none" else (), dtype=accumulate)
    lse = input.new_empty((rows,), dtype=accumulate)
    in_forward = reduction != "none"

    def gradient(wanted, param):
        return torch.empty_like(param, memory_format=torch.contiguous_format) if wanted else input.new_empty(0)

    grad_bias = gradient(in_forward and grads[2], bias) if bias is not None else input.new_empty(0)
    return loss, lse, gradient(in_forward and grads[0], input), gradient(in_forward and grads[1], weight), grad_bias


def _validate(name, input, weight, target, bias, grad_output, outputs, options, reduction):
    loss, lse, grad_input, grad_weight, grad_bias = outputs
    _torch.validate(name, C.flce_forward, input, weight, bias, target, grad_output, loss, lse, _present(grad_input),
                    _present(grad_weight), _present(grad_bias), _REDUCTIONS[reduction], *options, 0, 0)


@_torch.fake("fused_linear_cross_entropy")
def _fake_flce(input, weight, target, bias, ignore_index, label_smoothing, softcap, z_loss_scale, reduction, grads):
    _torch.reduction_code(reduction, _REDUCTIONS, "fused_linear_cross_entropy")
    outputs = _fake_outputs(input, weight, bias, reduction, grads)
    _validate("fused_linear_cross_entropy", input, weight, target, bias, None, outputs,
              (ignore_index, label_smoothing, softcap, z_loss_scale), reduction)
    return outputs


@_torch.fake("fused_linear_cross_entropy_grads")
def _fake_flce_grads(grad, input, weight, target, bias, ignore_index, label_smoothing, softcap, z_loss_scale, grads):
    outputs = _fake_outputs(input, weight, bias, "mean", grads)  # the gradients as a forward would make them
    loss = input.new_empty((input.shape[0],), dtype=outputs[0].dtype)
    _validate("fused_linear_cross_entropy_backward", input, weight, target, bias, grad, (loss, *outputs[1:]),
              (ignore_index, label_smoothing, softcap, z_loss_scale), "none")
    return outputs[2:]


@_torch.fake("fused_linear_cross_entropy_scale")
def _fake_flce_scale(grad, grad_input, grad_weight, grad_bias):
    _torch.validate("fused_linear_cross_entropy_backward", C.flce_backward, grad, _present(grad_input),
                    _present(grad_weight), _present(grad_bias))


def fused_linear_cross_entropy_with_lse(input: torch.Tensor, weight: torch.Tensor, target: torch.Tensor,
                                        bias: Optional[torch.Tensor] = None, ignore_index: int = -100,
                                        label_smoothing: float = 0.0, softcap: Optional[float] = None,
                                        z_loss_scale: float = 0.0, reduction: str = "mean", *,
                                        process_group=None,
                                        vocab_range: Optional[tuple[int, int]] = None
                                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`fused_linear_cross_entropy` and each row's log-sum-exp of the logits ([BT], 0 for
    ignored rows), from which a z-loss can be reported."""
    if process_group is not None:
        return flce_parallel.vocab_parallel_cross_entropy(input, weight, target, bias, ignore_index, label_smoothing,
                                                          softcap, z_loss_scale, reduction, process_group, vocab_range)
    if softcap is not None and not softcap > 0:
        raise errors.InvalidArgumentError(f"jitops.fused_linear_cross_entropy: softcap must be None or > 0; got {softcap}")
    grads = [False, False, False]
    if torch.is_grad_enabled():
        grads = [input.requires_grad, weight.requires_grad, bias is not None and bias.requires_grad]
    loss, lse, *_ = _torch.call(torch.ops.jitops.fused_linear_cross_entropy.default, _direct.fused_linear_cross_entropy,
                                input, weight, target, bias, ignore_index, label_smoothing, softcap or 0.0,
                                z_loss_scale, reduction, grads)
    return loss, lse


def fused_linear_cross_entropy(input: torch.Tensor, weight: torch.Tensor, target: torch.Tensor,
                               bias: Optional[torch.Tensor] = None, ignore_index: int = -100,
                               label_smoothing: float = 0.0, softcap: Optional[float] = None,
                               z_loss_scale: float = 0.0, reduction: str = "mean", *, process_group=None,
                               vocab_range: Optional[tuple[int, int]] = None) -> torch.Tensor:
    """``cross_entropy(input @ weight.T + bias, target)`` without the logits: ``input``
    [BT, H], ``weight`` [V, H] (as ``nn.Linear`` stores it), int64 ``target`` [BT], optional
    ``bias`` [V]; f32, f64, f16 or bf16. Gradients for input, weight and bias.

    With a ``torch.distributed`` ``process_group``, ``weight`` (and ``bias``) are this rank's
    shard of the vocabulary and ``target`` holds global indices: see
    :mod:`jitops.ops.flce_parallel` (``vocab_range`` names an uneven split)."""
    return fused_linear_cross_entropy_with_lse(input, weight, target, bias, ignore_index, label_smoothing, softcap,
                                               z_loss_scale, reduction, process_group=process_group,
                                               vocab_range=vocab_range)[0]
