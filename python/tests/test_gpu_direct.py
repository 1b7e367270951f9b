"""The direct entries (jitops._direct) on the GPU: a direct call gives bit for bit what the
torch.ops call gives, with the same autograd graph and gradients, under no_grad,
inference_mode, CUDA graph capture and on two streams."""

from __future__ import annotations

import contextlib

import pytest
from gpu import DEVICE, randn, torch

import jitops.ops as O
from jitops.ops import _torch

pytestmark = pytest.mark.gpu




def integers(high, shape, seed=0):
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    return torch.randint(0, high, shape, device=DEVICE, generator=generator)


def inputs(grad):
    """Fresh leaves (so that each path records its own graph) and the calls to make on them."""
    x = randn(6, 50).requires_grad_(grad)
    data = randn(300, 8).requires_grad_(grad)
    segment_ids = integers(20, (300,))
    lp = randn(16, 3, 7).log_softmax(-1).detach().requires_grad_(grad)
    targets, il, tl = integers(6, (3, 5)) + 1, torch.full((3,), 16, device=DEVICE), torch.tensor([5, 3, 0], device=DEVICE)
    inp, weight, bias = randn(32, 16).requires_grad_(grad), randn(64, 16).requires_grad_(grad), randn(64).requires_grad_(grad)
    target = integers(64, (32,))
    leaves = [x, data, lp, inp, weight, bias]
    return leaves, {
        "cumsum": lambda: O.cumsum(x, 1),
        "cumprod": lambda: O.cumprod(x, 0, reverse=True),
        "logcumsumexp": lambda: O.logcumsumexp(x, 1),
        "cummax": lambda: O.cummax(x, 1),
        "segment_sum": lambda: O.segment_sum(data, segment_ids, 20),
        "segment_max_dropped": lambda: O.segment_max(data, segment_ids, 15, return_dropped=True),
        "repeat": lambda: O.repeat(x, 2, 3),
        "ctc_loss": lambda: O.ctc_loss(lp, targets, il, tl),
        "flce_mean": lambda: O.fused_linear_cross_entropy(inp, weight, target, bias, label_smoothing=0.1),
        "flce_none": lambda: O.fused_linear_cross_entropy(inp, weight, target, reduction="none", softcap=20.0),
    }


def run(name, grad, direct, default_device=False):
    """The op's outputs, their grad_fn types, and the gradients of their float sum; with
    `default_device`, the call and its backward run under `with torch.device(DEVICE)` (what
    torch.set_default_device pushes)."""
    leaves, calls = inputs(grad)
    before = _torch.direct_counts()[0]
    with torch.device(DEVICE) if default_device else contextlib.nullcontext():
        with contextlib.nullcontext() if direct else _torch.dispatcher_path():
            out = calls[name]()
        assert (_torch.direct_counts()[0] - before == 1) == direct
        outs = out if isinstance(out, tuple) else (out,)
        kinds = [type(t.grad_fn).__name__ for t in outs]
        grads = []
        if grad:
            total = sum(t.sum() for t in outs if t.is_floating_point())
            used = [leaf for leaf in leaves if leaf.requires_grad]
            grads = torch.autograd.grad(total, used, allow_unused=True)
    return outs, kinds, grads


def assert_same(got, want):
    """Two run() results agree bit for bit, grad_fn types included."""
    (outs, kinds, grads), (want_outs, want_kinds, want_grads) = got, want
    assert kinds == want_kinds
    assert all(torch.equal(a, b) for a, b in zip(outs, want_outs, strict=True))
    for a, b in zip(grads, want_grads, strict=True):
        assert (a is None and b is None) or torch.equal(a, b)


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("name", list(inputs(False)[1]))
def test_a_direct_call_is_the_torch_ops_call(name, grad):
    assert_same(run(name, grad, direct=True), run(name, grad, direct=False))


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("name", list(inputs(False)[1]))
def test_a_default_device_keeps_the_direct_call(name, grad):
    # A DeviceContext on the mode stack used to send every call through torch.ops.
    assert_same(run(name, grad, direct=True, default_device=True), run(name, grad, direct=False))


def test_inference_mode_and_no_grad():
    x = randn(6, 50).requires_grad_()
    for mode in (torch.inference_mode, torch.no_grad):
        with mode():
            y = O.cumsum(x, 1)
            with _torch.dispatcher_path():
                want = O.cumsum(x, 1)
        assert torch.equal(y, want) and y.grad_fn is None
        assert (y.is_inference(), y.requires_grad) == (want.is_inference(), want.requires_grad)


def test_graph_capture_takes_direct_calls():
    data, segment_ids = randn(4000, 16), integers(100, (4000,))
    inp, weight, target = randn(64, 32), randn(200, 32), integers(200, (64,))

    def step():
        return O.segment_sum(data, segment_ids, 100), O.fused_linear_cross_entropy(inp, weight, target)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # kernels compiled and loaded before the capture
    torch.cuda.current_stream().wait_stream(side)
    direct = _torch.direct_counts()[0]
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    assert _torch.direct_counts()[0] - direct == 2
    for seed in (1, 2):
        data.copy_(randn(*data.shape, seed=seed))
        inp.copy_(randn(*inp.shape, seed=seed))
        graph.replay()
        torch.cuda.synchronize()
        assert all(torch.equal(a, b) for a, b in zip(captured, step()))


def test_two_streams():
    streams = [torch.cuda.Stream() for _ in range(2)]
    data = [randn(3000, 8, seed=s) for s in range(2)]
    segment_ids = [integers(50, (3000,), seed=s) for s in range(2)]
    want = [torch.zeros(50, 8, device=DEVICE).index_add_(0, i, d) for d, i in zip(data, segment_ids)]
    for s in streams:
        s.wait_stream(torch.cuda.current_stream())
    results = [[], []]
    for _ in range(20):  # interleaved, never synchronized
        for k, s in enumerate(streams):
            with torch.cuda.stream(s):
                results[k].append(O.segment_sum(data[k], segment_ids[k], 50))
    torch.cuda.synchronize()
    for k in range(2):
        for got in results[k]:
            torch.testing.assert_close(got, want[k], rtol=1e-5, atol=1e-4)
            assert torch.equal(got, results[k][0])  # deterministic
