#!/usr/bin/env bash
# The main job: set-up, then 2 workers on this machine train LeNet-5 on the real Fashion-MNIST
# (Debian's dataset-fashion-mnist) with DistributedDataParallel, rendezvousing through a file
# store (no server needed), and print the test accuracy after each epoch.
# EPOCHS (default 3) and any extra arguments go to ringtrain.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
store_dir=$(mktemp -d)
trap 'rm -rf "$store_dir"' EXIT
"$BUILD_DIR/apps/ringrun" --nproc_per_node 2 --rdzv_endpoint "file://$store_dir/store" --run_id main-job \
  "$BUILD_DIR/apps/ringtrain" --dataset fashion-mnist --model lenet --epochs "${EPOCHS:-3}" \
  --batch-size 64 --lr 0.01 --momentum 0.9 --log-interval 0 "$@"
