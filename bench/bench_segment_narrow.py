#!/usr/bin/env python3
"""Segment reductions over narrow rows and many segments (issue 21, item 2): the sweep.

For D = 1, 2, 3, 4, 8 columns and S = 10^5, 10^6 segments (N rows, f32 data, int64 ids drawn
uniformly, so unsorted) and each reduction it times, with CUDA events (bench_segment.py's
helpers: a warm-up, then the median of samples of back-to-back calls):
  ours           jitops_segment_reduce, automatic algorithm (with --forced also the sort and
                 atomic algorithms);
  scatter_reduce torch scatter_reduce_ (index expanded to [N, D] as a stride-0 view,
                 include_self=False, into a preallocated output);
  index_add      torch zero_() + index_add_ (sum and mean rows; mean's torch bar is
                 scatter_reduce alone, index_add_ has no mean).
ratio = the fastest torch time / ours. Before timing, ours is checked against torch (largest
difference over non-empty segments, and for sum/mean relative to a float64 reference) and
run twice more for bit-identical results.

Usage: PYTHONPATH=build/python python3 bench/bench_segment_narrow.py [--rows LOG2] [--cols
       1,2,3,4,8] [--segments 100000,1000000] [--forced] [--profile] [--json FILE]
  --profile  also one torch.profiler pass a configuration: each kernel's mean time (ours and
             torch's), printed after the table.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import TypedDict

import torch

from bench_segment import ATOMIC, MAX, NAMES, SORT, SUM, TORCH_REDUCE, forward_fn, per_call_ms
from timing import Fn

MEAN = 1


class Row(TypedDict):
    """One (N, D, S, reduction) of the table (and of --json)."""
    N: int
    D: int
    S: int
    kind: str
    ours_ms: float
    torch_scatter_ms: float
    torch_index_add_ms: float | None
    ratio: float
    max_diff: float
    rel_err: float
    bit_identical: bool
    workspace: int | None
    forced: dict[str, float]


class Profile(TypedDict):
    """--profile's kernel times of one (N, D, S, reduction): us by contestant and kernel name."""
    N: int
    D: int
    S: int
    kind: str
    kernels: dict[str, dict[str, float]]


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32)


def check(kind: int, out: torch.Tensor, ref: torch.Tensor, data: torch.Tensor, ids: torch.Tensor, S: int
          ) -> tuple[float, float]:
    """Largest |ours - torch| over non-empty segments, and for sum/mean the largest error
    relative to a float64 reference, scaled by the segment's sum of |x| (0 for max/min)."""
    counts = torch.bincount(ids, minlength=S)
    mask = counts > 0
    diff = (out[mask].double() - ref[mask].double()).abs().max().item()
    rel = 0.0
    if kind <= MEAN:
        d64 = data.double()
        exact = torch.zeros(out.shape, dtype=torch.float64, device=out.device)
        exact.index_add_(0, ids, d64)
        mag = torch.zeros_like(exact).index_add_(0, ids, d64.abs())
        if kind == MEAN:
            c = counts.clamp(min=1).double().view(-1, 1)
            exact, mag = exact / c, mag / c
        err = (out.double() - exact).abs() / mag.clamp(min=1e-300)
        rel = err[mask].max().item()
    return diff, rel


def kernel_times(fn: Fn, calls: int = 5) -> dict[str, float]:
    """Each CUDA kernel's mean microseconds over `calls` calls of fn, by name."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    times: dict[str, list[float]] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            times.setdefault(e.name, []).append(e.device_time)
    return {name[:90]: sum(t) / calls for name, t in times.items()}


def bench(N: int, D: int, S: int, args: argparse.Namespace, rows: list[Row], profiles: list[Profile]) -> None:
    torch.manual_seed(0)
    data = torch.randn(N, D, device="cuda", dtype=torch.float32)
    ids = torch.randint(0, S, (N,), device="cuda", dtype=torch.int64)
    index = ids.view(-1, 1).expand(-1, D)
    out = torch.empty(S, D, device="cuda")
    again = torch.empty(S, D, device="cuda")
    ref = torch.empty(S, D, device="cuda")
    inner, iters = 10, 9
    for kind in range(4):
        red = TORCH_REDUCE[kind]
        fwd, ws = forward_fn(kind, data, ids, S, out)
        fwd()
        ref.zero_().scatter_reduce_(0, index, data, red, include_self=False)
        torch.cuda.synchronize()
        diff, rel = check(kind, out, ref, data, ids, S)
        first = out.clone()
        identical = True
        for _ in range(2):
            again.fill_(float("nan"))
            f2, _ = forward_fn(kind, data, ids, S, again)
            f2()
            identical &= torch.equal(bits(again), bits(first))
        ours = per_call_ms(fwd, inner, iters)
        forced: dict[str, float] = {}
        if args.forced:
            for algo, name in ((SORT, "sort"), (ATOMIC, "atomic")):
                if kind >= MAX or algo == SORT:
                    f, _ = forward_fn(kind, data, ids, S, again, algorithm=algo)
                    forced[name] = per_call_ms(f, inner, iters)
        scatter = lambda: ref.scatter_reduce_(0, index, data, red, include_self=False)
        t_scatter = per_call_ms(scatter, inner, iters)
        t_index = None
        index_add = lambda: ref.zero_().index_add_(0, ids, data)
        if kind == SUM:
            t_index = per_call_ms(index_add, inner, iters)
        best = min(t for t in (t_scatter, t_index) if t is not None)
        row: Row = {"N": N, "D": D, "S": S, "kind": NAMES[kind], "ours_ms": ours,
                    "torch_scatter_ms": t_scatter, "torch_index_add_ms": t_index,
                    "ratio": best / ours, "max_diff": diff, "rel_err": rel,
                    "bit_identical": bool(identical), "workspace": ws, "forced": forced}
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
        if args.profile:
            prof = {"ours": kernel_times(fwd), "scatter_reduce": kernel_times(scatter)}
            if kind == SUM:
                prof["index_add"] = kernel_times(index_add)
            profiles.append({"N": N, "D": D, "S": S, "kind": NAMES[kind], "kernels": prof})


def print_table(rows: list[Row], profiles: list[Profile]) -> None:
    print("GPU: %s, torch %s, f32 data, int64 ids uniform random" %
          (torch.cuda.get_device_name(), torch.__version__))
    print()
    print("| N | D | S | op | ours ms | torch scatter_reduce ms | torch index_add_ ms | ratio | "
          "bit-identical | max diff vs torch | rel err vs f64 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ia = "%.4f" % r["torch_index_add_ms"] if r["torch_index_add_ms"] is not None else "-"
        print("| 2^%d | %d | %.0e | %s | %.4f | %.4f | %s | %.2fx | %s | %.2g | %.2g |" %
              (r["N"].bit_length() - 1, r["D"], r["S"], r["kind"], r["ours_ms"],
               r["torch_scatter_ms"], ia, r["ratio"], "yes" if r["bit_identical"] else "NO",
               r["max_diff"], r["rel_err"]))
    if any(r["forced"] for r in rows):
        print()
        for r in rows:
            if r["forced"]:
                print("  D=%d S=%d %s: auto %.4f, %s" % (r["D"], r["S"], r["kind"], r["ours_ms"],
                      ", ".join("%s %.4f" % kv for kv in r["forced"].items())))
    for p in profiles:
        print()
        print("kernels (us), D=%d S=%d %s:" % (p["D"], p["S"], p["kind"]))
        for who, ks in p["kernels"].items():
            for name, us in ks.items():
                print("  %-15s %8.1f  %s" % (who, us, name))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=20, help="log2 of N (default 20)")
    ap.add_argument("--cols", default="1,2,3,4,8")
    ap.add_argument("--segments", default="100000,1000000")
    ap.add_argument("--forced", action="store_true", help="also time the forced algorithms")
    ap.add_argument("--profile", action="store_true", help="also per-kernel times")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()
    rows: list[Row]
    profiles: list[Profile]
    rows, profiles = [], []
    for S in [int(s) for s in args.segments.split(",")]:
        for D in [int(d) for d in args.cols.split(",")]:
            bench(1 << args.rows, D, S, args, rows, profiles)
            torch.cuda.empty_cache()
    print_table(rows, profiles)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "profiles": profiles}, f, indent=1)


if __name__ == "__main__":
    main()
