"""CTC f32 accuracy at long T (issue 21): ours and torch's f32 loss and exact gradient against
ours in f64 (the same f32-rounded inputs), at T=5000, N=2, C=40, S=3500, full lengths,
reduction none, upstream gradient 1.

    PYTHONPATH=build/python python3 bench/ctc_precision.py [--torch] [T N C S]

Gradient: ||g - g64|| / ||g64|| over the whole [T, N, C] tensor (PyTorch's convention, so
torch's can be compared: it differs from the exact one by exp(lp), the same in both); loss:
the largest per-sequence relative error. The f64 reference is ours in f64 (it matches the
tests' CPU reference to ~1e-12); --torch also checks torch f64 against it."""
from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

import jitops.ops  # noqa: F401  (workspace allocator)
from jitops import _C

RUN, GRADIENT_PYTORCH = 0, 1


def ours(lp: torch.Tensor, targets: torch.Tensor, il: torch.Tensor, tl: torch.Tensor
         ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sequence loss and PyTorch-convention gradient for upstream gradient 1."""
    rt = jitops.Runtime(lp.device).handle
    stream = torch.cuda.current_stream().cuda_stream
    loss = torch.empty(lp.shape[1], device="cuda", dtype=lp.dtype)
    grad = torch.empty_like(lp)
    ones = torch.ones(lp.shape[1], device="cuda", dtype=lp.dtype)
    _C.ctc_loss_backward(RUN, rt, lp, targets, il, tl, 0, 0, False, 0, GRADIENT_PYTORCH, ones,
                         grad, loss, stream)
    torch.cuda.synchronize()
    return loss, grad


def theirs(lp: torch.Tensor, targets: torch.Tensor, il: torch.Tensor, tl: torch.Tensor
           ) -> tuple[torch.Tensor, torch.Tensor]:
    x = lp.detach().clone().requires_grad_(True)
    with torch.backends.cudnn.flags(enabled=False):
        loss = F.ctc_loss(x, targets, il.cpu(), tl.cpu(), blank=0, reduction="none")
        g, = torch.autograd.grad(loss.sum(), x)
    return loss.detach(), g


def errors(loss: torch.Tensor, grad: torch.Tensor, ref_loss: torch.Tensor, ref_grad: torch.Tensor
           ) -> tuple[float, float]:
    gl = ((loss.double() - ref_loss).abs() / ref_loss.abs()).max().item()
    gg = ((grad.double() - ref_grad).norm() / ref_grad.norm()).item()
    return gl, gg


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    T, N, C, S = (int(v) for v in args) if args else (5000, 2, 40, 3500)
    g = torch.Generator(device="cuda").manual_seed(21)
    lp32 = torch.randn(T, N, C, device="cuda", generator=g).log_softmax(-1)
    gc = torch.Generator().manual_seed(21)
    targets = torch.randint(1, C, (N, S), generator=gc).cuda()
    il = torch.full((N,), T, dtype=torch.int64, device="cuda")
    tl = torch.full((N,), S, dtype=torch.int64, device="cuda")
    lp64 = lp32.double()
    ref_loss, ref_grad = ours(lp64, targets, il, tl)
    assert torch.isfinite(ref_loss).all(), "infeasible case"
    print("device: %s, torch %s; T=%d N=%d C=%d S=%d; loss %s" % (
        torch.cuda.get_device_name(), torch.__version__, T, N, C, S, ref_loss.tolist()))
    rows = [("ours f32", ours(lp32, targets, il, tl))]
    if "--torch" in sys.argv:
        rows.append(("torch f32", theirs(lp32, targets, il, tl)))
        rows.append(("torch f64", theirs(lp64, targets, il, tl)))
    for name, (loss, grad) in rows:
        gl, gg = errors(loss, grad, ref_loss, ref_grad)
        print("%-10s loss rel err %.3g  grad rel norm err %.3g" % (name, gl, gg))


if __name__ == "__main__":
    main()
