#!/usr/bin/env bash
# One device call for the CTC family: the benchmark against PyTorch (native and cuDNN), the GPU
# test, and compute-sanitizer memcheck and racecheck over its --quick subset. Run from a
# directory holding `build` (tests/test_gpu_ctc, libjitops.so and the package in python/) and
# `bench`; logs go to $OUT. A kernel cache filled on the build machine may be given as
# $PREWARMED (a directory with kernels.db; `jitops-cache --dir DIR prewarm --op ctc` fills the
# catalogue's share).
set -uo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export JITOPS_CACHE_DIR=/tmp/jitops-ctc-cache
export PYTHONPATH=$HERE/build/python${PYTHONPATH:+:$PYTHONPATH}
rm -rf "$JITOPS_CACHE_DIR"
mkdir -p "$JITOPS_CACHE_DIR"
chmod 700 "$JITOPS_CACHE_DIR"
if [ -n "${PREWARMED:-}" ] && [ -f "$PREWARMED/kernels.db" ]; then
  cp "$PREWARMED/kernels.db" "$JITOPS_CACHE_DIR/"
  chmod 600 "$JITOPS_CACHE_DIR/kernels.db"
fi
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
T=$HERE/build/tests/test_gpu_ctc
step() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  echo "== $name rc=$? $((SECONDS - t0))s"
}
step bench 120 python3 "$HERE/bench/bench_ctc.py"
step test 180 "$T"
step memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 3 "$T" --quick
step racecheck 120 compute-sanitizer --tool racecheck --error-exitcode 3 "$T" --quick
for f in test memcheck racecheck; do
  echo "--- $f"
  grep -v '^\[' "$OUT/$f.log" | tail -4
done
echo "--- bench"
tail -12 "$OUT/bench.log"
