#!/usr/bin/env bash
# One device call for the JIT core: GPU tests, compute-sanitizer, the quickstart, the JIT
# overhead benchmark and the compile-option table. Run from the repository root on the GPU
# machine with the build carried in `build`. Logs go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/build:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export JITOPS_CACHE_DIR=/tmp/jitops-device-cache
rm -rf "$JITOPS_CACHE_DIR"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
status=0
run() { echo "== $*"; "$@" || { echo "FAILED ($?): $*"; status=1; }; }
{
  run build/tests/test_gpu_jit_launch
  run compute-sanitizer --tool memcheck --error-exitcode 9 build/tests/test_gpu_jit_launch
  run compute-sanitizer --tool racecheck --error-exitcode 9 build/tests/test_gpu_jit_launch
  run build/examples/quickstart
  run build/examples/quickstart
  for t in build/tests/test_*; do
    case "$t" in *gpu*) ;; *) [ -x "$t" ] && JITOPS_TEST_TMP=/tmp/jt run "$t" ;; esac
  done
} 2>&1 | tee "$OUT/tests.log"
build/bench/bench_compile_options 2>&1 | tee "$OUT/compile_options.md"
build/bench/bench_jit_overhead 2>&1 | tee "$OUT/jit_overhead.md"
grep -E "FAILED|passed|failure" "$OUT/tests.log" | sort | uniq -c
exit $status
