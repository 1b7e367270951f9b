#!/usr/bin/env bash
# Exercises every jitops-cache subcommand against a real cache, with no GPU:
#   prewarm (two targets, parallel, then again: all hits; --op, --dry-run, --verbose, and
#   progress lines off a terminal), stats (text and JSON: the disk tier's state and reason,
#   sizes and the limit) and list (text and JSON, filters), export (mode 0600), clear (all,
#   by op, by age), import (and the error text of a garbage file), verify after a flipped
#   blob byte, usage errors (exit 2, one line), help (exit 0), verify and clear of a
#   directory with no cache (nothing created), no -wal/-shm left by readers, a symlinked
#   directory followed and a symlinked database refused, damaged databases set aside by
#   every subcommand, a refused world-writable directory, and prewarm's independence from
#   JITOPS_CACHE and JITOPS_CACHE_SHIPPED.
# Usage: bash tests/test_cli_subcommands.sh /path/to/jitops-cache
# Scratch space: $JITOPS_TEST_TMP (created and emptied), else a mktemp directory.
set -euo pipefail

CLI=${1:?usage: $0 /path/to/jitops-cache}
TMP=${JITOPS_TEST_TMP:-$(mktemp -d)}
if [[ "$TMP" == "/" || "$TMP" == "$HOME" ]]; then
  echo "$0: refusing to empty JITOPS_TEST_TMP=$TMP" >&2
  exit 1
fi
rm -rf "$TMP"
mkdir -p "$TMP"
chmod 700 "$TMP"

# The cache the tool is pointed at with --dir; it does not exist yet, the tool creates it.
DIR=$TMP/cache
DB=$DIR/kernels.db
# The environment's default must stay untouched: every call below passes --dir.
export JITOPS_CACHE_DIR=$TMP/env-default
unset JITOPS_CACHE JITOPS_CACHE_MAX_BYTES JITOPS_CACHE_SHIPPED XDG_CACHE_HOME

passed=0
failed=0
trap 'echo "$0: aborted at line $LINENO" >&2' ERR

fail() {
  echo "FAIL: $*" >&2
  failed=$((failed + 1))
}

pass() {
  passed=$((passed + 1))
}

expect_eq() { # expect_eq WHAT EXPECTED ACTUAL
  if [[ "$2" == "$3" ]]; then
    pass
  else
    fail "$1: expected '$2', got '$3'"
  fi
}

expect_true() { # expect_true WHAT COMMAND...
  local what=$1
  shift
  if "$@"; then
    pass
  else
    fail "$what"
  fi
}

expect_contains() { # expect_contains WHAT NEEDLE TEXT
  if [[ "$3" == *"$2"* ]]; then
    pass
  else
    fail "$1: '$3' does not contain '$2'"
  fi
}

expect_match() { # expect_match WHAT REGEX TEXT
  if [[ "$3" =~ $2 ]]; then
    pass
  else
    fail "$1: '$3' does not match /$2/"
  fi
}

# run ARGS...: runs the tool; sets OUT, ERR and RC, never stops the script.
run() {
  set +e
  "$CLI" "$@" >"$TMP/out" 2>"$TMP/err"
  RC=$?
  set -e
  OUT=$(cat "$TMP/out")
  ERR=$(cat "$TMP/err")
}

# run_ok WHAT ARGS...: runs the tool and counts a failure unless it exits 0.
run_ok() {
  local what=$1
  shift
  run "$@"
  if [[ $RC -ne 0 ]]; then
    fail "$what: exit $RC; stderr: $ERR"
  else
    pass
  fi
}

# json FILE EXPR: evaluates a Python expression over the JSON document `d` in FILE. On any
# error it prints -999999 (a number no assertion expects), so the script goes on.
json() {
  python3 - "$1" "$2" <<'EOF' || echo -999999
import json, sys
with open(sys.argv[1]) as f:
    d = json.load(f)
print(eval(sys.argv[2], {"d": d}))
EOF
}

# valid_json FILE: the JSON tool accepts it.
valid_json() {
  python3 -m json.tool "$1" >/dev/null 2>&1
}

# stats_json NAME: writes `stats --json` to $TMP/NAME.json and checks it is valid JSON.
stats_json() {
  run_ok "stats --json ($1)" --dir "$DIR" stats --json
  printf '%s\n' "$OUT" >"$TMP/$1.json"
  expect_true "stats --json ($1) is valid JSON" valid_json "$TMP/$1.json"
}

# list_json NAME ARGS...: writes `list --json ARGS` to $TMP/NAME.json, checks it, and sets
# COUNT to the number of entries (checked against the "count" field).
list_json() {
  local name=$1
  shift
  run_ok "list --json $* ($name)" --dir "$DIR" list --json "$@"
  printf '%s\n' "$OUT" >"$TMP/$name.json"
  expect_true "list --json $* ($name) is valid JSON" valid_json "$TMP/$name.json"
  COUNT=$(json "$TMP/$name.json" 'len(d["entries"])')
  expect_eq "list --json $* ($name): count field" "$COUNT" \
    "$(json "$TMP/$name.json" 'd["count"]')"
}

# A usage error: exit 2 and one line on stderr that points at --help.
expect_usage_error() { # expect_usage_error WHAT ARGS...
  local what=$1
  shift
  run "$@"
  expect_eq "$what: exit status" 2 "$RC"
  expect_match "$what: message" 'see jitops-cache --help' "$ERR"
  expect_eq "$what: stderr lines" 1 "$(printf '%s\n' "$ERR" | wc -l)"
}

# ---- help ------------------------------------------------------------------------------------

run_ok "--help" --help
for word in stats list clear verify export import prewarm "Exit status"; do
  expect_match "--help mentions $word" "$word" "$OUT"
done
run_ok "-h" -h
for sub in stats list clear verify export import prewarm; do
  run_ok "$sub --help" "$sub" --help
  expect_match "$sub --help" "Usage: jitops-cache .*$sub" "$OUT"
  run_ok "help $sub" help "$sub"
done
run_ok "--version" --version
expect_match "--version" 'libjitops [0-9]+\.[0-9]+\.[0-9]+' "$OUT"

# ---- usage errors ----------------------------------------------------------------------------

expect_usage_error "no subcommand"
expect_usage_error "unknown subcommand" frobnicate
expect_usage_error "unknown option" --dir "$DIR" list --bogus
expect_usage_error "unknown global option" --bogus stats
expect_usage_error "--dir without a value" --dir
expect_usage_error "export without FILE" --dir "$DIR" export
expect_usage_error "import without FILE" --dir "$DIR" import
expect_usage_error "export with two files" --dir "$DIR" export a b
expect_usage_error "--jobs abc" --dir "$DIR" prewarm --jobs abc
expect_usage_error "--jobs 0" --dir "$DIR" prewarm --jobs 0
expect_usage_error "--jobs without a value" --dir "$DIR" prewarm --jobs
expect_usage_error "--arch 90" --dir "$DIR" prewarm --arch 90
expect_usage_error "--older-than xyz" --dir "$DIR" clear --older-than xyz
expect_usage_error "--older-than -1" --dir "$DIR" clear --older-than -1
expect_usage_error "--json on verify" --dir "$DIR" verify --json
expect_usage_error "--arch on list" --dir "$DIR" list --arch sm_90
expect_usage_error "prewarm --op nosuchop" --dir "$DIR" prewarm --op nosuchop
expect_true "usage errors created no cache" test ! -e "$DIR"
run --dir
expect_eq "--dir without a value: the program is named once" 1 \
  "$(grep -o 'jitops-cache:' <<<"$ERR" | wc -l)"

# A mistyped --dir: the commands that change a cache say there is none, and create nothing.
for sub in verify clear; do
  run --dir "$TMP/typo" "$sub"
  expect_eq "$sub of a directory with no cache: exit status" 1 "$RC"
  expect_contains "$sub of a directory with no cache: says so" "no cache" "$ERR"
  expect_true "$sub of a directory with no cache created nothing" test ! -e "$TMP/typo"
done

# ---- prewarm into a fresh directory ----------------------------------------------------------

# The example family keeps this test fast on CI's two cores; the full catalogue compiles
# the same way, only longer (the op families' tests compile their own kernels).
PREWARM_OP=example
run_ok "prewarm two targets" --dir "$DIR" prewarm --arch sm_90 --arch sm_80 --jobs 2 --op "$PREWARM_OP"
expect_true "the database exists" test -f "$DB"
expect_eq "cache directory mode" 700 "$(stat -c %a "$DIR")"
expect_eq "database mode" 600 "$(stat -c %a "$DB")"
expect_true "--dir was used, not \$JITOPS_CACHE_DIR" test ! -e "$JITOPS_CACHE_DIR"
for arch in sm_90 sm_80; do
  line=$(grep "^$arch: " <<<"$OUT" || true)
  expect_match "first prewarm $arch compiles every entry" \
    "^$arch: ([0-9]+) entries, [0-9]+ compiled, 0 cached, 0 failed" "$line"
done
ENTRIES_PER_ARCH=$(sed -n 's/^sm_90: \([0-9]*\) entries.*/\1/p' <<<"$OUT")
COMPILED_90=$(sed -n 's/^sm_90: [0-9]* entries, \([0-9]*\) compiled.*/\1/p' <<<"$OUT")
expect_true "the catalogue is not empty" test "${ENTRIES_PER_ARCH:-0}" -gt 0
expect_true "sm_90 compiled at least one kernel per entry" \
  test "${COMPILED_90:-0}" -ge "${ENTRIES_PER_ARCH:-1}"

stats_json stats1
TOTAL=$(json "$TMP/stats1.json" 'd["totals"]["entries"]')
E90=$(json "$TMP/stats1.json" 'sum(g["entries"] for g in d["groups"] if g["target"] == "sm_90")')
E80=$(json "$TMP/stats1.json" 'sum(g["entries"] for g in d["groups"] if g["target"] == "sm_80")')
expect_true "stats: sm_90 has entries" test "$E90" -gt 0
expect_true "stats: sm_80 has entries" test "$E80" -gt 0
expect_eq "stats: both targets hold the same catalogue" "$E90" "$E80"
expect_eq "stats: totals add up" "$TOTAL" $((E90 + E80))
expect_eq "stats: compiles recorded for sm_90" "$COMPILED_90" \
  "$(json "$TMP/stats1.json" 'sum(g["compiles"] for g in d["groups"] if g["target"] == "sm_90")')"
expect_eq "stats: bytes add up" "$(json "$TMP/stats1.json" 'd["totals"]["bytes"]')" \
  "$(json "$TMP/stats1.json" 'sum(g["bytes"] for g in d["groups"])')"
expect_true "stats: bytes are positive" test "$(json "$TMP/stats1.json" 'd["totals"]["bytes"]')" -gt 0
expect_eq "stats: database path" "$DB" "$(json "$TMP/stats1.json" 'd["database"]')"

expect_eq "stats: the size limit" 1073741824 "$(json "$TMP/stats1.json" 'd["max_bytes"]')"
expect_eq "stats: the disk tier" "read-write False" \
  "$(json "$TMP/stats1.json" 'd["disk_tier"]["state"] + " " + str(d["disk_tier"]["degraded"])')"

run_ok "stats (text)" --dir "$DIR" stats
expect_contains "stats text shows the database" "database: $DB" "$OUT"
expect_eq "stats text shows a total row" 1 "$(grep -c '^total  ' <<<"$OUT" || true)"
expect_contains "stats text shows the disk tier" "disk tier: read-write" "$OUT"
expect_match "stats text shows the size and its limit" $'size: [0-9.]+ KiB of 1.0 GiB' "$OUT"
expect_match "stats text shows sizes in binary units" $'\ntotal +[0-9]+ +[0-9.]+ KiB ' "$OUT"
JITOPS_CACHE=off JITOPS_CACHE_MAX_BYTES=512M "$CLI" --dir "$DIR" stats >"$TMP/out" 2>"$TMP/err" && RC=0 || RC=$?
expect_eq "stats with JITOPS_CACHE=off" 0 "$RC"
expect_contains "stats says the tier is off, and why" "disk tier: off (JITOPS_CACHE" "$(cat "$TMP/out")"
expect_contains "stats shows the limit from the environment" "of 512.0 MiB" "$(cat "$TMP/out")"

# ---- list and its filters --------------------------------------------------------------------

list_json all
expect_eq "list: every entry" "$TOTAL" "$COUNT"
expect_eq "list: keys are 32 hex digits" "$TOTAL" \
  "$(json "$TMP/all.json" 'sum(1 for e in d["entries"] if len(e["key"]) == 32 and all(c in "0123456789abcdef" for c in e["key"]))')"
expect_eq "list: keys are unique" "$TOTAL" "$(json "$TMP/all.json" 'len({e["key"] for e in d["entries"]})')"
expect_eq "list: every entry has a name expression and bytes" "$TOTAL" \
  "$(json "$TMP/all.json" 'sum(1 for e in d["entries"] if e["name_expression"] and e["bytes"] > 0)')"
list_json t90 --target sm_90
expect_eq "list --target sm_90" "$E90" "$COUNT"
expect_eq "list --target sm_90 holds only sm_90" "$E90" \
  "$(json "$TMP/t90.json" 'sum(1 for e in d["entries"] if e["target"] == "sm_90")')"
list_json t80 --target sm_80
expect_eq "list --target sm_80" "$E80" "$COUNT"
list_json t70 --target sm_70
expect_eq "list --target sm_70 (none)" 0 "$COUNT"

OP=$(json "$TMP/stats1.json" 'd["groups"][0]["op"]')
OP_ENTRIES=$(json "$TMP/stats1.json" "sum(g['entries'] for g in d['groups'] if g['op'] == '$OP')")
OP_90=$(json "$TMP/stats1.json" "sum(g['entries'] for g in d['groups'] if g['op'] == '$OP' and g['target'] == 'sm_90')")
list_json op --op "$OP"
expect_eq "list --op $OP" "$OP_ENTRIES" "$COUNT"
list_json op90 --op "$OP" --target sm_90
expect_eq "list --op $OP --target sm_90" "$OP_90" "$COUNT"
list_json noop --op no_such_op
expect_eq "list --op no_such_op" 0 "$COUNT"

run_ok "list (text)" --dir "$DIR" list
expect_eq "list text: header, one line per entry, a count line" $((TOTAL + 2)) \
  "$(printf '%s\n' "$OUT" | wc -l)"
expect_match "list text: count line" "$TOTAL entr(y|ies)\$" "$OUT"
run_ok "--json before the subcommand" --json --dir "$DIR" list
printf '%s\n' "$OUT" >"$TMP/global.json"
expect_true "--json before the subcommand is JSON" valid_json "$TMP/global.json"

# ---- a second prewarm finds everything ------------------------------------------------------

run_ok "second prewarm" --dir "$DIR" prewarm --arch sm_90,sm_80 --jobs 2 --op "$PREWARM_OP"
for arch in sm_90 sm_80; do
  line=$(grep "^$arch: " <<<"$OUT" || true)
  expect_match "second prewarm $arch compiles nothing" \
    "^$arch: $ENTRIES_PER_ARCH entries, 0 compiled, [1-9][0-9]* cached, 0 failed" "$line"
done
stats_json stats2
expect_eq "second prewarm: no new entries" "$TOTAL" "$(json "$TMP/stats2.json" 'd["totals"]["entries"]')"
expect_eq "second prewarm: no new compiles" \
  "$(json "$TMP/stats1.json" 'd["totals"]["compiles"]')" \
  "$(json "$TMP/stats2.json" 'd["totals"]["compiles"]')"
expect_true "second prewarm: disk hits recorded" \
  test "$(json "$TMP/stats2.json" 'd["totals"]["disk_hits"]')" -gt \
  "$(json "$TMP/stats1.json" 'd["totals"]["disk_hits"]')"

# prewarm --dry-run lists the whole catalogue and compiles nothing. The catalogue's op names
# are the families the cache counts kernels under.
run_ok "prewarm --dry-run" --dir "$TMP/dry-cache" prewarm --dry-run
expect_eq "prewarm --dry-run: one line per prewarmed entry" "$ENTRIES_PER_ARCH" \
  "$(printf '%s\n' "$OUT" | grep -c "^$PREWARM_OP: " || true)"
expect_true "prewarm --dry-run creates no cache" test ! -e "$TMP/dry-cache"
CAT_OP=$(head -n 1 <<<"$OUT" | cut -d: -f1)
CAT_OP_ENTRIES=$(grep -c "^$CAT_OP: " <<<"$OUT" || true)
expect_eq "the catalogue's op names are the cache's" "$(json "$TMP/stats1.json" 'sorted({g["op"] for g in d["groups"]})')" "['$PREWARM_OP']"
run_ok "prewarm --dry-run --op $CAT_OP" --dir "$TMP/dry-cache" prewarm --dry-run --op "$CAT_OP"
expect_eq "prewarm --dry-run --op $CAT_OP" "$CAT_OP_ENTRIES" "$(printf '%s\n' "$OUT" | wc -l)"

# prewarm of one op only (default target sm_90), into another directory: it compiles a subset
# of what the full prewarm stored for sm_90, under the same keys.
OP_DIR=$TMP/op-cache
# Off a terminal, prewarm without --verbose still shows progress: a line at each tenth of the
# entries (here fewer than ten, so one a entry), the last one complete.
run_ok "prewarm, progress off a terminal" --dir "$TMP/progress-cache" prewarm --op "$CAT_OP" --jobs 1
expect_eq "prewarm off a terminal: a progress line an entry" "$CAT_OP_ENTRIES" \
  "$(grep -c '^prewarm sm_90: [0-9]*/[0-9]* entries' <<<"$ERR" || true)"
expect_match "prewarm off a terminal: the last line is complete" \
  "prewarm sm_90: $CAT_OP_ENTRIES/$CAT_OP_ENTRIES entries, 0 failed" "$ERR"
run_ok "prewarm --op $CAT_OP" --dir "$OP_DIR" prewarm --op "$CAT_OP" --jobs 1 --verbose
expect_match "prewarm --op $CAT_OP summary" \
  "^sm_90: $CAT_OP_ENTRIES entries, [0-9]+ compiled, 0 cached, 0 failed" "$OUT"
expect_eq "prewarm --verbose: one line per entry" "$CAT_OP_ENTRIES" \
  "$(grep -c "^\[[0-9]*/$CAT_OP_ENTRIES\] sm_90 $CAT_OP: .*: ok" <<<"$ERR" || true)"
run_ok "list after prewarm --op" --dir "$OP_DIR" list --json
printf '%s\n' "$OUT" >"$TMP/opdir.json"
OPDIR_KEYS=$(json "$TMP/opdir.json" 'sorted(e["key"] for e in d["entries"])')
expect_true "prewarm --op $CAT_OP stored kernels" \
  test "$(json "$TMP/opdir.json" 'd["count"]')" -gt 0
expect_eq "prewarm --op: sm_90 only" True \
  "$(json "$TMP/opdir.json" 'all(e["target"] == "sm_90" for e in d["entries"])')"
expect_eq "prewarm --op: the same keys as the full prewarm" True \
  "$(json "$TMP/t90.json" "set($OPDIR_KEYS) <= {e['key'] for e in d['entries']}")"

# ---- export, clear, import -------------------------------------------------------------------

EXPORT=$TMP/export.db
run_ok "export" --dir "$DIR" export "$EXPORT"
expect_match "export count" "^exported $TOTAL entr(y|ies) to " "$OUT"
expect_true "the export file exists" test -s "$EXPORT"
expect_eq "the export is private, like the cache" 600 "$(stat -c %a "$EXPORT")"
run --dir "$DIR" export "$EXPORT"
expect_eq "export onto an existing file fails" 1 "$RC"

run_ok "clear --older-than 1" --dir "$DIR" clear --older-than 1
expect_eq "clear --older-than 1 removes nothing fresh" "removed 0 entries" "$OUT"
list_json after_age
expect_eq "clear --older-than 1: entries kept" "$TOTAL" "$COUNT"

run_ok "clear" --dir "$DIR" clear
expect_eq "clear removes everything" "removed $TOTAL entries" "$OUT"
list_json empty
expect_eq "list after clear" 0 "$COUNT"
stats_json stats_empty
expect_eq "stats after clear" 0 "$(json "$TMP/stats_empty.json" 'd["totals"]["entries"]')"

run_ok "import" --dir "$DIR" import "$EXPORT"
expect_eq "import counts" "imported $TOTAL, rejected 0" "$OUT"
list_json imported
expect_eq "entries back after import" "$TOTAL" "$COUNT"
expect_eq "the same keys are back" \
  "$(json "$TMP/all.json" 'sorted(e["key"] for e in d["entries"])')" \
  "$(json "$TMP/imported.json" 'sorted(e["key"] for e in d["entries"])')"
run_ok "import again" --dir "$DIR" import "$EXPORT"
expect_eq "a second import adds nothing" "imported 0, rejected 0" "$OUT"
run --dir "$DIR" import "$TMP/no-such-file.db"
expect_eq "import of a missing file fails" 1 "$RC"
head -c 8192 /dev/urandom >"$TMP/garbage.db"
run --dir "$DIR" import "$TMP/garbage.db"
expect_eq "import of a garbage file fails" 1 "$RC"
expect_eq "import of a garbage file: the reason, once" 1 \
  "$(grep -o 'is not a jitops cache export' <<<"$ERR" | wc -l)"
expect_contains "import of a garbage file: the reason" "not an SQLite database" "$ERR"

run_ok "clear --op $OP" --dir "$DIR" clear --op "$OP"
expect_match "clear --op $OP count" "^removed $OP_ENTRIES entr(y|ies)\$" "$OUT"
list_json after_op
expect_eq "clear --op $OP leaves the rest" $((TOTAL - OP_ENTRIES)) "$COUNT"
run_ok "import after clear --op" --dir "$DIR" import "$EXPORT"
expect_eq "import restores the op's entries" "imported $OP_ENTRIES, rejected 0" "$OUT"

# ---- verify after a flipped blob byte --------------------------------------------------------

# Read-only subcommands leave no -wal or -shm behind (verify, the last writer, removed them).
run_ok "verify a sound cache" --dir "$DIR" verify
expect_true "no -wal or -shm after a writing command" test ! -e "$DB-wal" -a ! -e "$DB-shm"
run_ok "stats" --dir "$DIR" stats
run_ok "list" --dir "$DIR" list
rm -f "$TMP/export2.db"
run_ok "export" --dir "$DIR" export "$TMP/export2.db"
expect_true "no -wal or -shm after stats, list and export" test ! -e "$DB-wal" -a ! -e "$DB-shm"
run_ok "verify a sound cache" --dir "$DIR" verify
expect_eq "verify a sound cache" "checked $TOTAL, dropped 0" "$OUT"

BAD_KEY=$(python3 - "$DB" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rowid, key, blob = db.execute(
    "SELECT rowid, lower(hex(key)), blob FROM kernels ORDER BY rowid LIMIT 1").fetchone()
blob = bytearray(blob)
blob[len(blob) // 2] ^= 0x01
db.execute("UPDATE kernels SET blob = ? WHERE rowid = ?", (bytes(blob), rowid))
db.commit()
db.close()
print(key)
EOF
)
expect_match "a row was corrupted" '^[0-9a-f]{32}$' "$BAD_KEY"
run --dir "$DIR" verify
expect_eq "verify with a bad row: exit status" 1 "$RC"
expect_eq "verify drops exactly that row" "checked $TOTAL, dropped 1" "$OUT"
list_json after_verify
expect_eq "one entry fewer after verify" $((TOTAL - 1)) "$COUNT"
expect_eq "the bad key is gone" False \
  "$(json "$TMP/after_verify.json" "any(e['key'] == '$BAD_KEY' for e in d['entries'])")"
run_ok "verify again" --dir "$DIR" verify
expect_eq "verify again finds nothing" "checked $((TOTAL - 1)), dropped 0" "$OUT"

# A prewarm puts the dropped kernel back, compiling exactly that one.
run_ok "prewarm after verify" --dir "$DIR" prewarm --arch sm_90 --arch sm_80 --jobs 2 --op "$PREWARM_OP"
expect_eq "prewarm recompiles only the dropped kernel" 1 \
  "$(awk '/^sm_[0-9]+: / { n += $4 } END { print n + 0 }' <<<"$OUT")"
list_json restored
expect_eq "every entry is back" "$TOTAL" "$COUNT"

# ---- damaged databases: every subcommand sets them aside -------------------------------------

# Garbage: stats reads no cache (and says why), prewarm rebuilds it.
DAMAGED=$TMP/damaged
mkdir -m 700 "$DAMAGED"
head -c 16384 /dev/urandom >"$DAMAGED/kernels.db"
run --dir "$DAMAGED" stats
expect_eq "stats over garbage succeeds" 0 "$RC"
expect_contains "stats over garbage: set aside" "set aside as $DAMAGED/kernels.db.corrupt-" "$ERR"
expect_true "stats over garbage: nothing left at the database's path" test ! -e "$DAMAGED/kernels.db"
head -c 16384 /dev/urandom >"$DAMAGED/kernels.db"
run_ok "prewarm over garbage" --dir "$DAMAGED" prewarm --op "$PREWARM_OP" --jobs 2
expect_match "prewarm over garbage compiles" "^sm_90: [0-9]+ entries, [0-9]+ compiled, 0 cached, 0 failed" "$OUT"
run_ok "list after prewarm over garbage" --dir "$DAMAGED" list --json
printf '%s\n' "$OUT" >"$TMP/damaged.json"
expect_eq "prewarm over garbage stored the catalogue" "$E90" "$(json "$TMP/damaged.json" 'd["count"]')"

# A damaged header byte (an unsupported schema format): verify sets it aside and says so.
python3 - "$DAMAGED/kernels.db" <<'EOF'
import sqlite3, sys
sqlite3.connect(sys.argv[1]).execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
with open(sys.argv[1], "r+b") as f:
    f.seek(47)
    f.write(bytes([9]))
EOF
run --dir "$DAMAGED" verify
expect_eq "verify of a damaged header: exit status" 1 "$RC"
expect_contains "verify of a damaged header: set aside" "set aside as" "$ERR"
expect_eq "verify of a damaged header: a new, empty cache" "checked 0, dropped 0" "$OUT"

# A foreign schema with our table names: clear sets it aside, and the cache works again.
rm -f "$DAMAGED"/kernels.db*
python3 -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).executescript("CREATE TABLE kernels(id INTEGER PRIMARY KEY, x TEXT); CREATE TABLE usage(y);")' "$DAMAGED/kernels.db"
run_ok "clear of a foreign schema" --dir "$DAMAGED" clear
expect_contains "clear of a foreign schema: set aside" "set aside as" "$ERR"
run_ok "stats after clear of a foreign schema" --dir "$DAMAGED" stats --json

# ---- directories the tool must refuse, and the environment it must not obey -----------------

# A directory others can write is refused: nothing is compiled into it, nothing read from it.
UNSAFE=$TMP/unsafe
mkdir -p "$UNSAFE"
chmod 777 "$UNSAFE"
run --dir "$UNSAFE" prewarm --arch sm_90 --op "$PREWARM_OP"
expect_eq "prewarm into a world-writable directory fails" 1 "$RC"
expect_contains "prewarm names the refused directory" "$UNSAFE" "$ERR"
expect_true "nothing was written there" test ! -e "$UNSAFE/kernels.db"
run --dir "$UNSAFE" stats
expect_eq "stats of a world-writable directory fails" 1 "$RC"

# A symlinked cache directory (or $HOME) is followed; a database that is a symlink is refused,
# and the message says so.
ln -s "$DIR" "$TMP/cache-link"
run_ok "stats through a symlinked directory" --dir "$TMP/cache-link" stats --json
printf '%s\n' "$OUT" >"$TMP/linked.json"
expect_eq "stats through a symlinked directory: the real database" "$(realpath "$DB")" \
  "$(json "$TMP/linked.json" 'd["database"]')"
mkdir -m 700 "$TMP/linked-db"
ln -s "$DB" "$TMP/linked-db/kernels.db"
run --dir "$TMP/linked-db" stats
expect_eq "stats of a symlinked database fails" 1 "$RC"
expect_contains "stats of a symlinked database says why" "symbolic link" "$ERR"

# prewarm writes the cache even when the environment turns the runtime's disk tier off.
JITOPS_CACHE=off "$CLI" --dir="$TMP/env-off" prewarm --arch=sm_90 --op "$PREWARM_OP" >"$TMP/out" 2>"$TMP/err" && RC=0 || RC=$?
expect_eq "prewarm with JITOPS_CACHE=off" 0 "$RC"
run_ok "list --dir=DIR" --dir="$TMP/env-off" list --json
printf '%s\n' "$OUT" >"$TMP/envoff.json"
expect_eq "prewarm with JITOPS_CACHE=off stored the catalogue" "$E90" \
  "$(json "$TMP/envoff.json" 'd["count"]')"

# prewarm fills its own cache even when a shipped tier already holds every kernel.
JITOPS_CACHE_SHIPPED=$EXPORT "$CLI" --dir "$TMP/shipped" prewarm --op "$PREWARM_OP" >"$TMP/out" 2>"$TMP/err" && RC=0 || RC=$?
expect_eq "prewarm with JITOPS_CACHE_SHIPPED" 0 "$RC"
expect_match "prewarm with a shipped tier compiles" "^sm_90: [0-9]+ entries, $E90 compiled, 0 cached" \
  "$(cat "$TMP/out")"
run_ok "list after prewarm with a shipped tier" --dir "$TMP/shipped" list --json
printf '%s\n' "$OUT" >"$TMP/shipped.json"
expect_eq "prewarm with a shipped tier stored the catalogue" "$E90" "$(json "$TMP/shipped.json" 'd["count"]')"

# ---- the default directory was never touched -------------------------------------------------

expect_true "\$JITOPS_CACHE_DIR stayed untouched" test ! -e "$JITOPS_CACHE_DIR"

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]] || exit 1
