#!/usr/bin/env python3
"""Host overhead of the Python ops (issue 19, part 5): the host time of one call of a
``jitops.ops`` op (custom-op dispatch, argument conversion, output and workspace allocation
from torch's caching allocator, then the C call) against the same C call made from C, and
against a PyTorch op of similar size, in one run.

The C calls are bench/op_host_overhead.c, loaded into this process as a library
(``build/bench/libop_host_overhead.so``) and timed by its own C loop, with a preallocated
workspace. A lent machine's host speed drifts by tens of percent between minutes, so for each
row the C calls, the jitops calls, the PyTorch op and the jitops calls through torch.ops take
turns in batches of BATCH calls (CHUNKS turns each): whatever the host does, each of them sees
it in the same proportion. A cell is the median host time of one call over its CHUNKS x BATCH
calls, each timed alone (time.perf_counter_ns here, clock_gettime in C), a synchronization (not
timed) closing every batch so that the GPU queue never fills; the spread is the 10th to 90th
percentile over the turns of (the turn's jitops median - the C median just before it). The same
C program also runs once in a process of its own (``build/bench/op_host_overhead``), with the
CUDA libraries this process loaded, and its medians are printed under the table.

Each op gets a problem small enough that launching dominates. "no_grad" rows run under
torch.no_grad(); "requires_grad" rows give the op inputs that require gradients, so autograd
records the graph (and fused linear cross-entropy then computes its gradients in the forward:
its C column is that call, with grad_input and grad_weight). PyTorch's ctc_loss gets its
lengths as CPU tensors (its fastest form; jitops gets them on the device).

Prints a markdown table; exits 77 without a GPU.

    PYTHONPATH=build/python python3 bench/bench_host_overhead.py [--chunks 40]
"""

from __future__ import annotations

import argparse
import ctypes
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

WARMUP, BATCH, CHUNKS = 200, 100, 20
TARGET_US = 10.0  # issue 19: at most 10 us above the C call
BUILD_BENCH = Path(__file__).resolve().parent.parent / "build" / "bench"

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


def python_batch(fn: Fn, calls: int) -> list[float]:
    """The host nanoseconds of each of `calls` fn() calls, from an idle GPU queue."""
    torch.cuda.synchronize()
    samples: list[float] = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - start)
    torch.cuda.synchronize()
    return samples


class CBaseline:
    """op_host_overhead.c in this process: its own runtime, tensors and workspaces on device 0."""

    def __init__(self, path: Path) -> None:
        if not path.exists():
            sys.exit(f"{path} is missing: build it with `cmake --build build --target op_host_overhead_lib`")
        self.lib = ctypes.CDLL(str(path))
        self.lib.ohc_error.restype = ctypes.c_char_p
        self.lib.ohc_op_name.restype = ctypes.c_char_p
        self.lib.ohc_op_name.argtypes = [ctypes.c_int]
        self.lib.ohc_time.argtypes = [ctypes.c_int] * 4 + [ctypes.POINTER(ctypes.c_double)]
        self._check(self.lib.ohc_open())
        self.ops = {self.lib.ohc_op_name(i).decode(): i for i in range(self.lib.ohc_op_count())}

    def _check(self, status: int) -> None:
        if status != 0:
            sys.exit(f"op_host_overhead: {self.lib.ohc_error().decode()}")

    def batch(self, op: str, calls: int, warmup: int = 0) -> list[float]:
        """The host nanoseconds of each of `calls` calls of `op`, timed in C."""
        samples = (ctypes.c_double * calls)()
        self._check(self.lib.ohc_time(self.ops[op], warmup, calls, BATCH, samples))
        return list(samples)


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


def own_process_ns(binary: Path) -> str:
    """The C program's medians in a process of its own, for reference (with the CUDA libraries
    this process uses, so that it runs the same library builds)."""
    if not binary.exists():
        return f"{binary} is missing"
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join([*cuda_library_dirs(), env.get("LD_LIBRARY_PATH", "")]).strip(os.pathsep)
    done = subprocess.run([str(binary)], capture_output=True, text=True, timeout=600, env=env)
    if done.returncode != 0:
        return f"{binary} failed (exit {done.returncode}): {done.stdout}{done.stderr}".strip()
    results = [line.split() for line in done.stdout.splitlines() if line.startswith("result ")]
    return ", ".join(f"{name} {float(ns) / 1e3:.1f}" for _, name, ns in results)


class Row(NamedTuple):
    case: Case
    grad: bool
    ours: Fn
    theirs: Fn


class Measured(NamedTuple):
    c: float  # median ns of one call: C
    python: float  # jitops.ops
    torch_op: float  # the PyTorch op
    dispatcher: float  # jitops.ops through torch.ops
    spread: tuple[float, float]  # 10th and 90th percentile of the turns' overheads, ns


def through_torch_ops(fn: Fn) -> Fn:
    def call() -> Any:
        with _torch.dispatcher_path():
            return fn()
    return call


def measure(row: Row, c: CBaseline, chunks: int) -> Measured:
    """The row's four contestants in turns of BATCH calls, after a warm-up of each."""
    c_op = row.case.c_op_grad if row.grad else row.case.c_op
    with torch.set_grad_enabled(row.grad):
        python_fns = (row.ours, row.theirs, through_torch_ops(row.ours))
        c.batch(c_op, 0, WARMUP)
        for fn in python_fns:
            python_batch(fn, WARMUP)
        pools: list[list[float]] = [[], [], [], []]
        turns = []
        for _ in range(chunks):
            c_turn = c.batch(c_op, BATCH)
            ours_turn = python_batch(python_fns[0], BATCH)
            turns.append(statistics.median(ours_turn) - statistics.median(c_turn))
            pools[0] += c_turn
            pools[1] += ours_turn
            pools[2] += python_batch(python_fns[1], BATCH)
            pools[3] += python_batch(python_fns[2], BATCH)
    deciles = statistics.quantiles(turns, n=10)
    return Measured(statistics.median(pools[0]), statistics.median(pools[1]), statistics.median(pools[2]),
                    statistics.median(pools[3]), (deciles[0], deciles[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--library", type=Path, default=BUILD_BENCH / "libop_host_overhead.so",
                        help="the C baseline as a library (op_host_overhead_lib)")
    parser.add_argument("--binary", type=Path, default=BUILD_BENCH / "op_host_overhead",
                        help="the same as a program, run once in a process of its own")
    parser.add_argument("--chunks", type=int, default=CHUNKS, help=f"turns of {BATCH} calls per contestant and row")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench_host_overhead: skipped, no GPU")
        return 77
    torch.cuda.init()
    rows = [Row(case, grad, *case.make(grad)) for case in CASES for grad in (False, True)]
    c = CBaseline(args.library)
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, jitops {jitops.__version__}, "
          f"{datetime.date.today().isoformat()}; CUDA libraries from {', '.join(cuda_library_dirs())}")
    print(f"host time of one call (us), each cell the median of {args.chunks} x {BATCH} calls taken in turns with "
          "the row's other columns; spread: 10th-90th percentile over the turns of (jitops - C). The last "
          "column is jitops.ops through torch.ops (the direct entries off)\n")
    print("| op | mode | C call | Python jitops | overhead | spread | torch op | via torch.ops |")
    print("|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for row in rows:
        m = measure(row, c, args.chunks)
        overhead = (m.python - m.c) / 1e3
        worst = max(worst, overhead)
        print(f"| {row.case.name} | {'requires_grad' if row.grad else 'no_grad'} | {m.c / 1e3:.1f} | "
              f"{m.python / 1e3:.1f} | {overhead:.1f} | {m.spread[0] / 1e3:.1f} to {m.spread[1] / 1e3:.1f} | "
              f"{m.torch_op / 1e3:.1f} | {m.dispatcher / 1e3:.1f} |", flush=True)
    verdict = "met" if worst <= TARGET_US else "NOT met"
    print(f"\nlargest overhead above the C call: {worst:.1f} us (target <= {TARGET_US:g} us: {verdict})")
    print(f"the C program in a process of its own (medians, us): {own_process_ns(args.binary)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
