#!/usr/bin/env python3
"""Segment reductions: libjitops against PyTorch on the same tensors in the same run.

For each shape (rows N, row length D, segments S; f32 data, int64 ids drawn uniformly, so
unsorted) and each reduction (sum, mean, max, min) it times, with CUDA events (warm-up, then
the median of several samples of back-to-back calls):
  forward   jitops_segment_reduce (automatic algorithm; for max/min also each algorithm
            forced), torch scatter_reduce_ (index expanded to [N, D], include_self=False,
            into a preallocated output) and torch index_add_/index_reduce_ (1-D index);
  backward  jitops_segment_reduce_backward, and torch autograd through scatter_reduce.
libjitops runs through the package's C layer (jitops._C, one function per C entry point) into
preallocated outputs, and takes its workspace from torch's caching allocator at each call.
Ours is checked against torch's result (non-empty segments) before timing. GB/s counts the
bytes a forward must move: data, ids and the output, once.

The last rows repeat the first shape with sorted ids (options.sorted) against the same torch
calls on the sorted ids.

Usage: PYTHONPATH=build/python python3 bench/bench_segment.py [--quick] [--shapes 0,1,...]
       [--no-sorted] [--once] [--json FILE]
  --shapes  indices into SHAPES (default all); --no-sorted skips the sorted-ids rows;
  --once    no timing: one forward and one backward of each (shape, reduction), for a
            profiler (e.g. ncu -k regex:segment) to time each kernel.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import TypedDict

import torch

import jitops.ops  # also makes torch's caching allocator the workspace allocator of jitops._C
from jitops import _C
from timing import Fn, time_queued_ms

SUM, MEAN, MAX, MIN = 0, 1, 2, 3
NAMES = ["sum", "mean", "max", "min"]
TORCH_REDUCE = ["sum", "mean", "amax", "amin"]
AUTO, SORT, ATOMIC = 0, 1, 2  # jitops_segment_algorithm
ALGO_NAMES = ["auto", "sort", "atomic"]
RUN, SIZE = 0, 2  # jitops._C's modes: launch (the workspace from torch) / the workspace bytes

SHAPES = [  # (N, D, S): the shape, then one parameter changed at a time
    (1 << 20, 64, 10000),
    (1 << 20, 1, 10000),
    (1 << 20, 1024, 10000),
    (1 << 20, 64, 100),
    (1 << 20, 64, 1000000),
]


class Row(TypedDict):
    """One (shape, reduction) of bench_shape (and of --json)."""
    N: int
    D: int
    S: int
    kind: str
    ours_ms: float
    torch_scatter_ms: float
    torch_index_ms: float
    ratio: float
    ours_gbps: float
    ours_bwd_ms: float
    torch_bwd_ms: float
    bwd_ratio: float
    bwd_over_fwd: float
    max_diff: float
    workspace: int | None
    bwd_workspace: int | None
    forced: dict[str, float]


def runtime_and_stream(t: torch.Tensor) -> tuple[int, int]:
    """The jitops runtime handle of t's device and torch's current stream there."""
    return jitops.Runtime(t.device).handle, torch.cuda.current_stream().cuda_stream


def forward_fn(kind: int, data: torch.Tensor, ids: torch.Tensor, S: int, out: torch.Tensor, algorithm: int = AUTO,
               sorted_ids: bool = False) -> tuple[Fn, int | None]:
    """A closure running the forward into `out`, and the workspace bytes it takes."""
    rt, stream = runtime_and_stream(data)
    args = (rt, kind, data, ids, S, out, int(sorted_ids), None, None, algorithm,  # no fill, no count
            stream)
    return (lambda: _C.segment_reduce(RUN, *args)), _C.segment_reduce(SIZE, *args)


def backward_fn(kind: int, dy: torch.Tensor, data: torch.Tensor, out: torch.Tensor, ids: torch.Tensor, S: int,
                dx: torch.Tensor, sorted_ids: bool = False) -> tuple[Fn, int | None]:
    """A closure running the backward into `dx`, and the workspace bytes it takes."""
    rt, stream = runtime_and_stream(dy)
    args = (rt, kind, dy, data, out, ids, S, dx, int(sorted_ids), 0, stream)  # first_occurrence 0
    return (lambda: _C.segment_reduce_backward(RUN, *args)), _C.segment_reduce_backward(SIZE, *args)


def per_call_ms(fn: Fn, inner: int, iters: int) -> float:
    """Median ms per call over `iters` samples of `inner` back-to-back calls."""
    return time_queued_ms(fn, inner, reps=iters, warmup=2 * inner)


def nonempty_max_diff(ours: torch.Tensor, ref: torch.Tensor, ids: torch.Tensor, S: int) -> float:
    counts = torch.bincount(ids, minlength=S)
    mask = counts > 0
    return (ours[mask].double() - ref[mask].double()).abs().max().item() if mask.any() else 0.0


def run_once(N: int, D: int, S: int, sorted_ids: bool = False) -> None:
    """One forward and one backward per reduction, nothing timed (for a profiler)."""
    torch.manual_seed(0)
    data = torch.randn(N, D, device="cuda", dtype=torch.float32)
    ids = torch.randint(0, S, (N,), device="cuda", dtype=torch.int64)
    if sorted_ids:
        ids = ids.sort().values
    out = torch.empty(S, D, device="cuda", dtype=torch.float32)
    dy = torch.randn(S, D, device="cuda", dtype=torch.float32)
    dx = torch.empty(N, D, device="cuda", dtype=torch.float32)
    for kind in range(4):
        fwd, _ = forward_fn(kind, data, ids, S, out, sorted_ids=sorted_ids)
        fwd()
        bwd, _ = backward_fn(kind, dy, data, out, ids, S, dx, sorted_ids)
        bwd()
        torch.cuda.synchronize()
        print("once: N=%d D=%d S=%d %s" % (N, D, S, NAMES[kind]), flush=True)


def bench_shape(N: int, D: int, S: int, inner: int, iters: int, rows: list[Row], sorted_ids: bool = False) -> None:
    torch.manual_seed(0)
    data = torch.randn(N, D, device="cuda", dtype=torch.float32)
    ids = torch.randint(0, S, (N,), device="cuda", dtype=torch.int64)
    if sorted_ids:
        ids = ids.sort().values
    index = ids.view(-1, 1).expand(-1, D)
    out = torch.empty(S, D, device="cuda", dtype=torch.float32)
    ref = torch.empty(S, D, device="cuda", dtype=torch.float32)
    alt = torch.empty(S, D, device="cuda", dtype=torch.float32)
    dy = torch.randn(S, D, device="cuda", dtype=torch.float32)
    dx = torch.empty(N, D, device="cuda", dtype=torch.float32)
    data_req = data.clone().requires_grad_(True)
    bytes_fwd = N * D * 4 + N * 8 + S * D * 4
    for kind in range(4):
        red = TORCH_REDUCE[kind]
        fwd, ws = forward_fn(kind, data, ids, S, out, sorted_ids=sorted_ids)
        fwd()
        ref.zero_().scatter_reduce_(0, index, data, red, include_self=False)
        torch.cuda.synchronize()
        diff = nonempty_max_diff(out, ref, ids, S)
        ours = per_call_ms(fwd, inner, iters)
        forced: dict[str, float] = {}
        if kind >= MAX and not sorted_ids:
            for algo in (SORT, ATOMIC):
                f, _ = forward_fn(kind, data, ids, S, alt, algorithm=algo)
                forced[ALGO_NAMES[algo]] = per_call_ms(f, inner, iters)
        t_scatter = per_call_ms(
            lambda: ref.scatter_reduce_(0, index, data, red, include_self=False), inner, iters)
        if kind == SUM:
            t_index = per_call_ms(lambda: ref.zero_().index_add_(0, ids, data), inner, iters)
        else:
            t_index = per_call_ms(
                lambda: ref.index_reduce_(0, ids, data, red, include_self=False), inner, iters)

        bwd, bws = backward_fn(kind, dy, data, out, ids, S, dx, sorted_ids)
        ours_b = per_call_ms(bwd, inner, iters)
        res = torch.zeros(S, D, device="cuda").scatter_reduce(0, index, data_req, red,
                                                               include_self=False)
        t_bwd = per_call_ms(
            lambda: torch.autograd.grad(res, data_req, dy, retain_graph=True), inner, iters)
        del res
        row: Row = {
            "N": N, "D": D, "S": S, "kind": NAMES[kind] + (" sorted" if sorted_ids else ""),
            "ours_ms": ours,
            "torch_scatter_ms": t_scatter, "torch_index_ms": t_index,
            "ratio": t_scatter / ours, "ours_gbps": bytes_fwd / ours / 1e6,
            "ours_bwd_ms": ours_b, "torch_bwd_ms": t_bwd, "bwd_ratio": t_bwd / ours_b,
            "bwd_over_fwd": ours_b / ours, "max_diff": diff, "workspace": ws,
            "bwd_workspace": bws, "forced": forced,
        }
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    del data_req, dx


def print_table(rows: list[Row], gpu: str) -> None:
    print("GPU: %s, torch %s, f32 data, int64 ids, uniform random (unsorted unless the op says "
          "sorted)" % (gpu, torch.__version__))
    print()
    print("| N | D | S | op | ours fwd ms | torch scatter_reduce ms | torch index_* ms | "
          "speed-up | ours GB/s | ours bwd ms | torch bwd ms | bwd speed-up | bwd/fwd |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %d | %d | %d | %s | %.4f | %.4f | %.4f | %.2fx | %.0f | %.4f | %.4f | %.2fx | "
              "%.2f |" % (r["N"], r["D"], r["S"], r["kind"], r["ours_ms"],
                          r["torch_scatter_ms"], r["torch_index_ms"], r["ratio"],
                          r["ours_gbps"], r["ours_bwd_ms"], r["torch_bwd_ms"], r["bwd_ratio"],
                          r["bwd_over_fwd"]))
    print()
    print("max/min forward by algorithm (ms): ")
    for r in rows:
        if r["forced"]:
            print("  N=%d D=%d S=%d %s: auto %.4f, sort %.4f, atomic %.4f" %
                  (r["N"], r["D"], r["S"], r["kind"], r["ours_ms"], r["forced"]["sort"],
                   r["forced"]["atomic"]))
    worst = max(r["max_diff"] for r in rows)
    print("largest |ours - torch| over non-empty segments: %.3g" % worst)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="the first shape only")
    ap.add_argument("--shapes", help="comma-separated indices into SHAPES (default: all)")
    ap.add_argument("--no-sorted", action="store_true", help="skip the sorted-ids rows")
    ap.add_argument("--once", action="store_true", help="run each call once, time nothing")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()
    rows: list[Row] = []
    shapes = SHAPES[:1] if args.quick else SHAPES
    if args.shapes:
        shapes = [SHAPES[int(i)] for i in args.shapes.split(",")]
    if args.once:
        for N, D, S in shapes:
            run_once(N, D, S)
        return
    for N, D, S in shapes:
        big = N * D >= (1 << 28)
        bench_shape(N, D, S, inner=2 if big else 10, iters=5 if big else 9, rows=rows)
        torch.cuda.empty_cache()
    # Sorted ids (TensorFlow's segment_*): ours takes the boundaries path; torch has no
    # sorted variant of scatter_reduce, so it runs the same call on the sorted ids.
    if not args.no_sorted:
        N, D, S = SHAPES[0]
        bench_shape(N, D, S, inner=10, iters=9, rows=rows, sorted_ids=True)
    print_table(rows, torch.cuda.get_device_name())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
