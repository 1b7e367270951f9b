#!/usr/bin/env python3
"""Host overhead of the Python ops (issue 19, part 5): the host time of one call of a
``jitops.ops`` op (custom-op dispatch, argument conversion, output and workspace allocation
from torch's caching allocator, then the C call) against the same C call made from C
(``build/bench/op_host_overhead``, run first, as a subprocess, with the CUDA libraries this
process has loaded), and against a PyTorch op of similar size, in one run.

Each op gets a problem small enough that launching dominates. A measurement is the median host
time of one call over CALLS calls, each timed alone with time.perf_counter_ns, in batches of
BATCH followed by a synchronization (not timed) so that the GPU queue never fills, after a
warm-up. A lent machine's host speed drifts by tens of percent between minutes, so the C
program and the Python rows are measured in alternating rounds, and each cell is the median
over the rounds (the overhead's range over them is printed beside it). The same calls are also timed through torch.ops (the direct entries of jitops._direct
off), for the breakdown. "no_grad" rows run under torch.no_grad(); "requires_grad" rows give
the op inputs that require gradients, so autograd records the graph (and fused linear
cross-entropy then computes its gradients in the forward: its C column is that call, with
grad_input and grad_weight). PyTorch's ctc_loss gets its lengths as CPU tensors (its fastest
form; jitops gets them on the device).

Prints a markdown table; exits 77 without a GPU.

    PYTHONPATH=build/python python3 bench/bench_host_overhead.py [--binary build/bench/op_host_overhead]
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

import torch
import torch.nn.functional as F

import jitops.ops
from jitops.ops import _torch

WARMUP, CALLS, BATCH = 200, 2000, 100
TARGET_US = 10.0  # issue 19: at most 10 us above the C call
DEFAULT_BINARY = Path(__file__).resolve().parent.parent / "build" / "bench" / "op_host_overhead"

Fn = Callable[[], Any]


class Case(NamedTuple):
    name: str  # the problem, as the table shows it
    c_op: str  # the C program's name of the call a no_grad forward makes
    c_op_grad: str  # ... and of the call a forward with requires_grad inputs makes
    make: Callable[[bool], tuple[Fn, Fn]]  # requires_grad -> (jitops call, torch call)


def cumsum(grad: bool) -> tuple[Fn, Fn]:
    x = torch.randn(4, 1024, device="cuda", requires_grad=grad)
    return lambda: jitops.ops.cumsum(x, 1), lambda: torch.cumsum(x, 1)


def segment_sum(grad: bool) -> tuple[Fn, Fn]:
    data = torch.randn(1024, 8, device="cuda", requires_grad=grad)
    ids = torch.randint(0, 64, (1024,), device="cuda")
    return (lambda: jitops.ops.segment_sum(data, ids, 64),
            lambda: data.new_zeros(64, 8).index_add_(0, ids, data))


def repeat(grad: bool) -> tuple[Fn, Fn]:
    x = torch.randn(64, 64, device="cuda", requires_grad=grad)
    return lambda: jitops.ops.repeat(x, 2, 2), lambda: x.repeat(2, 2)


def ctc_loss(grad: bool) -> tuple[Fn, Fn]:
    T, N, C, S = 32, 4, 16, 8
    log_probs = torch.randn(T, N, C, device="cuda").log_softmax(-1).requires_grad_(grad)
    targets = torch.randint(1, C, (N, S), device="cuda")
    input_lengths = torch.full((N,), T, dtype=torch.int64)
    target_lengths = torch.full((N,), S, dtype=torch.int64)
    on_device = input_lengths.cuda(), target_lengths.cuda()
    return (lambda: jitops.ops.ctc_loss(log_probs, targets, *on_device),
            lambda: F.ctc_loss(log_probs, targets, input_lengths, target_lengths))


def fused_linear_cross_entropy(grad: bool) -> tuple[Fn, Fn]:
    x = torch.randn(64, 64, device="cuda", requires_grad=grad)
    w = torch.randn(256, 64, device="cuda", requires_grad=grad)
    target = torch.randint(0, 256, (64,), device="cuda")
    return (lambda: jitops.ops.fused_linear_cross_entropy(x, w, target),
            lambda: F.cross_entropy(F.linear(x, w), target))


CASES = [
    Case("cumsum [4, 1024] f32, dim 1", "cumsum", "cumsum", cumsum),
    Case("segment_sum [1024, 8] f32, 64 segments, int64 ids", "segment_sum", "segment_sum", segment_sum),
    Case("repeat [64, 64] f32 by (2, 2)", "repeat", "repeat", repeat),
    Case("ctc_loss T 32, N 4, C 16, S 8 f32", "ctc_loss", "ctc_loss", ctc_loss),
    Case("fused_linear_cross_entropy BT 64, H 64, V 256 f32", "fused_linear_cross_entropy",
         "fused_linear_cross_entropy_grads", fused_linear_cross_entropy),
]


def host_ns(fn: Fn) -> float:
    """The median host nanoseconds of one fn() call."""
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(CALLS // BATCH):
        for _ in range(BATCH):
            start = time.perf_counter_ns()
            fn()
            samples.append(time.perf_counter_ns() - start)
        torch.cuda.synchronize()
    return statistics.median(samples)




def cuda_library_dirs() -> list[str]:
    """The folders of the CUDA libraries this process has loaded (cuBLASLt, the runtime, NVRTC:
    PyTorch's own copies, when it ships them), in the order they appear."""
    dirs: list[str] = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            name = os.path.basename(path)
            if name.startswith(("libcublasLt.so", "libcudart.so", "libnvrtc.so")) and os.path.dirname(path) not in dirs:
                dirs.append(os.path.dirname(path))
    return dirs


def c_call_ns(binary: Path) -> tuple[str, dict[str, float]]:
    """The C program's header line and its median ns per op; exits as it does without a GPU.
    It runs with the CUDA libraries this process uses (PyTorch's cuBLASLt rather than the
    toolkit's, say), so that the difference measures the binding, not two library builds."""
    if not binary.exists():
        sys.exit(f"{binary} is missing: build it with `cmake --build build --target op_host_overhead`")
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join([*cuda_library_dirs(), env.get("LD_LIBRARY_PATH", "")]).strip(os.pathsep)
    done = subprocess.run([str(binary)], capture_output=True, text=True, timeout=600, env=env)
    if done.returncode == 77:
        print(done.stdout.strip())
        sys.exit(77)
    if done.returncode != 0:
        sys.exit(f"{binary} failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")
    lines = done.stdout.splitlines()
    results = {name: float(ns) for _, name, ns in (line.split() for line in lines if line.startswith("result "))}
    return lines[0], results


class Row(NamedTuple):
    case: Case
    grad: bool
    ours: Fn
    theirs: Fn


def measure_round(rows: list[Row], binary: Path) -> tuple[str, list[tuple[float, float, float, float]]]:
    """One round: the C program, then every row's (C, jitops, torch op, via torch.ops) ns."""
    header, c_ns = c_call_ns(binary)
    results = []
    for row in rows:
        with torch.set_grad_enabled(row.grad):
            python_ns, torch_ns = host_ns(row.ours), host_ns(row.theirs)
            with _torch.dispatcher_path():
                dispatcher_ns = host_ns(row.ours)
        c = c_ns[row.case.c_op_grad if row.grad else row.case.c_op]
        results.append((c, python_ns, torch_ns, dispatcher_ns))
    return header, results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", type=Path, default=DEFAULT_BINARY, help="the C program (op_host_overhead)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of (C program, every Python row)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench_host_overhead: skipped, no GPU")
        return 77
    torch.cuda.init()
    rows = [Row(case, grad, *case.make(grad)) for case in CASES for grad in (False, True)]
    rounds = [measure_round(rows, args.binary) for _ in range(args.rounds)]
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, jitops {jitops.__version__}, "
          f"{datetime.date.today().isoformat()}; C program: {rounds[0][0]}; CUDA libraries from "
          f"{', '.join(cuda_library_dirs())}")
    print(f"host time of one call (us): each round runs the C program, then times every row, each the median of "
          f"{CALLS} calls; a cell is the median over {args.rounds} rounds, and the spread is the overhead's range "
          "over the rounds. The last column is jitops.ops through torch.ops (the direct entries off)\n")
    print("| op | mode | C call | Python jitops | overhead | spread | torch op | via torch.ops |")
    print("|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for i, row in enumerate(rows):
        per_round = [results[i] for _, results in rounds]
        c, python_ns, torch_ns, dispatcher_ns = (statistics.median(r[k] for r in per_round) for k in range(4))
        overheads = [(r[1] - r[0]) / 1e3 for r in per_round]
        overhead = (python_ns - c) / 1e3
        worst = max(worst, overhead)
        print(f"| {row.case.name} | {'requires_grad' if row.grad else 'no_grad'} | {c / 1e3:.1f} | "
              f"{python_ns / 1e3:.1f} | {overhead:.1f} | {min(overheads):.1f} to {max(overheads):.1f} | "
              f"{torch_ns / 1e3:.1f} | {dispatcher_ns / 1e3:.1f} |", flush=True)
    verdict = "met" if worst <= TARGET_US else "NOT met"
    print(f"\nlargest overhead above the C call: {worst:.1f} us (target <= {TARGET_US:g} us: {verdict})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
