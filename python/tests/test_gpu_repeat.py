"""Tensor.repeat on the GPU: exact copies in every dtype and layout; the backward against
torch's and by gradcheck; reruns bit-identical."""

from __future__ import annotations

import pytest
from gpu import DEVICE, FLOATS, assert_close, randn, reruns_identical, torch

import jitops.ops as O

pytestmark = pytest.mark.gpu

CASES = [((3, 4), (2, 1)), ((3, 4), (1, 3, 2)), ((5,), (4, 1, 3)), ((2, 3, 4), (1, 1, 1)), ((7, 1, 5), (2, 9, 1)),
         ((3, 4), (0, 2))]


@pytest.mark.parametrize("shape, repeats", CASES)
@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.int64])
def test_forward_is_an_exact_copy(shape, repeats, dtype):
    x = randn(*shape, scale=100).to(dtype)
    assert torch.equal(O.repeat(x, *repeats), x.repeat(*repeats))


def test_non_contiguous_input():
    x = randn(6, 8).t()[1:, ::2]
    assert torch.equal(O.repeat(x, 3, 2), x.repeat(3, 2))


@pytest.mark.parametrize("shape, repeats", CASES[:5])
def test_gradcheck_f64(shape, repeats):
    x = randn(*shape, dtype=torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(lambda t: O.repeat(t, *repeats), (x,))


@pytest.mark.parametrize("dtype", FLOATS)
def test_backward_matches_torch(dtype):
    x = randn(37, 1, 20, dtype=dtype).requires_grad_()
    grad = randn(4 * 37, 300, 20, dtype=dtype, seed=2)
    O.repeat(x, 4, 300, 1).backward(grad)
    x_ref = x.detach().double().requires_grad_()
    x_ref.repeat(4, 300, 1).backward(grad.double())
    assert_close(x.grad, x_ref.grad, dtype, "repeat backward", scale=x_ref.grad.abs().max().item())


def test_reruns_are_bit_identical():
    x = randn(64, 1, 1).requires_grad_()
    grad = randn(64, 4096, 100, seed=3)

    def backward(t):
        t.grad = None
        O.repeat(t, 1, 4096, 100).backward(grad)
        return t.grad.clone()

    assert reruns_identical(backward, x)
