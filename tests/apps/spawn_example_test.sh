#!/usr/bin/env bash
# spawn_example (the second seed's mp.spawn program) on the real Fashion-MNIST: 2 spawned ranks,
# 1 epoch, one "Rank R, Epoch [1/1], Loss: x" line each with a loss below the untrained 2.3;
# the private store directory is gone afterwards; bad input exits non-zero with a message.
set -euo pipefail
spawn_example=$1
source "$(dirname "$0")/fashion_mnist_or_skip.sh"
export TMPDIR=$dir  # spawn() makes its private directory here

out=$("$spawn_example" --nprocs 2 --epochs 1 2>&1) || { echo "$out"; exit 1; }
echo "$out"
for rank in 0 1; do
  loss=$(grep -o "^\[rank $rank\]: Rank $rank, Epoch \[1/1\], Loss: [0-9.]*" <<<"$out" | grep -o '[0-9.]*$') ||
    { echo "FAILED: no epoch line from rank $rank"; exit 1; }
  awk -v l="$loss" 'BEGIN { exit !(l < 1.5) }' || { echo "FAILED: rank $rank's loss $loss did not fall"; exit 1; }
done
grep -q "^All 2 ranks finished$" <<<"$out" || { echo "FAILED: no final line"; exit 1; }
left=$(ls -A "$TMPDIR")
[ -z "$left" ] || { echo "FAILED: spawn() left $left in TMPDIR"; exit 1; }

if out=$("$spawn_example" --nprocs 0 2>&1); then echo "FAILED: --nprocs 0 accepted"; exit 1; fi
grep -q "spawn_example: --nprocs" <<<"$out" || { echo "FAILED: unclear message: $out"; exit 1; }
if out=$("$spawn_example" --nprocs 2 --epochs 1 --dataset nosuch 2>&1); then echo "FAILED: --dataset nosuch accepted"; exit 1; fi
echo "$out"
grep -q "spawned rank [01] of 2 (pid [0-9]*) raised InvalidArgumentError: .*nosuch" <<<"$out" ||
  { echo "FAILED: the parent does not name the rank and its error"; exit 1; }
echo "spawn_example: OK"
