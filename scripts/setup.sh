#!/usr/bin/env bash
# Everything a fresh Debian 12 machine needs, then a build in ./build. Idempotent: installs only
# the packages that are missing and rebuilds only what changed. Run as root (or with sudo).
#
#   bash scripts/setup.sh            # packages + configure + build
#   BUILD_DIR=out bash scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}

packages=(
  # toolchain
  cmake ninja-build g++ ccache pkg-config
  # engines and libraries (docs/ARCHITECTURE.md, "External engines")
  libtorch-dev libgloo-dev libhiredis-dev nlohmann-json3-dev zlib1g-dev libplplot-dev libspdlog-dev libcli11-dev
  # LibTorch runs on the netlib reference BLAS unless an OpenBLAS takes over libblas.so.3
  libopenblas0-pthread
  # tests: GoogleTest, a real Redis, the real Fashion-MNIST, network namespaces (iptables: the
  # harness under a firewall that drops bridged traffic, as Docker's daemon leaves it)
  googletest libgtest-dev redis-server dataset-fashion-mnist iproute2 iptables
  # `docker-compose config` validates docker-compose.yml without a Docker engine
  docker-compose
  # PyTorch's own Python torch.distributed, for interop tests and side-by-side benchmarks
  python3-torch
)

bash scripts/install_packages.sh setup "${packages[@]}"

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD_DIR" -- -j"$(nproc)"
echo "setup: built into $BUILD_DIR"
