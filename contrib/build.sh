#!/usr/bin/env bash
# Configure (once) and build into ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/build.ninja ] || meson setup build
ninja -C build
