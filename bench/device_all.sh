#!/usr/bin/env bash
# One device call over everything: the GPU tests of the core and of every op family, their
# compute-sanitizer runs, the quickstart, and the benchmarks named in $BENCHES (default: jit
# ctc; the others: compile scan segment flce flce_autograd host). Run from a directory holding
# `build` (the Python benchmarks import the package from build/python) and `bench`. The scan
# racecheck set runs as $RACE_SHARDS sanitized processes in the background while the other tests
# run (racecheck is far too slow for it in one process); the benchmarks run after it, on a quiet
# GPU. Each step has a time limit; logs are packed into $OUT/logs.tgz and a summary is printed
# last.
set -uo pipefail
HERE=$PWD
OUT=${OUT:-/tmp/out}
LOGS=/tmp/jitops-logs
rm -rf "$LOGS" && mkdir -p "$LOGS" "$OUT"
export LD_LIBRARY_PATH=$HERE/build:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PYTHONPATH=$HERE/build/python${PYTHONPATH:+:$PYTHONPATH}
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
BENCHES=${BENCHES-jit ctc}
CTC_ARGS=${CTC_ARGS:-}
MC="compute-sanitizer --tool memcheck --error-exitcode 9"
RC="compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 9"
has() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
race_pids=()
if has scan; then
  # Compile the race set's kernels once, unsanitized; the shards then find them in the cache.
  step scan_race_plain 120 "$T/test_gpu_scan" race
  n=${RACE_SHARDS:-12}
  for ((k = 0; k < n; ++k)); do
    (timeout "${RACE_TIMEOUT:-300}" $RC "$T/test_gpu_scan" race "$k/$n" >"$LOGS/scan_race_$k.log" 2>&1
      echo "rc=$?" >>"$LOGS/scan_race_$k.log") &
    race_pids+=($!)
  done
fi
for s in $STEPS; do
  case $s in
  core)
    step core_test 60 "$T/test_gpu_jit_launch"
    step core_memcheck 120 $MC "$T/test_gpu_jit_launch"
    step core_racecheck 120 $RC "$T/test_gpu_jit_launch"
    step quickstart_1 30 build/examples/quickstart
    step quickstart_2 30 build/examples/quickstart
    ;;
  ctc)
    step ctc_test 180 "$T/test_gpu_ctc" $CTC_ARGS
    step ctc_memcheck 150 $MC "$T/test_gpu_ctc" --quick
    ;;
  flce)
    step flce_test 150 "$T/test_gpu_flce"
    step flce_memcheck 120 $MC "$T/test_gpu_flce" --small
    ;;
  segment)
    step segment_test 300 "$T/test_gpu_segment"
    step segment_memcheck 150 $MC "$T/test_gpu_segment" --quick
    step segment_racecheck 150 $RC "$T/test_gpu_segment" --quick
    ;;
  scan)
    step scan_test 170 "$T/test_gpu_scan"
    step repeat_test 60 "$T/test_gpu_repeat"
    step scan_memcheck 150 $MC "$T/test_gpu_scan" quick
    step repeat_memcheck 90 $MC "$T/test_gpu_repeat" quick
    step repeat_racecheck 90 $RC "$T/test_gpu_repeat" quick
    ;;
  esac
done
if [ ${#race_pids[@]} -gt 0 ]; then
  t0=$SECONDS
  wait "${race_pids[@]}"
  cases=$(cat "$LOGS"/scan_race_[0-9]*.log | grep -c "race case .* done")
  bad=$(grep -L "rc=0" "$LOGS"/scan_race_[0-9]*.log | wc -l)
  hazards=$(grep -h "RACECHECK SUMMARY" "$LOGS"/scan_race_[0-9]*.log | sort | uniq -c | tr '\n' ' ')
  printf '%-28s rc=%-3s %4ss  %s cases done; %s\n' scan_racecheck_shards "$bad" "$((SECONDS - t0))" \
    "$cases" "$hazards" | tee -a "$SUMMARY"
fi
for b in $BENCHES; do
  case $b in
  jit) step bench_jit 90 build/bench/bench_jit_overhead ;;
  compile) step bench_compile_options 90 build/bench/bench_compile_options ;;
  ctc) step bench_ctc 150 python3 bench/bench_ctc.py ;;
  scan) step bench_scan 150 python3 bench/bench_scan.py ;;
  segment) step bench_segment 200 python3 bench/bench_segment.py ;;
  flce) step bench_flce 200 python3 bench/bench_flce.py ;;
  flce_autograd) step bench_flce_autograd 120 python3 bench/bench_flce_autograd.py ;;
  host) step bench_host_overhead 120 python3 bench/bench_host_overhead.py ;;
  esac
done
tar -czf "$OUT/logs.tgz" -C "$LOGS" .
for b in $BENCHES; do [ -f "$LOGS/bench_$b.log" ] && { echo "---- bench $b"; tail -n 24 "$LOGS/bench_$b.log"; }; done
echo "---- summary"
cat "$SUMMARY"
! grep -qE 'rc=[1-9]' "$SUMMARY"
