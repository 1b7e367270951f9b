#!/usr/bin/env python3
"""The max forward by buckets of segments (the atomic algorithm forced, f32) against the sort
algorithm and torch scatter_reduce amax, N = 2^20, over rows per segment and row lengths: where
the automatic choice between them comes from. Prints a markdown table (diff: largest |ours -
torch| over non-empty segments; DIFFER if the two algorithms disagree in any bit).

It forces the algorithm (jitops_segment_options.algorithm), which the jitops package does not
expose, so it still calls libjitops through ctypes (jitops_ctypes.py, build/libjitops.so or
$JITOPS_LIB); the package is needed for bench_segment's helpers.

    PYTHONPATH=build/python python3 bench/segment_buckets_sweep.py
"""
import ctypes

import torch

from bench_segment import nonempty_max_diff, per_call_ms
from jitops_ctypes import DLTensor, Workspace, check, create_runtime, current_stream, load_library, tensor_ptr

MAX = 2
SORT, ATOMIC = 1, 2


class Options(ctypes.Structure):  # jitops_segment_options
    _fields_ = [
        ("sorted", ctypes.c_int),
        ("has_fill", ctypes.c_int),
        ("fill", ctypes.c_double),
        ("first_occurrence", ctypes.c_int),
        ("dropped_count", ctypes.POINTER(DLTensor)),
        ("algorithm", ctypes.c_int),
    ]


def max_forward(lib, rt, data, ids, S, out, algorithm):
    """A closure running the max forward with `algorithm` forced, with a workspace of the
    queried size."""
    P = ctypes.POINTER(DLTensor)
    lib.jitops_segment_reduce.argtypes = [ctypes.c_void_p, ctypes.c_int, P, P, ctypes.c_int64, P,
                                          ctypes.POINTER(Options), ctypes.POINTER(Workspace),
                                          ctypes.c_void_p]
    lib.jitops_segment_reduce_workspace_size.argtypes = [
        ctypes.c_void_p, ctypes.c_int, P, P, ctypes.c_int64, P, ctypes.POINTER(Options),
        ctypes.POINTER(ctypes.c_size_t)]
    held = [tensor_ptr(t) for t in (data, ids, out)]
    (_, d), (_, i), (_, o) = held
    opts = Options(0, 0, 0.0, 0, None, algorithm)
    size = ctypes.c_size_t()
    check(lib, lib.jitops_segment_reduce_workspace_size(rt, MAX, d, i, S, o, ctypes.byref(opts),
                                                        ctypes.byref(size)), "workspace size")
    buffer = torch.empty(max(size.value, 1), dtype=torch.uint8, device="cuda")
    ws = Workspace(buffer.data_ptr(), size.value)
    stream = current_stream()

    def run():
        check(lib, lib.jitops_segment_reduce(rt, MAX, d, i, S, o, ctypes.byref(opts),
                                             ctypes.byref(ws), stream), "jitops_segment_reduce")
    run.keep = (held, opts, buffer, ws)
    return run


def main():
    lib = load_library()
    rt = create_runtime(lib)
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
        fs = max_forward(lib, rt, data, ids, S, out, SORT)
        fb = max_forward(lib, rt, data, ids, S, alt, ATOMIC)
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
