#!/usr/bin/env python3
"""Scans and repeat: libjitops against PyTorch on the same tensors, in the same run.

libjitops runs through the jitops package: the forward ops of jitops.ops (which allocate their
outputs and scratch from torch's caching allocator), and the backward ops
torch.ops.jitops.scan_backward and repeat_backward called directly, as autograd calls them.
PyTorch writes its forward results into preallocated outputs (out=) and runs its backward
through autograd.

For every op it times libjitops and PyTorch with CUDA events, checks that both agree, and
reports the bytes each op must move at least (its byte floor), the achieved GB/s, and that
bandwidth as a share of a plain device copy measured in the same run (torch's copy_ of the same
tensor). Two timings of each: "queued" (the main columns) is the device time per call with the
calls queued back to back, as in a training step, so host latency overlaps the previous call;
"synced" waits for every call before the next one is issued, so it adds the host's launch
latency (for libjitops, the Python op's dispatch included). Prints a markdown table; --json
writes the rows.

    PYTHONPATH=build/python python3 bench/bench_scan.py [--n 8192] [--iters 20] [--json out.json]
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
from typing import Callable, TypedDict, Union, cast

import torch

import jitops.ops
from timing import Fn, time_ms, time_queued_ms

Scan = Callable[[torch.Tensor, int], Union[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]]  # jitops.ops' scans

SCANS: dict[str, Scan] = {"cumsum": jitops.ops.cumsum, "cumprod": jitops.ops.cumprod, "cummax": jitops.ops.cummax,
                          "cummin": jitops.ops.cummin, "logcumsumexp": jitops.ops.logcumsumexp}


class Row(TypedDict):
    """One row of the table (and of --json)."""
    kind: str
    op: str
    shape: list[int]
    axis: int | str
    ours_ms: float
    torch_ms: float
    ours_synced_ms: float
    torch_synced_ms: float
    speedup_vs_torch: float
    floor_mb: float
    ours_gbs: float
    pct_of_copy: float
    max_rel_err_vs_torch: float


def torch_forward(op: str, x: torch.Tensor, axis: int, y: torch.Tensor, idx: torch.Tensor | None) -> Fn:
    if op == "cumsum":
        return lambda: torch.cumsum(x, axis, out=y)
    if op == "cumprod":
        return lambda: torch.cumprod(x, axis, out=y)
    if op == "logcumsumexp":
        return lambda: torch.logcumsumexp(x, axis, out=y)
    fn = torch.cummax if op == "cummax" else torch.cummin
    indices = cast(torch.Tensor, idx)  # not None: the caller passes cummax's and cummin's indices
    return lambda: fn(x, axis, out=(y, indices))


def torch_op(op: str, x: torch.Tensor, axis: int) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    if op == "cumsum":
        return torch.cumsum(x, axis)
    if op == "cumprod":
        return torch.cumprod(x, axis)
    if op == "logcumsumexp":
        return torch.logcumsumexp(x, axis)
    return (torch.cummax if op == "cummax" else torch.cummin)(x, axis)


def make_input(op: str, n: int, seed: int) -> torch.Tensor:
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(n, n, device="cuda", generator=g)
    if op == "cumprod":  # products that stay finite along 8192 elements
        x = 1 + x * (1.0 / n)
    return x


def timings(fn: Fn, iters: int) -> tuple[float, float]:
    """(queued, synced) milliseconds per call: queued is the median over 5 batches of `iters`
    calls queued between two events."""
    return time_queued_ms(fn, inner=iters, reps=5), time_ms(fn, iters=iters)


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    finite = torch.isfinite(b)
    scale = b[finite].abs().max().clamp_min(1e-30)
    return float(((a - b)[finite]).abs().max() / scale)


def row(kind: str, op: str, shape: torch.Size, axis: int | str, ours: tuple[float, float], theirs: tuple[float, float],
        floor_bytes: int, copy_gbs: float, err: float) -> Row:
    ours_ms, torch_ms = ours[0], theirs[0]
    gbs = floor_bytes / (ours_ms * 1e6)
    return {
        "kind": kind, "op": op, "shape": list(shape), "axis": axis,
        "ours_ms": round(ours_ms, 4), "torch_ms": round(torch_ms, 4),
        "ours_synced_ms": round(ours[1], 4), "torch_synced_ms": round(theirs[1], 4),
        "speedup_vs_torch": round(torch_ms / ours_ms, 2),
        "floor_mb": round(floor_bytes / 1e6, 1), "ours_gbs": round(gbs, 1),
        "pct_of_copy": round(100 * gbs / copy_gbs, 1), "max_rel_err_vs_torch": err,
    }


def bench_forward(n: int, iters: int, copy_gbs: float) -> list[Row]:
    rows = []
    for op in ("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"):
        x = make_input(op, n, 1)
        for axis in (1, 0):

            def ours() -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
                return SCANS[op](x, axis)

            out = ours()
            y, idx = out if isinstance(out, tuple) else (out, None)
            ref = torch_op(op, x, axis)
            ref_v = ref[0] if isinstance(ref, tuple) else ref
            err = rel_err(y, ref_v)
            if idx is not None and not torch.equal(idx, ref[1]):
                err = float("nan")  # indices differ: reported, not hidden
            ty = torch.empty_like(x)
            ti = torch.empty_like(idx) if idx is not None else None
            t_ours = timings(ours, iters)
            t_torch = timings(torch_forward(op, x, axis, ty, ti), iters)
            floor = x.numel() * (4 + 4 + (8 if idx is not None else 0))
            rows.append(row("forward", op, x.shape, axis, t_ours, t_torch, floor, copy_gbs, err))
            print(rows[-1], file=sys.stderr)
    return rows


def bench_backward(n: int, iters: int, copy_gbs: float) -> list[Row]:
    rows = []
    for op in ("cumsum", "cumprod", "cummax", "logcumsumexp"):
        x = make_input(op, n, 2)
        for axis in (1, 0):
            xg = x.clone().requires_grad_(True)
            out = torch_op(op, xg, axis)
            yv = out[0] if isinstance(out, tuple) else out
            idx = out[1] if isinstance(out, tuple) else None
            g = torch.Generator(device="cuda").manual_seed(3)
            dy = torch.randn(x.shape, device="cuda", generator=g)
            y = yv.detach()

            def ours() -> torch.Tensor:
                return torch.ops.jitops.scan_backward(op, dy, x, y, idx, axis, False)

            def theirs() -> None:
                torch.autograd.grad(yv, xg, dy, retain_graph=True)

            err = rel_err(ours(), torch.autograd.grad(yv, xg, dy, retain_graph=True)[0])
            t_ours = timings(ours, iters)
            t_torch = timings(theirs, iters)
            streams = {"cumsum": 8, "cumprod": 16, "cummax": 16, "logcumsumexp": 16}[op]
            rows.append(row("backward", op, x.shape, axis, t_ours, t_torch, x.numel() * streams,
                            copy_gbs, err))
            print(rows[-1], file=sys.stderr)
    return rows


def bench_repeat(iters: int, copy_gbs: float) -> list[Row]:
    rows = []
    x = torch.randn(1024, 1024, device="cuda")
    reps = (4, 4)

    def ours() -> torch.Tensor:
        return jitops.ops.repeat(x, *reps)

    y = ours()
    err = rel_err(y, x.repeat(*reps))
    t_ours = timings(ours, iters)
    t_torch = timings(lambda: x.repeat(*reps), iters)
    floor = (x.numel() + y.numel()) * 4
    rows.append(row("repeat", "repeat", x.shape, "4x4", t_ours, t_torch, floor, copy_gbs, err))
    print(rows[-1], file=sys.stderr)

    xg = x.clone().requires_grad_(True)
    yg = xg.repeat(*reps)
    dy = torch.randn(yg.shape, device="cuda")

    def ours_bwd() -> torch.Tensor:
        return torch.ops.jitops.repeat_backward(dy, list(reps), list(x.shape))

    err = rel_err(ours_bwd(), torch.autograd.grad(yg, xg, dy, retain_graph=True)[0])
    t_ours = timings(ours_bwd, iters)
    t_torch = timings(lambda: torch.autograd.grad(yg, xg, dy, retain_graph=True), iters)
    rows.append(row("repeat", "repeat backward", x.shape, "4x4", t_ours, t_torch, floor, copy_gbs,
                    err))
    print(rows[-1], file=sys.stderr)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json")
    args = ap.parse_args()

    x = torch.randn(args.n, args.n, device="cuda")
    y = torch.empty_like(x)
    copy_ms, copy_synced_ms = timings(lambda: y.copy_(x), args.iters)
    copy_gbs = 2 * x.numel() * 4 / (copy_ms * 1e6)
    del x, y

    rows = bench_forward(args.n, args.iters, copy_gbs)
    rows += bench_backward(args.n, args.iters, copy_gbs)
    rows += bench_repeat(args.iters, copy_gbs)

    gpu = torch.cuda.get_device_name()
    print("GPU: %s, PyTorch %s, %s; device copy of f32 %dx%d: %.4f ms = %.0f GB/s (read+write)"
          " queued, %.4f ms synced" % (gpu, torch.__version__, datetime.date.today().isoformat(),
                                       args.n, args.n, copy_ms, copy_gbs, copy_synced_ms))
    print()
    print("| kind | op | shape | axis | libjitops ms | PyTorch ms | speed-up | GB/s | % of copy |"
          " synced ms: libjitops / PyTorch | rel. err |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %s | %s | %s | %.4f | %.4f | %.2fx | %.0f | %.0f%% | %.4f / %.4f | %.1e |"
              % (r["kind"], r["op"], "x".join(map(str, r["shape"])), r["axis"], r["ours_ms"],
                 r["torch_ms"], r["speedup_vs_torch"], r["ours_gbs"], r["pct_of_copy"],
                 r["ours_synced_ms"], r["torch_synced_ms"], r["max_rel_err_vs_torch"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": gpu, "torch": torch.__version__, "copy_ms": copy_ms,
                       "copy_synced_ms": copy_synced_ms,
                       "copy_gbs": copy_gbs, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
