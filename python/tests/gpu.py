"""What the GPU tests share: the module-level skip, random data that is never zero, and a
comparison that scales its tolerance to the dtype."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

DEVICE = torch.device("cuda")
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]

# Relative error allowed against an f64 reference, by the dtype of the data.
TOLERANCE = {torch.float64: 1e-10, torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}


def randn(*shape, dtype=torch.float32, scale=1.0, seed=None):
    """Normal data on the GPU, with no exact zeros (they hide unwritten outputs)."""
    generator = torch.Generator(device=DEVICE)
    generator.manual_seed(hash((shape, str(dtype), seed)) % 2**31 if seed is None else seed)
    x = torch.randn(shape, device=DEVICE, dtype=torch.float64, generator=generator) * scale
    x = torch.where(x == 0, torch.full_like(x, 0.5), x)
    return x.to(dtype)


def assert_close(got, want, dtype, what="", scale=None, tol=None):
    """max |got - want| <= tol * max(|want|, 1) (or tol * `scale`), with tol the dtype's
    unless given; NaN never passes."""
    got64, want64 = got.double(), want.double()
    assert got.shape == want.shape, (what, got.shape, want.shape)
    assert not torch.isnan(got64).any() or torch.equal(torch.isnan(got64), torch.isnan(want64)), what
    finite = torch.isfinite(want64)
    assert torch.equal(got64[~finite], want64[~finite]), f"{what}: non-finite values differ"
    if finite.any():
        error = (got64[finite] - want64[finite]).abs().max().item()
        bound = (tol or TOLERANCE[dtype]) * (scale if scale is not None else max(want64[finite].abs().max().item(), 1.0))
        assert error <= bound, f"{what}: max error {error:.3g} > {bound:.3g} ({dtype})"


def scan_reference(op, x, dim, reverse):
    """torch's scan of x (in x's dtype) along dim, flipped for reverse, with cummax/cummin's
    indices in the original coordinates."""
    if reverse:
        x = x.flip(dim)
    result = getattr(torch, op)(x, dim)
    if op in ("cummax", "cummin"):
        values, indices = result
        if reverse:
            values, indices = values.flip(dim), (x.shape[dim] - 1 - indices).flip(dim)
        return values, indices
    return result.flip(dim) if reverse else result


def segment_reference(data, ids, segments, reduction, fill):
    """TensorFlow's segment reduction in data's dtype (f64 for a reference): rows with ids
    outside [0, segments) dropped, empty segments 0 (sum, mean) or ``fill`` (max, min)."""
    ids = ids.to(data.device).long()
    keep = (ids >= 0) & (ids < segments)
    rows, index = data[keep], ids[keep]
    trailing = tuple(data.shape[1:])
    if reduction in ("sum", "mean"):
        out = torch.zeros((segments, *trailing), dtype=data.dtype, device=data.device)
        out = out.index_add(0, index, rows)
        if reduction == "mean":
            counts = torch.bincount(index, minlength=segments).clamp_min(1).to(data.dtype)
            out = out / counts.reshape(-1, *[1] * len(trailing))
        return out
    out = torch.full((segments, *trailing), fill, dtype=data.dtype, device=data.device)
    expanded = index.reshape(-1, *[1] * len(trailing)).expand_as(rows)
    how = "amax" if reduction == "max" else "amin"
    return out.scatter_reduce(0, expanded, rows, how, include_self=False)


def poison(t):
    """Fills an output with NaN (or -1 for integers) so that an unwritten element shows."""
    return t.fill_(float("nan") if t.is_floating_point() else -1)


def reruns_identical(fn, *args):
    """fn(*args) twice gives bit-identical outputs."""
    first, second = fn(*args), fn(*args)
    first = first if isinstance(first, tuple) else (first,)
    second = second if isinstance(second, tuple) else (second,)
    return all(torch.equal(a, b) for a, b in zip(first, second))
