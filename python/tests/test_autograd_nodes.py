"""The ops' autograd nodes without a GPU, on meta tensors: each op that records a graph gives its
input a gradient of the input's shape through its own node, keeps what its backward needs
against in-place changes and frees it after a backward, leaves int64 outputs without a history,
and refuses forward-mode AD by name (its tangents would otherwise be dropped)."""

from __future__ import annotations

from typing import Callable

import pytest

torch = pytest.importorskip("torch")

import jitops  # noqa: E402
import jitops.ops as O  # noqa: E402

META = torch.device("meta")


def meta(*shape, dtype=torch.float32, grad=False):
    return torch.empty(shape, dtype=dtype, device=META).requires_grad_(grad)


def ids(n):
    return meta(n, dtype=torch.int64)


def first(out):
    return out[0] if isinstance(out, tuple) else out


# Each case: the op's name, its input's shape, and a call of the op on that input.
CASES: list[tuple[str, tuple[int, ...], Callable]] = [
    ("cumsum", (4, 9), lambda x: O.cumsum(x, 1)),
    ("cumprod", (4, 9), lambda x: O.cumprod(x, 0, reverse=True)),
    ("logcumsumexp", (4, 9), lambda x: O.logcumsumexp(x, -1)),
    ("cummax", (4, 9), lambda x: O.cummax(x, 1)),
    ("cummin", (4, 9), lambda x: O.cummin(x, 1)),
    ("segment_sum", (12, 3), lambda x: O.segment_sum(x, ids(12), 5)),
    ("segment_mean", (12, 3), lambda x: O.segment_mean(x, ids(12), 5, sorted=True)),
    ("segment_max", (12, 3), lambda x: O.segment_max(x, ids(12), 5)),
    ("segment_min", (12, 3), lambda x: O.segment_min(x, ids(12), 5)),
    ("repeat", (2, 3), lambda x: O.repeat(x, 2, 1, 3)),
    ("ctc_loss", (30, 2, 8), lambda x: O.ctc_loss(x, meta(2, 5, dtype=torch.int64), ids(2), ids(2))),
    ("fused_linear_cross_entropy", (6, 8), lambda x: O.fused_linear_cross_entropy(x, meta(10, 8), ids(6))),
]
NAMES = [case[0] for case in CASES]


@pytest.mark.parametrize("name, shape, call", CASES, ids=NAMES)
def test_backward_gives_the_input_a_gradient_of_its_shape(name, shape, call):
    x = meta(*shape, grad=True)
    y = first(call(x))
    assert y.requires_grad and y.grad_fn.name() == f"jitops::{name}_backward"
    y.sum().backward()
    assert (x.grad.shape, x.grad.dtype, x.grad.device) == (x.shape, x.dtype, META)


@pytest.mark.parametrize("name, shape, call", CASES, ids=NAMES)
def test_no_graph_is_recorded_without_grad(name, shape, call):
    with torch.no_grad():
        assert first(call(meta(*shape, grad=True))).grad_fn is None
    y = first(call(meta(*shape)))
    assert y.grad_fn is None and not y.requires_grad


@pytest.mark.parametrize("name, shape, call", CASES, ids=NAMES)
def test_forward_mode_is_refused_naming_the_op(name, shape, call):
    import torch.autograd.forward_ad as forward_ad

    with forward_ad.dual_level():
        dual = forward_ad.make_dual(meta(*shape), meta(*shape))
        with pytest.raises(jitops.UnsupportedError, match=rf"jitops\.{name}: forward-mode"):
            call(dual)


@pytest.mark.parametrize("name, call", [("cumprod", CASES[1][2]), ("segment_max", CASES[7][2]),
                                        ("ctc_loss", CASES[10][2])])
def test_a_saved_input_changed_in_place_fails_the_backward(name, call):
    shape = dict((c[0], c[1]) for c in CASES)[name]
    leaf = meta(*shape, grad=True)
    x = leaf * 1  # not a leaf: it may be changed in place
    y = first(call(x))
    x.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


@pytest.mark.parametrize("name, call", [("cumprod", CASES[1][2]), ("segment_min", CASES[8][2]),
                                        ("ctc_loss", CASES[10][2])])
def test_saved_tensors_are_freed_by_a_backward_and_kept_by_retain_graph(name, call):
    shape = dict((c[0], c[1]) for c in CASES)[name]
    x = meta(*shape, grad=True)
    loss = first(call(x)).sum()
    loss.backward(retain_graph=True)
    loss.backward()  # the graph was kept
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


@pytest.mark.parametrize("op", [O.cummax, O.cummin])
def test_indices_have_no_history(op):
    values, indices = op(meta(4, 9, grad=True), 1)
    assert values.grad_fn is not None
    assert indices.grad_fn is None and not indices.requires_grad


def test_the_dropped_count_has_no_history():
    out, dropped = O.segment_sum(meta(12, 3, grad=True), ids(12), 5, return_dropped=True)
    assert out.grad_fn is not None and dropped.grad_fn is None and not dropped.requires_grad
