#!/usr/bin/env bash
# One device call for the segment family: the GPU test, compute-sanitizer memcheck and racecheck
# over its --quick subset, the benchmark against PyTorch, and (step "ceilings", not in the
# default) the memory ceilings of its access patterns (bench/stream_ceilings.cu, compiled
# there); step "narrow" (not in the default) runs the narrow-rows sweep
# (bench/bench_segment_narrow.py, $NARROW_ARGS). Run from a directory holding `build` (tests/, libjitops.so and the package in python/)
# and `bench`; logs go to $OUT. A kernel cache prewarmed on the build machine (test_gpu_segment
# --prewarm DIR) may be given as $PREWARMED. $STEPS picks the steps (default "test memcheck
# racecheck bench"); each has a time limit.
set -uo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$HERE/build:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export JITOPS_CACHE_DIR=/tmp/jitops-segment-cache
export PYTHONPATH=$HERE/build/python${PYTHONPATH:+:$PYTHONPATH}
rm -rf "$JITOPS_CACHE_DIR"
mkdir -p "$JITOPS_CACHE_DIR"
chmod 700 "$JITOPS_CACHE_DIR"
if [ -n "${PREWARMED:-}" ] && [ -f "$PREWARMED/kernels.db" ]; then
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
STEPS=${STEPS:-test memcheck racecheck bench}
T=$HERE/build/tests/test_gpu_segment
has() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
{
  has test && run timeout "${T_TEST:-150}" "$T"
  has memcheck && run timeout "${T_MEMCHECK:-150}" compute-sanitizer --tool memcheck --error-exitcode 9 "$T" --quick
  has racecheck && run timeout "${T_RACECHECK:-150}" compute-sanitizer --tool racecheck --racecheck-report hazard \
    --error-exitcode 9 "$T" --quick
} >"$OUT/tests.log" 2>&1
grep -E "^==|FAILED|passed|failure|ERROR SUMMARY|RACECHECK SUMMARY|\(.* s\)" "$OUT/tests.log" | tail -n 40
if has ceilings; then
  nvcc -O3 -std=c++17 -arch=sm_90 "$HERE/bench/stream_ceilings.cu" -o /tmp/stream_ceilings &&
    timeout "${T_CEILINGS:-120}" /tmp/stream_ceilings | tee "$OUT/ceilings.txt" | tail -n 30 || status=1
fi
if has bench; then
  timeout "${T_BENCH:-200}" python3 "$HERE/bench/bench_segment.py" ${BENCH_ARGS:-} --json "$OUT/bench.json" \
    2>"$OUT/bench_rows.log" | tee "$OUT/bench.md" || status=1
  tail -n 3 "$OUT/bench_rows.log"
fi
if has narrow; then
  timeout "${T_NARROW:-120}" python3 "$HERE/bench/bench_segment_narrow.py" ${NARROW_ARGS:-} \
    --json "$OUT/narrow.json" 2>"$OUT/narrow_rows.log" | tee "$OUT/narrow.md" || status=1
fi
exit $status
