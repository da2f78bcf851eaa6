#!/usr/bin/env bash
# Store latency, ringtorch (C++) side by side with Python's torch.distributed (Debian's
# python3-torch), in one run, alternating A B A B (this machine's speed drifts), medians and
# ratios (python / ringtorch: above 1 means ringtorch is faster).
#   bash bench/compare_stores.sh [BUILD_DIR] [ITERATIONS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
iterations=${2:-2000}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for round in 1 2; do
  for store in tcp file; do
    "$build/bench/store_bench" "$store" "$iterations" >>"$out"
    /usr/bin/python3 "$here/store_bench.py" "$store" "$iterations" >>"$out"
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows:
    by.setdefault((r["store"], r["op"], r["impl"]), []).append(r["us_per_op"])
print("%-6s %-6s %14s %14s %8s" % ("store", "op", "ringtorch us", "python us", "ratio"))
for store in ("tcp", "file"):
    for op in ("set", "get", "add", "wait"):
        c = statistics.median(by[(store, op, "ringtorch")])
        p = statistics.median(by[(store, op, "python")])
        print("%-6s %-6s %14.2f %14.2f %8.2f" % (store, op, c, p, p / c))
PY
