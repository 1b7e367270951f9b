#!/usr/bin/env python3
"""Trains a tiny language model's output layer with ``jitops.nn.FusedLinearCrossEntropyLoss``
and, from the same seed on the same batches, with PyTorch's unfused
``F.cross_entropy(h @ W.T, target)``; checks that the two loss curves track each other and
prints the peak memory of one training step of each.

The data is a synthetic Markov chain: each of the first ACTIVE token ids has SUCCESSORS fixed
random successors, drawn uniformly, so the best loss is log(SUCCESSORS) = 1.39 while the
output layer spans the whole VOCAB. Sequences are cut at a random length and padded; the
padded positions' targets are -100 (ignore_index), as a data loader pads them. The model:
an embedding, one residual MLP block with LayerNorm (f32 weights), and the output weight
[VOCAB, HIDDEN]. With ``--dtype bf16`` (the default) the output layer runs in bf16 on f32
master weights, as mixed-precision training does; with ``--dtype f32`` everything is f32
(TF32 off, so that both sides do full f32 GEMMs).

What to expect. f32: the curves agree to rounding (1e-3 relative). bf16: PyTorch rounds the
[BT, VOCAB] logits, the loss and its gradient to bf16, while jitops keeps the log-sum-exp and
the loss in f32, so the curves differ by up to a few percent (5% allowed). Memory: PyTorch
stores the logits, their log-softmax and their gradient, each [BT, VOCAB]; jitops computes
the gradients chunk by chunk during the forward and never holds more than its scratch budget.

    PYTHONPATH=build/python python3 examples/python/lm_head_train.py [--dtype bf16|f32] [--steps 300]
"""

from __future__ import annotations

import argparse
import time
from typing import Callable, NamedTuple

import torch
import torch.nn.functional as F

import jitops.nn
from compare_runs import compare, parse_args, verdict

SEED = 0
VOCAB = 32768
ACTIVE = 2048  # token ids the chain visits
SUCCESSORS = 4
HIDDEN = 256
BATCH, SEQUENCE = 8, 512  # 4096 rows per step
LEARNING_RATE = 1e-2
LOG_EVERY = 25
MEASURE_STEP = 1  # the step whose peak memory is measured (step 0 compiles and tunes)
TOLERANCE = {torch.bfloat16: 5e-2, torch.float32: 1e-3}
IGNORE = -100


class Batch(NamedTuple):
    tokens: torch.Tensor  # [BT] int64
    targets: torch.Tensor  # [BT] int64, IGNORE where padded


def make_batches(count: int, device: str) -> list[Batch]:
    """``count`` batches of Markov-chain sequences, the same for every call."""
    generator = torch.Generator().manual_seed(SEED)
    successors = torch.randint(0, ACTIVE, (ACTIVE, SUCCESSORS), generator=generator)
    rows = count * BATCH
    choices = torch.randint(0, SUCCESSORS, (rows, SEQUENCE), generator=generator)
    tokens = torch.empty(rows, SEQUENCE + 1, dtype=torch.int64)
    tokens[:, 0] = torch.randint(0, ACTIVE, (rows,), generator=generator)
    for t in range(SEQUENCE):
        tokens[:, t + 1] = successors[tokens[:, t], choices[:, t]]
    targets = tokens[:, 1:].clone()
    lengths = torch.randint(SEQUENCE // 2, SEQUENCE + 1, (rows, 1), generator=generator)
    targets[torch.arange(SEQUENCE) >= lengths] = IGNORE
    inputs = tokens[:, :-1].reshape(count, BATCH * SEQUENCE).to(device)
    targets = targets.reshape(count, BATCH * SEQUENCE).to(device)
    return [Batch(inputs[i], targets[i]) for i in range(count)]


class Model(torch.nn.Module):
    """Embedding, one residual MLP block, and the output weight that the loss applies."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.up = torch.nn.Linear(HIDDEN, 4 * HIDDEN)
        self.down = torch.nn.Linear(4 * HIDDEN, HIDDEN)
        self.norm = torch.nn.LayerNorm(HIDDEN)
        self.head = torch.nn.Parameter(torch.randn(VOCAB, HIDDEN) * HIDDEN**-0.5)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """The hidden states [BT, HIDDEN] that the output layer reads."""
        e = self.embed(tokens)
        return self.norm(e + self.down(F.gelu(self.up(e))))


# loss(hidden [BT, H], weight [V, H], targets [BT]) -> a scalar
LossFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def jitops_loss() -> LossFn:
    flce = jitops.nn.FusedLinearCrossEntropyLoss(ignore_index=IGNORE)
    return lambda h, w, target: flce(w, h, target)


def torch_loss(h: torch.Tensor, w: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(h @ w.T, target, ignore_index=IGNORE)


class Run(NamedTuple):
    losses: list[float]
    peak_bytes: int  # of step MEASURE_STEP, above what was allocated before it
    seconds: float


def train(loss_fn: LossFn, batches: list[Batch], dtype: torch.dtype, device: str) -> Run:
    """Adam from SEED over ``batches``; the output layer computes in ``dtype``."""
    torch.manual_seed(SEED)
    model = Model().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    losses: list[torch.Tensor] = []
    peak = 0
    start = time.perf_counter()
    for step, batch in enumerate(batches):
        measured = step == MEASURE_STEP and device == "cuda"
        if measured:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
        optimizer.zero_grad(set_to_none=True)
        h = model(batch.tokens)
        loss = loss_fn(h.to(dtype), model.head.to(dtype), batch.targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach().float())
        if measured:
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - base
    return Run(torch.stack(losses).tolist(), peak, time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dtype", choices=("bf16", "f32"), default="bf16",
                        help="the output layer's dtype (default bf16)")
    args = parse_args(parser)
    if not torch.cuda.is_available():
        print("lm_head_train: skipped, no GPU")
        return 77
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    torch.backends.cuda.matmul.allow_tf32 = False

    batches = make_batches(args.steps, "cuda")
    ours = train(jitops_loss(), batches, dtype, "cuda")
    theirs = train(torch_loss, batches, dtype, "cuda")
    rows = BATCH * SEQUENCE
    print(f"{torch.cuda.get_device_name()}: {args.steps} steps, {args.dtype} output layer, BT {rows} "
          f"({int((batches[0].targets == IGNORE).sum())} ignored in the first batch), H {HIDDEN}, V {VOCAB}")
    problems = compare(ours.losses, theirs.losses, lambda step: TOLERANCE[dtype], LOG_EVERY)
    if not ours.peak_bytes < theirs.peak_bytes:
        problems.append(f"jitops' step peaked at {ours.peak_bytes} bytes, PyTorch's at {theirs.peak_bytes}")
    mib = float(1 << 20)
    print(f"peak memory of step {MEASURE_STEP}: jitops {ours.peak_bytes / mib:.0f} MiB, "
          f"PyTorch {theirs.peak_bytes / mib:.0f} MiB ({theirs.peak_bytes / max(ours.peak_bytes, 1):.1f}x); "
          f"training time: jitops {ours.seconds:.1f} s, PyTorch {theirs.seconds:.1f} s")
    return verdict(problems, f"loss curves track (every logged step within {TOLERANCE[dtype]:g} relative), "
                             f"and jitops' step used less memory")


if __name__ == "__main__":
    raise SystemExit(main())
