#!/usr/bin/env bash
# `cmake --install` gives a usable package: headers, a SONAME-versioned shared library, the
# static library, jitops-cache, a CMake config (find_package(jitops)) and a relocatable
# pkg-config file. Usage: test_install_consumer.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 source=$2
work=${JITOPS_TEST_TMP:-/tmp/jitops-install-test}
rm -rf "$work" && mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
failures=0
check() { if "$@"; then echo "ok: $*"; else echo "FAILED: $*"; failures=$((failures + 1)); fi; }
check test -f "$prefix/include/jitops/jitops.h"
check test -x "$prefix/bin/jitops-cache"
check test -f "$prefix/lib/libjitops.a"
soname=$(objdump -p "$prefix/lib/libjitops.so" | awk '/SONAME/ {print $2}')
check test "$soname" = "libjitops.so.0"
cmake -S "$source/tests/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
check env LD_LIBRARY_PATH="$prefix/lib" "$work/consumer/consumer_shared"
check "$work/consumer/consumer_static"
flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs jitops)
static_flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --static --libs jitops)
check cc "$source/tests/consumer/main.c" $flags -o "$work/consumer_pc"
# A pkg-config consumer starts as it is: the flags give it an rpath to the library, and the
# library carries one to CUDA's (which need not be in the loader's default path).
check env -u LD_LIBRARY_PATH "$work/consumer_pc"
check grep -q -- "-Wl,-rpath," <<<"$flags"
cuda_dir=
for dir in $(tr ' ' '\n' <<<"$static_flags" | sed -n 's/^-L//p'); do
  [ -e "$dir/libnvrtc.so" ] && cuda_dir=$dir
done
check test -n "$cuda_dir" # --static names CUDA's library directory
check grep -q "RUNPATH.*$cuda_dir" <<<"$(readelf -d "$prefix/lib/libjitops.so")"
check test "$("$prefix/bin/jitops-cache" --version | grep -c MIT)" = 1
if [ "$failures" -eq 0 ]; then echo "test_install_consumer: passed"; else echo "test_install_consumer: $failures failed"; fi
exit $((failures > 0))
