#!/usr/bin/env bash
# The test suite: build, then ctest. GPU tests report themselves skipped (exit 77) where
# there is no GPU. Extra arguments go to ctest (for example: -L cpu, or -R cache).
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" "$@"
