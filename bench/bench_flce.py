#!/usr/bin/env python3
"""Fused linear cross-entropy: libjitops, through the jitops package, against PyTorch's
unfused F.cross_entropy(x @ W.T), forward + backward, on the same tensors in the same run.

For each shape it times (CUDA events, warm-up, median) and measures the peak memory above
the inputs (torch.cuda.max_memory_allocated; libjitops takes its scratch from torch's caching
allocator, so it is counted, and every output either side allocates is counted):
  - torch:   loss = F.cross_entropy(x @ W.T, target); loss.backward()
  - jitops:  jitops_flce_forward (loss, grad_input, grad_weight) + jitops_flce_backward (dy),
             through the package's C layer (jitops._C.flce_forward, flce_backward), with the
             default scratch budget and with larger budgets (other algorithms).
At the first shape it also compares both against an f32 unfused reference (relative L2
errors), and checks that two libjitops runs give identical bytes.

Usage: PYTHONPATH=build/python python3 bench/bench_flce.py [--shapes BT,H,V ...] [--dtype bf16]
       [--quick]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from typing import TypedDict, cast

import torch
import torch.nn.functional as F

import jitops.ops  # also makes torch's caching allocator the workspace allocator of jitops._C
from jitops import _C
from timing import Fn, peak_bytes, time_interleaved

GIB = float(1 << 30)
RUN, SIZE = 0, 2  # jitops._C's modes: launch (the workspace from torch) / the workspace bytes
REDUCTION_MEAN = 1
IGNORE_INDEX = -100

Options = tuple[int, float, float, float, int, int]  # what options() returns
Config = tuple[str, Options, bool]  # (name, options, dy in the forward)


class TimingRow(TypedDict):
    bt: int
    h: int
    v: int
    dtype: str
    config: str
    ms: float
    torch_ms: float
    ratio: float
    peak_gib: float
    torch_peak_gib: float
    workspace_gib: float
    tflops_3gemm: float


class AccuracyRow(TypedDict):
    what: str
    loss_abs_err: float
    grad_input_rel_l2: float
    grad_weight_rel_l2: float


class BreakdownRow(TypedDict):
    what: str
    ms: float


class Results(TypedDict):
    """What --json writes."""
    gpu: str
    torch: str
    timing: list[TimingRow]
    accuracy: list[AccuracyRow]
    breakdown: list[BreakdownRow]


def options(chunk_rows: int = 0, scratch_budget_bytes: int = 0) -> Options:
    """jitops_flce_options past the reduction, in jitops._C.flce_forward's order: ignore_index,
    label_smoothing, softcap, z_loss_scale, chunk_rows, scratch_budget_bytes (0: the
    library's choice)."""
    return (IGNORE_INDEX, 0.0, 0.0, 0.0, chunk_rows, scratch_budget_bytes)


def loss_and_grads(x: torch.Tensor, w: torch.Tensor, target: torch.Tensor, opts: Options,
                   dy: torch.Tensor | None = None, dy_in_forward: bool = False, grads: bool = True
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int | None]:
    """What F.cross_entropy(x @ w.T) + backward(dy) gives: (loss, grad_input, grad_weight,
    workspace bytes). dy goes to jitops_flce_backward (a scalar rescale of the saved
    gradients), or with dy_in_forward to the forward, which then needs no backward.
    grads=False: the loss only."""
    loss = torch.empty((), dtype=torch.float32, device=x.device)
    gi, gw = torch.empty_like(x), torch.empty_like(w)
    rt = jitops.Runtime(x.device).handle
    stream = torch.cuda.current_stream().cuda_stream
    args = (rt, x, w, None, target, dy if dy_in_forward else None, loss, None,  # bias, lse: None
            gi if grads else None, gw if grads else None, None,  # grad_bias: None
            REDUCTION_MEAN, *opts, stream)
    ws_bytes = _C.flce_forward(SIZE, *args)
    _C.flce_forward(RUN, *args)
    if grads and dy is not None and not dy_in_forward:
        _C.flce_backward(RUN, rt, dy, gi, gw, None, stream)
    return loss, gi, gw, ws_bytes


def torch_unfused(x: torch.Tensor, w: torch.Tensor, target: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    xr, wr = x.detach().requires_grad_(), w.detach().requires_grad_()
    loss = F.cross_entropy(xr @ wr.t(), target)
    loss.backward()
    return loss.detach(), xr.grad, wr.grad


def rel(a: torch.Tensor, ref: torch.Tensor) -> float:
    a, ref = a.double(), ref.double()
    return ((a - ref).norm() / ref.norm()).item()


def accuracy_report(x: torch.Tensor, w: torch.Tensor, target: torch.Tensor, configs: list[Config],
                    out: list[AccuracyRow]) -> None:
    """Errors against the f32 unfused computation, for torch bf16 and each jitops config."""
    xf, wf = x.float().requires_grad_(), w.float().requires_grad_()
    ref_loss = F.cross_entropy(xf @ wf.t(), target)
    ref_loss.backward()
    ref = (ref_loss.detach().double(), cast(torch.Tensor, xf.grad), cast(torch.Tensor, wf.grad))  # set by backward()
    del xf, wf
    torch.cuda.empty_cache()
    rows: list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor]] = []
    tl, tgi, tgw = torch_unfused(x, w, target)
    rows.append(("torch %s unfused" % str(x.dtype).split(".")[1], tl, cast(torch.Tensor, tgi),
                 cast(torch.Tensor, tgw)))  # set by backward()
    del tl, tgi, tgw
    dy = torch.ones((), dtype=torch.float32, device=x.device)
    for name, opts, dy_fwd in configs:
        l1, gi1, gw1, _ = loss_and_grads(x, w, target, opts, dy, dy_fwd)
        l2, gi2, gw2, _ = loss_and_grads(x, w, target, opts, dy, dy_fwd)
        torch.cuda.synchronize()
        same = bool(torch.equal(l1, l2) and torch.equal(gi1, gi2) and torch.equal(gw1, gw2))
        rows.append((name + (", rerun bit-identical" if same else ", RERUN DIFFERS"), l1, gi1, gw1))
        del l2, gi2, gw2
    print("\naccuracy vs f32 unfused reference (BT=%d, H=%d, V=%d):" % (x.shape[0], x.shape[1],
                                                                      w.shape[0]))
    print("  %-62s %10s %10s %11s" % ("", "|dloss|", "grad_input", "grad_weight"))
    for name, l, gi, gw in rows:
        r: AccuracyRow = {"what": name, "loss_abs_err": abs(l.double().item() - ref[0].item()),
                           "grad_input_rel_l2": rel(gi, ref[1]), "grad_weight_rel_l2": rel(gw, ref[2])}
        out.append(r)
        print("  %-62s %10.3e %10.3e %11.3e" % (name, r["loss_abs_err"], r["grad_input_rel_l2"],
                                                r["grad_weight_rel_l2"]))
    del rows, ref
    torch.cuda.empty_cache()


def bench_shape(bt: int, h: int, v: int, dtype: torch.dtype, quick: bool, results: Results, accuracy: bool) -> None:
    torch.manual_seed(0)
    dev = torch.device("cuda")
    x = torch.randn(bt, h, device=dev, dtype=dtype)
    w = (torch.randn(v, h, device=dev, dtype=torch.float32) * (2.0 / math.sqrt(h))).to(dtype)
    target = torch.randint(0, v, (bt,), device=dev)
    target[torch.rand(bt, device=dev) < 0.05] = -100  # some padding
    ld = (v + 63) // 64 * 64
    esize = x.element_size()
    configs = [("jitops default (automatic budget)", options(), False),
               ("jitops 1 GiB budget (the old default)", options(scratch_budget_bytes=1 << 30), False)]
    # The whole batch as one chunk: 3 GEMMs, no accumulator, BT x V of scratch logits.
    one_chunk = options(scratch_budget_bytes=bt * ld * esize + (96 << 20))
    configs.append(("jitops rows, one chunk", one_chunk, False))
    # The same with dy known at the forward (grad_output): no backward kernel.
    configs.append(("jitops rows, one chunk, dy in forward", one_chunk, True))
    if bt > 2048:
        # 4096-row chunks with the V x H f32 grad_weight accumulator.
        configs.append(("jitops rows, 4096-row chunks + f32 acc", options(
            chunk_rows=4096, scratch_budget_bytes=4096 * ld * esize + v * h * 4 + (96 << 20)),
            False))
    warm, iters = (1, 3) if quick else (2, 5) if bt >= 32768 else (3, 15)
    dy = torch.ones((), dtype=torch.float32, device=dev)
    flops = 6.0 * bt * h * v

    def ours(opts: Options, dy_fwd: bool) -> Fn:
        return lambda: loss_and_grads(x, w, target, opts, dy, dy_fwd)

    # Timing in rounds: torch and every config once per round.
    fns = [lambda: torch_unfused(x, w, target)] + [ours(o, d) for _, o, d in configs]
    times = time_interleaved(fns, warm, iters)
    t_ms = times[0]
    torch.cuda.empty_cache()
    try:
        t_peak: float = peak_bytes(lambda: torch_unfused(x, w, target))
    except torch.cuda.OutOfMemoryError:
        t_peak = float("nan")
    torch.cuda.empty_cache()
    for (name, opts, dy_fwd), ms in zip(configs, times[1:]):
        held: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, int | None]] = []
        peak = peak_bytes(lambda: held.append(loss_and_grads(x, w, target, opts, dy, dy_fwd)))
        ws_bytes = cast(int, held[0][3])  # mode SIZE's result: the bytes, never None
        del held
        torch.cuda.empty_cache()
        r: TimingRow = {"bt": bt, "h": h, "v": v, "dtype": str(dtype), "config": name, "ms": ms,
                         "torch_ms": t_ms, "ratio": ms / t_ms, "peak_gib": peak / GIB,
                         "torch_peak_gib": t_peak / GIB, "workspace_gib": ws_bytes / GIB,
                         "tflops_3gemm": flops / (ms * 1e9)}
        results["timing"].append(r)
        print("%6d %5d %6d  %-40s %9.2f %9.2f %6.3f %9.3f %9.3f %7.1f" % (
            bt, h, v, name, ms, t_ms, r["ratio"], r["peak_gib"], r["torch_peak_gib"],
            r["tflops_3gemm"]))
    if accuracy:  # the main shape: where the time goes
        xr = x.detach()
        parts = [("torch x @ W.T (one GEMM)", lambda: xr @ w.t()),
                 ("torch F.cross_entropy(x @ W.T), forward only",
                  lambda: F.cross_entropy(xr @ w.t(), target)),
                 ("jitops loss only (one pass of logits + row stats)",
                  lambda: loss_and_grads(x, w, target, configs[1][1], grads=False))]
        pt = time_interleaved([f for _, f in parts], warm, iters)
        print("  breakdown (%d x %d x %d):" % (bt, h, v))
        for (name, _), ms in zip(parts, pt):
            print("    %-52s %8.2f ms  %6.1f TFLOP/s per GEMM" % (name, ms, flops / 3 / (ms * 1e9)))
            results["breakdown"].append({"what": name, "ms": ms})
    if accuracy:
        accuracy_report(x, w, target, configs, results["accuracy"])
    sys.stdout.flush()
    del x, w, target
    torch.cuda.empty_cache()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", nargs="*", default=["8192,4096,128256", "2048,4096,128256",
                                                    "8192,4096,32000", "32768,4096,128256"])
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16"])
    ap.add_argument("--quick", action="store_true", help="fewer iterations")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--no-accuracy", action="store_true")
    args = ap.parse_args()
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    print("GPU: %s; torch %s" % (torch.cuda.get_device_name(), torch.__version__))
    print("time = forward + backward (ms, median); peak = GiB above the inputs; TFLOP/s counts "
          "the 3 GEMMs (6 BT H V)")
    print("%6s %5s %6s  %-40s %9s %9s %6s %9s %9s %7s" % (
        "BT", "H", "V", "config", "ours ms", "torch ms", "ratio", "peak GiB", "torch GiB",
        "TFLOP/s"))
    results: Results = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "timing": [],
                        "accuracy": [], "breakdown": []}
    for i, s in enumerate(args.shapes):
        bt, h, v = (int(t) for t in s.split(","))
        bench_shape(bt, h, v, dtype, args.quick, results,
                    accuracy=(i == 0 and not args.no_accuracy))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
