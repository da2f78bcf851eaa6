#!/usr/bin/env bash
# The whole test suite: set-up, then every CTest test (each starts the servers it needs, e.g. a
# redis-server on a free loopback port). Ends with CTest's counts.
#   bash scripts/test.sh                 # everything
#   bash scripts/test.sh -L unit         # extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" -j"$(nproc)" --output-on-failure "$@"
