"""The vocabulary-parallel FLCE's argument checks, which run before any collective (no GPU
and no process group needed): each bad argument raises its own exception, naming it."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import jitops  # noqa: E402
import jitops.ops as O  # noqa: E402

GROUP = object()  # never reached: every call below fails its checks first


def _tensors():
    x = torch.randn(4, 8)
    w = torch.randn(10, 8)
    target = torch.tensor([1, 2, 3, -100])
    return x, w, target


def test_an_unknown_reduction_is_refused():
    x, w, target = _tensors()
    with pytest.raises(jitops.InvalidArgumentError, match="reduction"):
        O.fused_linear_cross_entropy(x, w, target, reduction="avg", process_group=GROUP)


def test_a_non_positive_softcap_is_refused():
    x, w, target = _tensors()
    with pytest.raises(jitops.InvalidArgumentError, match="softcap"):
        O.fused_linear_cross_entropy(x, w, target, softcap=-1.0, process_group=GROUP)


def test_host_tensors_are_refused_with_a_process_group():
    x, w, target = _tensors()
    with pytest.raises(jitops.InvalidDeviceError, match="CUDA"):
        O.fused_linear_cross_entropy(x, w, target, process_group=GROUP)


def test_the_module_passes_its_group_on():
    x, w, target = _tensors()
    loss = jitops.nn.FusedLinearCrossEntropyLoss(process_group=GROUP)
    with pytest.raises(jitops.InvalidDeviceError):
        loss(w, x, target)
