"""CTC loss on the GPU against torch.nn.functional.ctc_loss: every reduction, padded and
concatenated targets, host and device lengths, zero_infinity, f16/bf16 inputs; the exact
gradient by gradcheck and, after log_softmax, against torch's; reruns bit-identical."""

from __future__ import annotations

import pytest
from gpu import DEVICE, assert_close, randn, reruns_identical, torch

import jitops
import jitops.ops as O

pytestmark = pytest.mark.gpu
F = torch.nn.functional


def batch(T=60, N=5, C=12, S=15, dtype=torch.float32, seed=0, infeasible=False):
    """log_probs [T, N, C] (a log_softmax), padded targets [N, S] (labels 1..C-1), lengths."""
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    logits = torch.randn(T, N, C, device=DEVICE, generator=generator, dtype=torch.float64)
    targets = torch.randint(1, C, (N, S), device=DEVICE, generator=generator)
    input_lengths = torch.randint(T // 2, T + 1, (N,), device=DEVICE, generator=generator)
    input_lengths[0] = T
    target_lengths = torch.randint(0, S + 1, (N,), device=DEVICE, generator=generator)
    target_lengths = torch.minimum(target_lengths, input_lengths // 2)
    target_lengths[-1] = 0  # an empty target
    if infeasible:
        target_lengths[1], input_lengths[1] = S, S // 2  # longer than its input
    return logits.log_softmax(-1).to(dtype), targets, input_lengths, target_lengths


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("lengths_on", ["host", "device"])
def test_loss_matches_torch(reduction, dtype, lengths_on):
    lp, targets, il, tl = batch(dtype=dtype)
    if lengths_on == "host":
        il, tl = il.tolist(), tl.tolist()
    got = O.ctc_loss(lp, targets, il, tl, reduction=reduction)
    want = F.ctc_loss(lp.double(), targets, torch.as_tensor(il), torch.as_tensor(tl), reduction=reduction)
    assert_close(got, want, dtype, reduction)


def test_concatenated_targets_and_int32():
    lp, targets, il, tl = batch(N=4)
    flat = torch.cat([targets[n, : tl[n]] for n in range(4)]).int()
    got = O.ctc_loss(lp, flat, il.int(), tl.int(), reduction="none", max_target_length=int(tl.max()))
    want = F.ctc_loss(lp.double(), targets, il, tl, reduction="none")
    assert_close(got, want, torch.float32)


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_infeasible_sample(zero_infinity):
    lp, targets, il, tl = batch(infeasible=True)
    lp = lp.clone().requires_grad_()
    loss = O.ctc_loss(lp, targets, il, tl, reduction="none", zero_infinity=zero_infinity)
    assert loss[1].item() == (0.0 if zero_infinity else float("inf"))
    assert torch.isfinite(loss[torch.arange(5, device=DEVICE) != 1]).all()
    if zero_infinity:
        loss.sum().backward()
        assert torch.equal(lp.grad[:, 1], torch.zeros_like(lp.grad[:, 1]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_inputs_accumulate_in_f32(dtype):
    lp, targets, il, tl = batch(dtype=dtype)
    got = O.ctc_loss(lp, targets, il, tl, reduction="none")
    assert got.dtype == torch.float32
    want = F.ctc_loss(lp.double(), targets, il, tl, reduction="none")
    assert_close(got, want, torch.float32)  # the same rounded inputs, accumulated in f32


def test_unbatched_input():
    lp, targets, il, tl = batch(N=1)
    got = O.ctc_loss(lp[:, 0], targets[0, : tl[0]], il[:1], tl[:1], reduction="none")
    want = F.ctc_loss(lp[:, 0].double(), targets[0, : tl[0]], il[:1], tl[:1], reduction="none")
    assert got.shape == want.shape == ()
    assert_close(got, want, torch.float32)


def test_gradcheck_exact_gradient_f64():
    T, N, C, S = 7, 3, 5, 3
    lp = randn(T, N, C, dtype=torch.float64).requires_grad_()  # not normalized: the exact gradient
    targets = torch.tensor([[1, 2, 2], [3, 1, 4], [2, 0, 0]], device=DEVICE)
    il, tl = torch.tensor([7, 6, 4], device=DEVICE), torch.tensor([3, 2, 1], device=DEVICE)
    for reduction in ("none", "sum", "mean"):
        assert torch.autograd.gradcheck(lambda x: O.ctc_loss(x, targets, il, tl, reduction=reduction), (lp,))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gradient_after_log_softmax_matches_torch(dtype):
    logits, targets, il, tl = batch(dtype=dtype, seed=4)
    x = logits.clone().requires_grad_()
    x_ref = x.detach().double().requires_grad_()
    O.ctc_loss(x.log_softmax(-1), targets, il, tl).backward()
    F.ctc_loss(x_ref.log_softmax(-1), targets, il, tl).backward()
    # f32: the recursion's error grows with T (about 1e-4 of the largest gradient here).
    assert_close(x.grad, x_ref.grad, dtype, "x.grad", scale=x_ref.grad.abs().max().item(),
                 tol=2e-4 if dtype == torch.float32 else None)


def test_module_is_a_drop_in():
    lp, targets, il, tl = batch()
    ours = jitops.nn.CTCLoss(blank=0, reduction="sum", zero_infinity=True)
    theirs = torch.nn.CTCLoss(blank=0, reduction="sum", zero_infinity=True)
    assert_close(ours(lp, targets, il, tl), theirs(lp.double(), targets, il, tl), torch.float32)


def test_bad_host_length_names_the_sample():
    lp, targets, il, tl = batch()
    il = il.tolist()
    il[2] = 1000
    with pytest.raises(jitops.OutOfRangeError, match="input_lengths"):
        O.ctc_loss(lp, targets, il, tl.tolist())


def test_reruns_are_bit_identical():
    lp, targets, il, tl = batch(T=200, N=16, C=40, S=60)
    lp.requires_grad_()

    def loss_and_grad(x):
        x.grad = None
        loss = O.ctc_loss(x, targets, il, tl)
        loss.backward()
        return loss.detach(), x.grad.clone()

    assert reruns_identical(loss_and_grad, lp)
