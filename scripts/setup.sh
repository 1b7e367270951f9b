# Sourced by scripts/example.sh and scripts/test.sh: installs what is missing (Debian
# packages through apt-get), then configures and builds into $BUILD_DIR (default: build).
# Environment: BUILD_DIR, CMAKE_BUILD_TYPE (default Release), JITOPS_WERROR (ON in CI),
# JITOPS_SETUP_ONLY (1: install and find, do not build).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}

need_packages() {
  local missing=()
  # libhiredis-dev builds the remote (Redis) tier; redis-server runs its loopback tests.
  for pkg in cmake make gcc g++ pkg-config libsqlite3-dev libxxhash-dev libdlpack-dev \
    libhiredis-dev redis-server; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  command -v python3 >/dev/null 2>&1 || missing+=(python3 python3-venv)
  # The Python extension needs Python.h (a pyenv or python.org Python has it; Debian's is in
  # python3-dev).
  command -v python3 >/dev/null 2>&1 && ! python3 -c \
    "import os, sysconfig; raise SystemExit(not os.path.exists(sysconfig.get_paths()['include'] + '/Python.h'))" \
    && missing+=(python3-dev)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

find_cuda() {
  if [ -z "${CUDAToolkit_ROOT:-}" ]; then
    for dir in /usr/local/cuda /usr/local/cuda-13.0 /usr/local/cuda-12; do
      [ -x "$dir/bin/nvcc" ] && export CUDAToolkit_ROOT=$dir && break
    done
  fi
  if [ -z "${CUDAToolkit_ROOT:-}" ] && ! command -v nvcc >/dev/null 2>&1; then
    echo "error: no CUDA toolkit found (install CUDA 12.x or 13.x, or set CUDAToolkit_ROOT)" >&2
    exit 1
  fi
}

configure_and_build() {
  local werror=${JITOPS_WERROR:-OFF}
  [ "${CI:-}" = "true" ] && werror=ON
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-Release}" \
    -DJITOPS_WERROR="$werror" -DJITOPS_BUILD_PYTHON=ON -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON \
    ${CUDAToolkit_ROOT:+-DCUDAToolkit_ROOT="$CUDAToolkit_ROOT"} >/dev/null
  cmake --build "$BUILD_DIR" -j "$(nproc)"
}

need_packages
find_cuda
# JITOPS_SETUP_ONLY=1: packages and toolkit only (a caller that configures its own build).
[ "${JITOPS_SETUP_ONLY:-0}" = 1 ] || configure_and_build
