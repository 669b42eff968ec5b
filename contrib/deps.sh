#!/usr/bin/env bash
# Install the Debian packages tierfs needs: to build and run it (and the
# demo), and with --test also what the test suite uses.
#
#     contrib/deps.sh          # build, run, demo (contrib/demo.sh)
#     contrib/deps.sh --test   # ... and the tests (contrib/test.sh)
set -euo pipefail
pkgs=(build-essential pkg-config meson ninja-build scdoc
      libfuse3-dev fuse3 liburing-dev liblmdb-dev
      python3 attr util-linux)
case "${1:-}" in
--test) pkgs+=(lmdb-utils python3-pytest python3-xattr sqlite3 fio postgresql man-db
               systemd) ;;
"") ;;
*) echo "usage: $0 [--test]" >&2; exit 2 ;;
esac
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q "${missing[@]}"
fi
