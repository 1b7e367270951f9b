"""Vocabulary-parallel fused linear cross-entropy over a ``torch.distributed`` process group
(Megatron-style tensor parallelism of the output layer).

Each rank holds all ``BT`` rows of ``input`` and the global ``target``, and one shard of the
output layer: ``weight`` rows ``[vocab_start, vocab_start + V_r)`` of a vocabulary of
``vocab_size`` rows (and the same slice of ``bias``). By default the shards are equal and in
rank order (``vocab_start = rank * V_r``, ``vocab_size = world_size * V_r``), as Megatron pads
its vocabulary; ``vocab_range=(vocab_start, vocab_size)`` names any other split.

Forward, per rank: one pass over the shard's logits, chunk by chunk, gives each row's
log-sum-exp over the shard and the shard's part of the loss's linear terms (the target logit
where the target falls in the shard, and the label-smoothing sum); three all-reduces over
[BT] vectors (a max, then two sums) give every rank the global log-sum-exp and the loss.
Backward, per rank: the shard's logits are computed again chunk by chunk and turned into
the gradient of the global softmax, which gives the shard's grad_weight and grad_bias and a
partial grad_input that one all-reduce sums. No rank ever holds the logits of another shard,
nor the [BT, V] logits of its own. Four GEMMs of the shard's size per step (the unsharded op
fuses its gradients into the forward and does three).

Results match :func:`jitops.ops.fused_linear_cross_entropy` on the unsharded weight within
the rounding of the dtype (the all-reduces add the shards' partial sums in another order).
The reduced loss and the gradients are bit-identical from run to run for a given group
(NCCL's order of summation is fixed for a fixed topology). The function is not a custom op
(a process group cannot be an operator argument): torch.compile runs it eagerly, with a graph
break around it.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Optional

import torch

from .. import errors
from .._lib import C
from ..runtime import Runtime

_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}
_RUN = 0  # jitops._C's launch mode: the workspace comes from torch's caching allocator


def _dist() -> ModuleType:
    import torch.distributed as dist  # imported late: most users of the package never need it

    return dist


def _accumulation(input: torch.Tensor) -> torch.dtype:
    return torch.float64 if input.dtype == torch.float64 else torch.float32


class _Shard:
    """What both phases pass to the library for one call."""

    def __init__(self, input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                 target: torch.Tensor, ignore_index: int, label_smoothing: float, softcap: float,
                 z_loss_scale: float, vocab_start: int, vocab_size: int) -> None:
        self.input, self.weight, self.bias, self.target = input, weight, bias, target
        self.options = (ignore_index, label_smoothing, softcap, z_loss_scale, 0, 0)  # chunks, budget: automatic
        self.vocab = (vocab_start, vocab_size)

    def _launch(self) -> tuple[int, int]:
        return Runtime(self.input.device).handle, torch.cuda.current_stream(self.input.device).cuda_stream

    def stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Each row's log-sum-exp over the shard and the shard's linear part of the loss."""
        rows = self.input.shape[0]
        lse_local = self.input.new_empty((rows,), dtype=_accumulation(self.input))
        linear = torch.empty_like(lse_local)
        runtime, stream = self._launch()
        C.flce_shard_stats(_RUN, runtime, self.input, self.weight, self.bias, self.target, lse_local, linear,
                           _REDUCTIONS["none"], *self.options, *self.vocab, stream)
        return lse_local, linear

    def gradients(self, lse: torch.Tensor, grad_output: torch.Tensor, reduction: str, wanted: tuple[bool, bool, bool]
                  ) -> tuple[Optional[torch.Tensor], Optional[torch.Tensor], Optional[torch.Tensor]]:
        """grad_input's partial sum over this shard, and the shard's grad_weight and grad_bias."""
        def like(flag: bool, t: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
            return torch.empty_like(t, memory_format=torch.contiguous_format) if flag and t is not None else None

        grad_input, grad_weight, grad_bias = (like(wanted[0], self.input), like(wanted[1], self.weight),
                                              like(wanted[2], self.bias))
        runtime, stream = self._launch()
        C.flce_shard_backward(_RUN, runtime, self.input, self.weight, self.bias, self.target, grad_output, lse,
                              grad_input, grad_weight, grad_bias, _REDUCTIONS[reduction], *self.options, *self.vocab,
                              stream)
        return grad_input, grad_weight, grad_bias


def _global_lse(lse_local: torch.Tensor, valid: torch.Tensor,
                group: Optional[torch.distributed.ProcessGroup]) -> torch.Tensor:
    """log(sum over ranks of exp(lse_local)), stably: a max all-reduce, then a sum of the
    rescaled sums. Ignored rows (lse_local 0 on every rank) get 0."""
    dist = _dist()
    peak = lse_local.clone()
    dist.all_reduce(peak, op=dist.ReduceOp.MAX, group=group)
    total = torch.exp(lse_local - peak)
    dist.all_reduce(total, op=dist.ReduceOp.SUM, group=group)
    return torch.where(valid, peak + torch.log(total), torch.zeros_like(peak))


def _reduce(loss_rows: torch.Tensor, valid: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "none":
        return loss_rows
    total = loss_rows.sum()
    return total if reduction == "sum" else total / valid.sum()  # 0/0 = NaN, as in PyTorch


class _VocabParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], target: torch.Tensor,
                ignore_index: int, label_smoothing: float, softcap: float, z_loss_scale: float, reduction: str,
                vocab_start: int, vocab_size: int, group: Optional[torch.distributed.ProcessGroup]
                ) -> tuple[torch.Tensor, torch.Tensor]:
        shard = _Shard(input, weight, bias, target, ignore_index, label_smoothing, softcap, z_loss_scale,
                       vocab_start, vocab_size)
        lse_local, linear = shard.stats()
        valid = target != ignore_index
        lse = _global_lse(lse_local, valid, group)
        dist = _dist()
        dist.all_reduce(linear, op=dist.ReduceOp.SUM, group=group)
        loss_rows = torch.where(valid, lse - linear + z_loss_scale * lse * lse, torch.zeros_like(lse))
        ctx.shard, ctx.reduction, ctx.group = shard, reduction, group
        ctx.save_for_backward(lse)
        ctx.mark_non_differentiable(lse)
        return _reduce(loss_rows, valid, reduction), lse

    @staticmethod
    def backward(ctx: Any, grad_loss: torch.Tensor, _grad_lse: Optional[torch.Tensor]
                 ) -> tuple[Optional[torch.Tensor], ...]:
        (lse,) = ctx.saved_tensors
        shard = ctx.shard
        wanted = (ctx.needs_input_grad[0], ctx.needs_input_grad[1], ctx.needs_input_grad[2])
        grad_input, grad_weight, grad_bias = shard.gradients(lse, grad_loss.contiguous(), ctx.reduction, wanted)
        if grad_input is not None:
            dist = _dist()
            dist.all_reduce(grad_input, op=dist.ReduceOp.SUM, group=ctx.group)
        return (grad_input, grad_weight, grad_bias) + (None,) * 9


def _vocab_range(weight: torch.Tensor, group: Optional[torch.distributed.ProcessGroup],
                 vocab_range: Optional[tuple[int, int]]) -> tuple[int, int]:
    if vocab_range is not None:
        start, total = (int(v) for v in vocab_range)
        if start < 0 or total < start + weight.shape[0]:
            raise errors.InvalidArgumentError(
                f"jitops.fused_linear_cross_entropy: vocab_range ({start}, {total}) does not hold this rank's "
                f"{weight.shape[0]} weight rows")
        return start, total
    dist = _dist()
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    return rank * weight.shape[0], world * weight.shape[0]


def vocab_parallel_cross_entropy(input: torch.Tensor, weight: torch.Tensor, target: torch.Tensor,
                                 bias: Optional[torch.Tensor], ignore_index: int, label_smoothing: float,
                                 softcap: Optional[float], z_loss_scale: float, reduction: str,
                                 process_group: Optional[torch.distributed.ProcessGroup],
                                 vocab_range: Optional[tuple[int, int]] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The loss (reduced as ``reduction`` says) and each row's global log-sum-exp, with this
    rank's weight (and bias) holding its vocabulary shard; see the module's documentation.
    Every rank of ``process_group`` must call it with the same input, target and options."""
    if reduction not in _REDUCTIONS:
        raise errors.InvalidArgumentError(
            f"jitops.fused_linear_cross_entropy: reduction must be one of 'none', 'mean', 'sum'; got {reduction!r}")
    if softcap is not None and not softcap > 0:
        raise errors.InvalidArgumentError(
            f"jitops.fused_linear_cross_entropy: softcap must be None or > 0; got {softcap}")
    if not (input.is_cuda and weight.is_cuda and target.is_cuda):
        raise errors.InvalidDeviceError("jitops.fused_linear_cross_entropy: input, weight and target must be CUDA "
                                        "tensors with a process group")
    start, total = _vocab_range(weight, process_group, vocab_range)
    return _VocabParallel.apply(input, weight, bias, target, ignore_index, label_smoothing, softcap or 0.0,
                                z_loss_scale, reduction, start, total, process_group)
