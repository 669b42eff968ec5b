#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine: packages, build, C unit
# tests (meson), then every filesystem test (pytest, which also runs the C
# unit tests again so one command shows everything).
set -euo pipefail
cd "$(dirname "$0")/.."
contrib/deps.sh --test
contrib/build.sh
meson test -C build --print-errorlogs
set +e
/usr/bin/python3 -m pytest "$@"
rc=$?
set -e
if [ $rc -eq 5 ]; then
    echo "pytest collected no tests: that is a failure" >&2
    exit 1
fi
exit $rc
