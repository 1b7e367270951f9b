#!/usr/bin/env bash
# The CPU suite again, built with AddressSanitizer and UndefinedBehaviorSanitizer in a build
# directory of its own ($SANITIZE_BUILD_DIR, default build-sanitize): a memory error, a leak
# of ours or undefined behaviour fails the test that hit it. Extra arguments go to ctest.
#
# Left out: the GPU tests (skipped without a GPU anyway); test_install_consumer, whose
# consumers would need the sanitizers' runtime too; and test_symbol_namespace, since
# AddressSanitizer adds symbols of its own (__odr_asan.*) beside the library's. Leaks inside NVRTC and cuBLASLt, which
# are not ours to fix, are suppressed (scripts/lsan.supp).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${SANITIZE_BUILD_DIR:-$ROOT/build-sanitize} CMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-RelWithDebInfo}
SANITIZE="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
# The sanitizers' link turns --as-needed off, which would make every program need CUDA's
# libcuda stub (a dependency of cuBLASLt's CMake target that nothing calls): turn it back on.
AS_NEEDED="-Wl,--as-needed"

JITOPS_SETUP_ONLY=1 source "$ROOT/scripts/setup.sh"
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="$CMAKE_BUILD_TYPE" \
  -DJITOPS_WERROR="${JITOPS_WERROR:-OFF}" -DJITOPS_BUILD_BENCH=OFF -DJITOPS_BUILD_EXAMPLES=OFF \
  -DCMAKE_C_FLAGS="$SANITIZE" -DCMAKE_CXX_FLAGS="$SANITIZE" \
  -DCMAKE_EXE_LINKER_FLAGS="$SANITIZE $AS_NEEDED" -DCMAKE_SHARED_LINKER_FLAGS="$SANITIZE $AS_NEEDED" \
  ${CUDAToolkit_ROOT:+-DCUDAToolkit_ROOT="$CUDAToolkit_ROOT"} >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1
export LSAN_OPTIONS=suppressions=$ROOT/scripts/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" -L cpu -E "test_install_consumer|test_symbol_namespace" "$@"
