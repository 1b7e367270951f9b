"""Vocabulary-parallel FLCE (``process_group=``) against the unsharded op: loss, lse and the
gradients of input, weight and bias, for every reduction and option, f32 and bf16, even and
uneven shards, reruns bit-identical. Each case runs in ``world`` processes, one GPU each,
over NCCL; a one-rank group also runs where the machine has a single GPU."""

from __future__ import annotations

import os
import tempfile
import traceback

import pytest
from gpu import torch

pytestmark = pytest.mark.gpu

CASES = [  # (dtype, options, reduction, bias)
    (torch.float32, {}, "mean", True),
    (torch.float32, {"label_smoothing": 0.1, "z_loss_scale": 1e-3}, "sum", False),
    (torch.float32, {"softcap": 15.0}, "none", True),
    (torch.bfloat16, {}, "mean", False),
    (torch.bfloat16, {"label_smoothing": 0.05, "softcap": 20.0, "z_loss_scale": 1e-4}, "mean", True),
]
TOLERANCE = {torch.float32: 2e-5, torch.bfloat16: 2e-2}


def _problem(dtype, bias, BT=384, H=256, V=1000):
    generator = torch.Generator(device="cuda").manual_seed(7)

    def rand(*shape, scale=1.0):
        x = torch.randn(shape, device="cuda", generator=generator) * scale
        return torch.where(x == 0, torch.full_like(x, 0.5), x).to(dtype)

    x, w = rand(BT, H), rand(V, H, scale=0.1)
    b = rand(V, scale=0.5) if bias else None
    target = torch.randint(0, V, (BT,), device="cuda", generator=generator)
    target[::9] = -100
    return x, w, b, target


def _bounds(rank, world, V, uneven):
    """Shard `rank`'s vocabulary rows: equal, or (uneven) a split of V into unequal parts."""
    if not uneven:
        return rank * V // world, (rank + 1) * V // world
    cuts = [0] + [(V * (2 * k + 1)) // (2 * world) for k in range(1, world)] + [V]
    return cuts[rank], cuts[rank + 1]


def _run(x, w, b, target, options, reduction, **parallel):
    import jitops.ops as O

    x, w = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    b = b.detach().clone().requires_grad_() if b is not None else None
    loss, lse = O.fused_linear_cross_entropy_with_lse(x, w, target, b, reduction=reduction, **options, **parallel)
    (loss.sum() if reduction == "none" else loss).backward()
    return loss.detach(), lse.detach(), x.grad, w.grad, b.grad if b is not None else None


def _close(got, want, dtype, what):
    error = (got.double() - want.double()).abs().max().item()
    bound = TOLERANCE[dtype] * max(want.double().abs().max().item(), 1.0)
    assert error <= bound, f"{what}: max error {error:.3g} > {bound:.3g} ({dtype})"


def _worker(rank, world, init_file, uneven, failures):
    import torch.distributed as dist

    try:
        torch.cuda.set_device(rank)
        dist.init_process_group("nccl", init_method=f"file://{init_file}", rank=rank, world_size=world)
        for dtype, options, reduction, bias in CASES:
            x, w, b, target = _problem(dtype, bias)
            want = _run(x, w, b, target, options, reduction)
            lo, hi = _bounds(rank, world, w.shape[0], uneven)
            shard_b = b[lo:hi] if b is not None else None
            got = _run(x, w[lo:hi], shard_b, target, options, reduction, process_group=dist.group.WORLD,
                       vocab_range=(lo, w.shape[0]) if uneven else None)
            again = _run(x, w[lo:hi], shard_b, target, options, reduction, process_group=dist.group.WORLD,
                         vocab_range=(lo, w.shape[0]) if uneven else None)
            case = f"rank {rank}, {dtype}, {options}, {reduction}, bias={bias}, uneven={uneven}"
            for name, g, a in zip(("loss", "lse", "grad_input", "grad_weight", "grad_bias"), got, again):
                assert (g is None) == (a is None) and (g is None or torch.equal(g, a)), f"{case}: {name} rerun differs"
            _close(got[0], want[0], dtype, f"{case}: loss")
            _close(got[1], want[1], torch.float32, f"{case}: lse")
            _close(got[2], want[2], dtype, f"{case}: grad_input")
            _close(got[3], want[3][lo:hi], dtype, f"{case}: grad_weight")
            if bias:
                _close(got[4], want[4][lo:hi], dtype, f"{case}: grad_bias")
        dist.destroy_process_group()
    except BaseException:
        failures.put(f"rank {rank}:\n{traceback.format_exc()}")


def _spawn(world, uneven):
    import torch.multiprocessing as mp

    context = mp.get_context("spawn")
    failures = context.SimpleQueue()
    with tempfile.TemporaryDirectory() as directory:
        init_file = os.path.join(directory, "rendezvous")
        workers = [context.Process(target=_worker, args=(r, world, init_file, uneven, failures)) for r in range(world)]
        for p in workers:
            p.start()
        for p in workers:
            p.join(timeout=300)
        hung = [p for p in workers if p.is_alive()]
        for p in hung:
            p.kill()
    messages = []
    while not failures.empty():
        messages.append(failures.get())
    assert not hung, f"{len(hung)} ranks did not finish"
    assert not messages, "\n".join(messages)
    assert all(p.exitcode == 0 for p in workers), [p.exitcode for p in workers]


def test_one_rank_group_matches_the_unsharded_op():
    _spawn(1, uneven=False)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
@pytest.mark.parametrize("uneven", [False, True])
def test_two_ranks_match_the_unsharded_op(uneven):
    _spawn(2, uneven)
