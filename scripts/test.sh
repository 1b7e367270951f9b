#!/usr/bin/env bash
# The test suite: build, then the C suites (ctest), then the Python package as `pip install .`
# makes it, against PyTorch (pytest). GPU tests report themselves skipped where there is no
# GPU (ctest exit 77, pytest skip). Extra arguments go to ctest (for example: -L cpu, or
# -R cache); PYTEST_ARGS goes to pytest; JITOPS_PYTHON_TESTS=0 leaves the Python suite out.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" "$@"

[ "${JITOPS_PYTHON_TESTS:-1}" = 0 ] && exit 0
# A virtual environment under the build folder, seeing the system's packages (a PyTorch
# that is already installed is used as it is); what is missing is installed into it.
VENV=${BUILD_DIR}-venv
[ -x "$VENV/bin/python" ] || python3 -m venv --system-site-packages "$VENV"
"$VENV/bin/python" -c "import torch, pytest, numpy" 2>/dev/null ||
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check torch pytest numpy
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$ROOT"
cd "$BUILD_DIR" # not the source tree, whose python/jitops has no compiled extension
"$VENV/bin/python" -m pytest -q -p no:cacheprovider ${PYTEST_ARGS:-} "$ROOT/python/tests"
