"""Shared pytest setup: a private kernel cache for the whole session (so the suite neither
reads nor fills the user's), and the `gpu` marker, skipped where no CUDA GPU is usable."""

from __future__ import annotations

import os
import tempfile

import pytest

_CACHE = tempfile.mkdtemp(prefix="jitops-pytest-")
os.environ["JITOPS_CACHE_DIR"] = _CACHE
os.environ.pop("JITOPS_CACHE_SHIPPED", None)


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


HAS_GPU = _has_gpu()


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords and not HAS_GPU:
            item.add_marker(skip)


@pytest.fixture
def cache_dir(tmp_path):
    """An empty cache directory of the test's own (0700, as the library requires)."""
    path = tmp_path / "cache"
    path.mkdir(mode=0o700)
    return str(path)
