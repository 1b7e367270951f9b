"""CTC loss: libjitops, through the jitops package's C layer (jitops._C, one function per C
entry point), against torch.nn.functional.ctc_loss (native CUDA, and cuDNN where it applies)
on the same tensors, in the same run, timed with CUDA events (median).

    PYTHONPATH=build/python python3 bench/bench_ctc.py [--quick] [--only T,N,C,S]

Columns, per shape (f32 unless said, mean reduction, PyTorch's gradient convention so that
the gradients can be compared with torch's):
  fwd        jitops_ctc_loss / F.ctc_loss
  fwd+bwd    jitops_ctc_loss then jitops_ctc_loss_backward / loss + autograd.grad
  fused      one jitops_ctc_loss_backward that also writes the loss
  ab only    jitops_ctc_alpha_beta alone (the backward's first pass, into [N, T, 2S+1] tensors)
  cudnn      torch's cuDNN path (int32 concatenated targets on the CPU, blank 0, every
             input_length == T): one call computes loss and gradient, so its fwd and fwd+bwd
             are nearly the same
  ratio      the faster of native and cuDNN divided by ours (> 1: ours is faster)
Every column times `inner` calls queued back to back between two CUDA events, so that the
GPU queue stays full and host overheads overlap device work, as in a training loop. Our calls
take int64 padded targets and int64 lengths in device memory (no host sync); torch native gets
the same targets and CPU lengths (its fastest: no device sync). Each of our calls takes its
workspace from torch's caching allocator (jitops._C allocates it per call).
"""
from __future__ import annotations

import argparse
import sys
from typing import Callable, TypedDict, cast

import torch
import torch.nn.functional as F

import jitops.ops  # also makes torch's caching allocator the workspace allocator of jitops._C
from jitops import _C
from timing import Fn, time_queued_ms

RUN = 0  # jitops._C's mode: validate, allocate the workspace, launch
BLANK = 0
REDUCTION_MEAN = 2
GRADIENT_PYTORCH = 1


class Row(TypedDict, total=False):
    """bench_shape's results for one shape (ms, and the agreement with torch); c_fwd and
    c_fwd_bwd only where cuDNN applies."""
    shape: str
    fwd: float
    fwd_bwd: float
    fused: float
    ab: float
    t_fwd: float
    t_fwd_bwd: float
    cudnn_used: bool
    c_fwd: float
    c_fwd_bwd: float
    loss_rel: float
    grad_abs: float
    ratio_fwd: float
    ratio_fwd_bwd: float
    ratio_fused: float
    gbps: float


def time_ms(fn: Fn, reps: int) -> float:
    """Median milliseconds per fn() over `reps` samples of 10 queued calls."""
    return time_queued_ms(fn, inner=10, reps=reps)


def make_inputs(T: int, N: int, C: int, S: int, dtype: torch.dtype, seed: int = 0
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator(device="cuda").manual_seed(seed)
    logits = torch.randn(T, N, C, device="cuda", generator=g, dtype=torch.float32)
    lp = logits.log_softmax(-1).to(dtype)
    gc = torch.Generator().manual_seed(seed)
    tl = torch.randint(max(S // 2, 1), S + 1, (N,), generator=gc)
    tl[0] = S
    targets = torch.randint(1, C, (N, S), generator=gc)
    il = torch.full((N,), T, dtype=torch.int64)
    return lp, targets.cuda(), il, tl


def our_calls(lp: torch.Tensor, targets: torch.Tensor, il: torch.Tensor, tl: torch.Tensor, grad_out: torch.Tensor,
              grad: torch.Tensor, loss: torch.Tensor
              ) -> tuple[Callable[[], None], Callable[[bool], None],
                         Callable[[torch.Tensor, torch.Tensor, torch.Tensor], None]]:
    """Our calls on these tensors (blank 0, mean reduction, PyTorch's gradient convention), as
    closures: fwd() writes `loss`; bwd(with_loss) writes `grad` and, with with_loss, `loss` from
    the same pass; ab(la, lb, nll) runs the alpha/beta pass alone into those tensors."""
    rt = jitops.Runtime(lp.device).handle
    stream = torch.cuda.current_stream().cuda_stream

    def fwd() -> None:
        _C.ctc_loss(RUN, rt, lp, targets, il, tl, BLANK, REDUCTION_MEAN, False, 0, loss, stream)

    def bwd(with_loss: bool) -> None:
        _C.ctc_loss_backward(RUN, rt, lp, targets, il, tl, BLANK, REDUCTION_MEAN, False, 0,
                             GRADIENT_PYTORCH, grad_out, grad, loss if with_loss else None, stream)

    def ab(la: torch.Tensor, lb: torch.Tensor, nll: torch.Tensor) -> None:
        _C.ctc_alpha_beta(RUN, rt, lp, targets, il, tl, BLANK, 0, la, lb, nll, stream)

    return fwd, bwd, ab


def bench_shape(T: int, N: int, C: int, S: int, dtype: torch.dtype = torch.float32, reps: int = 20) -> Row:
    lp, targets, il_cpu, tl_cpu = make_inputs(T, N, C, S, dtype)
    il_dev, tl_dev = il_cpu.cuda(), tl_cpu.cuda()
    loss = torch.empty((), device="cuda", dtype=torch.float32)
    grad_out = torch.ones((), device="cuda", dtype=torch.float32)
    grad = torch.empty_like(lp)
    ours_fwd, ours_bwd, ours_ab = our_calls(lp, targets, il_dev, tl_dev, grad_out, grad, loss)

    def ours_fwd_bwd() -> None:
        ours_fwd()
        ours_bwd(False)

    def ours_fused() -> None:
        ours_bwd(True)

    row: Row = {"shape": "T=%d N=%d C=%d S=%d %s" % (T, N, C, S, str(dtype).replace("torch.", ""))}
    row["fwd"] = time_ms(ours_fwd, reps)
    row["fwd_bwd"] = time_ms(ours_fwd_bwd, reps)
    row["fused"] = time_ms(ours_fused, reps)

    # The public alpha/beta pass alone (the backward's first kernel, plus the -inf fill).
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    la = torch.empty(N, T, 2 * S + 1, device="cuda", dtype=acc)
    lb = torch.empty_like(la)
    nll = torch.empty(N, device="cuda", dtype=acc)
    row["ab"] = time_ms(lambda: ours_ab(la, lb, nll), reps)
    del la, lb

    # torch native: f32 only (it rejects f16/bf16 on CUDA); compare against f32 for halves.
    lp32 = lp.float().detach().requires_grad_(True)

    def torch_fwd() -> torch.Tensor:
        return F.ctc_loss(lp32, targets, il_cpu, tl_cpu, blank=0, reduction="mean")

    def torch_fwd_bwd() -> None:
        torch.autograd.grad(torch_fwd(), lp32)

    with torch.backends.cudnn.flags(enabled=False):
        row["t_fwd"] = time_ms(lambda: torch_fwd(), reps)
        row["t_fwd_bwd"] = time_ms(torch_fwd_bwd, reps)
        ref_loss = torch_fwd()
        ref_grad, = torch.autograd.grad(ref_loss, lp32)

    # cuDNN: int32 concatenated targets on the CPU, int32 lengths, all input lengths == T.
    tl32 = tl_cpu.to(torch.int32)
    tcat = torch.cat([targets[n, :int(tl_cpu[n])].cpu() for n in range(N)]).to(torch.int32)
    il32 = il_cpu.to(torch.int32)
    il_list, tl_list = il32.tolist(), tl32.tolist()
    try:
        eligible = bool(torch._use_cudnn_ctc_loss(lp32, tcat, il_list, tl_list, 0))
    except (AttributeError, RuntimeError, TypeError):
        eligible = False
    row["cudnn_used"] = eligible
    if eligible:
        def cudnn_fwd() -> torch.Tensor:
            # Lists of lengths (cuDNN's form): F.ctc_loss takes them, though annotated for tensors only.
            return F.ctc_loss(lp32, tcat, il_list, tl_list, blank=0, reduction="mean")  # type: ignore[arg-type]

        def cudnn_fwd_bwd() -> None:
            torch.autograd.grad(cudnn_fwd(), lp32)

        row["c_fwd"] = time_ms(lambda: cudnn_fwd(), reps)
        row["c_fwd_bwd"] = time_ms(cudnn_fwd_bwd, reps)

    # Agreement with torch native (same inputs; halves: ours on rounded inputs).
    ours_bwd(True)
    torch.cuda.synchronize()
    row["loss_rel"] = abs(loss.item() - ref_loss.item()) / max(abs(ref_loss.item()), 1e-30)
    row["grad_abs"] = (grad.float() - ref_grad).abs().max().item()
    best_fwd = min(row["t_fwd"], row.get("c_fwd", float("inf")))
    best_fb = min(row["t_fwd_bwd"], row.get("c_fwd_bwd", float("inf")))
    row["ratio_fwd"] = best_fwd / row["fwd"]
    row["ratio_fwd_bwd"] = best_fb / row["fwd_bwd"]
    row["ratio_fused"] = best_fb / row["fused"]
    row["gbps"] = lp.numel() * lp.element_size() / (row["fwd"] * 1e-3) / 1e9
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", action="append", default=[],
                    help="T,N,C,S: run only these f32 shapes (repeatable)")
    args = ap.parse_args()
    shapes = [
        (500, 64, 64, 100),     # the first shape
        (1000, 32, 256, 400),   # the second shape
        (2400, 4, 64, 2000),    # long targets
        (500, 256, 64, 100),    # large batch
        (1000, 1, 64, 100),     # tiny batch
        (200, 2, 32, 50),       # tiny everything
        (150, 512, 40, 60),     # many short sequences
    ]
    if args.quick:
        shapes = shapes[:2]
    print("device: %s, torch %s, cuDNN %s" % (torch.cuda.get_device_name(), torch.__version__,
                                              torch.backends.cudnn.version()))
    head = ("%-32s %8s %8s %8s %8s | %8s %8s | %8s %8s | %7s %7s %7s | %8s %8s"
            % ("shape", "fwd", "fwd+bwd", "fused", "ab only", "torch f", "torch fb", "cudnn f",
               "cudnn fb", "x fwd", "x f+b", "x fused", "loss rel", "grad abs"))
    print(head)
    print("-" * len(head))
    cases = [(T, N, C, S, torch.float32) for (T, N, C, S) in shapes]
    cases.append((500, 64, 64, 100, torch.bfloat16))
    if args.only:
        cases = [cast("tuple[int, int, int, int]", tuple(int(v) for v in o.split(","))) + (torch.float32,)
                 for o in args.only]
    for (T, N, C, S, dtype) in cases:
        r = bench_shape(T, N, C, S, dtype)
        c_f = "%8.3f" % r["c_fwd"] if "c_fwd" in r else "%8s" % "n/a"
        c_fb = "%8.3f" % r["c_fwd_bwd"] if "c_fwd_bwd" in r else "%8s" % "n/a"
        print("%-32s %8.3f %8.3f %8.3f %8.3f | %8.3f %8.3f | %s %s | %7.2f %7.2f %7.2f | %8.1e %8.1e"
              % (r["shape"], r["fwd"], r["fwd_bwd"], r["fused"], r["ab"], r["t_fwd"],
                 r["t_fwd_bwd"], c_f, c_fb, r["ratio_fwd"], r["ratio_fwd_bwd"], r["ratio_fused"],
                 r["loss_rel"], r["grad_abs"]))
        sys.stdout.flush()
    print("times in ms (median of CUDA-event timings); x = faster torch path / ours")


if __name__ == "__main__":
    main()
