"""The package's top level works without PyTorch; the torch layer says what it needs."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def run_without_torch(code: str) -> subprocess.CompletedProcess:
    # sys.modules["torch"] = None makes every `import torch` fail, as if it were not installed.
    program = "import sys\nsys.modules['torch'] = None\n" + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)


def test_import_jitops_needs_no_torch():
    result = run_without_torch(
        """
        import jitops
        assert not any(m == "torch" or m.startswith("torch.") for m, v in sys.modules.items() if v is not None)
        print(jitops.__version__)
        """
    )
    assert result.returncode == 0, result.stderr
    assert all(part.isdigit() for part in result.stdout.strip().split("."))


def test_core_api_works_without_torch():
    result = run_without_torch(
        """
        import jitops, tempfile
        d = tempfile.mkdtemp()
        with jitops.Runtime(arch="sm_90", cache_dir=d) as rt:
            jitops.register_source("t/noop.cu", 'extern "C" __global__ void noop(int *p) { if (p) *p = 1; }')
            k = jitops.get_kernel("t/noop.cu", "noop", runtime=rt)
            assert k.lowered_name == "noop", k.lowered_name
        assert [g.entries for g in jitops.cache.stats(d)] == [1]
        """
    )
    assert result.returncode == 0, result.stderr


def test_torch_layer_reports_missing_torch():
    result = run_without_torch(
        """
        import jitops
        try:
            jitops.ops
        except ImportError as error:
            print("ImportError", error)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ImportError")
