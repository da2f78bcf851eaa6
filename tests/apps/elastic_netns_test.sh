#!/usr/bin/env bash
# Elastic jobs across "machines": 3 network namespaces on a bridge, redis-server in the first,
# one ringrun per namespace (RINGTORCH_HOST_ID makes each a host of its own, so the workers talk
# over TCP between namespaces). The plan of tests/apps/elastic_test.sh (tests/apps/elastic_cases.sh:
# (a) a node killed whole and replaced, within 1 accuracy point of an uninterrupted run; (b) a
# node killed, not replaced; (c) a node admitted; (d) too few nodes; (e) the restart budget;
# (f) a run id reused; in-process recovery) over redis://, which lives outside the killed nodes,
# plus (b) with node 2's link cut instead (no connection reset): declared dead by its heartbeat.
# Skips (77) without root, ip netns, redis-server or the dataset.
#   sudo bash tests/apps/elastic_netns_test.sh RINGRUN RINGTRAIN
set -euo pipefail
ringrun=$1
ringtrain=$2
here=$(cd "$(dirname "$0")" && pwd)
source "$here/fashion_mnist_or_skip.sh"
source "$here/elastic_nodes.sh"
command -v redis-server >/dev/null || { echo "SKIP: no redis-server"; exit 77; }
source "$here/../../scripts/netns_nodes.sh"
trap 'netns_down; rm -rf "$dir"' EXIT
netns_up el 3 || { echo "SKIP: $netns_why"; exit 77; }
ns=("${netns_nodes[@]}")
addr=("${netns_addresses[@]}")
ip netns exec "${ns[0]}" redis-server --port 6379 --bind "${addr[0]}" --save "" --appendonly no --protected-mode no \
  --daemonize no >/dev/null 2>&1 &
disown
for _ in $(seq 50); do
  ip netns exec "${ns[1]}" bash -c "exec 3<>/dev/tcp/${addr[0]}/6379" 2>/dev/null && break
  sleep 0.1
done
store="redis://${addr[0]}:6379/0"
conf="join_timeout=60,last_call_timeout=2,keep_alive_interval=0.5,keep_alive_max_attempt=4,admit_interval=1"
# Node N runs in namespace N (its own host: RINGTORCH_HOST_ID); Redis shares namespace 0 with
# node 0, which these cases never kill.
place_node() { node_prefix=(ip netns exec "${ns[$1]}" env RINGTORCH_HOST_ID="elastic-node$1"); }
source "$here/elastic_cases.sh"
where=" across namespaces"

torchelastic_plan

# --- node 2's link cut: no connection resets, only its silence -----------------------------------
elastic_nodes l 3 --nnodes 2:3 --max_restarts 1 --run_id cut --rdzv_endpoint "$store" -- "${train[@]}" \
  --checkpoint-dir "$dir/cut"
wait_for_line l0 "Epoch \[1/3\]"
ip link set "${netns_links[2]}" down
expect_exit l0 0
expect_exit l1 0
ip link set "${netns_links[2]}" up
kill_node l2
expect_line l0 "node '.*' (--node_rank 2) sent no heartbeat for 2 s .*: declared dead"
expect_line l0 "resumed at epoch [0-9]* step [0-9]* with world size 2 (was 3)"
echo "elastic across namespaces (cut link): node 2 declared dead by its heartbeat, finished at world size 2"

case_in_process
echo "elastic across namespaces: all cases passed"
