#!/usr/bin/env bash
# Install the Debian packages tierfs needs to build, test and demo.
set -euo pipefail
pkgs=(build-essential pkg-config meson ninja-build
      libfuse3-dev fuse3 liburing-dev liblmdb-dev lmdb-utils
      python3 python3-pytest python3-xattr sqlite3 attr util-linux fio
      postgresql)
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
