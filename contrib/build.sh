#!/usr/bin/env bash
# Configure (once) and build into ./build.  PREFIX=/usr contrib/build.sh
# sets the install prefix, also of a build directory made before (a
# second "meson setup build --prefix=..." would leave the old one).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
    meson setup build ${PREFIX:+--prefix="$PREFIX"}
elif [ -n "${PREFIX:-}" ]; then
    meson configure build -Dprefix="$PREFIX"
fi
ninja -C build
