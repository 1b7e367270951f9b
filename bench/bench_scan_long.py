#!/usr/bin/env python3
"""Scans along one long axis: libjitops against PyTorch on the same tensors, in the same run.

Two parts.

* Long axes: every scan forward (cumsum, cumprod, cummax, cummin, logcumsumexp) and backward
  (cumsum, cumprod, cummax, cummin, logcumsumexp), f32 and bf16, on a 1-D tensor of 2^20 and
  2^27 elements and on 8 rows of 2^17 and 2^24, scanned along the last axis. Each row gives
  our time and PyTorch's, the speed-up, and our bandwidth (the op's byte floor over its time)
  as a share of a device copy of the same tensor timed in the same run. The targets: at least
  85% of copy and at least 1.5x PyTorch.
* Sweep: cumsum and cummax forward, f32, rows x length (1 to 512 rows of 2^16 to 2^24
  elements, at most 2^28 elements): the speed-up over PyTorch per cell.

Times are queued (20 calls between two CUDA events, median of 5 batches), as in
bench_scan.py. Our backward is torch.ops.jitops.scan_backward called as autograd calls it;
PyTorch's is autograd through its own op.

    PYTHONPATH=build/python python3 bench/bench_scan_long.py [--part long|sweep|all]
        [--ops cumsum,logcumsumexp,...] [--json F]
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
from typing import TypedDict

import torch

import jitops.ops
from bench_scan import SCANS, Scan
from timing import Fn, time_queued_ms

FORWARD = ("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp")
BACKWARD = ("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp")
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


class Result(TypedDict):
    """One row of either part (and of --json)."""
    kind: str
    op: str
    dtype: str
    shape: list[int]
    ours_ms: float
    torch_ms: float
    speedup: float
    ours_gbs: float
    pct_of_copy: float
    rel_err: float


def queued(fn: Fn, iters: int) -> float:
    """Queued milliseconds per call; an op slower than 10 ms a call (some of PyTorch's scans
    along a long axis take hundreds) is timed over fewer calls."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    once = start.elapsed_time(end)
    if once > 10:
        return time_queued_ms(fn, inner=1, reps=3, warmup=0)
    return time_queued_ms(fn, inner=iters, reps=5)


def make_input(op: str, shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(shape, device="cuda", generator=g)
    if op == "cumprod":  # products that stay finite along the whole axis
        x = 1 + x * (0.5 / shape[-1] ** 0.5)
    return x.to(dtype)


def torch_forward(op: str, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    fns: dict[str, Scan] = {"cumsum": torch.cumsum, "cumprod": torch.cumprod, "cummax": torch.cummax,
                            "cummin": torch.cummin, "logcumsumexp": torch.logcumsumexp}
    fn = fns[op]  # the dict typed as a variable: a literal of overloaded functions is inferred as `function`
    return fn(x, -1)


def floor_bytes(kind: str, op: str, x: torch.Tensor) -> int:
    """Bytes the op must move at least: inputs read and outputs written once."""
    e, n = x.element_size(), x.numel()
    if op in ("cummax", "cummin"):
        return n * (2 * e + 8)  # x, y and int64 indices; backward: dy, indices, dx
    if kind == "backward" and op in ("cumprod", "logcumsumexp"):
        return n * 4 * e  # dy, x, y, dx
    return n * 2 * e


def copy_gbs(x: torch.Tensor, iters: int) -> float:
    y = torch.empty_like(x)
    ms = queued(lambda: y.copy_(x), iters)
    return 2 * x.numel() * x.element_size() / (ms * 1e6)


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    finite = torch.isfinite(b)
    scale = b[finite].abs().max().clamp_min(1e-30)
    return float(((a - b)[finite]).abs().max() / scale)


def result(kind: str, op: str, x: torch.Tensor, ours_ms: float, torch_ms: float, copy: float, err: float) -> Result:
    gbs = floor_bytes(kind, op, x) / (ours_ms * 1e6)
    return {"kind": kind, "op": op, "dtype": str(x.dtype).removeprefix("torch."),
            "shape": list(x.shape), "ours_ms": round(ours_ms, 4), "torch_ms": round(torch_ms, 4),
            "speedup": round(torch_ms / ours_ms, 2), "ours_gbs": round(gbs, 1),
            "pct_of_copy": round(100 * gbs / copy, 1), "rel_err": err}


def bench_forward(op: str, x: torch.Tensor, copy: float, iters: int) -> Result:
    ours = lambda: SCANS[op](x, -1)
    out, ref = ours(), torch_forward(op, x)
    y = out[0] if isinstance(out, tuple) else out
    err = rel_err(y, ref[0] if isinstance(ref, tuple) else ref)
    if isinstance(out, tuple) and not torch.equal(out[1], ref[1]):
        err = float("nan")  # indices differ: reported, not hidden
    return result("forward", op, x, queued(ours, iters), queued(lambda: torch_forward(op, x), iters),
                  copy, err)


def bench_backward(op: str, x: torch.Tensor, copy: float, iters: int) -> Result:
    xg = x.clone().requires_grad_(True)
    out = torch_forward(op, xg)
    yv, idx = (out[0], out[1]) if isinstance(out, tuple) else (out, None)
    dy = torch.randn(x.shape, device="cuda", generator=torch.Generator(device="cuda").manual_seed(3))
    dy = dy.to(x.dtype)
    y = yv.detach()
    ours = lambda: torch.ops.jitops.scan_backward(op, dy, x, y, idx, x.dim() - 1, False)
    theirs = lambda: torch.autograd.grad(yv, xg, dy, retain_graph=True)
    err = rel_err(ours(), theirs()[0])
    return result("backward", op, x, queued(ours, iters), queued(theirs, iters), copy, err)


def part_long(iters: int, ops: tuple[str, ...] = FORWARD) -> list[Result]:
    rows = []
    for dname, dtype in DTYPES.items():
        for shape in ((1 << 20,), (1 << 27,), (8, 1 << 17), (8, 1 << 24)):
            probe = torch.empty(shape, device="cuda", dtype=dtype).normal_()
            copy = copy_gbs(probe, iters)
            del probe
            for op in (o for o in FORWARD if o in ops):
                rows.append(bench_forward(op, make_input(op, shape, dtype, 1), copy, iters))
                print(rows[-1], file=sys.stderr, flush=True)
            for op in (o for o in BACKWARD if o in ops):
                rows.append(bench_backward(op, make_input(op, shape, dtype, 2), copy, iters))
                print(rows[-1], file=sys.stderr, flush=True)
            torch.cuda.empty_cache()
    return rows


def part_sweep(iters: int) -> list[Result]:
    rows = []
    for op in ("cumsum", "cummax"):
        for lg in (16, 18, 20, 22, 24):
            for r in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512):
                if r << lg > 1 << 28:
                    continue
                x = make_input(op, (r, 1 << lg), torch.float32, 5)
                rows.append(bench_forward(op, x, copy_gbs(x, iters), iters))
                print(rows[-1], file=sys.stderr, flush=True)
                del x
            torch.cuda.empty_cache()
    return rows


def print_long(rows: list[Result]) -> None:
    print("| op | kind | dtype | shape | ours ms | PyTorch ms | speed-up | GB/s | % of copy |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %s | %s | %s | %.4f | %.4f | %.2fx | %.0f | %.0f%% |" % (
            r["op"], r["kind"], r["dtype"], "x".join(map(str, r["shape"])), r["ours_ms"],
            r["torch_ms"], r["speedup"], r["ours_gbs"], r["pct_of_copy"]))


def print_sweep(rows: list[Result]) -> None:
    for op in sorted({r["op"] for r in rows}):
        mine = [r for r in rows if r["op"] == op]
        lengths = sorted({r["shape"][1] for r in mine})
        counts = sorted({r["shape"][0] for r in mine})
        print("\n%s forward f32, speed-up over PyTorch (ours ms), rows x length:" % op)
        print("| rows | " + " | ".join("2^%d" % (n.bit_length() - 1) for n in lengths) + " |")
        print("|---|" + "---|" * len(lengths))
        for c in counts:
            cells = []
            for n in lengths:
                hit = [r for r in mine if r["shape"] == [c, n]]
                cells.append("%.2fx (%.4f)" % (hit[0]["speedup"], hit[0]["ours_ms"]) if hit else "")
            print("| %d | %s |" % (c, " | ".join(cells)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("long", "sweep", "all"), default="all")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--ops", default=",".join(FORWARD),
                    help="comma-separated ops of the long part (default: all five)")
    ap.add_argument("--json")
    args = ap.parse_args()
    ops = tuple(args.ops.split(","))
    unknown = [o for o in ops if o not in FORWARD]
    if unknown:
        ap.error("unknown op(s): %s (choose from %s)" % (", ".join(unknown), ", ".join(FORWARD)))
    long_rows = part_long(args.iters, ops) if args.part in ("long", "all") else []
    sweep_rows = part_sweep(args.iters) if args.part in ("sweep", "all") else []
    print("GPU: %s, PyTorch %s, %s" % (torch.cuda.get_device_name(), torch.__version__,
                                        datetime.date.today().isoformat()))
    if long_rows:
        print_long(long_rows)
    if sweep_rows:
        print_sweep(sweep_rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "long": long_rows, "sweep": sweep_rows}, f, indent=1)


if __name__ == "__main__":
    main()
