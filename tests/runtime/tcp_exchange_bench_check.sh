#!/usr/bin/env bash
# tcp_exchange_bench (bench/compare_wire's floor) as a pair on loopback: one JSON line per size
# from rank 0, sizes above the socket buffers included (both sides send and receive at once, so
# a blocking design would deadlock there); a peer that never comes is a clear error, not a hang.
set -euo pipefail
bench=$1
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
out=$(mktemp)
trap 'rm -f "$out"' EXIT
pids=()
for rank in 0 1; do
  RANK=$rank MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$bench" --sizes 4,65536,16777216 --iters 3 --warmup 1 \
    --timeout 60 >>"$out" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || { echo "FAILED: a rank of the pair exited non-zero"; exit 1; }; done
/usr/bin/python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["bytes"] for r in rows] == [4, 65536, 16777216], rows
assert all(r["impl"] == "tcp exchange" and r["median_us"] > 0 and r["min_us"] <= r["median_us"] for r in rows), rows
# The floor is the faster of the two connections' medians (autotuned and small send buffer).
assert all(r["median_us"] == min(r["autotuned_median_us"], r["small_buffer_median_us"]) for r in rows), rows
print("tcp_exchange_bench: %d sizes, 4 B in %.1f us" % (len(rows), rows[0]["median_us"]))
PY
if msg=$(RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$bench" --timeout 1 2>&1); then
  echo "FAILED: rank 1 without a rank 0 succeeded"; exit 1
fi
grep -q "rank 1 cannot connect to rank 0 at 127.0.0.1:$port (--timeout)" <<<"$msg" || { echo "$msg"; exit 1; }
echo "tcp_exchange_bench: a missing peer: $msg"
