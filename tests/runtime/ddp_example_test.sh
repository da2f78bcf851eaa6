#!/usr/bin/env bash
# DistributedDataParallel in real processes under ringrun: 2 ranks train 2 epochs with
# checkpoints, a second run resumes at epoch 2 and trains 2 more; the loss falls, and both
# ranks end with the same parameters.
set -euo pipefail
ringrun=$1
example=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
first=$("$ringrun" --standalone --nproc_per_node 2 --use_env --timeout 120 "$example" --epochs 2 \
  --checkpoint-dir "$dir/ck" 2>&1) || { echo "$first"; echo "FAILED: first run"; exit 1; }
second=$("$ringrun" --standalone --nproc_per_node 2 --use_env --timeout 120 "$example" --epochs 4 \
  --checkpoint-dir "$dir/ck" 2>&1) || { echo "$second"; echo "FAILED: resumed run"; exit 1; }
echo "$first"
echo "$second"
grep -q "resumed at epoch 2" <<<"$second" || { echo "FAILED: did not resume at epoch 2"; exit 1; }
if grep -q "epoch [01]:" <<<"$second"; then echo "FAILED: the resumed run repeated an epoch"; exit 1; fi
loss() { sed -n "s/.*epoch $1: mean loss \([0-9.]*\).*/\1/p" <<<"$2"; }
first_loss=$(loss 0 "$first")
last_loss=$(loss 3 "$second")
awk -v a="$first_loss" -v b="$last_loss" 'BEGIN { exit !(b < a / 2) }' ||
  { echo "FAILED: loss went from $first_loss to $last_loss"; exit 1; }
sums=$(sed -n 's/.*parameter checksum \(.*\)/\1/p' <<<"$second" | sort -u | wc -l)
[ "$sums" -eq 1 ] || { echo "FAILED: ranks ended with different parameters"; exit 1; }
echo "ddp_example: loss $first_loss -> $last_loss, resumed at epoch 2, ranks identical"
