#!/usr/bin/env bash
# Two "machines" on this one: Linux network namespaces joined by a bridge, each with its own
# address, redis-server in the first; one ringrun per node (2 workers each, world size 4)
# rendezvousing through redis:// across the bridge, running PROGRAM (default: ringtrain, mlp,
# 1 epoch on Fashion-MNIST). The docker-compose.yml topology, without Docker. Needs root and
# `ip netns`; exits 77 (skip) when they are not available.
#   sudo bash scripts/netns_cluster.sh [BUILD_DIR] [--link-rate RATE] [-- PROGRAM ARGS...]
# --link-rate RATE shapes each node's link to RATE both ways (tc's form: 100mbit, 1gbit;
# scripts/netns_nodes.sh), a network like the clusters' instead of a nearly free one, and prints
# each node's qdisc as tc reports it; a RATE not in tc's form exits 2.
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
shift || true
rate=""
if [ "${1:-}" = "--link-rate" ]; then
  rate=${2:?--link-rate needs a rate, e.g. 100mbit}
  shift 2
fi
[ "${1:-}" = "--" ] && shift
if [ $# -eq 0 ]; then
  set -- "$build/apps/ringtrain" --model mlp --epochs 1 --log-interval 0
fi
command -v redis-server >/dev/null || { echo "netns_cluster: SKIP: no redis-server"; exit 77; }
source "$(dirname "$0")/netns_nodes.sh"
if [ -n "$rate" ] && ! link_burst_bytes "$rate" >/dev/null; then
  echo "netns_cluster: --link-rate '$rate': give tc's form, e.g. 100mbit, 1gbit, 10gbit" >&2
  exit 2
fi
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  netns_down
}
trap cleanup EXIT
netns_up rt 2 $rate || { echo "netns_cluster: SKIP: $netns_why"; exit 77; }
tag=$$
nodes=("${netns_nodes[@]}")
addresses=("${netns_addresses[@]}")
echo "netns_cluster: nodes ${nodes[*]} at ${addresses[*]} on bridge $netns_bridge${rate:+, each link shaped to $rate}"
if [ -n "$rate" ]; then
  # What the kernel holds each node's link to, as tc reports it (the test checks it).
  for i in 0 1; do echo "netns_cluster: node $i eth0: $(tc -n "${nodes[$i]}" qdisc show dev eth0 | head -n 1)"; done
fi
ip netns exec "${nodes[0]}" redis-server --port 6379 --bind "${addresses[0]}" --save "" --appendonly no --protected-mode no \
  --daemonize no >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 50); do
  ip netns exec "${nodes[1]}" bash -c "exec 3<>/dev/tcp/${addresses[0]}/6379" 2>/dev/null && break
  sleep 0.1
done
endpoint="redis://${addresses[0]}:6379/0"
codes=$(mktemp -d)
for i in 1 0; do
  { rc=0
    # Namespaces share the kernel (hostname, boot id, /dev/shm): RINGTORCH_HOST_ID makes each
    # node a host of its own, so groups take the hierarchical path (shared memory within a
    # node, TCP between the namespaces), as on two real machines.
    ip netns exec "${nodes[$i]}" env RINGTORCH_HOST_ID="netns-node$i" "$build/apps/ringrun" --nnodes 2 --node_rank "$i" --nproc_per_node 2 \
      --rdzv_endpoint "$endpoint" --run_id "netns-$tag" --timeout 120 "$@" 2>&1 || rc=$?
    echo "$rc" >"$codes/node$i"; } | sed "s/^/[node $i] /" &
  pids+=($!)
done
for p in "${pids[@]:1}"; do wait "$p" || true; done
status=0
for i in 0 1; do
  code=$(cat "$codes/node$i" 2>/dev/null || echo missing)
  echo "netns_cluster: node $i ringrun exit $code"
  [ "$code" = 0 ] || status=1
done
rm -rf "$codes"
exit $status
