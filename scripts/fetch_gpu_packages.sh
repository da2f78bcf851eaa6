#!/usr/bin/env bash
# What the GPU machine lacks, fetched here for it to carry: it has CUDA, CMake, ninja and the
# PyTorch wheel (whose LibTorch ringtorch builds against there), but no apt and no network.
#
#   bash scripts/fetch_gpu_packages.sh [DIR]      # default .gpu-packages (ignored by git)
#
# DIR/debs/*.deb   Debian's Gloo, hiredis, nlohmann-json, GoogleTest and their runtime needs,
#                  unpacked there with dpkg -x into a private prefix (tests/gpu/device_check.sh)
# DIR/fashion-mnist/  the real Fashion-MNIST files, for the two short trainings
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.gpu-packages}
packages=(libgloo-dev libgloo0 libibverbs1 libnl-3-200 libnl-route-3-200 libhiredis-dev libhiredis0.14
          nlohmann-json3-dev libgtest-dev)
mkdir -p "$dir/debs" "$dir/fashion-mnist"
rm -f "$dir"/debs/*.deb
(cd "$dir/debs" && apt-get download "${packages[@]}" >/dev/null)
data=/usr/share/datasets/fashion-mnist
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
  echo "fetch_gpu_packages: $data is missing: apt-get install dataset-fashion-mnist (scripts/setup.sh does)" >&2
  exit 1
fi
cp "$data"/*.gz "$dir/fashion-mnist/"
# .gpu-packages/ is in .gitignore; another DIR inside the checkout must be ignored too, or it travels as
# untracked files (and counts towards the device tool's 64 MiB).
echo "fetch_gpu_packages: $(ls "$dir/debs" | wc -l) packages and Fashion-MNIST in $dir ($(du -sh "$dir" | cut -f1));"
echo "carry it: device run with carry [\"$dir\"], command: bash tests/gpu/device_check.sh"
