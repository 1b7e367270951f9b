#!/usr/bin/env bash
# Every global symbol the library defines is in its namespace: `jitops_` for the public API,
# `jitops__` for what the library's files share among themselves. Anything else could clash
# with a symbol of the application that links the static library. The shared library exports
# the public API only (internal symbols are hidden).
# Usage: test_symbol_namespace.sh libjitops.a libjitops.so
set -euo pipefail
static_lib=$1
shared_lib=$2
command -v nm >/dev/null || { echo "nm not found: skipped"; exit 77; }

failed=0
outside=$(nm -g --defined-only "$static_lib" | awk 'NF == 3 { print $3 }' | grep -v '^jitops_' |
  sort -u || true)
if [ -n "$outside" ]; then
  echo "FAIL: $static_lib defines global symbols outside jitops_ and jitops__:"
  echo "$outside" | sed 's/^/  /'
  failed=1
fi
exported=$(nm -D --defined-only "$shared_lib" | awk 'NF == 3 { print $3 }' |
  grep -v '^jitops_[a-z0-9]' || true)
if [ -n "$exported" ]; then
  echo "FAIL: $shared_lib exports symbols outside the public jitops_ API:"
  echo "$exported" | sed 's/^/  /'
  failed=1
fi
if [ "$failed" -eq 0 ]; then
  echo "test_symbol_namespace: every global symbol is jitops_ (public) or jitops__ (internal)"
fi
exit "$failed"
