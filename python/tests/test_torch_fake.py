"""The torch layer without a GPU: every op's shape and dtype inference on meta tensors and
FakeTensors, the library's argument checks run on them, CPU tensors refused, and models that
trace into one graph (torch.compile fullgraph) with the ops as nodes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import jitops  # noqa: E402
import jitops.ops as O  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

META = torch.device("meta")


def meta(*shape, dtype=torch.float32):
    return torch.empty(shape, dtype=dtype, device=META)


def ids(n, dtype=torch.int64):
    return meta(n, dtype=dtype)


# ---- shapes and dtypes ---------------------------------------------------------------------


@pytest.mark.parametrize("op", [O.cumsum, O.cumprod, O.logcumsumexp])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_scans_keep_shape_and_dtype(op, dtype):
    x = meta(3, 5, 7, dtype=dtype)
    for dim in (0, 1, -1):
        y = op(x, dim, reverse=dim == 1)
        assert (y.shape, y.dtype) == (x.shape, dtype)
    assert op(meta(dtype=dtype), 0).shape == ()  # a 0-d tensor scans as one element


@pytest.mark.parametrize("op", [O.cummax, O.cummin])
def test_cummax_cummin_return_int64_indices(op):
    values, indices = op(meta(4, 6), 1)
    assert values.shape == indices.shape == (4, 6)
    assert (values.dtype, indices.dtype) == (torch.float32, torch.int64)


def test_int_cumsum_is_accepted():
    assert O.cumsum(meta(10, dtype=torch.int32), 0).dtype == torch.int32


@pytest.mark.parametrize("reduction", ["sum", "mean", "max", "min"])
def test_segment_output_is_num_segments_rows(reduction):
    out = O.segment_reduce(meta(100, 3, 4, dtype=torch.bfloat16), ids(100, torch.int32), 17, reduction)
    assert (out.shape, out.dtype) == ((17, 3, 4), torch.bfloat16)
    out, dropped = O.segment_reduce(meta(100, 8), ids(100), 5, reduction, return_dropped=True)
    assert out.shape == (5, 8) and (dropped.shape, dropped.dtype) == ((), torch.int64)


def test_repeat_shape_follows_tensor_repeat():
    x = meta(3, 4)
    for sizes in [(2, 1), (1, 3, 2), (0, 5)]:
        assert O.repeat(x, *sizes).shape == torch.empty(3, 4).repeat(*sizes).shape
    assert O.repeat(x, [2, 2]).shape == (6, 8)


@pytest.mark.parametrize("dtype, loss_dtype", [(torch.float32, torch.float32), (torch.float64, torch.float64),
                                                (torch.float16, torch.float32), (torch.bfloat16, torch.float32)])
def test_ctc_loss_shape_and_dtype(dtype, loss_dtype):
    lp, targets = meta(50, 3, 20, dtype=dtype), meta(3, 10, dtype=torch.int64)
    lengths = ([50, 40, 30], [10, 5, 0])
    assert O.ctc_loss(lp, targets, *lengths).shape == ()
    loss = O.ctc_loss(lp, targets, ids(3), ids(3), reduction="none")
    assert (loss.shape, loss.dtype) == ((3,), loss_dtype)
    unbatched = O.ctc_loss(meta(50, 20, dtype=dtype), meta(10, dtype=torch.int64), ids(1), ids(1), reduction="none")
    assert unbatched.shape == ()


@pytest.mark.parametrize("dtype, loss_dtype", [(torch.float32, torch.float32), (torch.bfloat16, torch.float32),
                                                (torch.float64, torch.float64)])
def test_flce_shapes(dtype, loss_dtype):
    x, w, target = meta(16, 32, dtype=dtype), meta(100, 32, dtype=dtype), ids(16)
    loss = O.fused_linear_cross_entropy(x, w, target, bias=meta(100, dtype=dtype))
    assert (loss.shape, loss.dtype) == ((), loss_dtype)
    loss, lse = O.fused_linear_cross_entropy_with_lse(x, w, target, reduction="none")
    assert loss.shape == lse.shape == (16,)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("wants", [(True, True, True), (False, True, False), (True, False, None)])
def test_flce_backward_gives_each_wanted_parameter_its_gradient(reduction, wants):
    # The forward returns only the gradients autograd wants (and lse only when asked): the
    # backward must hand each its parameter, whichever are missing.
    x, w = meta(16, 32).requires_grad_(wants[0]), meta(100, 32, dtype=torch.bfloat16).requires_grad_(wants[1])
    b = None if wants[2] is None else meta(100, dtype=torch.bfloat16).requires_grad_(wants[2])
    for with_lse in (False, True):
        if with_lse:
            loss, lse = O.fused_linear_cross_entropy_with_lse(x.to(torch.bfloat16), w, ids(16), b, reduction=reduction)
            assert lse.shape == (16,) and not lse.requires_grad
        else:
            loss = O.fused_linear_cross_entropy(x.to(torch.bfloat16), w, ids(16), b, reduction=reduction)
        loss.sum().backward()
        for param, wanted in zip((x, w, b), wants):
            if param is None:
                continue
            assert (param.grad is not None) == bool(wanted)
            if wanted:
                assert (param.grad.shape, param.grad.dtype) == (param.shape, param.dtype)
            param.grad = None


def test_flce_refuses_forward_mode_autograd():
    import torch.autograd.forward_ad as forward_ad

    weight = meta(10, 8).requires_grad_()
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(meta(4, 8), meta(4, 8))
        with pytest.raises(jitops.UnsupportedError, match="forward-mode"):
            O.fused_linear_cross_entropy(dual, weight, ids(4))
        with pytest.raises(jitops.UnsupportedError, match="forward-mode"):
            O.fused_linear_cross_entropy(dual, weight.detach(), ids(4))


def test_modules_on_meta_tensors():
    loss = jitops.nn.CTCLoss(blank=0, reduction="sum")(meta(30, 2, 8), meta(2, 5, dtype=torch.int64), ids(2), ids(2))
    assert loss.shape == ()
    head = jitops.nn.FusedLinearCrossEntropyLoss(lse_square_scale=1e-4, return_z_loss=True)
    loss, z_loss = head(meta(64, 16), meta(8, 16), ids(8))
    assert loss.shape == z_loss.shape == ()


# ---- the library's checks, on fake tensors ------------------------------------------------


def test_bad_dtype_shape_and_range_name_the_op_and_argument():
    with pytest.raises(jitops.InvalidDtypeError, match=r"jitops\.cumsum: x .*int8|jitops\.cumsum: x"):
        O.cumsum(meta(3, dtype=torch.int8), 0)
    with pytest.raises(jitops.OutOfRangeError, match="axis 5"):
        O.cumsum(meta(3, 4), 5)
    with pytest.raises(jitops.InvalidDtypeError, match="segment_ids"):
        O.segment_sum(meta(10, 2), meta(10, dtype=torch.float32), 4)
    with pytest.raises(jitops.InvalidShapeError):
        O.segment_sum(meta(10, 2), ids(9), 4)
    with pytest.raises(jitops.InvalidDtypeError, match="target"):
        O.fused_linear_cross_entropy(meta(4, 8), meta(10, 8), meta(4, dtype=torch.int32))
    with pytest.raises(jitops.InvalidShapeError):
        O.fused_linear_cross_entropy(meta(4, 8), meta(10, 9), ids(4))
    with pytest.raises(jitops.InvalidShapeError):
        O.ctc_loss(meta(50, 3, 20), meta(3, 10, dtype=torch.int64), ids(2), ids(3))
    with pytest.raises(jitops.InvalidShapeError):
        O.repeat(meta(3, 4), 2)
    with pytest.raises(jitops.OutOfRangeError):
        O.repeat(meta(3, 4), 2, -1)


def test_bad_options_are_invalid_arguments():
    with pytest.raises(jitops.InvalidArgumentError, match="reduction"):
        O.ctc_loss(meta(5, 1, 3), meta(1, 2, dtype=torch.int64), [5], [2], reduction="avg")
    with pytest.raises(jitops.InvalidArgumentError, match="reduction"):
        O.segment_reduce(meta(4, 2), ids(4), 2, "prod")
    with pytest.raises(jitops.InvalidArgumentError, match="fill"):
        O.segment_reduce(meta(4, 2), ids(4), 2, "sum", fill=0.0)
    with pytest.raises(jitops.InvalidArgumentError, match="softcap"):
        O.fused_linear_cross_entropy(meta(4, 8), meta(10, 8), ids(4), softcap=-1.0)
    with pytest.raises(jitops.InvalidArgumentError, match="label_smoothing"):
        O.fused_linear_cross_entropy(meta(4, 8), meta(10, 8), ids(4), label_smoothing=1.5)
    with pytest.raises(jitops.UnsupportedError, match="ce_weight"):
        jitops.nn.FusedLinearCrossEntropyLoss(ce_weight=torch.ones(3))


def test_overlapping_output_is_a_layout_error():
    x = meta(4, 4)
    with pytest.raises(jitops.InvalidLayoutError):
        # The C check, reached directly: an output whose rows overlap.
        from jitops.ops import _torch

        y = torch.empty_strided((4, 4), (1, 1), device=META)
        _torch.validate("cumsum", jitops._C.scan, 0, x, 1, False, y, None)


def test_cpu_tensors_are_refused_with_the_argument_named():
    with pytest.raises(jitops.InvalidDeviceError, match="CPU tensor"):
        O.cumsum(torch.randn(3, 4), 0)
    with pytest.raises(jitops.InvalidDeviceError):
        O.segment_sum(torch.randn(3, 4), torch.zeros(3, dtype=torch.int64), 2)
    with pytest.raises(jitops.InvalidDeviceError):
        O.repeat(torch.randn(3), 2)


def test_fake_tensor_mode_on_a_cuda_device():
    with FakeTensorMode():
        x = torch.randn(8, 3, device="cuda")
        assert O.cummin(x, 1)[0].device.type == "cuda"
        assert O.segment_max(x, torch.zeros(8, dtype=torch.int32, device="cuda"), 4).shape == (4, 3)
        with pytest.raises(jitops.InvalidDtypeError):
            O.cumsum(x.to(torch.int8), 0)


# ---- graphs ---------------------------------------------------------------------------------


class Model(torch.nn.Module):
    """Every op family in one forward."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 10)
        self.head = jitops.nn.FusedLinearCrossEntropyLoss()

    def forward(self, x, segment_ids, targets, lengths, tokens):
        h = self.proj(x)  # [T, N, 10]
        lp = jitops.ops.logcumsumexp(h, 0).log_softmax(-1)
        ctc = jitops.ops.ctc_loss(lp, targets, lengths, lengths // 2)
        pooled = jitops.ops.segment_mean(h.reshape(-1, 10), segment_ids, 5)
        pooled = jitops.ops.repeat(pooled, 2, 1)
        peak = jitops.ops.cummax(pooled, 0)[0] + jitops.ops.cumsum(pooled, 1)
        flce = self.head(self.proj.weight, peak[:, :6], tokens)
        return ctc + flce


def model_inputs(device):
    T, N = 12, 3
    return (
        torch.randn(T, N, 6, device=device),
        torch.zeros(T * N, dtype=torch.int64, device=device),
        torch.ones(N, 4, dtype=torch.int64, device=device),
        torch.full((N,), T, dtype=torch.int64, device=device),
        torch.zeros(10, dtype=torch.int64, device=device),
    )


def test_model_compiles_fullgraph_with_every_op_as_a_node():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    model = Model().to(META)
    out = torch.compile(model, fullgraph=True, backend=backend)(*model_inputs(META))
    assert out.shape == () and len(graphs) == 1
    targets = {str(node.target) for node in graphs[0].graph.nodes if node.op == "call_function"}
    for name in ("logcumsumexp", "ctc_loss", "segment_reduce", "repeat", "cummax", "cumsum",
                 "fused_linear_cross_entropy"):
        assert f"jitops.{name}.default" in targets, (name, sorted(targets))


def test_ops_are_pt2_compliant():
    for name in ("cumsum", "ctc_loss", "segment_reduce", "repeat", "fused_linear_cross_entropy"):
        op = getattr(torch.ops.jitops, name).default
        assert torch.Tag.pt2_compliant_tag in op.tags


def test_a_tensor_whose_stride_has_another_rank_is_refused():
    """The extension reads shape and stride() into fixed arrays; a tensor-like object whose
    stride() is shorter than its shape left the rest of the strides unwritten for the library
    to read. It is refused, naming the argument."""

    class Duck:
        dtype = torch.float32
        shape = (2, 3)

        def stride(self):
            return (3,)

        def data_ptr(self):
            return 0

        def get_device(self):
            return 0

    with jitops.Runtime(arch="sm_90") as rt:
        with pytest.raises(ValueError, match="x: its stride\\(\\) has 1 entries for 2 dimensions"):
            jitops._C.repeat(1, rt.handle, Duck(), (1, 1), meta(2, 3), 0)
