#!/usr/bin/env bash
# One device call for the scan and repeat families: the GPU tests, the benchmark against
# PyTorch (with STEPS naming `long`, also bench_scan_long.py's long axes), then
# compute-sanitizer memcheck over the tests' quick subsets and racecheck over the scan test's
# race subset (f32 through each kernel path) and the repeat quick subset. Run from a
# directory holding `build` (tests/, libjitops.so and the package in python/) and `bench`; logs
# go to $OUT. A kernel cache prewarmed on the build machine (test_gpu_scan --prewarm DIR,
# test_gpu_repeat --prewarm DIR) may be given as $PREWARMED (a directory holding kernels.db).
set -uo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$HERE/build:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export JITOPS_CACHE_DIR=/tmp/jitops-scan-cache
export PYTHONPATH=$HERE/build/python${PYTHONPATH:+:$PYTHONPATH}
export TEST_THREADS=${TEST_THREADS:-16}
mkdir -p "$JITOPS_CACHE_DIR"
chmod 700 "$JITOPS_CACHE_DIR"
if [ -n "${PREWARMED:-}" ] && [ -f "$PREWARMED/kernels.db" ] && [ ! -f "$JITOPS_CACHE_DIR/kernels.db" ]; then
  cp "$PREWARMED/kernels.db" "$JITOPS_CACHE_DIR/"
  chmod 600 "$JITOPS_CACHE_DIR/kernels.db"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
status=0
run() {
  echo "== $*"
  local t0=$SECONDS
  "$@" || { echo "FAILED ($?): $*"; status=1; }
  echo "   ($((SECONDS - t0)) s)"
}
T=$HERE/build/tests
STEPS=${STEPS:-tests bench memcheck racecheck}
for step in $STEPS; do
  case $step in
  tests)
    {
      run timeout "${TEST_TIMEOUT:-150}" "$T/test_gpu_scan"
      run timeout 60 "$T/test_gpu_repeat"
    } >"$OUT/tests.log" 2>&1
    grep -E "FAIL|plan|test_gpu|==|\(" "$OUT/tests.log" | head -n 80
    ;;
  bench)
    timeout "${BENCH_TIMEOUT:-120}" python3 "$HERE/bench/bench_scan.py" ${BENCH_ARGS:-} --json "$OUT/bench.json" \
      2>"$OUT/bench_rows.log" | tee "$OUT/bench.md" || status=1
    tail -n 3 "$OUT/bench_rows.log"
    ;;
  long)
    timeout "${LONG_TIMEOUT:-240}" python3 "$HERE/bench/bench_scan_long.py" ${LONG_ARGS:-} \
      --json "$OUT/long.json" 2>"$OUT/long_rows.log" | tee "$OUT/long.md" || status=1
    tail -n 3 "$OUT/long_rows.log"
    ;;
  memcheck | racecheck)
    extra=""
    [ "$step" = racecheck ] && extra="--racecheck-report hazard"
    {
      subset=quick
      [ "$step" = racecheck ] && subset=race
      run timeout "${SANITIZER_TIMEOUT:-150}" compute-sanitizer --tool "$step" $extra \
        --error-exitcode 9 "$T/test_gpu_scan" $subset
      run timeout "${SANITIZER_TIMEOUT_REPEAT:-60}" compute-sanitizer --tool "$step" $extra --error-exitcode 9 \
        "$T/test_gpu_repeat" quick
    } >"$OUT/$step.log" 2>&1
    grep -E "ERROR SUMMARY|FAIL|test_gpu|==|\(" "$OUT/$step.log" | head -n 20
    ;;
  esac
done
exit $status
