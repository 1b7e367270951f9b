"""Segment reductions on the GPU against an f64 reference built from torch's scatter ops,
with TensorFlow's rules (dropped ids, empty segments); gradients by gradcheck; the dropped
count; sorted ids; reruns bit-identical."""

from __future__ import annotations

import pytest
from gpu import DEVICE, FLOATS, assert_close, randn, reruns_identical, segment_reference, torch

import jitops.ops as O

pytestmark = pytest.mark.gpu

REDUCTIONS = ["sum", "mean", "max", "min"]


def segment_ids(n, num_segments, dtype=torch.int64, sorted=False, seed=0):
    """Ids in [-2, num_segments + 2): some rows dropped on both sides."""
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    ids = torch.randint(-2, num_segments + 2, (n,), device=DEVICE, generator=generator)
    return (ids.sort().values if sorted else ids).to(dtype)


def reference(data, ids, num_segments, reduction):
    """TensorFlow's unsorted_segment_<reduction> in f64 (empty max/min: the dtype's fill)."""
    info = torch.finfo(data.dtype)
    fill = info.min if reduction == "max" else info.max
    return segment_reference(data.double(), ids, num_segments, reduction, fill)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, num_segments", [((1000, 8), 50), ((20000, 3), 3000), ((4096, 1), 1),
                                                 ((3000, 2, 33), 7), ((50000, 64), 100000)])
def test_unsorted_matches_reference(reduction, dtype, shape, num_segments):
    data = randn(*shape, dtype=dtype)
    ids = segment_ids(shape[0], num_segments, dtype=torch.int32 if shape[1] == 3 else torch.int64)
    out, dropped = O.segment_reduce(data, ids, num_segments, reduction, return_dropped=True)
    want = reference(data, ids, num_segments, reduction)
    scale = None
    if reduction == "sum":
        scale = torch.bincount(ids[(ids >= 0) & (ids < num_segments)].long()).max().item()
    assert_close(out, want.to(dtype), dtype, f"{reduction} {shape} -> {num_segments}", scale)
    assert dropped.item() == (ids >= num_segments).sum().item()


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_sorted_ids_take_the_sorted_path_with_the_same_result(reduction):
    data = randn(30000, 16)
    ids = segment_ids(30000, 500, sorted=True)
    assert_close(O.segment_reduce(data, ids, 500, reduction, sorted=True), reference(data, ids, 500, reduction),
                 torch.float32, reduction, scale=200)


def test_host_ids_and_fill():
    data = randn(200, 4)
    ids = segment_ids(200, 10, seed=3).clamp_min(0).clamp_max(9)
    ids[ids == 4] = 5  # segment 4 empty
    out = O.segment_max(data, ids.cpu(), 10, fill=-7.5)
    assert torch.equal(out[4], torch.full((4,), -7.5, device=DEVICE))
    others = torch.arange(10, device=DEVICE) != 4
    assert_close(out[others], reference(data, ids, 10, "max")[others], torch.float32)


def test_pinned_host_ids_may_be_refilled_right_after_the_call():
    """Host ids are read before the call returns, pinned ones too: a pinned batch loader that
    refills (or frees and reuses) the ids tensor right after the call must not change what the
    op sums. The stream is kept busy first, so that a copy still queued would see the refill."""
    n, segments = 1 << 16, 4
    data = torch.ones(n, 1, device=DEVICE)
    ids = torch.zeros(n, dtype=torch.int64).pin_memory()
    for step in range(3):
        ids.fill_(step % segments)
        torch.cuda._sleep(50_000_000)
        out = O.segment_sum(data, ids, segments)
        ids.fill_((step + 1) % segments)
        torch.cuda.synchronize()
        want = torch.zeros(segments, 1, device=DEVICE)
        want[step % segments] = n
        assert torch.equal(out, want), f"step {step}: {out[:, 0].tolist()}"


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_gradcheck_f64(reduction):
    data = randn(14, 3, dtype=torch.float64).requires_grad_()
    ids = torch.tensor([0, 2, 2, 1, -1, 0, 2, 3, 3, 9, 1, 0, 2, 3], device=DEVICE)
    assert torch.autograd.gradcheck(lambda d: O.segment_reduce(d, ids, 5, reduction), (data,))
    assert torch.autograd.gradcheck(lambda d: O.segment_reduce(d, ids.sort().values, 5, reduction, sorted=True),
                                    (data,))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_backward_matches_torch_scatter_f32(reduction):
    data = randn(5000, 8).requires_grad_()
    ids = segment_ids(5000, 300).clamp(0, 299)
    grad = randn(300, 8, seed=5)
    O.segment_reduce(data, ids, 300, reduction).backward(grad)
    data_ref = data.detach().double().requires_grad_()
    reference(data_ref, ids, 300, reduction).backward(grad.double())
    assert_close(data.grad, data_ref.grad, torch.float32, reduction)


def test_max_gradient_splits_ties_like_tensorflow():
    data = torch.tensor([[1.0], [3.0], [3.0], [2.0]], device=DEVICE, requires_grad=True)
    ids = torch.tensor([0, 0, 0, 0], device=DEVICE)
    O.segment_max(data, ids, 1).backward(torch.tensor([[4.0]], device=DEVICE))
    assert data.grad.flatten().tolist() == [0.0, 2.0, 2.0, 0.0]


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_reruns_are_bit_identical(reduction):
    data, ids = randn(200000, 4), segment_ids(200000, 100000)
    assert reruns_identical(lambda d: O.segment_reduce(d, ids, 100000, reduction), data)
