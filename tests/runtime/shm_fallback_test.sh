#!/usr/bin/env bash
# Two ranks that look like one host (the same RINGTORCH_HOST_ID) but do not share /dev/shm, as
# two docker-compose services with the same hostname would: rank 1 runs in its own mount
# namespace with a private tmpfs on /dev/shm. It cannot open the segment rank 0 created, so
# both ranks fall back to Gloo over TCP, rank 0 says why, and every result is still checked.
# Needs root and unshare(1) (util-linux); skips (77) otherwise.
set -euo pipefail
ringbench=$1
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for a private /dev/shm (unshare --mount)"; exit 77; }
command -v unshare >/dev/null || { echo "SKIP: no unshare (apt-get install util-linux)"; exit 77; }
unshare --mount true 2>/dev/null || { echo "SKIP: unshare --mount is not permitted here"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
common=(env MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=2 RINGTORCH_HOST_ID=one-hostname RINGTORCH_TIMEOUT=60)
args=(--check --min-bytes 4 --max-bytes 1M --factor 16 --iters 2 --warmup 1)
"${common[@]}" RANK=0 "$ringbench" "${args[@]}" >"$dir/rank0" 2>&1 &
rank0=$!
"${common[@]}" RANK=1 unshare --mount --propagation private \
  sh -c 'mount -t tmpfs -o size=64m tmpfs /dev/shm && exec "$0" "$@"' "$ringbench" "${args[@]}" >"$dir/rank1" 2>&1 &
rank1=$!
rc=0
wait $rank0 || rc=$?
wait $rank1 || rc=$?
cat "$dir/rank0" "$dir/rank1"
[ "$rc" -eq 0 ] || { echo "FAILED: a rank exited $rc"; exit 1; }
grep -q "Gloo over TCP: shared memory failed at rank 1: shm_open(/ringtorch-" "$dir/rank0" ||
  { echo "FAILED: rank 0 did not say it fell back to TCP because rank 1 could not open the segment"; exit 1; }
rows=$(grep -cE "^ +[0-9]+ .* 0$" "$dir/rank0" || true)
[ "$rows" -ge 3 ] || { echo "FAILED: expected >= 3 checked rows with 0 wrong elements"; exit 1; }
echo "shm fallback: separate /dev/shm -> Gloo over TCP, $rows sizes checked, 0 wrong elements"
