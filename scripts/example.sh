#!/usr/bin/env bash
# The main job: build, then run the quickstart example twice. The first run compiles the
# kernel (a miss), the second finds it on disk (a hit). Without a GPU it still compiles and
# caches, and says that there is no GPU to launch on.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
echo "== first run"
"$BUILD_DIR/examples/quickstart"
echo "== second run (a fresh process)"
"$BUILD_DIR/examples/quickstart"
