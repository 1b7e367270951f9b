"""Scans on the GPU against torch's, in every dtype, both directions; gradients by
gradcheck in f64; reruns bit-identical."""

from __future__ import annotations

import pytest
from gpu import DEVICE, FLOATS, assert_close, randn, reruns_identical, scan_reference, torch

import jitops.ops as O

pytestmark = pytest.mark.gpu

OPS = ["cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"]


def data(op, shape, dtype):
    x = randn(*shape, dtype=torch.float64)
    if op == "cumprod":  # products of values near 1 stay in range
        x = 1 + 0.05 * x
    return x.to(dtype)


def reference(op, x, dim, reverse):
    """torch's op in f64, flipped for reverse (indices back in the original coordinates)."""
    return scan_reference(op, x.double(), dim, reverse)


def assert_scan_close(op, got, want, x, dim, what):
    """A scan of x along dim against reference(): cummax/cummin's values within x's tolerance
    and their indices exactly; cumsum's error scaled to the largest sum of |x| along dim."""
    if op in ("cummax", "cummin"):
        assert_close(got[0], want[0], x.dtype, f"{what}: values")
        assert torch.equal(got[1], want[1]), f"{what}: indices"
    else:
        scale = x.double().abs().sum(dim).max().item() if op == "cumsum" else None
        assert_close(got, want, x.dtype, what, scale)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reverse", [False, True])
def test_matches_torch(op, dtype, reverse):
    x = data(op, (33, 257), dtype)
    for dim in (0, 1, -1):
        got = getattr(O, op)(x, dim, reverse=reverse)
        want = reference(op, x, dim, reverse)
        assert_scan_close(op, got, want, x, dim, f"{op} dim {dim}")


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_integer_cumsum_and_cumprod_are_exact(dtype):
    x = torch.randint(-3, 4, (7, 100), device=DEVICE, dtype=dtype)
    assert torch.equal(O.cumsum(x, 1), torch.cumsum(x, 1))
    assert torch.equal(O.cumprod(x[:, :12], 1), torch.cumprod(x[:, :12], 1))


@pytest.mark.parametrize("op", ["cumsum", "cummax", "logcumsumexp"])
@pytest.mark.parametrize("reverse", [False, True])
def test_every_position_of_a_partial_cols_tile_is_written(op, reverse):
    """Along a strided axis shorter than a tile, each thread of the cols kernel scans only its
    first positions inside the axis. The outputs are allocated where NaN lay just before, so a
    position left unwritten fails here instead of passing on stale memory (one such failure
    was seen once and not reproduced: bench/NOTES-scan.md)."""
    for shape in ((33, 257), (65, 33), (257, 31)):
        x = randn(*shape, seed=shape[0])
        want = reference(op, x, 0, reverse)
        for _ in range(10):
            poison = torch.full((4 * x.numel(),), float("nan"), device=DEVICE)
            del poison  # its block goes back to the caching allocator, NaN inside
            got = getattr(O, op)(x, 0, reverse=reverse)
            assert_scan_close(op, got, want, x, 0, f"{op} {shape}")


def test_dim_beyond_int_is_out_of_range_not_wrapped():
    """dim reached the library as a C int, so 2^32 ran along axis 0 and 2^32 + 1 along 1."""
    import jitops

    x = randn(3, 4)
    for dim in (2**32, 2**32 + 1, -(2**40)):
        with pytest.raises(jitops.OutOfRangeError, match="axis"):
            O.cumsum(x, dim)


def test_strided_input_and_zero_dim_tensor():
    x = randn(64, 48).t()  # not contiguous
    assert_close(O.cumsum(x, 0), torch.cumsum(x.double(), 0), torch.float32)
    scalar = randn(1).reshape(())
    assert torch.equal(O.cumsum(scalar, 0), scalar)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("reverse", [False, True])
def test_zero_dim_tensors_forward_and_backward(op, reverse):
    """A 0-d tensor scans as one element, forward (cummax's and cummin's index 0 too) and
    backward, in every op: the torch layer views it as [1], and its optional tensors (the
    indices, the backward's saved x and y) once pointed at the extent of a temporary."""
    for seed in range(8):
        x = randn(1, dtype=torch.float64, seed=seed)
        x = (1 + 0.05 * x if op == "cumprod" else x).float().reshape(()).requires_grad_()
        g = randn(1, seed=100 + seed).reshape(())
        got = getattr(O, op)(x, 0, reverse=reverse)
        want = getattr(torch, op)(x.detach(), 0)
        if op in ("cummax", "cummin"):
            assert got[0].shape == () and got[1].shape == (), f"{op}: shapes"
            assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), op
            got[0].backward(g)
        else:
            assert got.shape == () and torch.equal(got, want), op
            got.backward(g)
        xr = x.detach().requires_grad_()
        ref = getattr(torch, op)(xr, 0)
        (ref[0] if op in ("cummax", "cummin") else ref).backward(g)
        assert_close(x.grad, xr.grad, torch.float32, f"{op} backward")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("reverse", [False, True])
def test_gradcheck_f64(op, reverse):
    x = data(op, (4, 9), torch.float64)
    if op == "cumprod":
        x[1, 3] = 0.0  # the backward must be exact at zeros (no division by x)
    x.requires_grad_()

    def f(t):
        out = getattr(O, op)(t, 1, reverse=reverse)
        return out[0] if isinstance(out, tuple) else out

    assert torch.autograd.gradcheck(f, (x,))


@pytest.mark.parametrize("op", OPS)
def test_backward_matches_torch_f32(op):
    x = data(op, (16, 300), torch.float32).requires_grad_()
    dy = randn(16, 300, seed=1)
    out = getattr(O, op)(x, 1)
    (out[0] if isinstance(out, tuple) else out).backward(dy)
    x_ref = x.detach().double().requires_grad_()
    ref = getattr(torch, op)(x_ref, 1)
    (ref[0] if isinstance(ref, tuple) else ref).backward(dy.double())
    assert_close(x.grad, x_ref.grad, torch.float32, op, scale=x_ref.grad.abs().max().item() * 10)


@pytest.mark.parametrize("op", OPS)
def test_reruns_are_bit_identical(op):
    x = data(op, (8, 5000), torch.float32)
    assert reruns_identical(lambda t: getattr(O, op)(t, 1), x)
