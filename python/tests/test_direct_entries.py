"""The direct entries (jitops._direct) without a GPU: which calls they take and which they hand
to torch.ops, and that a call they take gives what the torch.ops call gives (shapes, dtypes,
autograd graph, errors), on meta and CPU tensors."""

from __future__ import annotations

import contextlib

import pytest

torch = pytest.importorskip("torch")

import jitops  # noqa: E402
import jitops.ops as O  # noqa: E402
from jitops.ops import _torch  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

META = torch.device("meta")


def meta(*shape, dtype=torch.float32, grad=False):
    return torch.empty(shape, dtype=dtype, device=META, requires_grad=grad)


@contextlib.contextmanager
def counted():
    """Yields a dict that, on exit, holds how many calls the entries made and declined."""
    before = _torch.direct_counts()
    seen: dict[str, int] = {}
    yield seen
    after = _torch.direct_counts()
    seen["direct"], seen["declined"] = after[0] - before[0], after[1] - before[1]




def calls(grad=False):
    """One call of every op jitops.ops routes through an entry, on meta tensors."""
    x = meta(4, 6, grad=grad)
    lp = meta(10, 3, 5, grad=grad)
    targets, lengths = meta(3, 4, dtype=torch.int64), meta(3, dtype=torch.int64)
    inp, weight, target = meta(8, 6, grad=grad), meta(20, 6, grad=grad), meta(8, dtype=torch.int64)
    segment_ids = meta(4, dtype=torch.int64)
    return {
        "cumsum": lambda: O.cumsum(x, 1),
        "cumprod": lambda: O.cumprod(x, 0, reverse=True),
        "logcumsumexp": lambda: O.logcumsumexp(x, -1),
        "cummax": lambda: O.cummax(x, 1),
        "cummin": lambda: O.cummin(x, 0),
        "segment_sum": lambda: O.segment_sum(x, segment_ids, 5),
        "segment_max_dropped": lambda: O.segment_max(x, segment_ids, 5, fill=-1.0, return_dropped=True),
        "repeat": lambda: O.repeat(x, 2, 1, 3),
        "ctc_loss": lambda: O.ctc_loss(lp, targets, lengths, lengths),
        "flce": lambda: O.fused_linear_cross_entropy(inp, weight, target, label_smoothing=0.1, softcap=30.0),
        "flce_none": lambda: O.fused_linear_cross_entropy(inp, weight, target, reduction="none"),
    }


def summary(out):
    """What a result is, short of its (meta) values: shapes, dtypes, autograd records."""
    tensors = out if isinstance(out, tuple) else (out,)
    return [(t.shape, t.dtype, t.device, t.requires_grad, type(t.grad_fn).__name__) for t in tensors]


def test_entries_are_on():
    assert _torch.DIRECT


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("name", list(calls()))
def test_an_entry_takes_a_plain_call_and_matches_torch_ops(name, grad):
    with counted() as seen:
        direct = calls(grad)[name]()
    assert seen == {"direct": 1, "declined": 0}
    with _torch.dispatcher_path(), counted() as seen:
        via_torch_ops = calls(grad)[name]()
    assert seen == {"direct": 0, "declined": 1}
    assert summary(direct) == summary(via_torch_ops)
    if grad:
        assert any(t.grad_fn is not None for t in (direct if isinstance(direct, tuple) else (direct,)))


def test_gradients_flow_through_a_direct_call():
    x = meta(4, 6, grad=True)
    (grad,) = torch.autograd.grad(O.cumprod(x, 1).sum(), x)
    assert grad.shape == x.shape


@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
def test_no_grad_and_inference_mode(mode):
    x = meta(4, 6, grad=True)
    with mode(), counted() as seen:
        y = O.cumsum(x, 1)
    assert seen["direct"] == 1 and not y.requires_grad and y.grad_fn is None
    with mode(), _torch.dispatcher_path():
        assert summary(O.cumsum(x, 1)) == summary(y)


def test_a_parameter_is_a_plain_tensor():
    weight = torch.nn.Parameter(meta(20, 6))
    with counted() as seen:
        loss = O.fused_linear_cross_entropy(meta(8, 6), weight, meta(8, dtype=torch.int64))
    assert seen == {"direct": 1, "declined": 0} and loss.requires_grad


def call_and_error(fn):
    try:
        fn()
    except Exception as error:  # noqa: BLE001 - the error itself is what is compared
        return type(error), str(error)
    raise AssertionError("the call did not fail")


@pytest.mark.parametrize(
    "bad",
    [
        lambda: O.cumsum(torch.zeros(3, 4), 1),  # a CPU tensor: the torch layer's CPU kernel refuses it
        lambda: O.cumsum(meta(3, 4), 5),  # the fake kernel's validation, in Python below the dispatcher
        lambda: O.segment_reduce(meta(3, 4), meta(3, dtype=torch.float32), 4, "sum"),
        lambda: O.repeat(meta(3, 4), -1, 2),
        lambda: O.ctc_loss(meta(10, 3, 5), meta(3, 4, dtype=torch.int64), meta(3), meta(3)),  # float lengths
        lambda: O.fused_linear_cross_entropy(meta(8, 6), meta(20, 7), meta(8, dtype=torch.int64)),
    ],
)
def test_errors_are_the_ones_torch_ops_raises(bad):
    with counted() as seen:
        direct = call_and_error(bad)
    with _torch.dispatcher_path():
        via_torch_ops = call_and_error(bad)
    assert seen == {"direct": 1, "declined": 0}
    assert direct == via_torch_ops
    assert issubclass(direct[0], jitops.Error), direct


class Subclass(torch.Tensor):
    pass


class Recorder(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.funcs = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.funcs.append(func)
        return func(*args, **(kwargs or {}))


class DispatchRecorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.funcs = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.funcs.append(func)
        return func(*args, **(kwargs or {}))


def test_a_tensor_subclass_goes_through_torch_ops():
    x = meta(4, 6).as_subclass(Subclass)
    with counted() as seen:
        y = O.cumsum(x, 1)
    assert seen == {"direct": 0, "declined": 1}
    assert type(y) is Subclass  # torch.ops' __torch_function__ handling kept the subclass


def test_a_torch_function_mode_sees_the_call():
    with Recorder() as mode, counted() as seen:
        O.cumsum(meta(4, 6), 1)
    assert seen == {"direct": 0, "declined": 1}
    assert torch.ops.jitops.cumsum.default in mode.funcs


def test_a_default_device_takes_the_direct_entries():
    # torch.set_default_device and `with torch.device(...)` push a DeviceContext, which hands a
    # call to a non-factory op straight on: the entries take it, with torch.ops' result.
    x = meta(4, 6)
    want = summary(torch.ops.jitops.cumsum.default(x, 1, False))
    with torch.device("cpu"), counted() as seen:
        got = summary(O.cumsum(x, 1))
    assert seen == {"direct": 1, "declined": 0}
    assert got == want


def test_a_mode_beside_the_default_device_still_sees_the_call():
    with torch.device("cpu"), Recorder() as mode, counted() as seen:
        O.cumsum(meta(4, 6), 1)
    assert seen == {"direct": 0, "declined": 1}
    assert torch.ops.jitops.cumsum.default in mode.funcs


def test_a_torch_dispatch_mode_sees_a_direct_call():
    # The dispatcher runs below the entries: its Python mode handling is the same either way.
    with DispatchRecorder() as mode, counted() as seen:
        O.cumsum(meta(4, 6), 1)
    assert seen == {"direct": 1, "declined": 0}
    assert torch.ops.jitops.cumsum.default in mode.funcs


@pytest.mark.parametrize(
    "call",
    [
        lambda x: O.cumsum(x, True),  # a bool where the schema has an int
        lambda x: O.repeat(x, torch.tensor(2), 1),  # a tensor among the repeats
        lambda x: O.segment_sum(x, meta(4, dtype=torch.int64), 2**70),  # an int beyond int64
    ],
)
def test_arguments_an_entry_does_not_read_go_through_torch_ops(call):
    with counted() as seen:
        direct = call_and_error_or_summary(call, meta(4, 6))
    assert seen == {"direct": 0, "declined": 1}
    with _torch.dispatcher_path():
        assert call_and_error_or_summary(call, meta(4, 6)) == direct


def call_and_error_or_summary(call, x):
    try:
        return summary(call(x))
    except Exception as error:  # noqa: BLE001
        return type(error), str(error)


def test_torch_compile_traces_torch_ops_not_the_entries():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def fn(x, ids):
        return O.segment_sum(O.cumsum(x, 1), ids, 3)

    with counted() as seen:
        out = torch.compile(fn, fullgraph=True, backend=backend)(meta(4, 6), meta(4, dtype=torch.int64))
    assert seen == {"direct": 0, "declined": 0} and out.shape == (3, 6)
    targets = {str(node.target) for node in graphs[0].graph.nodes if node.op == "call_function"}
    assert {"jitops.cumsum.default", "jitops.segment_reduce.default"} <= targets, targets


def test_entries_off_then_on():
    assert _torch.direct_entries(False) is True
    assert _torch.direct_entries(True) is False
    with counted() as seen:
        O.cumsum(meta(2, 2), 0)
    assert seen["direct"] == 1
