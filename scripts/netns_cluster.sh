#!/usr/bin/env bash
# Two "machines" on this one: Linux network namespaces joined by a bridge, each with its own
# address, redis-server in the first; one ringrun per node (2 workers each, world size 4)
# rendezvousing through redis:// across the bridge, running PROGRAM (default: ringtrain, mlp,
# 1 epoch on Fashion-MNIST). The docker-compose.yml topology, without Docker. Needs root and
# `ip netns`; exits 77 (skip) when they are not available.
#   sudo bash scripts/netns_cluster.sh [BUILD_DIR] [-- PROGRAM ARGS...]
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
shift || true
[ "${1:-}" = "--" ] && shift
if [ $# -eq 0 ]; then
  set -- "$build/apps/ringtrain" --model mlp --epochs 1 --log-interval 0
fi
[ "$(id -u)" = 0 ] || { echo "netns_cluster: SKIP: needs root for ip netns"; exit 77; }
command -v ip >/dev/null || { echo "netns_cluster: SKIP: no ip (apt-get install iproute2)"; exit 77; }
command -v redis-server >/dev/null || { echo "netns_cluster: SKIP: no redis-server"; exit 77; }
tag=$$
net=10.$((100 + tag % 100)).$((tag / 100 % 250)).0
prefix=${net%.0}
bridge=rtbr$((tag % 100000))
nodes=(rt$tag-n0 rt$tag-n1)
addresses=("$prefix.10" "$prefix.11")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for n in "${nodes[@]}"; do ip netns pids "$n" 2>/dev/null | xargs -r kill -9 2>/dev/null || true; done
  for n in "${nodes[@]}"; do ip netns delete "$n" 2>/dev/null || true; done
  ip link delete "$bridge" 2>/dev/null || true
}
trap cleanup EXIT
if ! ip netns add "${nodes[0]}" 2>/dev/null; then
  echo "netns_cluster: SKIP: cannot create network namespaces here (ip netns add failed)"
  exit 77
fi
ip netns add "${nodes[1]}"
ip link add "$bridge" type bridge
ip link set "$bridge" up
for i in 0 1; do
  n=${nodes[$i]}
  ip link add "v$tag$i" type veth peer name eth0 netns "$n"
  ip link set "v$tag$i" master "$bridge" up
  ip -n "$n" addr add "${addresses[$i]}/24" dev eth0
  ip -n "$n" link set eth0 up
  ip -n "$n" link set lo up
done
echo "netns_cluster: nodes ${nodes[*]} at ${addresses[*]} on bridge $bridge"
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
