#!/usr/bin/env python3
"""Scans and repeat: libjitops against PyTorch on the same tensors, in the same run.

For every op it times libjitops and PyTorch with CUDA events, checks that both agree, and
reports the bytes each op must move at least (its byte floor), the achieved GB/s, and that
bandwidth as a share of a plain device copy measured in the same run (torch's copy_ of the same
tensor). Two timings of each: "queued" (the main columns) is the device time per call with the
calls queued back to back, as in a training step, so host latency overlaps the previous call;
"synced" waits for every call before the next one is issued, so it adds the host's launch
latency and, for libjitops ops that need scratch memory, the stream-ordered allocator's cost
after each synchronization. Prints a markdown table; --json writes the rows.

    python3 bench/bench_scan.py [--n 8192] [--iters 20] [--json out.json]
"""
import argparse
import ctypes
import datetime
import json
import sys

import torch

import jitops_ctypes as jc

SCAN_OPS = {"cumsum": 0, "cumprod": 1, "cummax": 2, "cummin": 3, "logcumsumexp": 4}


def bind(lib):
    P = ctypes.c_void_p
    lib.jitops_scan.argtypes = [P, ctypes.c_int, P, ctypes.c_int, ctypes.c_int, P, P, P, P]
    lib.jitops_scan_backward.argtypes = [P, ctypes.c_int, P, P, P, P, ctypes.c_int, ctypes.c_int,
                                         P, P, P]
    lib.jitops_repeat.argtypes = [P, P, ctypes.POINTER(ctypes.c_int64), ctypes.c_int, P, P]
    lib.jitops_repeat_backward.argtypes = [P, P, ctypes.POINTER(ctypes.c_int64), ctypes.c_int, P,
                                           P, P]


def ptr(holder):
    return None if holder is None else ctypes.cast(holder.ref, ctypes.c_void_p)


def torch_forward(op, x, axis, y, idx):
    if op == "cumsum":
        return lambda: torch.cumsum(x, axis, out=y)
    if op == "cumprod":
        return lambda: torch.cumprod(x, axis, out=y)
    if op == "logcumsumexp":
        return lambda: torch.logcumsumexp(x, axis, out=y)
    fn = torch.cummax if op == "cummax" else torch.cummin
    return lambda: fn(x, axis, out=(y, idx))


def torch_op(op, x, axis):
    if op == "cumsum":
        return torch.cumsum(x, axis)
    if op == "cumprod":
        return torch.cumprod(x, axis)
    if op == "logcumsumexp":
        return torch.logcumsumexp(x, axis)
    return (torch.cummax if op == "cummax" else torch.cummin)(x, axis)


def make_input(op, n, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(n, n, device="cuda", generator=g)
    if op == "cumprod":  # products that stay finite along 8192 elements
        x = 1 + x * (1.0 / n)
    return x


def time_queued_ms(fn, iters, reps=5):
    """Device milliseconds per call: `iters` calls queued between two events, the median over
    `reps` such batches."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    per_call = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        per_call.append(start.elapsed_time(end) / iters)
    return sorted(per_call)[reps // 2]


def timings(fn, iters):
    """(queued, synced) milliseconds per call."""
    return time_queued_ms(fn, iters), jc.time_ms(fn, iters=iters)


def rel_err(a, b):
    a, b = a.double(), b.double()
    finite = torch.isfinite(b)
    scale = b[finite].abs().max().clamp_min(1e-30)
    return float(((a - b)[finite]).abs().max() / scale)


def row(kind, op, shape, axis, ours, theirs, floor_bytes, copy_gbs, err):
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


def bench_forward(lib, rt, stream, n, iters, copy_gbs):
    rows = []
    for op in ("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"):
        x = make_input(op, n, 1)
        for axis in (1, 0):
            y = torch.empty_like(x)
            idx = (torch.empty(x.shape, dtype=torch.int64, device="cuda")
                   if op in ("cummax", "cummin") else None)
            X, Y = jc.Tensor(x), jc.Tensor(y)
            I = jc.Tensor(idx) if idx is not None else None

            def ours():
                jc.check(lib, lib.jitops_scan(rt, SCAN_OPS[op], ptr(X), axis, 0, ptr(Y), ptr(I),
                                              None, stream), "jitops_scan")

            ours()
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


def bench_backward(lib, rt, stream, n, iters, copy_gbs):
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
            dx = torch.empty_like(x)
            y = yv.detach()
            DY, DX, X, Y = jc.Tensor(dy), jc.Tensor(dx), jc.Tensor(x), jc.Tensor(y)
            I = jc.Tensor(idx) if idx is not None else None

            def ours():
                jc.check(lib, lib.jitops_scan_backward(rt, SCAN_OPS[op], ptr(DY), ptr(X), ptr(Y),
                                                       ptr(I), axis, 0, ptr(DX), None, stream),
                         "jitops_scan_backward")

            def theirs():
                torch.autograd.grad(yv, xg, dy, retain_graph=True)

            ours()
            err = rel_err(dx, torch.autograd.grad(yv, xg, dy, retain_graph=True)[0])
            t_ours = timings(ours, iters)
            t_torch = timings(theirs, iters)
            streams = {"cumsum": 8, "cumprod": 16, "cummax": 16, "logcumsumexp": 16}[op]
            rows.append(row("backward", op, x.shape, axis, t_ours, t_torch, x.numel() * streams,
                            copy_gbs, err))
            print(rows[-1], file=sys.stderr)
    return rows


def bench_repeat(lib, rt, stream, iters, copy_gbs):
    rows = []
    x = torch.randn(1024, 1024, device="cuda")
    reps = (4, 4)
    rep = (ctypes.c_int64 * 2)(*reps)
    y = torch.empty(4096, 4096, device="cuda")
    X, Y = jc.Tensor(x), jc.Tensor(y)

    def ours():
        jc.check(lib, lib.jitops_repeat(rt, ptr(X), rep, 2, ptr(Y), stream), "jitops_repeat")

    ours()
    err = rel_err(y, x.repeat(*reps))
    t_ours = timings(ours, iters)
    t_torch = timings(lambda: x.repeat(*reps), iters)
    floor = (x.numel() + y.numel()) * 4
    rows.append(row("repeat", "repeat", x.shape, "4x4", t_ours, t_torch, floor, copy_gbs, err))
    print(rows[-1], file=sys.stderr)

    xg = x.clone().requires_grad_(True)
    yg = xg.repeat(*reps)
    dy = torch.randn(yg.shape, device="cuda")
    dx = torch.empty_like(x)
    DY, DX = jc.Tensor(dy), jc.Tensor(dx)

    def ours_bwd():
        jc.check(lib, lib.jitops_repeat_backward(rt, ptr(DY), rep, 2, ptr(DX), None, stream),
                 "jitops_repeat_backward")

    ours_bwd()
    err = rel_err(dx, torch.autograd.grad(yg, xg, dy, retain_graph=True)[0])
    t_ours = timings(ours_bwd, iters)
    t_torch = timings(lambda: torch.autograd.grad(yg, xg, dy, retain_graph=True), iters)
    rows.append(row("repeat", "repeat backward", x.shape, "4x4", t_ours, t_torch, floor, copy_gbs,
                    err))
    print(rows[-1], file=sys.stderr)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json")
    args = ap.parse_args()
    lib = jc.load_library()
    bind(lib)
    rt = jc.create_runtime(lib)
    stream = jc.current_stream()

    x = torch.randn(args.n, args.n, device="cuda")
    y = torch.empty_like(x)
    copy_ms, copy_synced_ms = timings(lambda: y.copy_(x), args.iters)
    copy_gbs = 2 * x.numel() * 4 / (copy_ms * 1e6)
    del x, y

    rows = bench_forward(lib, rt, stream, args.n, args.iters, copy_gbs)
    rows += bench_backward(lib, rt, stream, args.n, args.iters, copy_gbs)
    rows += bench_repeat(lib, rt, stream, args.iters, copy_gbs)

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
