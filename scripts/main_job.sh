#!/usr/bin/env bash
# The main job: set-up, then 2 workers on this machine rendezvous through ringrun's own store
# (no server needed) and exchange values through it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
exec "$BUILD_DIR/apps/ringrun" --standalone --nproc_per_node 2 "$BUILD_DIR/apps/ringhello"
