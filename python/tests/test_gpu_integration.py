"""The ops inside PyTorch's machinery, on the GPU: torch.library.opcheck for every op, a
model under torch.compile(fullgraph=True) and under CUDA graphs (reduce-overhead and a
hand-captured graph), two streams, a second device, workspaces from torch's allocator."""

from __future__ import annotations

import pytest
from gpu import DEVICE, assert_close, randn, torch

import jitops
import jitops.ops as O

pytestmark = pytest.mark.gpu
jops = torch.ops.jitops


def ids(n, num_segments, seed=0):
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    return torch.randint(0, num_segments, (n,), device=DEVICE, generator=generator)


def opcheck_cases():
    x = randn(6, 40)
    grad_x = randn(6, 40).requires_grad_()
    lp = randn(20, 3, 6).log_softmax(-1).requires_grad_()
    targets = torch.randint(1, 6, (3, 5), device=DEVICE)
    lengths = (torch.tensor([20, 18, 15], device=DEVICE), torch.tensor([5, 3, 0], device=DEVICE))
    data = randn(50, 4).requires_grad_()
    segment_ids = ids(50, 9)
    inp, weight, bias = randn(16, 8).requires_grad_(), randn(30, 8).requires_grad_(), randn(30).requires_grad_()
    target = torch.randint(0, 30, (16,), device=DEVICE)
    return [
        (jops.cumsum.default, (grad_x, 1, False)),
        (jops.cumprod.default, (grad_x, 0, True)),
        (jops.cummax.default, (grad_x, 1, False)),
        (jops.cummin.default, (x, 1, True)),
        (jops.logcumsumexp.default, (grad_x, 1, False)),
        (jops.scan_backward.default, ("cumprod", x, x, x, None, 1, False)),
        (jops.segment_reduce.default, (data, segment_ids, 9, "sum", False, None)),
        (jops.segment_reduce.default, (data, segment_ids, 9, "max", False, -1.0)),
        (jops.segment_reduce_counted.default, (data, segment_ids, 7, "mean", False, None)),
        (jops.segment_reduce_backward.default, (x[:, :4].contiguous(), None, None, ids(6, 6), 6, "sum", False)),
        (jops.repeat.default, (grad_x, [2, 1, 3])),
        (jops.repeat_backward.default, (randn(12, 40), [2, 1], [6, 40])),
        (jops.ctc_loss.default, (lp, targets, *lengths, 0, "mean", False, 0)),
        (jops.ctc_loss_backward.default, (torch.tensor(1.0, device=DEVICE), lp.detach(), targets, *lengths, 0, "sum",
                                          False, 0)),
        (jops.fused_linear_cross_entropy.default, (inp, weight, target, bias, -100, 0.0, 0.0, 0.0, "mean",
                                                   [True, True, True], False)),
        (jops.fused_linear_cross_entropy.default, (inp, weight, target, bias, -100, 0.0, 0.0, 0.0, "sum",
                                                   [False, True, False], True)),
        (jops.fused_linear_cross_entropy.default, (inp, weight, target, None, -100, 0.1, 5.0, 1e-4, "none",
                                                   [False, False, False], True)),
        (jops.fused_linear_cross_entropy_grads.default, (randn(16), inp.detach(), weight.detach(), target, None, -100,
                                                         0.0, 0.0, 0.0, [True, True, False])),
    ]


@pytest.mark.parametrize("case", range(len(opcheck_cases())))
def test_opcheck(case):
    op, args = opcheck_cases()[case]
    torch.library.opcheck(op, args)


class Model(torch.nn.Module):
    """Every op family in one forward, with parameters that get gradients through each."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 10, device=DEVICE)
        self.head = torch.nn.Linear(6, 10, device=DEVICE)

    def forward(self, x, segment_ids, targets, input_lengths, target_lengths, tokens):
        h = self.proj(x)  # [T, N, 10]
        lp = O.logcumsumexp(h, 0).log_softmax(-1)
        ctc = O.ctc_loss(lp, targets, input_lengths, target_lengths)
        pooled = O.segment_mean(h.reshape(-1, 10), segment_ids, 5)
        pooled = O.repeat(pooled, 2, 1)
        mixed = O.cummax(pooled, 0)[0] + O.cumsum(pooled, 1) + O.cumprod(pooled.tanh() * 0.1 + 1, 1)
        flce = O.fused_linear_cross_entropy(mixed[:, :6], self.head.weight, tokens, self.head.bias)
        return ctc + flce + O.segment_max(mixed, segment_ids[:10], 3).sum() * 1e-3


def model_inputs(seed=0):
    T, N = 12, 3
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    return (
        randn(T, N, 6, seed=seed),
        torch.randint(0, 5, (T * N,), device=DEVICE, generator=generator),
        torch.randint(1, 10, (N, 4), device=DEVICE, generator=generator),
        torch.full((N,), T, device=DEVICE),
        torch.tensor([4, 2, 3], device=DEVICE),
        torch.randint(0, 10, (10,), device=DEVICE, generator=generator),
    )


def loss_and_grads(model, inputs):
    model.zero_grad()
    loss = model(*inputs)
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]


def test_compile_fullgraph_matches_eager_forward_and_backward():
    torch.manual_seed(0)
    model = Model()
    inputs = model_inputs()
    eager = loss_and_grads(model, inputs)
    compiled = torch.compile(model, fullgraph=True)
    for _ in range(2):
        got = loss_and_grads(compiled, inputs)
    assert_close(got[0], eager[0], torch.float32, "loss")
    for g, e in zip(got[1], eager[1]):
        assert_close(g, e, torch.float32, "grad", scale=e.abs().max().item())


def test_reduce_overhead_cuda_graphs_replay():
    torch.manual_seed(0)
    model = Model()
    compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True)
    with torch.no_grad():
        for seed in range(4):  # warm-up, record, then replays with new data
            inputs = model_inputs(seed)
            assert_close(compiled(*inputs).clone(), model(*inputs), torch.float32, f"replay {seed}")


def test_hand_captured_graph_of_every_op():
    x, data = randn(8, 300), randn(4000, 16)
    segment_ids = ids(4000, 100)
    lp, targets = randn(30, 4, 8).log_softmax(-1), torch.randint(1, 8, (4, 6), device=DEVICE)
    il, tl = torch.full((4,), 30, device=DEVICE), torch.tensor([6, 5, 1, 0], device=DEVICE)
    inp, weight, target = randn(64, 32), randn(200, 32), torch.randint(0, 200, (64,), device=DEVICE)

    def step():
        return (O.cumsum(x, 1), O.logcumsumexp(x, 0), O.segment_sum(data, segment_ids, 100),
                O.segment_max(data, segment_ids, 100), O.repeat(x, 2, 3), O.ctc_loss(lp, targets, il, tl),
                O.fused_linear_cross_entropy(inp, weight, target))

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # compile and load everything before capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    for seed in (1, 2):
        for t in (x, data, inp, weight):
            t.copy_(randn(*t.shape, seed=seed))
        lp.copy_(randn(*lp.shape, seed=seed).log_softmax(-1))
        graph.replay()
        torch.cuda.synchronize()
        for got, want in zip(captured, step()):
            assert torch.equal(got, want), "a replay differs from the eager call"


def test_two_streams_run_independently():
    x, y = randn(64, 10000), randn(64, 10000, seed=7)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    s1.wait_stream(torch.cuda.current_stream())
    s2.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s1):
        a = O.cumsum(x, 1)
        a2 = O.segment_sum(x, ids(64, 8), 8)
    with torch.cuda.stream(s2):
        b = O.logcumsumexp(y, 1)
    torch.cuda.synchronize()
    assert_close(a, torch.cumsum(x.double(), 1), torch.float32, scale=x.abs().sum(1).max().item())
    assert_close(b, torch.logcumsumexp(y.double(), 1), torch.float32, scale=10)
    assert_close(a2, torch.zeros(8, 10000, dtype=torch.float64, device=DEVICE).index_add_(0, ids(64, 8), x.double()),
                 torch.float32, scale=64)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs a second GPU")
def test_second_device_has_its_own_runtime():
    with torch.cuda.device(1):
        x = randn(16, 1000).to("cuda:1")
    y = O.cumsum(x, 1)  # the current device is still 0
    assert y.device == x.device
    assert_close(y, torch.cumsum(x.double(), 1), torch.float32, scale=x.abs().sum(1).max().item())
    assert jitops.Runtime(1).info.device == 1 and jitops.Runtime(1) is not jitops.Runtime(0)
    with pytest.raises(jitops.InvalidDeviceError, match="device"):
        O.segment_sum(x, ids(16, 4), 4)  # ids on device 0


def test_workspace_comes_from_torch_allocator():
    inp, weight = randn(2048, 256, dtype=torch.bfloat16), randn(32000, 256, dtype=torch.bfloat16)
    target = torch.randint(0, 32000, (2048,), device=DEVICE)
    O.fused_linear_cross_entropy(inp, weight, target)  # warm-up: kernels, tuning
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    O.fused_linear_cross_entropy(inp, weight, target)
    torch.cuda.synchronize()
    # The chunk's logits alone (rows x V x 2 bytes) exceed 16 MiB; torch's allocator saw them.
    assert torch.cuda.max_memory_allocated() - before > 16 << 20


def test_user_kernel_on_torch_tensors_and_stream():
    jitops.register_source("tests/axpy.cu", """
#include "jitops/common.cuh"
template <class T> __global__ void axpy(long long n, float a, const T *x, T *y) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) jitops::store(y + i, a * jitops::load(x + i) + jitops::load(y + i));
}
""")
    import numpy as np

    for dtype, name in ((torch.float32, "float"), (torch.float16, "jitops::half"), (torch.bfloat16, "jitops::bfloat16")):
        x, y = randn(100000, dtype=dtype), randn(100000, dtype=dtype, seed=3)
        want = (2.5 * x.float() + y.float()).to(dtype)
        kernel = jitops.get_kernel("tests/axpy.cu", f"axpy<{name}>")
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        kernel(((100000 + 255) // 256,), (256,), (np.int64(100000), np.float32(2.5), x, y), stream=stream)
        stream.synchronize()
        assert_close(y, want, dtype)


def test_user_kernel_arguments_are_checked_against_its_parameters():
    """The driver reads one pointer and the declared size for each parameter: too few
    arguments, or a scalar narrower than its parameter, used to reach the kernel as stack or
    heap garbage (or crash the process). They are refused before the launch."""
    import numpy as np

    jitops.register_source("tests/count.cu", 'extern "C" __global__ void count(float *p, long long n, float v) '
                                             "{ long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; "
                                             "if (i < n) p[i] = v; }")
    kernel = jitops.get_kernel("tests/count.cu", "count")
    y = torch.zeros(1000, device=DEVICE)
    with pytest.raises(TypeError, match="takes 3 arguments; got 2"):
        kernel(4, 256, (y, np.int64(1000)))
    with pytest.raises(TypeError, match="takes 3 arguments; got 0"):
        kernel(4, 256, ())
    with pytest.raises(TypeError, match="argument 1 of count is 4 bytes; its parameter takes 8"):
        kernel(4, 256, (y, np.int32(1000), np.float32(2.0)))
    kernel(4, 256, (y, np.int64(1000), np.float32(2.0)))
    torch.cuda.synchronize()
    assert torch.equal(y, torch.full_like(y, 2.0))


def test_user_kernel_on_cupy_arrays():
    cupy = pytest.importorskip("cupy")
    import numpy as np

    jitops.register_source("tests/fill.cu", 'extern "C" __global__ void fill(float *p, int n, float v) '
                                            "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] = v * i; }")
    a = cupy.zeros(5000, dtype=cupy.float32)
    jitops.get_kernel("tests/fill.cu", "fill")(20, 256, (a, np.int32(5000), np.float32(0.5)), stream=cupy.cuda.get_current_stream())
    cupy.cuda.get_current_stream().synchronize()
    assert cupy.allclose(a, cupy.arange(5000, dtype=cupy.float32) * 0.5)


def test_an_op_called_after_jitops_exit_handler_gets_a_live_runtime():
    """jitops's exit handler destroys the shared runtimes; the torch layer kept their pointers,
    so an op called later in the exit (here from an exit handler registered before jitops was
    imported, which runs after jitops's) used a destroyed runtime: a crash, or a nonsense
    device. It now gets a new runtime."""
    import subprocess
    import sys

    code = (
        "import atexit, torch\n"
        "def late():\n"
        "    x = torch.arange(100, dtype=torch.float32, device='cuda')\n"
        "    y = torch.ops.jitops.cumsum(x, 0)\n"
        "    print('late', torch.equal(y, torch.cumsum(x, 0)), flush=True)\n"
        "atexit.register(late)\n"
        "import jitops.ops as O\n"
        "O.cumsum(torch.ones(10, device='cuda'), 0)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "late True" in done.stdout, (done.returncode, done.stdout, done.stderr[-2000:])


def test_a_leading_tensor_on_the_cpu_is_an_invalid_device():
    """With one tensor on CUDA the dispatcher runs the CUDA kernel, which made its outputs on
    the leading tensor's device: a CPU leading tensor got PyTorch's internal assertion ("please
    report a bug") instead of jitops's error."""
    ids = torch.zeros(4, dtype=torch.int64, device=DEVICE)
    with pytest.raises(jitops.InvalidDeviceError, match="CUDA device"):
        O.segment_sum(torch.ones(4, 2), ids, 3)
    with pytest.raises(jitops.InvalidDeviceError, match="CUDA device"):
        O.fused_linear_cross_entropy(torch.ones(4, 8), torch.ones(10, 8, device=DEVICE), ids)
