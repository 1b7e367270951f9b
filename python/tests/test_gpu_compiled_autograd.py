"""Every op's backward under compiled autograd (torch._dynamo.compiled_autograd, as
``torch.compile`` of a training step with compiled autograd on runs it) gives the eager backward's
gradients bit for bit. Ops whose forward has an integer output (cummax and cummin's indices, the
dropped-id count) are the ones a C++ autograd Function could trip on; FLCE's own node is tested in
test_gpu_flce.py."""

from __future__ import annotations

from typing import Callable

import pytest
from gpu import DEVICE, randn, torch

import jitops.ops as O

pytestmark = pytest.mark.gpu


def scan(op: str) -> Callable[[torch.Tensor], torch.Tensor]:
    def loss(x: torch.Tensor) -> torch.Tensor:
        out = getattr(O, op)(1 + 0.05 * x if op == "cumprod" else x, 1)
        values = out[0] if isinstance(out, tuple) else out
        return (values * torch.linspace(0.5, 2, values.shape[1], device=DEVICE)).sum()

    return loss


def fixed_ints(low: int, high: int, shape: tuple[int, ...]) -> torch.Tensor:
    """The same int64 values on every call (the GPU is touched only when a test runs)."""
    return torch.randint(low, high, shape, device=DEVICE, generator=torch.Generator(DEVICE).manual_seed(3))


def segment(op: str, return_dropped: bool) -> Callable[[torch.Tensor], torch.Tensor]:
    def loss(x: torch.Tensor) -> torch.Tensor:
        ids = fixed_ints(-2, 40, (300,))  # some negative: dropped rows
        out = getattr(O, op)(x, ids, 40, return_dropped=return_dropped)
        values = out[0] if return_dropped else out
        return (values * values).sum()

    return loss


def repeat(x: torch.Tensor) -> torch.Tensor:
    return (O.repeat(x, 2, 3) ** 2).sum()


def ctc(x: torch.Tensor) -> torch.Tensor:
    log_probs = x.reshape(30, 10, 10).log_softmax(-1)
    targets = fixed_ints(1, 10, (10, 6))
    lengths = torch.full((10,), 30, device=DEVICE, dtype=torch.int64)
    target_lengths = torch.full((10,), 6, device=DEVICE, dtype=torch.int64)
    return O.ctc_loss(log_probs, targets, lengths, target_lengths)


CASES = {
    **{op: scan(op) for op in ("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp")},
    "segment_sum": segment("segment_sum", False),
    "segment_max dropped": segment("segment_max", True),
    "segment_mean dropped": segment("segment_mean", True),
    "repeat": repeat,
    "ctc_loss": ctc,
}


@pytest.mark.parametrize("case", list(CASES))
def test_backward_under_compiled_autograd_matches_eager(case: str) -> None:
    loss_of = CASES[case]
    x = randn(300, 10, dtype=torch.float32, seed=11).requires_grad_()

    def gradient(compiled: bool) -> torch.Tensor:
        x.grad = None
        loss = loss_of(x) * 3
        if compiled:
            with torch._dynamo.compiled_autograd._enable(torch.compile(backend="eager", fullgraph=True)):
                loss.backward()
        else:
            loss.backward()
        return x.grad.clone()

    torch._dynamo.reset()
    want = gradient(False)
    got = gradient(True)
    assert want.abs().sum() > 0
    assert torch.equal(got, want)
