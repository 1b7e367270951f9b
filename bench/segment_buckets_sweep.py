#!/usr/bin/env python3
"""The max forward by buckets of segments (the atomic algorithm forced, f32) against the sort
algorithm and torch scatter_reduce amax, N = 2^20, over rows per segment and row lengths: where
the automatic choice between them comes from. Prints a markdown table (diff: largest |ours -
torch| over non-empty segments; DIFFER if the two algorithms disagree in any bit).

It forces the algorithm through jitops._C.segment_reduce (bench_segment.forward_fn).

    PYTHONPATH=build/python python3 bench/segment_buckets_sweep.py
"""
from __future__ import annotations

import torch

from bench_segment import ATOMIC, MAX, SORT, forward_fn, nonempty_max_diff, per_call_ms


def main() -> None:
    N = 1 << 20
    print("| D | S | rows/seg | sort ms | buckets ms | torch ms | sort x | buckets x | diff |")
    print("|---|---|---|---|---|---|---|---|---|")
    for D, S in [(64, 1000000), (64, 300000), (64, 100000), (64, 30000), (64, 10000), (256, 100000),
                 (1024, 10000), (8, 1000000), (16, 100000)]:
        torch.manual_seed(0)
        data = torch.randn(N, D, device="cuda")
        ids = torch.randint(0, S, (N,), device="cuda")
        index = ids.view(-1, 1).expand(-1, D)
        out = torch.empty(S, D, device="cuda")
        alt = torch.empty(S, D, device="cuda")
        ref = torch.empty(S, D, device="cuda")
        fs, _ = forward_fn(MAX, data, ids, S, out, algorithm=SORT)
        fb, _ = forward_fn(MAX, data, ids, S, alt, algorithm=ATOMIC)
        fs()
        fb()
        ref.zero_().scatter_reduce_(0, index, data, "amax", include_self=False)
        torch.cuda.synchronize()
        diff = max(nonempty_max_diff(out, ref, ids, S), nonempty_max_diff(alt, ref, ids, S))
        same = torch.equal(out, alt)
        inner, iters = (2, 5) if N * D >= (1 << 28) else (10, 9)
        ts = min(per_call_ms(fs, inner, iters) for _ in range(2))
        tb = min(per_call_ms(fb, inner, iters) for _ in range(2))
        tt = per_call_ms(lambda: ref.scatter_reduce_(0, index, data, "amax", include_self=False), inner, iters)
        print("| %d | %d | %.1f | %.4f | %.4f | %.4f | %.2fx | %.2fx | %.2g%s |" % (
            D, S, N / S, ts, tb, tt, tt / ts, tt / tb, diff, "" if same else " DIFFER"), flush=True)
        del data, ids, index, out, alt, ref
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
