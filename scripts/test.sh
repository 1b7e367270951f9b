#!/usr/bin/env bash
# The test suite: build, then the C suites (ctest), then the Python package as `pip install .`
# makes it, against PyTorch (pytest), then the package's type annotations (mypy, with the
# settings of pyproject.toml). GPU tests report themselves skipped where there is no
# GPU (ctest exit 77, pytest skip). Extra arguments go to ctest (for example: -L cpu, or
# -R cache); PYTEST_ARGS goes to pytest; JITOPS_PYTHON_TESTS=0 leaves the Python suite out.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" "$@"

[ "${JITOPS_PYTHON_TESTS:-1}" = 0 ] && exit 0
# A virtual environment under the build folder, seeing the system's packages (a PyTorch
# that is already installed is used as it is); what is missing is installed into it.
VENV=${BUILD_DIR}-venv
[ -x "$VENV/bin/python" ] || python3 -m venv --system-site-packages "$VENV"
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir)

# PyTorch from PyPI is about 5 GB installed, most of it CUDA libraries. pip's usual way (every
# wheel downloaded, and a cached copy kept, before anything is installed) needs twice that free,
# more than a CI machine sometimes has. Installed one requirement at a time without the cache,
# the peak is what stays plus one download. Triton (1 GB) is only torch.compile's GPU code
# generator, so it is left out where there is no GPU (no nvidia-smi).
# (Until the last requirement is in, pip would report torch's missing ones at every step: its
# conflict warnings are off here.)
install_torch() {
  echo "installing PyTorch into $VENV ($(df -h --output=avail "$VENV" | tail -1 | tr -d ' ') free)"
  "${PIP[@]}" --no-warn-conflicts --no-deps torch
  local requirement
  "$VENV/bin/python" -c 'from importlib.metadata import requires; print(*requires("torch"), sep="\n")' |
    grep -v 'extra ==' | { command -v nvidia-smi >/dev/null && cat || grep -v '^triton'; } |
    while IFS= read -r requirement; do "${PIP[@]}" --no-warn-conflicts "$requirement"; done
}
"$VENV/bin/python" -c "import torch" 2>/dev/null || install_torch
"$VENV/bin/python" -c "import pytest, numpy" 2>/dev/null || "${PIP[@]}" pytest numpy
# mypy within one minor version: a newer one may report new errors on unchanged code.
"${PIP[@]}" "mypy>=2.4,<2.5"
"${PIP[@]}" "$ROOT"
cd "$BUILD_DIR" # not the source tree, whose python/jitops has no compiled extension
"$VENV/bin/python" -m pytest -q -p no:cacheprovider ${PYTEST_ARGS:-} "$ROOT/python/tests"
# The extensions' stubs (_C.pyi, _direct.pyi) against the installed modules: a function added,
# removed or renamed in the C sources and not in its stub fails here (the C functions carry no
# signatures, so names are what can be compared). torch first: _direct links libtorch, which
# only `import torch` puts in the process; and _direct exists only where the torch layer was built.
"$VENV/bin/python" - <<'PY'
import importlib.util, sys
import torch  # noqa: F401
from mypy.stubtest import main
sys.argv[1:] = [m for m in ("jitops._C", "jitops._direct") if importlib.util.find_spec(m)]
sys.exit(main())
PY
# One mypy run over python/jitops, examples/python and bench (pyproject.toml's files; about 10 s
# on 2 cores without its cache), reading this torch's annotations; any error fails the script.
cd "$ROOT"
"$VENV/bin/python" -m mypy --cache-dir "$BUILD_DIR/mypy-cache"
