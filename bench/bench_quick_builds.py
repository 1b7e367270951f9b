#!/usr/bin/env python3
"""Quick builds against full builds on the GPU (runtime/kernel_batch.h): what the first calls
of a cold process pay until the background's full builds land.

Each case runs in a fresh process on an empty cache directory. Its first call launches quick
builds; 20 back-to-back calls are timed with CUDA events right after it (they finish long
before a full build can land, which the last column checks), then, after
``Runtime.wait_builds()``, 20 more on the full builds.

Usage: PYTHONPATH=build/python python3 bench/bench_quick_builds.py [CASE PREFIX ...]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

CASE = r'''
import sys, torch, jitops
from jitops import ops
dev = torch.device("cuda", 0)
rt = jitops.Runtime(dev)
g = torch.Generator(device=dev)
g.manual_seed(1)
name = sys.argv[1]
if name == "segment_sum D 64, S 10^4":
    x = torch.randn(1 << 20, 64, device=dev, generator=g)
    i = torch.randint(0, 10000, (1 << 20,), device=dev, generator=g)
    f = lambda: ops.segment_sum(x, i, 10000)
elif name == "segment_max D 3, S 10^6":
    x = torch.randn(1 << 20, 3, device=dev, generator=g)
    i = torch.randint(0, 1000000, (1 << 20,), device=dev, generator=g)
    f = lambda: ops.segment_max(x, i, 1000000)
elif name == "cumsum 8192^2, axis 1":
    x = torch.randn(8192, 8192, device=dev, generator=g)
    f = lambda: ops.cumsum(x, 1)
elif name == "cummax 8192^2, axis 0":
    x = torch.randn(8192, 8192, device=dev, generator=g)
    f = lambda: ops.cummax(x, 0)
elif name == "logcumsumexp 8192^2, axis 1":
    x = torch.randn(8192, 8192, device=dev, generator=g)
    f = lambda: ops.logcumsumexp(x, 1)
elif name == "cumprod backward 8192^2, axis 0":
    x = (torch.rand(8192, 8192, device=dev, generator=g) * 0.02 + 0.99).requires_grad_(True)
    y = ops.cumprod(x, 0)
    rt.wait_builds()  # the forward's full build: only the backward's first call is timed quick
    dy = torch.randn_like(x)
    f = lambda: torch.autograd.grad(y, x, dy, retain_graph=True)
elif name.startswith("ctc_loss"):  # T 500, N 64, C 64, S 100
    lp = torch.randn(500, 64, 64, device=dev, generator=g).log_softmax(2).requires_grad_(True)
    tg = torch.randint(1, 64, (64, 100), device=dev, generator=g)
    il = torch.full((64,), 500, device=dev, dtype=torch.long)
    tl = torch.randint(50, 101, (64,), device=dev, generator=g)
    if name.endswith("backward"):
        loss = ops.ctc_loss(lp, tg, il, tl)
        rt.wait_builds()
        f = lambda: torch.autograd.grad(loss, lp, retain_graph=True)
    else:
        f = lambda: ops.ctc_loss(lp.detach(), tg, il, tl)
elif name.startswith("flce"):  # BT 4096, H 4096, V 128256, bf16, gradients for input and weight
    x = (torch.randn(4096, 4096, device=dev, generator=g) * 0.05).to(torch.bfloat16)
    w = (torch.randn(128256, 4096, device=dev, generator=g) * 0.02).to(torch.bfloat16)
    y = torch.randint(0, 128256, (4096,), device=dev, generator=g)
    x.requires_grad_(True)
    w.requires_grad_(True)
    f = lambda: ops.fused_linear_cross_entropy(x, w, y)

def queued_ms(calls=20):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        f()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / calls

f()
quick_builds, compiles = rt.stats().quick_compiles, rt.stats().compiles
quick = queued_ms()
clean = rt.stats().compiles == compiles
rt.wait_builds()
f()
torch.cuda.synchronize()
full = queued_ms()
print(f"| {name} | {quick_builds} | {quick:.4f} | {full:.4f} | {quick / full:.2f} | "
      f"{'none' if clean else 'some (the quick time is mixed)'} |")
'''

NAMES = ["segment_sum D 64, S 10^4", "segment_max D 3, S 10^6", "cumsum 8192^2, axis 1",
         "cummax 8192^2, axis 0", "logcumsumexp 8192^2, axis 1", "cumprod backward 8192^2, axis 0",
         "ctc_loss T 500, N 64, C 64, S 100", "ctc_loss T 500, N 64, C 64, S 100 backward",
         "flce 4096 x 4096 x 128256 bf16, with gradients (the row kernel quick, GEMMs the same)"]


def main() -> None:
    print("| case | quick builds | quick ms | full ms | ratio | full builds landed meanwhile |")
    print("|---|---:|---:|---:|---:|---|")
    for name in [n for n in NAMES if any(n.startswith(p) for p in sys.argv[1:])] or NAMES:
        with tempfile.TemporaryDirectory() as cache:
            os.chmod(cache, 0o700)
            env = dict(os.environ, JITOPS_CACHE_DIR=cache)
            env.pop("JITOPS_QUICK_BUILDS", None)
            done = subprocess.run([sys.executable, "-c", CASE, name], capture_output=True,
                                  text=True, env=env)
            print(done.stdout.strip() or f"| {name} | failed: {done.stderr[-300:]} |")


if __name__ == "__main__":
    main()
