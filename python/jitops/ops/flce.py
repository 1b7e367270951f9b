"""Fused linear cross-entropy (``include/jitops/flce.h``): the loss of a language model's
output layer, ``cross_entropy(input @ weight.T + bias, target)``, with its gradients, without
ever storing the [BT, V] logits. Liger-Kernel's semantics: ``ignore_index``,
``label_smoothing``, a logit ``softcap`` (Gemma 2) and a z-loss (``z_loss_scale * lse**2``).

How autograd is served. With reduction "mean" or "sum", the forward already computes the
gradients for dy = 1 (that is where the fusion saves its time and memory), and the backward
multiplies them in place by the upstream scalar on the device (no host synchronization). A
backward that keeps the graph (``retain_graph=True``) scales copies instead, so a second
backward finds the saved gradients intact. With reduction "none", each row's dy must scale
its row before the sum over rows that grad_weight is, so the backward runs the fused pass
again with dy.

The loss is f32 for f16 and bf16 inputs (f64 for f64); gradients have their parameter's dtype.
"""

from __future__ import annotations

from typing import Optional

import torch

from .. import errors
from .._lib import C
from . import _torch

_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}
_OPTIONS = "int ignore_index, float label_smoothing, float softcap, float z_loss_scale"


def _accumulation_dtype(t: torch.Tensor) -> torch.dtype:
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def _outputs(input, weight, bias, reduction, grads):
    rows = input.shape[0] if input.dim() >= 1 else 0
    accumulate = _accumulation_dtype(input)
    loss = input.new_empty((rows,) if reduction == "none" else (), dtype=accumulate)
    lse = input.new_empty((rows,), dtype=accumulate)
    # A gradient not asked for is an empty tensor of its own (outputs must not alias).
    grad_input = torch.empty_like(input, memory_format=torch.contiguous_format) if grads[0] else input.new_empty(0)
    grad_weight = torch.empty_like(weight, memory_format=torch.contiguous_format) if grads[1] else input.new_empty(0)
    grad_bias = torch.empty_like(bias) if grads[2] and bias is not None else input.new_empty(0)
    return loss, lse, grad_input, grad_weight, grad_bias


def _call(validate, input, weight, target, bias, grad_output, outputs, options, reduction):
    loss, lse, grad_input, grad_weight, grad_bias = outputs
    args = (input, weight, bias, target, grad_output, loss, lse, _present(grad_input), _present(grad_weight),
            _present(grad_bias), _REDUCTIONS[reduction], *options, 0, 0)  # default chunking and budget
    _torch.call(validate, "fused_linear_cross_entropy", C.flce_forward, input, *args)


def _present(t: torch.Tensor) -> Optional[torch.Tensor]:
    return t if t.numel() > 0 or t.dim() != 1 else None


def _options(ignore_index, label_smoothing, softcap, z_loss_scale):
    return (ignore_index, label_smoothing, softcap or 0.0, z_loss_scale)


# ---- forward (with the gradients for dy = 1 when asked) ------------------------------------


def _forward(input, weight, target, bias, ignore_index, label_smoothing, softcap, z_loss_scale, reduction, grads,
             validate=False):
    outputs = _outputs(input, weight, bias, reduction, grads)
    _call(validate, input, weight, target, bias, None, outputs,
          _options(ignore_index, label_smoothing, softcap, z_loss_scale), reduction)
    return outputs


# ---- backward, reduction "none": the fused pass again, with each row's dy ------------------


def _grads(grad, input, weight, target, bias, ignore_index, label_smoothing, softcap, z_loss_scale, grads,
           validate=False):
    loss, lse, grad_input, grad_weight, grad_bias = _outputs(input, weight, bias, "none", grads)
    _call(validate, input, weight, target, bias, grad, (loss, lse, grad_input, grad_weight, grad_bias),
          _options(ignore_index, label_smoothing, softcap, z_loss_scale), "none")
    return grad_input, grad_weight, grad_bias


_flce_grads = _torch.define(
    f"fused_linear_cross_entropy_grads(Tensor grad, Tensor input, Tensor weight, Tensor target, Tensor? bias, "
    f"{_OPTIONS}, bool[3] grads) -> (Tensor, Tensor, Tensor)",
    lambda *a: _grads(*a),
    lambda *a: _grads(*a, validate=True),
)

# ---- backward, reduction "mean" or "sum": scale the saved gradients in place ---------------


def _scale(grad, grad_input, grad_weight, grad_bias, validate=False):
    args = (grad, _present(grad_input), _present(grad_weight), _present(grad_bias))
    _torch.call(validate, "fused_linear_cross_entropy_backward", C.flce_backward, grad, *args)


_flce_scale = _torch.define(
    "fused_linear_cross_entropy_scale(Tensor grad, Tensor(a!) grad_input, Tensor(b!) grad_weight, "
    "Tensor(c!) grad_bias) -> ()",
    lambda *a: _scale(*a),
    lambda *a: _scale(*a, validate=True),
)


def _setup_context(ctx, inputs, output):
    input, weight, target, bias = inputs[:4]
    ctx.options, ctx.reduction, ctx.grads = inputs[4:8], inputs[8], inputs[9]
    ctx.mark_non_differentiable(*output[1:])
    if ctx.reduction == "none":
        ctx.save_for_backward(input, weight, target, bias)
    else:
        ctx.save_for_backward(*output[2:])


def _backward(ctx, grad, *unused):
    needs = ctx.needs_input_grad
    if ctx.reduction == "none":
        input, weight, target, bias = ctx.saved_tensors
        wanted = [needs[0], needs[1], bias is not None and needs[3]]
        grad_input, grad_weight, grad_bias = _flce_grads(grad, input, weight, target, bias, *ctx.options, wanted)
    else:
        grad_input, grad_weight, grad_bias = ctx.saved_tensors
        if not _may_scale_in_place(grad_input):
            grad_input, grad_weight, grad_bias = grad_input.clone(), grad_weight.clone(), grad_bias.clone()
        _flce_scale(grad, grad_input, grad_weight, grad_bias)
    return (
        grad_input if needs[0] else None,
        grad_weight if needs[1] else None,
        None,
        grad_bias if needs[3] and grad_bias.numel() > 0 else None,
    ) + (None,) * 6


def _may_scale_in_place(saved: torch.Tensor) -> bool:
    """Whether the saved gradients may be scaled where they are: in an eager backward that
    drops the graph. Not when the graph is kept (retain_graph=True, as gradcheck does: a
    second backward needs them intact), nor while torch.compile traces (tensor subclasses),
    where mutating a forward's output inside the backward breaks the partition of the graph."""
    kept = getattr(torch._C._autograd, "_get_current_graph_task_keep_graph", None)
    return type(saved) is torch.Tensor and kept is not None and not kept()


_flce = _torch.define(
    f"fused_linear_cross_entropy(Tensor input, Tensor weight, Tensor target, Tensor? bias, {_OPTIONS}, "
    f"str reduction, bool[3] grads) -> (Tensor loss, Tensor lse, Tensor grad_input, Tensor grad_weight, "
    f"Tensor grad_bias)",
    lambda *a: _forward(*a),
    lambda *a: _forward(*a, validate=True),
    _backward,
    _setup_context,
)


def fused_linear_cross_entropy_with_lse(input: torch.Tensor, weight: torch.Tensor, target: torch.Tensor,
                                        bias: Optional[torch.Tensor] = None, ignore_index: int = -100,
                                        label_smoothing: float = 0.0, softcap: Optional[float] = None,
                                        z_loss_scale: float = 0.0,
                                        reduction: str = "mean") -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`fused_linear_cross_entropy` and each row's log-sum-exp of the logits ([BT], 0 for
    ignored rows), from which a z-loss can be reported."""
    _torch.reduction_code(reduction, _REDUCTIONS, "fused_linear_cross_entropy")
    wanted = [False, False, False]
    if reduction != "none" and torch.is_grad_enabled():
        wanted = [input.requires_grad, weight.requires_grad, bias is not None and bias.requires_grad]
    loss, lse, *_ = _flce(input, weight, target, bias, ignore_index, label_smoothing, softcap or 0.0, z_loss_scale,
                          reduction, wanted)
    return loss, lse


def fused_linear_cross_entropy(input: torch.Tensor, weight: torch.Tensor, target: torch.Tensor,
                               bias: Optional[torch.Tensor] = None, ignore_index: int = -100,
                               label_smoothing: float = 0.0, softcap: Optional[float] = None,
                               z_loss_scale: float = 0.0, reduction: str = "mean") -> torch.Tensor:
    """``cross_entropy(input @ weight.T + bias, target)`` without the logits: ``input``
    [BT, H], ``weight`` [V, H] (as ``nn.Linear`` stores it), int64 ``target`` [BT], optional
    ``bias`` [V]; f32, f64, f16 or bf16. Gradients for input, weight and bias."""
    if softcap is not None and not softcap > 0:
        raise errors.InvalidArgumentError(f"jitops.fused_linear_cross_entropy: softcap must be None or > 0; got {softcap}")
    return fused_linear_cross_entropy_with_lse(input, weight, target, bias, ignore_index, label_smoothing, softcap,
                                               z_loss_scale, reduction)[0]
