#!/usr/bin/env bash
# One device call over everything: the GPU tests of the core and of every op family, the
# core's compute-sanitizer runs, the quickstart, and the benchmarks named in $BENCHES (default:
# jit ctc). Run from the repository root on the GPU machine with `build` carried. Each step
# has a time limit; logs are packed into $OUT/logs.tgz and a summary is printed last.
set -uo pipefail
HERE=$PWD
OUT=${OUT:-/tmp/out}
LOGS=/tmp/jitops-logs
rm -rf "$LOGS" && mkdir -p "$LOGS" "$OUT"
export LD_LIBRARY_PATH=$HERE/build:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export JITOPS_LIB=$HERE/build/libjitops.so
export JITOPS_CACHE_DIR=/tmp/jitops-all-cache
export TEST_THREADS=16
mkdir -p "$JITOPS_CACHE_DIR" && chmod 700 "$JITOPS_CACHE_DIR"
T=$HERE/build/tests
SUMMARY=$LOGS/summary.txt
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$SUMMARY"
step() { # name limit command...
  local name=$1 limit=$2 t0=$SECONDS rc
  shift 2
  timeout "$limit" "$@" >"$LOGS/$name.log" 2>&1
  rc=$?
  printf '%-28s rc=%-3s %4ss  %s\n' "$name" "$rc" "$((SECONDS - t0))" \
    "$(grep -E 'passed|failure|ERROR SUMMARY|RACECHECK SUMMARY|FAIL' "$LOGS/$name.log" | tail -1 | cut -c1-80)" |
    tee -a "$SUMMARY"
}
STEPS=${STEPS:-core ctc flce segment scan}
BENCHES=${BENCHES:-jit ctc}
for s in $STEPS; do
  case $s in
  core)
    step core_test 60 "$T/test_gpu_jit_launch"
    step core_memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 9 "$T/test_gpu_jit_launch"
    step core_racecheck 120 compute-sanitizer --tool racecheck --error-exitcode 9 "$T/test_gpu_jit_launch"
    step quickstart_1 30 build/examples/quickstart
    step quickstart_2 30 build/examples/quickstart
    ;;
  ctc)
    step ctc_test 180 "$T/test_gpu_ctc"
    step ctc_racecheck 120 compute-sanitizer --tool racecheck --error-exitcode 9 "$T/test_gpu_ctc" --quick
    ;;
  flce) step flce_test 150 "$T/test_gpu_flce" ;;
  segment)
    step segment_test 150 "$T/test_gpu_segment"
    step segment_racecheck 120 compute-sanitizer --tool racecheck --error-exitcode 9 "$T/test_gpu_segment" --quick
    ;;
  scan)
    step scan_test 170 "$T/test_gpu_scan"
    step repeat_test 60 "$T/test_gpu_repeat"
    ;;
  esac
done
for b in $BENCHES; do
  case $b in
  jit) step bench_jit 90 build/bench/bench_jit_overhead ;;
  compile) step bench_compile_options 90 build/bench/bench_compile_options ;;
  ctc) step bench_ctc 150 python3 bench/bench_ctc.py --lib "$JITOPS_LIB" ;;
  scan) step bench_scan 150 python3 bench/bench_scan.py ;;
  segment) step bench_segment 200 python3 bench/bench_segment.py ;;
  flce) step bench_flce 200 python3 bench/bench_flce.py ;;
  esac
done
tar -czf "$OUT/logs.tgz" -C "$LOGS" .
for b in $BENCHES; do [ -f "$LOGS/bench_$b.log" ] && { echo "---- bench $b"; tail -n 24 "$LOGS/bench_$b.log"; }; done
echo "---- summary"
cat "$SUMMARY"
! grep -qE 'rc=[1-9]' "$SUMMARY"
