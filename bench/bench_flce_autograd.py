#!/usr/bin/env python3
"""Fused linear cross-entropy as a PyTorch training step calls it: forward and backward through
autograd, against PyTorch's unfused op, from host-bound shapes to GEMM-bound ones.

    ours:   jitops.ops.fused_linear_cross_entropy(x, w, t).backward()
    torch:  F.cross_entropy(x @ w.T, t).backward()

Both on the same tensors (x and w require grad), f32 and bf16, queued timing: ``--inner`` calls
back to back between two CUDA events, the median of ``--reps`` samples, both sides in turns
(what a training loop sees: where the GPU finishes a call sooner than the host issues it, the
host's time a call decides). bench_flce.py times the C entry points at LLM shapes; this script
adds the autograd layer and the small shapes, where three cuBLASLt calls (about 6-11 us of host
time each, bench/NOTES-flce.md) and the autograd record are most of a call. Each row also checks
that the two losses agree and that two of our calls give identical bits.

Usage: PYTHONPATH=build/python python3 bench/bench_flce_autograd.py [--shapes BT,H,V ...]
       [--dtypes f32 bf16] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
from typing import TypedDict

import torch
import torch.nn.functional as F

import jitops.ops
from timing import time_interleaved_queued

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
SHAPES = ["64,64,256", "256,256,1024", "512,512,4096", "1024,1024,8192", "2048,1024,32000",
          "4096,2048,32000"]


class Row(TypedDict):
    bt: int
    h: int
    v: int
    dtype: str
    ms: float
    torch_ms: float
    speedup: float
    loss_rel_diff: float


class Results(TypedDict):
    """What --json writes."""
    gpu: str
    torch: str
    rows: list[Row]


def bench_shape(bt: int, h: int, v: int, dtype: torch.dtype, inner: int, reps: int) -> Row:
    g = torch.Generator(device="cuda").manual_seed(bt * 7 + v)
    x = torch.randn(bt, h, device="cuda", dtype=dtype, generator=g).requires_grad_()
    w = (torch.randn(v, h, device="cuda", dtype=dtype, generator=g) / h ** 0.5).requires_grad_()
    t = torch.randint(0, v, (bt,), device="cuda", generator=g)

    def ours() -> None:
        jitops.ops.fused_linear_cross_entropy(x, w, t).backward()

    def theirs() -> None:
        F.cross_entropy(x @ w.T, t).backward()

    with torch.no_grad():
        a = jitops.ops.fused_linear_cross_entropy(x, w, t)
        b = jitops.ops.fused_linear_cross_entropy(x, w, t)
        ref = F.cross_entropy((x @ w.T).float(), t)
    if not torch.equal(a, b):
        raise AssertionError(f"{bt}x{h}x{v} {dtype}: two calls differ")
    diff = ((a.double() - ref.double()).abs() / ref.double().abs()).item()
    if diff > (1e-5 if dtype == torch.float32 else 1e-2):
        raise AssertionError(f"{bt}x{h}x{v} {dtype}: loss {a.item()} against {ref.item()}")
    ms, torch_ms = time_interleaved_queued([ours, theirs], inner, reps)
    x.grad = w.grad = None
    return {"bt": bt, "h": h, "v": v, "dtype": str(dtype).split(".")[1], "ms": ms,
            "torch_ms": torch_ms, "speedup": torch_ms / ms, "loss_rel_diff": diff}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", nargs="*", default=SHAPES, help="BT,H,V")
    ap.add_argument("--dtypes", nargs="*", default=list(DTYPES), choices=list(DTYPES))
    ap.add_argument("--inner", type=int, default=20, help="queued calls a sample")
    ap.add_argument("--reps", type=int, default=9, help="samples a side")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    results: Results = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                        "rows": []}
    print("GPU: %s; torch %s; forward + backward through autograd, ms a call, queued" % (
        results["gpu"], results["torch"]))
    print("%5s %6s %5s %6s %10s %10s %8s" % ("dtype", "BT", "H", "V", "ours ms", "torch ms",
                                             "speed-up"))
    for name in args.dtypes:
        for shape in args.shapes:
            bt, h, v = (int(s) for s in shape.split(","))
            row = bench_shape(bt, h, v, DTYPES[name], args.inner, args.reps)
            results["rows"].append(row)
            print("%5s %6d %5d %6d %10.4f %10.4f %7.2fx" % (
                name, bt, h, v, row["ms"], row["torch_ms"], row["speedup"]), flush=True)
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
