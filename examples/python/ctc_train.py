#!/usr/bin/env python3
"""Trains a small CTC model twice from the same seed on the same batches: once with
``jitops.nn.CTCLoss``, once with ``torch.nn.CTCLoss``, and checks that the two loss curves
agree.

The task is synthetic and learnable: each sample is a random label sequence rendered as
frames (1-2 blank frames before each label, the label held for 1-3 frames, 0-2 blank frames
at the end), each frame a fixed random prototype vector of its class plus Gaussian noise,
padded to a common length. A three-layer 1-D convolution reads the frames and emits
log-probabilities over the classes (blank = 0).

Why the curves agree: jitops returns the exact gradient with respect to the log-probabilities
and PyTorch its own convention (``exp(log_probs) * g - posterior``); the two are equal once
they pass through the model's ``log_softmax``, so both runs follow the same trajectory up to
floating-point rounding. PyTorch's CTC backward on CUDA accumulates with atomics (it is listed
among PyTorch's non-deterministic ops), so the runs are not bit-identical and their rounding
differences grow slowly over the steps: the check allows 1e-3 relative early and 1% at the end.

jitops gets the lengths as CUDA tensors: its loss and gradient then read nothing on the host,
and each step's loss and backward run under ``torch.cuda.set_sync_debug_mode("error")`` to
prove it (the losses are read once, after training). PyTorch gets them as CPU tensors, its
fastest form.

    PYTHONPATH=build/python python3 examples/python/ctc_train.py [--steps 300]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import time
from typing import Callable, Iterator, NamedTuple

import torch

import jitops.nn
from compare_runs import compare, parse_args, verdict

SEED = 0
CLASSES = 20  # blank + 19 labels
FEATURES = 32
HIDDEN = 128
BATCH = 32
MIN_LABELS, MAX_LABELS = 4, 12
FRAMES = 64  # the longest rendering: MAX_LABELS * (2 blanks + 3 frames) + 2 = 62
NOISE = 1.0
LEARNING_RATE = 3e-3
LOG_EVERY = 25
EARLY_STEPS = 100  # logged steps up to here must agree within EARLY_TOLERANCE
EARLY_TOLERANCE = 1e-3
FINAL_TOLERANCE = 1e-2


class Batch(NamedTuple):
    features: torch.Tensor  # [N, FEATURES, FRAMES] f32, on the GPU
    targets: torch.Tensor  # [N, MAX_LABELS] int64 padded with 0, on the GPU
    input_lengths: torch.Tensor  # [N] int64, on the GPU
    target_lengths: torch.Tensor  # [N] int64, on the GPU


def render(labels: list[int], generator: torch.Generator) -> list[int]:
    """The frame classes of one sample: blanks, then each label held for 1-3 frames."""
    def draw(low: int, high: int) -> int:
        return int(torch.randint(low, high + 1, (), generator=generator))

    frames: list[int] = []
    for label in labels:
        frames += [0] * draw(1, 2) + [label] * draw(1, 3)
    return frames + [0] * draw(0, 2)


def make_batches(count: int, device: str) -> list[Batch]:
    """``count`` batches of rendered label sequences, the same for every call."""
    generator = torch.Generator().manual_seed(SEED)
    prototypes = torch.randn(CLASSES, FEATURES, generator=generator)
    batches = []
    for _ in range(count):
        lengths = torch.randint(MIN_LABELS, MAX_LABELS + 1, (BATCH,), generator=generator)
        targets = torch.zeros(BATCH, MAX_LABELS, dtype=torch.int64)
        classes = torch.zeros(BATCH, FRAMES, dtype=torch.int64)
        input_lengths = torch.empty(BATCH, dtype=torch.int64)
        for n, length in enumerate(lengths.tolist()):
            labels = torch.randint(1, CLASSES, (length,), generator=generator)
            targets[n, :length] = labels
            frames = render(labels.tolist(), generator)
            classes[n, : len(frames)] = torch.tensor(frames)
            input_lengths[n] = len(frames)
        features = prototypes[classes] + NOISE * torch.randn(BATCH, FRAMES, FEATURES, generator=generator)
        batches.append(Batch(features.transpose(1, 2).contiguous().to(device), targets.to(device),
                             input_lengths.to(device), lengths.to(device)))
    return batches


class Model(torch.nn.Module):
    """Three 1-D convolutions over time; log-probabilities [T, N, C] for the CTC loss."""

    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Conv1d(FEATURES, HIDDEN, 5, padding=2), torch.nn.GELU(),
            torch.nn.Conv1d(HIDDEN, HIDDEN, 5, padding=2), torch.nn.GELU(),
            torch.nn.Conv1d(HIDDEN, CLASSES, 1),
        )

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.net(features).permute(2, 0, 1).log_softmax(-1)


LossFn = Callable[[torch.Tensor, Batch], torch.Tensor]


def train(loss_fn: LossFn, batches: list[Batch], device: str,
          guard: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext) -> list[float]:
    """The loss of every step of Adam training from SEED; the loss and its backward run
    under ``guard()``."""
    torch.manual_seed(SEED)
    model = Model().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    losses = []
    for batch in batches:
        log_probs = model(batch.features)
        with guard():
            loss = loss_fn(log_probs, batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses).tolist()  # the only read of the losses: after training


@contextlib.contextmanager
def no_host_sync() -> Iterator[None]:
    """Raises inside the block on any operation that makes the host wait for the GPU."""
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


def jitops_loss() -> LossFn:
    ctc = jitops.nn.CTCLoss(blank=0, reduction="mean")
    return lambda log_probs, b: ctc(log_probs, b.targets, b.input_lengths, b.target_lengths)


def torch_loss(batches: list[Batch]) -> LossFn:
    ctc = torch.nn.CTCLoss(blank=0, reduction="mean")
    host = {id(b): (b.input_lengths.cpu(), b.target_lengths.cpu()) for b in batches}
    return lambda log_probs, b: ctc(log_probs, b.targets, *host[id(b)])


def limit(steps: int) -> Callable[[int], float]:
    """The largest relative difference allowed at each step of a run of ``steps`` steps."""
    def at(step: int) -> float:
        if step == steps - 1:
            return FINAL_TOLERANCE
        return EARLY_TOLERANCE if step <= EARLY_STEPS else math.inf

    return at


def main() -> int:
    args = parse_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    if not torch.cuda.is_available():
        print("ctc_train: skipped, no GPU")
        return 77
    # Deterministic f32 everywhere but in PyTorch's CTC backward: no TF32, fixed cuDNN algorithms.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False

    batches = make_batches(args.steps, "cuda")
    start = time.perf_counter()
    ours = train(jitops_loss(), batches, "cuda", guard=no_host_sync)
    middle = time.perf_counter()
    theirs = train(torch_loss(batches), batches, "cuda")
    end = time.perf_counter()
    print(f"{torch.cuda.get_device_name()}: {args.steps} steps, batch {BATCH}, {FRAMES} frames, "
          f"{CLASSES} classes; jitops {middle - start:.1f} s, torch {end - middle:.1f} s")
    problems = compare(ours, theirs, limit(args.steps), LOG_EVERY)
    return verdict(problems, f"loss curves agree (logged steps <= {EARLY_STEPS} within {EARLY_TOLERANCE:g} "
                             f"relative, the last within {FINAL_TOLERANCE:.0%}); jitops' loss and backward "
                             f"ran without a host synchronization")


if __name__ == "__main__":
    raise SystemExit(main())
