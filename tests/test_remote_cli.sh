#!/usr/bin/env bash
# jitops-cache push, pull and stats against a real redis-server of the test's own (loopback, a
# free port, stopped on exit): push copies a prewarmed cache to the server, pull fills an
# empty cache from it (and again: nothing new), a key makes pull refuse unsigned records and
# accept signed ones, stats shows the remote tier without contacting it, and a server that is
# not there, a missing and a malformed address fail with exit 1 and the reason.
# Usage: bash tests/test_remote_cli.sh /path/to/jitops-cache
# Exits 77 (skipped) when redis-server is not installed.
set -uo pipefail

CLI=${1:?usage: $0 /path/to/jitops-cache}
command -v redis-server >/dev/null || { echo "skipped: redis-server is not installed"; exit 77; }
TMP=${JITOPS_TEST_TMP:-$(mktemp -d)}
rm -rf "$TMP" && mkdir -p "$TMP" && chmod 700 "$TMP"
unset JITOPS_CACHE JITOPS_CACHE_MAX_BYTES JITOPS_CACHE_SHIPPED JITOPS_CACHE_REMOTE JITOPS_CACHE_REMOTE_KEY
export JITOPS_CACHE_DIR=$TMP/env-default

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PORT=$(free_port)
URL=redis://127.0.0.1:$PORT
redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$TMP" \
  --logfile "$TMP/redis.log" --daemonize no &
SERVER=$!
trap 'kill -9 $SERVER 2>/dev/null; wait $SERVER 2>/dev/null' EXIT
for _ in $(seq 100); do
  redis-cli -p "$PORT" ping 2>/dev/null | grep -q PONG && break
  sleep 0.05
done

passed=0 failed=0
# check WHAT EXPECTED ACTUAL: equal, or (EXPECTED starting with ~) contained in ACTUAL.
check() {
  local what=$1 want=$2 got=$3 ok=0
  if [[ "$want" == "~"* ]]; then [[ "$got" == *"${want:1}"* ]] && ok=1; else [[ "$got" == "$want" ]] && ok=1; fi
  if [[ $ok == 1 ]]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $what: expected '$want', got '$got'" >&2; fi
}
# tool ARGS...: runs the tool, output (stdout and stderr) in OUT, exit status in RC.
tool() { OUT=$("$CLI" "$@" 2>&1); RC=$?; }
entries() { "$CLI" --dir "$1" list --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["count"])'; }

JITOPS_CACHE_REMOTE=$URL tool --dir "$TMP/a" stats
if [[ "$OUT" == *"remote tier: unavailable"* ]]; then # a build without hiredis
  check "unavailable, and why" "~without hiredis" "$OUT"
  tool --dir "$TMP/a" pull --remote "$URL"
  check "pull says why it cannot" "~1 jitops-cache: pulling" "$RC $OUT"
  check "and why" "~without hiredis" "$OUT"
  echo "$passed passed, $failed failed"
  [[ $failed == 0 ]]
  exit
fi

tool --dir "$TMP/a" prewarm --op example --arch sm_90
check "prewarm" 0 "$RC"
N=$(entries "$TMP/a")
check "prewarm made kernels" 1 "$((N > 0))"

tool --dir "$TMP/a" push --remote "$URL"
check "push" "0 pushed $N kernels" "$RC $OUT"
check "the server holds them" "$N" "$(redis-cli -p "$PORT" --scan --pattern 'jitops:*:kernel:*' | wc -l)"
tool --dir "$TMP/b" pull --remote "$URL"
check "pull into an empty cache" "0 pulled $N, rejected 0" "$RC $OUT"
check "the pulled cache" "$N" "$(entries "$TMP/b")"
tool --dir "$TMP/b" pull --remote "$URL"
check "pull again adds nothing" "0 pulled 0, rejected 0" "$RC $OUT"
JITOPS_CACHE_REMOTE=$URL tool --dir "$TMP/b" pull
check "pull from \$JITOPS_CACHE_REMOTE" 0 "$RC"

JITOPS_CACHE_REMOTE_KEY=k1 tool --dir "$TMP/c" pull --remote "$URL"
check "with a key, unsigned records are refused" "1 pulled 0, rejected $N" "$RC $OUT"
JITOPS_CACHE_REMOTE_KEY=k1 tool --dir "$TMP/a" push --remote "$URL"
JITOPS_CACHE_REMOTE_KEY=k1 tool --dir "$TMP/c" pull --remote "$URL"
check "signed records are taken" "0 pulled $N, rejected 0" "$RC $OUT"
JITOPS_CACHE_REMOTE_KEY=k2 tool --dir "$TMP/d" pull --remote "$URL"
check "another key refuses them" "1 pulled 0, rejected $N" "$RC $OUT"

JITOPS_CACHE_REMOTE=redis://u:secret@127.0.0.1:$PORT/2 JITOPS_CACHE_REMOTE_KEY=k1 tool --dir "$TMP/a" stats
check "stats shows the remote tier" "~remote tier: redis://u@127.0.0.1:$PORT/2 (signed)" "$OUT"
check "stats never shows the password" "" "$(grep -o secret <<<"$OUT")"
JITOPS_CACHE_REMOTE=$URL tool --dir "$TMP/a" stats --json
check "stats --json" "on False" "$(python3 -c 'import json, sys; r = json.loads(sys.argv[1])["remote_tier"]; print(r["state"], r["signed"])' "$OUT")"
tool --dir "$TMP/a" stats
check "stats without a remote tier" "~remote tier: off" "$OUT"

tool --dir "$TMP/a" push --remote "redis://127.0.0.1:$(free_port)"
check "push to nothing" "~cannot connect" "$RC $OUT"
check "push to nothing fails" 1 "$RC"
tool --dir "$TMP/a" push
check "push without an address" "~no remote tier" "$OUT"
tool --dir "$TMP/a" pull --remote "http://127.0.0.1:1"
check "a malformed address" "~redis://" "$RC $OUT"
tool --dir "$TMP/a" push --remote "redis://:wrong@127.0.0.1:$PORT"
check "a refused AUTH" "~AUTH refused" "$OUT"

echo "$passed passed, $failed failed"
[[ $failed == 0 ]]
