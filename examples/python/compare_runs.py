"""What the two training examples (ctc_train.py, lm_head_train.py) share: the command line,
the two loss curves printed side by side and checked step by step, and the verdict."""

from __future__ import annotations

import argparse
from typing import Callable

MIN_STEPS = 50  # fewer, and the models have not learned enough for the check


def parse_args(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """Adds --steps (the training steps of each run) to ``parser`` and parses the command line."""
    parser.add_argument("--steps", type=int, default=300,
                        help=f"training steps of each run (default 300, at least {MIN_STEPS})")
    args = parser.parse_args()
    if args.steps < MIN_STEPS:
        parser.error(f"--steps must be at least {MIN_STEPS}, for the model to learn")
    return args


def compare(ours: list[float], theirs: list[float], limit: Callable[[int], float], every: int) -> list[str]:
    """Prints the curves (jitops, torch) every ``every`` steps and at the last one, with their
    relative difference; returns what disagrees: each printed step whose difference is not below
    ``limit(step)`` (``math.inf`` leaves a step unchecked), and a model that did not learn
    (its last loss not below half its first)."""
    problems = []
    last = len(ours) - 1
    print(f"{'step':>5} {'jitops':>12} {'torch':>12} {'rel. diff':>10}")
    for step in sorted(set(range(0, last + 1, every)) | {last}):
        rel = abs(ours[step] - theirs[step]) / abs(theirs[step])
        print(f"{step:5d} {ours[step]:12.6f} {theirs[step]:12.6f} {rel:10.2e}")
        if not rel < limit(step):
            problems.append(f"step {step}: relative difference {rel:.2e} >= {limit(step):g}")
    if not ours[last] < ours[0] / 2:
        problems.append(f"the model did not learn: loss {ours[0]:.4f} -> {ours[last]:.4f}")
    return problems


def verdict(problems: list[str], success: str) -> int:
    """Prints each problem, or ``success`` when there is none; the exit status."""
    for problem in problems:
        print(f"MISMATCH: {problem}")
    if not problems:
        print(success)
    return 1 if problems else 0
