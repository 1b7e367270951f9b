#!/usr/bin/env python3
"""Vocabulary-parallel FLCE against the unsharded op: time of forward + backward and peak
memory above the inputs, per rank.

Run under torchrun, one GPU per rank:
    PYTHONPATH=build/python torchrun --nproc_per_node 2 bench/bench_flce_parallel.py [--shapes BT,H,V ...]
Each rank times (CUDA events, median) the sharded call on its 1/world of the vocabulary, and
rank 0 also the unsharded op on the whole weight on its own GPU (the other ranks idle in a
barrier meanwhile). Prints one table on rank 0.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any, Callable

import torch
import torch.distributed as dist

import jitops.ops as O

SHAPES = [(8192, 4096, 128256), (4096, 4096, 32000)]


def timed(fn: Callable[[], object], warmup: int = 2, iters: int = 7) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples)


def peak_above(fn: Callable[[], object], base: int) -> float:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**30


def step(x: torch.Tensor, w: torch.Tensor, target: torch.Tensor, **kw: Any) -> Callable[[], None]:
    def run() -> None:
        x.grad = w.grad = None
        O.fused_linear_cross_entropy(x, w, target, **kw).backward()
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", nargs="*", help="BT,H,V triples")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
    args = ap.parse_args()
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shapes] if args.shapes else SHAPES
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank % torch.cuda.device_count())
    rows = []
    for BT, H, V in shapes:
        g = torch.Generator(device="cuda").manual_seed(0)
        x = (torch.randn(BT, H, device="cuda", generator=g)).to(dtype).requires_grad_()
        w_full = (torch.randn(V, H, device="cuda", generator=g) * 0.02).to(dtype)
        target = torch.randint(0, V, (BT,), device="cuda", generator=g)
        lo, hi = rank * V // world, (rank + 1) * V // world
        w = w_full[lo:hi].clone().requires_grad_()
        vr = (lo, V) if V % world else None
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        sharded = step(x, w, target, process_group=dist.group.WORLD, vocab_range=vr)
        t_shard = timed(sharded)
        m_shard = peak_above(sharded, base)
        dist.barrier()
        if rank == 0:
            del w
            wf = w_full.requires_grad_()
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            whole = step(x, wf, target)
            t_whole, m_whole = timed(whole), peak_above(whole, base)
            rows.append((BT, H, V, t_whole, m_whole, t_shard, m_shard))
            del wf
        dist.barrier()
        # The closures hold this shape's tensors: drop them before the next shape's baseline.
        del x, w_full, target, sharded
        if rank == 0:
            del whole
        torch.cuda.empty_cache()
    if rank == 0:
        print(f"GPU: {torch.cuda.get_device_name()} x {world}, torch {torch.__version__}, {args.dtype}; "
              "forward + backward, median ms; peak GiB above the inputs (rank 0)")
        print("| BT | H | V | unsharded ms | unsharded peak GiB | sharded ms (per rank) | sharded peak GiB | speed-up |")
        print("|---|---|---|---|---|---|---|---|")
        for BT, H, V, tw, mw, ts, ms in rows:
            print(f"| {BT} | {H} | {V} | {tw:.2f} | {mw:.3f} | {ts:.2f} | {ms:.3f} | {tw / ts:.2f}x |")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
