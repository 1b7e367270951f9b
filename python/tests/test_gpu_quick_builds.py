"""Quick builds on a GPU (runtime/kernel_batch.h): on an empty cache, the first call of an op
whose kernels allow it launches quick builds, and once ``Runtime.wait_builds`` returns the same
call launches the full builds and gives the same bits, forward and backward. A call captured
into a CUDA graph while its full builds are pending waits for them instead of keeping the quick
ones, and the background builds never spoil a capture another thread makes meanwhile. The
segment digit path's cold call defers its fallback's kernels (skewed ids then build them on the
spot), except under capture, which builds all of them in full.

Each case runs in a process of its own on a cache directory of its own, so that its first call
is cold whatever ran before."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import jitops

pytestmark = pytest.mark.gpu

SCRIPT = r'''
import sys, threading
import torch, jitops
from jitops import ops

dev = torch.device("cuda", 0)
rt = jitops.Runtime(dev)
g = torch.Generator(device=dev)
g.manual_seed(7)

def randn(*shape):
    return torch.randn(*shape, device=dev, generator=g)

def ids(n, s):
    return torch.randint(0, s, (n,), device=dev, generator=g)

def bits(t):
    return t.detach().reshape(-1).contiguous().view(torch.uint8).clone()

def forward_backward(fn, x):
    x = x.detach().clone().requires_grad_(True)
    y = fn(x)
    y = y[0] if isinstance(y, tuple) else y
    y.backward(torch.ones_like(y) * 0.37)
    torch.cuda.synchronize()
    return bits(y), bits(x.grad)

CALLS = {
    "segment_sum_sort": (lambda x: ops.segment_sum(x, I64K, 10000), (1 << 16, 64)),
    "segment_mean_sorted": (lambda x: ops.segment_mean(x, I64K_SORTED, 10000, sorted=True), (1 << 16, 64)),
    "segment_max_narrow": (lambda x: ops.segment_max(x, I1M, 1000000), (1 << 20, 3)),
    "segment_sum_narrow": (lambda x: ops.segment_sum(x, I1M, 1000000), (1 << 20, 3)),
    # The digit path defers its fallback's kernels: skewed ids raise its flag on the cold call.
    "segment_sum_digit": (lambda x: ops.segment_sum(x, I1M, 1000000), (1 << 20, 64)),
    "segment_mean_digit_skewed": (lambda x: ops.segment_mean(x, SKEW1M, 1000000), (1 << 20, 64)),
    "cumsum_rows": (lambda x: ops.cumsum(x, 1), (512, 3000)),
    "cummax_cols": (lambda x: ops.cummax(x, 0), (3000, 512)),
    "cumprod_rows": (lambda x: ops.cumprod(x * 0.01 + 1.0, 1), (64, 5000)),
    "cumprod_cols": (lambda x: ops.cumprod(x * 0.01 + 1.0, 0), (3000, 512)),
    "logcumsumexp_rows": (lambda x: ops.logcumsumexp(x, 1), (512, 3000)),
    "logcumsumexp_cols": (lambda x: ops.logcumsumexp(x, 0), (3000, 512)),
    "ctc_f32": (lambda x: ops.ctc_loss(x.log_softmax(2), TG, IL, TL), (200, 16, 32)),
    "ctc_bf16": (lambda x: ops.ctc_loss(x.log_softmax(2).to(torch.bfloat16), TG, IL, TL), (200, 16, 32)),
    # Longer targets: 4 and 8 states a thread in the register tier, odd T (a partial ring round).
    "ctc_f32_k4": (lambda x: ops.ctc_loss(x.log_softmax(2), TG4, IL4, TL4), (501, 4, 64)),
    "ctc_f16_k8": (lambda x: ops.ctc_loss(x.log_softmax(2).to(torch.float16), TG8, IL8, TL8),
                   (2001, 2, 32)),
    "flce_bf16": (lambda x: ops.fused_linear_cross_entropy(x.to(torch.bfloat16), W_BF16, Y32K),
                  (512, 256)),
    "flce_f32_every_option": (lambda x: ops.fused_linear_cross_entropy(
        x, W_F32, Y2K, bias=B_F32, label_smoothing=0.1, softcap=30.0, z_loss_scale=1e-4,
        reduction="sum"), (256, 128)),
}

mode = sys.argv[1]
I64K = ids(1 << 16, 10000)
I64K_SORTED = torch.sort(I64K).values
I1M = ids(1 << 20, 1000000)
SKEW1M = (torch.rand(1 << 20, device=dev, generator=g) ** 4 * 1000000).long()
TG = torch.randint(1, 32, (16, 40), device=dev, generator=g)
IL = torch.full((16,), 200, device=dev, dtype=torch.long)
TL = torch.randint(20, 41, (16,), device=dev, generator=g)
TG4 = torch.randint(1, 64, (4, 200), device=dev, generator=g)
IL4 = torch.tensor([501, 480, 501, 433], device=dev)
TL4 = torch.randint(150, 201, (4,), device=dev, generator=g)
TG8 = torch.randint(1, 32, (2, 900), device=dev, generator=g)
IL8 = torch.tensor([2001, 1999], device=dev)
TL8 = torch.randint(700, 901, (2,), device=dev, generator=g)
W_BF16 = (randn(32000, 256) * 0.05).to(torch.bfloat16)
Y32K = ids(512, 32000)
W_F32, B_F32, Y2K = randn(2000, 128) * 0.1, randn(2000) * 0.1, ids(256, 2000)
Y2K[::17] = -100  # ignored rows

if mode in CALLS:
    fn, shape = CALLS[mode]
    x = randn(*shape)
    before = rt.stats()
    first = forward_backward(fn, x)
    cold = rt.stats()
    quick = cold.quick_compiles - before.quick_compiles
    assert quick > 0, f"{mode}: no quick build on a cold cache"
    rt.wait_builds()
    built = rt.stats()
    # Each quick build's full build is done (some may have finished during the first call).
    assert built.compiles - before.compiles >= 2 * quick, (mode, quick, built.compiles - before.compiles)
    assert built.quick_compiles == cold.quick_compiles
    second = forward_backward(fn, x)
    after = rt.stats()
    assert after.compiles == built.compiles, f"{mode}: the second call compiled"
    for a, b, what in zip(first, second, ("output", "gradient")):
        assert torch.equal(a, b), f"{mode}: the quick and full builds' {what} differ"
    print(f"{mode}: {quick} quick builds, then full builds: bit-identical")

elif mode == "capture_waits_for_full":
    x = randn(1 << 16, 64)
    eager = ops.segment_sum(x, I64K, 10000)  # quick builds; full ones queued
    cold = rt.stats()
    assert cold.quick_compiles > 0
    if cold.compiles >= 2 * cold.quick_compiles:  # every full build already landed
        print("INCONCLUSIVE: the full builds landed before the capture")
        raise SystemExit(0)
    graph = torch.cuda.CUDAGraph()
    out = torch.empty_like(eager)
    with torch.cuda.graph(graph):
        out.copy_(ops.segment_sum(x, I64K, 10000))
    captured = rt.stats()
    assert captured.quick_compiles == cold.quick_compiles
    assert captured.compiles >= 2 * cold.quick_compiles, "the capture did not wait for the full builds"
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(bits(out), bits(eager))
    print("capture: waited for the full builds")

elif mode == "cold_capture_defers_nothing":
    x = randn(1 << 20, 64)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # a capture may not read the fallback flag: all six in full
        out = ops.segment_sum(x, I1M, 1000000)
    captured = rt.stats()
    assert captured.quick_compiles == 0 and captured.compiles >= 6, captured
    graph.replay()
    eager = ops.segment_sum(x, I1M, 1000000)
    torch.cuda.synchronize()
    assert torch.equal(bits(out), bits(eager))
    print("cold capture: the digit path built in full")

elif mode == "captures_beside_background_builds":
    x = randn(1 << 16, 64)
    ops.segment_max(x, I64K, 10000)  # quick builds; their full builds load modules meanwhile
    done = threading.Event()
    waiter = threading.Thread(target=lambda: (rt.wait_builds(), done.set()))
    waiter.start()
    a = randn(1024, 1024)
    captures = beside = 0
    while not done.is_set() or captures < 3:
        beside += not done.is_set()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            b = a * 2.0 + 1.0
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(b, a * 2.0 + 1.0)
        captures += 1
    waiter.join()
    if beside == 0:
        print("INCONCLUSIVE: the full builds landed before the first capture")
        raise SystemExit(0)
    print(f"captures: {captures}, {beside} of them beside the background builds")
else:
    raise SystemExit(f"unknown mode {mode}")
'''


def _nvrtc_has_quick_builds() -> bool:
    with jitops.Runtime(arch="sm_90", cache_mode="off") as runtime:
        return runtime.info.nvrtc_version >= 1208


if not _nvrtc_has_quick_builds():
    pytest.skip("NVRTC older than 12.8 has no quick builds", allow_module_level=True)


def conclusive(done: subprocess.CompletedProcess) -> None:
    """Skips a timing-dependent case whose background finished before it could look."""
    if "INCONCLUSIVE" in done.stdout:
        pytest.skip(done.stdout.strip())


def run(mode: str, cache_dir: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, JITOPS_CACHE_DIR=cache_dir)
    env.pop("JITOPS_QUICK_BUILDS", None)
    package_root = str(Path(jitops.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True,
                          timeout=600, env=env)


@pytest.mark.parametrize("mode", ["segment_sum_sort", "segment_mean_sorted", "segment_max_narrow",
                                  "segment_sum_narrow", "segment_sum_digit", "segment_mean_digit_skewed",
                                  "cumsum_rows", "cummax_cols", "cumprod_rows",
                                  "cumprod_cols", "logcumsumexp_rows", "logcumsumexp_cols", "ctc_f32",
                                  "ctc_bf16", "ctc_f32_k4", "ctc_f16_k8", "flce_bf16",
                                  "flce_f32_every_option"])
def test_quick_then_full_builds_give_the_same_bits(mode, cache_dir):
    done = run(mode, cache_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "bit-identical" in done.stdout


def test_a_capture_waits_for_the_full_builds(cache_dir):
    done = run("capture_waits_for_full", cache_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    conclusive(done)


def test_a_cold_capture_builds_every_kernel_in_full(cache_dir):
    done = run("cold_capture_defers_nothing", cache_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "built in full" in done.stdout


def test_background_builds_leave_other_captures_alone(cache_dir):
    done = run("captures_beside_background_builds", cache_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    conclusive(done)
