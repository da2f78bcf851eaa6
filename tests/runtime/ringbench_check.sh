#!/usr/bin/env bash
# ringbench --check under ringrun: real processes, the real rendezvous, Gloo over loopback TCP;
# every op, every dtype, 2 and 3 ranks; fails on any wrong element.
set -euo pipefail
ringrun=$1
ringbench=$2
# Reduction depends on the dtype, copies do not: allreduce gets every dtype at 2 ranks; the
# thread-based suite (process_group_test) covers the full op x dtype x size matrix.
run() {
  local nproc=$1 op=$2 dtype=$3 out rows
  out=$("$ringrun" --standalone --nproc_per_node "$nproc" --use_env --timeout 60 \
    "$ringbench" --op "$op" --dtype "$dtype" --check --min-bytes 1 --max-bytes 256K --factor 16 \
    --iters 2 --warmup 1 2>&1) || { echo "$out"; echo "FAILED: $nproc ranks, $op, $dtype"; exit 1; }
  rows=$(echo "$out" | grep -cE "^\[rank 0\]: +[0-9]+ .* 0$" || true)
  [ "$rows" -ge 3 ] || { echo "$out"; echo "FAILED: expected >= 3 checked rows with 0 wrong ($nproc, $op, $dtype)"; exit 1; }
  echo "ringbench --check: $nproc ranks, $op, $dtype: $rows sizes, 0 wrong elements"
}
for dtype in float32 float64 float16 bfloat16 int32 int64 uint8; do run 2 allreduce "$dtype"; done
run 2 broadcast float32
run 2 allgather float32
run 3 allreduce bfloat16
run 3 allreduce int64
run 3 broadcast uint8
run 3 allgather float32
run 2 reduce_scatter float32
run 3 reduce_scatter int32
run 2 alltoall float64
run 3 alltoall uint8
run 2 send float32   # up to 256 KiB: past the 64 KiB that ride in the header (point_to_point.cc)
run 3 send int64     # the third rank has no partner and keeps its own
RINGTORCH_ALLREDUCE_ALGORITHM=direct run 4 allreduce float16
RINGTORCH_ALLREDUCE_ALGORITHM=direct run 2 allreduce float64
RINGTORCH_ALLREDUCE_ALGORITHM=ring run 2 allreduce float32
RINGTORCH_ALLREDUCE_ALGORITHM=bcube run 3 allreduce float32
RINGTORCH_ALLREDUCE_ALGORITHM=bcube run 4 allreduce int32
if [ ! -e /dev/nvidia0 ]; then
  out=$("$ringrun" --standalone --nproc_per_node 2 --use_env --timeout 60 "$ringbench" --device cuda 2>&1) &&
    { echo "$out"; echo "FAILED: --device cuda without a GPU exited 0"; exit 1; }
  grep -q "ringbench: --device cuda: no CUDA device is visible" <<<"$out" || { echo "$out"; echo "FAILED: no reason given"; exit 1; }
  echo "ringbench --device cuda without a GPU: exit non-zero, says why"
fi
