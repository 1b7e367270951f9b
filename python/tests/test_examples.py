"""The Python examples (examples/python/) run as a user runs them, so that they cannot drift
from the package: user_kernel.py everywhere (without a GPU it runs its compile-only part), and
on a GPU the two training examples, with fewer steps than their default. Each example checks
itself (the loss curves against PyTorch's, the results against a reference) and exits non-zero
on a mismatch; the test also reads its verdict."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import jitops

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "python"
STEPS = "60"  # the examples' floor is 50: fewer steps and their models have not learned enough


def run_example(name: str, *args: str) -> subprocess.CompletedProcess:
    """Runs examples/python/`name` in a process of its own on the package this suite imports,
    with this session's private kernel cache (conftest.py)."""
    env = dict(os.environ)
    package_root = str(Path(jitops.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True,
                          text=True, timeout=900, env=env)


def test_user_kernel_example_runs():
    done = run_example("user_kernel.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "compile-only:" in done.stdout and "->" in done.stdout, done.stdout


@pytest.mark.gpu
def test_user_kernel_example_launches_on_torch_tensors():
    done = run_example("user_kernel.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "  torch " in done.stdout and "correct" in done.stdout, done.stdout


@pytest.mark.gpu
@pytest.mark.parametrize("example, args, verdict", [
    ("ctc_train.py", (), "loss curves agree"),
    ("lm_head_train.py", ("--dtype", "bf16"), "loss curves track"),
    ("lm_head_train.py", ("--dtype", "f32"), "loss curves track"),
])
def test_training_example_tracks_pytorch(example, args, verdict):
    done = run_example(example, "--steps", STEPS, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert verdict in done.stdout and "MISMATCH" not in done.stdout, done.stdout
