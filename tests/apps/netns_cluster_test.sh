#!/usr/bin/env bash
# Multi-node for real on one machine: scripts/netns_cluster.sh (2 network namespaces, a bridge,
# redis-server in one of them), 2 nodes x 2 ringtrain workers, mlp on Fashion-MNIST, 1 epoch.
# Passes when both ringruns succeed, the world size is 4 and all 4 ranks end identical (and, with
# RATE, tc reports both nodes' links under tbf at RATE).
# Skips (77) without root, ip netns, redis-server or the dataset.
#   netns_cluster_test.sh SOURCE_DIR BUILD_DIR [RATE]   RATE: each node's link shaped (100mbit)
set -uo pipefail
source_dir=$1
build_dir=$2
rate=${3:-}
[ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || { echo "SKIP: no Fashion-MNIST"; exit 77; }
out=$(bash "$source_dir/scripts/netns_cluster.sh" "$build_dir" ${rate:+--link-rate "$rate"} 2>&1)
rc=$?
echo "$out"
[ "$rc" = 77 ] && exit 77
[ "$rc" = 0 ] || { echo "FAILED: netns_cluster exit $rc"; exit 1; }
if [ -n "$rate" ]; then
  # Each node's link really held to RATE: tc's own report, e.g. "qdisc tbf 8001: root ... rate 100Mbit".
  want=$(sed 's/mbit$/Mbit/; s/gbit$/Gbit/; s/kbit$/Kbit/' <<<"$rate")
  shaped=$(grep -c "^netns_cluster: node [01] eth0: qdisc tbf .* rate $want " <<<"$out")
  [ "$shaped" = 2 ] || { echo "FAILED: expected both nodes' eth0 under tbf at $want, tc reported:"; grep "eth0:" <<<"$out"; exit 1; }
fi
json=$(grep -o '{"device".*' <<<"$out")
/usr/bin/python3 - "$json" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
assert r["world_size"] == 4, r
assert len(set(r["parameter_checksums"])) == 1, r["parameter_checksums"]
assert r["test_accuracy"] >= 0.75, r["test_accuracy"]
print("netns cluster: 2 nodes x 2 ranks, accuracy %.4f, ranks identical, %.0f samples/s" % (r["test_accuracy"], r["samples_per_s"]))
PY
