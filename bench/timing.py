"""Timing and memory helpers of the bench scripts: CUDA-event timings (median over samples,
after a warm-up) and peak memory, all through PyTorch."""

from __future__ import annotations

import statistics
import sys
from typing import Any, Callable, Sequence

import torch

Fn = Callable[[], Any]


def _settle() -> None:
    """After a warm-up: wait for the GPU, and for the full builds of any quick builds the
    warm-up launched on a cold cache (jitops's background), so that only full builds are
    timed."""
    torch.cuda.synchronize()
    jitops = sys.modules.get("jitops")
    if jitops is not None:
        jitops.Runtime().wait_builds()


def _elapsed_ms(fn: Fn, calls: int) -> float:
    """Milliseconds between two CUDA events around ``calls`` back-to-back calls of fn()."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def time_ms(fn: Fn, warmup: int = 3, iters: int = 10) -> float:
    """Median milliseconds of one fn() on the current stream, each call waited for before the
    next is issued (so host launch latency counts)."""
    return time_queued_ms(fn, inner=1, reps=iters, warmup=warmup)


def time_queued_ms(fn: Fn, inner: int, reps: int, warmup: int = 3) -> float:
    """Median milliseconds per fn() call over ``reps`` samples of ``inner`` calls queued back to
    back between two CUDA events, so that the GPU queue stays full and host overheads overlap
    device work, as in a training loop. ``warmup`` calls come first."""
    for _ in range(warmup):
        fn()
    _settle()
    return statistics.median(_elapsed_ms(fn, inner) / inner for _ in range(reps))


def time_interleaved(fns: Sequence[Fn], warmup: int = 3, iters: int = 10) -> list[float]:
    """Median milliseconds of each fn, measured in rounds (one call of each per round) so that
    clock and thermal drift affect every fn alike. A fn that runs out of memory during warm-up
    gets NaN."""
    alive = []
    for fn in fns:
        try:
            for _ in range(warmup):
                fn()
            _settle()
            alive.append(True)
        except torch.cuda.OutOfMemoryError:
            alive.append(False)
            torch.cuda.empty_cache()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(iters):
        for fn, ok, samples in zip(fns, alive, times):
            if ok:
                samples.append(_elapsed_ms(fn, 1))
    return [statistics.median(t) if t else float("nan") for t in times]


def time_interleaved_queued(fns: Sequence[Fn], inner: int, reps: int, warmup: int = 5
                            ) -> list[float]:
    """Median milliseconds a call of each fn over ``reps`` samples of ``inner`` calls queued back
    to back (time_queued_ms's timing), the fns' samples taken in turns so that drift of the
    host and the clocks affects them alike."""
    for fn in fns:
        for _ in range(warmup):
            fn()
    _settle()
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(reps):
        for fn, s in zip(fns, samples):
            s.append(_elapsed_ms(fn, inner) / inner)
    return [statistics.median(s) for s in samples]


def peak_bytes(fn: Fn) -> int:
    """Peak bytes torch's allocator held above what it held before fn() (fn's allocations,
    the workspaces libjitops takes from it included)."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base
