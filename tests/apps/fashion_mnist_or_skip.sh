# Sourced by the script tests that train on the real Fashion-MNIST: exits 77 (CTest's
# SKIP_RETURN_CODE) where Debian's dataset-fashion-mnist is missing; else sets $data and makes
# a temporary directory $dir, removed when the script exits.
data=/usr/share/datasets/fashion-mnist
[ -e "$data/train-images-idx3-ubyte.gz" ] || { echo "SKIP: $data missing (apt-get install dataset-fashion-mnist)"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
