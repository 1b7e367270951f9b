#!/usr/bin/env bash
# One device call for fused linear cross-entropy: the GPU test, compute-sanitizer memcheck and
# racecheck on its small cases, bench_flce.py and bench_flce_autograd.py. Run from the
# repository root on the GPU machine with the build in $BUILD (default build). Logs go to $OUT.
set -uo pipefail
BUILD=${BUILD:-build}
BENCH=${BENCH:-bench}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$BUILD:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export JITOPS_CACHE_DIR=${JITOPS_CACHE_DIR:-/tmp/jitops-device-cache}
export PYTHONPATH=$PWD/$BUILD/python${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
S=$OUT/summary.txt
step() { # name timeout log command...
  local name=$1 limit=$2 log=$3 t0
  shift 3
  t0=$(date +%s)
  timeout "$limit" "$@" > "$log" 2>&1
  echo "$name rc=$? ($(($(date +%s) - t0)) s)" | tee -a "$S"
}
step test_gpu_flce 120 "$OUT/test_gpu.log" "$BUILD/tests/test_gpu_flce"
step memcheck 90 "$OUT/memcheck.log" compute-sanitizer --tool memcheck --error-exitcode 9 \
  "$BUILD/tests/test_gpu_flce" --small
step racecheck 90 "$OUT/racecheck.log" compute-sanitizer --tool racecheck --error-exitcode 9 \
  "$BUILD/tests/test_gpu_flce" --small
step bench 150 "$OUT/bench.log" python3 "$BENCH/bench_flce.py" --json "$OUT/bench.json"
step bench_autograd 120 "$OUT/bench_autograd.log" python3 "$BENCH/bench_flce_autograd.py" \
  --json "$OUT/bench_autograd.json"
echo "---- test"; grep -v ": done$" "$OUT/test_gpu.log" | tail -20
for s in memcheck racecheck; do echo "---- $s"; tail -3 "$OUT/$s.log"; done
echo "---- bench"; tail -40 "$OUT/bench.log"
echo "---- bench through autograd"; tail -14 "$OUT/bench_autograd.log"
