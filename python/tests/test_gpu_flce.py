"""Fused linear cross-entropy on the GPU against the unfused computation in f64: every
option (ignore_index, label smoothing, softcap, z-loss, bias, reductions), gradients for
input, weight and bias, gradcheck in f64, the Liger-style module, reruns bit-identical."""

from __future__ import annotations

import pytest
from gpu import DEVICE, assert_close, randn, reruns_identical, torch

from torch.utils._python_dispatch import TorchDispatchMode

import jitops
import jitops.ops as O

pytestmark = pytest.mark.gpu


def problem(BT=96, H=64, V=500, dtype=torch.float32, bias=True, seed=0):
    x = randn(BT, H, dtype=dtype, seed=seed)
    w = randn(V, H, dtype=dtype, scale=0.2, seed=seed + 1)
    b = randn(V, dtype=dtype, scale=0.5, seed=seed + 2) if bias else None
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    target = torch.randint(0, V, (BT,), device=DEVICE, generator=generator)
    target[::7] = -100  # ignored rows
    return x, w, b, target


def reference(x, w, b, target, ignore_index=-100, label_smoothing=0.0, softcap=None, z_loss_scale=0.0,
              reduction="mean"):
    """The unfused loss in f64, Liger's formula."""
    z = x.double() @ w.double().T
    if b is not None:
        z = z + b.double()
    if softcap:
        z = softcap * torch.tanh(z / softcap)
    lse = torch.logsumexp(z, -1)
    valid = target != ignore_index
    z_target = z.gather(1, target.clamp_min(0)[:, None])[:, 0]
    V = z.shape[1]
    loss = lse - (1 - label_smoothing) * z_target - label_smoothing / V * z.sum(-1) + z_loss_scale * lse**2
    loss = torch.where(valid, loss, torch.zeros_like(loss))
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / valid.sum()


OPTIONS = [
    {},
    {"label_smoothing": 0.1},
    {"softcap": 30.0},
    {"z_loss_scale": 1e-3},
    {"label_smoothing": 0.05, "softcap": 15.0, "z_loss_scale": 1e-4, "ignore_index": 3},
]


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_loss_and_gradients_match_f64_reference_f32(options, reduction):
    x, w, b, target = problem()
    target = torch.where(target == -100, options.get("ignore_index", -100), target)
    params = [t.clone().requires_grad_() for t in (x, w, b)]
    loss = O.fused_linear_cross_entropy(*params[:2], target, params[2], reduction=reduction, **options)
    refs = [t.detach().double().requires_grad_() for t in (x, w, b)]
    want = reference(*refs, target, reduction=reduction, **options)
    assert_close(loss, want, torch.float32, "loss")
    dy = randn(*loss.shape, seed=9) if reduction == "none" else torch.tensor(0.75, device=DEVICE)
    loss.backward(dy)
    want.backward(dy.double())
    for got, ref, name in zip(params, refs, ("input", "weight", "bias")):
        assert_close(got.grad, ref.grad, torch.float32, name, scale=ref.grad.abs().max().item())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_inputs(dtype):
    x, w, b, target = problem(BT=256, H=128, V=2000, dtype=dtype)
    params = [t.clone().requires_grad_() for t in (x, w, b)]
    loss = O.fused_linear_cross_entropy(*params[:2], target, params[2])
    assert loss.dtype == torch.float32
    refs = [t.detach().double().requires_grad_() for t in (x, w, b)]
    want = reference(*refs, target)
    assert_close(loss, want, dtype, "loss")
    loss.backward()
    want.backward()
    for got, ref, name in zip(params, refs, ("input", "weight", "bias")):
        assert got.grad.dtype == dtype
        assert_close(got.grad, ref.grad, dtype, name, scale=ref.grad.abs().max().item())


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_gradcheck_f64(reduction):
    x, w, b, target = problem(BT=6, H=5, V=7, dtype=torch.float64)
    target[2] = -100
    inputs = tuple(t.requires_grad_() for t in (x, w, b))

    def f(x, w, b):
        return O.fused_linear_cross_entropy(x, w, target, b, label_smoothing=0.1, softcap=4.0, z_loss_scale=0.01,
                                            reduction=reduction)

    assert torch.autograd.gradcheck(f, inputs)


def test_only_the_needed_gradients_are_made():
    x, w, b, target = problem()
    w.requires_grad_()
    O.fused_linear_cross_entropy(x, w, target, b).backward()
    assert w.grad is not None and x.grad is None


def test_second_backward_with_retain_graph_sees_intact_gradients():
    x, w, b, target = problem()
    x.requires_grad_()
    loss = O.fused_linear_cross_entropy(x, w, target, b)
    first, = torch.autograd.grad(loss, x, torch.tensor(2.0, device=DEVICE), retain_graph=True)
    second, = torch.autograd.grad(loss, x, torch.tensor(2.0, device=DEVICE))
    assert torch.equal(first, second)


def test_module_is_a_liger_drop_in():
    x, w, b, target = problem()
    head = jitops.nn.FusedLinearCrossEntropyLoss(lse_square_scale=1e-3, label_smoothing=0.1, return_z_loss=True)
    loss, z_loss = head(w, x, target, b)
    assert_close(loss, reference(x, w, b, target, label_smoothing=0.1, z_loss_scale=1e-3), torch.float32)
    lse = torch.logsumexp(x.double() @ w.double().T + b.double(), -1)
    valid = target != -100
    assert_close(z_loss, 1e-3 * (lse[valid] ** 2).mean(), torch.float32)


def test_reruns_are_bit_identical():
    x, w, b, target = problem(BT=1024, H=256, V=8000, dtype=torch.bfloat16)
    w.requires_grad_()

    def loss_and_grad(weight):
        weight.grad = None
        loss = O.fused_linear_cross_entropy(x, weight, target, b)
        loss.backward()
        return loss.detach(), weight.grad.clone()

    assert reruns_identical(loss_and_grad, w)


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_backward_under_compiled_autograd_matches_eager(reduction):
    x, w, b, target = problem(BT=64, H=32, V=300)
    params = [t.requires_grad_() for t in (x, w, b)]

    def grads(compiled):
        for p in params:
            p.grad = None
        loss = O.fused_linear_cross_entropy(x, w, target, b, reduction=reduction)
        loss = loss.sum() * 3 if reduction == "none" else loss * 3
        if compiled:
            with torch._dynamo.compiled_autograd._enable(torch.compile(backend="eager", fullgraph=True)):
                loss.backward()
        else:
            loss.backward()
        return [p.grad.clone() for p in params]

    torch._dynamo.reset()
    for got, want in zip(grads(True), grads(False)):
        assert torch.equal(got, want)


class _PassThrough(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _storages(*tensors):
    return {t.untyped_storage().data_ptr() for t in tensors}


def test_small_call_gradients_share_one_aligned_allocation_and_stay_exact():
    # A small call recorded by eager autograd makes its gradients in one allocation (host time);
    # each starts 256-byte aligned, they do not overlap, and each is what a separate one holds.
    x, w, b, target = problem(BT=40, H=24, V=300)
    params = [t.clone().requires_grad_() for t in (x, w, b)]
    O.fused_linear_cross_entropy(*params[:2], target, params[2], label_smoothing=0.1).backward()
    grads = [p.grad for p in params]
    assert len(_storages(*grads)) == 1
    starts = sorted((g.data_ptr(), g.nbytes) for g in grads)
    assert all(start % 256 == 0 for start, _ in starts)
    assert all(a + n <= b for (a, n), (b, _) in zip(starts, starts[1:]))

    # The same call under a dispatch mode allocates each gradient alone: the same bits.
    alone = [t.clone().requires_grad_() for t in (x, w, b)]
    with _PassThrough():
        loss = O.fused_linear_cross_entropy(*alone[:2], target, alone[2], label_smoothing=0.1)
    loss.backward()
    assert len(_storages(*(p.grad for p in alone))) == 3
    for got, want in zip(grads, (p.grad for p in alone)):
        assert torch.equal(got, want)
    ref = [t.double().requires_grad_() for t in (x, w, b)]
    reference(*ref, target, label_smoothing=0.1).backward()
    for got, r in zip(grads, ref):
        assert_close(got, r.grad, torch.float32)


def test_large_call_gradients_are_allocated_apart():
    # Over 4 MiB of gradients, each has its own allocation: weight.grad keeps only its own.
    x, w, b, target = problem(BT=64, H=256, V=4200)  # grad_weight alone is 4.1 MiB
    params = [t.requires_grad_() for t in (x, w)]
    O.fused_linear_cross_entropy(*params, target).backward()
    assert len(_storages(x.grad, w.grad)) == 2


def test_the_op_called_directly_returns_gradients_that_never_alias():
    # Only jitops.ops' own entry, which drops the gradients, lets them share a block: a caller of
    # torch.ops (or jitops.ops when its entry declines) gets outputs of their own.
    x, w, b, target = problem(BT=40, H=24, V=300)
    x, w = x.requires_grad_(), w.requires_grad_()
    out = torch.ops.jitops.fused_linear_cross_entropy.default(x, w, target, None, -100, 0.0, 0.0, 0.0, "mean",
                                                              [True, True, False], False)
    assert len(out) == 3 and len(_storages(*out)) == 3
    with jitops.ops._torch.dispatcher_path():
        O.fused_linear_cross_entropy(x, w, target).backward()
    assert len(_storages(x.grad, w.grad)) == 2


def test_small_call_gradients_share_their_block_under_autocast():
    # jitops registers no autocast kernel, so under autocast the call still goes straight to it.
    x, w, b, target = problem(BT=40, H=24, V=300)
    x, w = x.requires_grad_(), w.requires_grad_()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = O.fused_linear_cross_entropy(x, w, target)
    loss.backward()
    assert loss.dtype == torch.float32 and len(_storages(x.grad, w.grad)) == 1
