#!/usr/bin/env bash
# Elastic jobs across "machines": 3 network namespaces on a bridge, redis-server in the first,
# one ringrun per namespace (RINGTORCH_HOST_ID makes each a host of its own, so the workers talk
# over TCP between namespaces). A node is killed whole (every process in its namespace):
#   (a) --nnodes 2, --max_restarts 2: a replacement node started in its namespace: the job
#       finishes within 1 accuracy point of an uninterrupted run;
#   (b) --nnodes 2:3: not replaced: the other two finish at world size 2;
#   (b) with node 2's link cut instead (no connection reset): declared dead by its heartbeat;
#   and (b) again with --elastic in-process: the survivors go on without restarting.
# The redis:// store lives outside the killed nodes, so it survives them. The one-host cases
# (c-f, over file://) are in tests/apps/elastic_test.sh. Skips (77) without root, ip netns,
# redis-server or the dataset.
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
train=("$ringtrain" --model lenet --max-train-samples 12800 --batch-size 32 --epochs 3 --log-interval 0 --progress off
  --resume --checkpoint-every-steps 20)
inproc=("$ringtrain" --model lenet --max-train-samples 12800 --batch-size 32 --epochs 3 --log-interval 0 --progress off
  --elastic in-process --commit-every-steps 10)
in_ns() { node_prefix=(ip netns exec "${ns[$1]}" env RINGTORCH_HOST_ID="elastic-node$1"); }
# Node N runs in namespace N; Redis shares namespace 0 with node 0, which is never killed here.
kill_namespace() { ip netns pids "${ns[$1]}" | xargs -r kill -9; }

# --- (a) node 1 replaced ------------------------------------------------------------------------
for n in 0 1; do
  in_ns $n
  elastic_node a$n $n --nnodes 2 --max_restarts 2 --run_id plain --rdzv_endpoint "$store" -- "${train[@]}" \
    --checkpoint-dir "$dir/plain"
done
expect_exit a0 0
expect_exit a1 0
uninterrupted=$(accuracy a0)
for n in 0 1; do
  in_ns $n
  elastic_node k$n $n --nnodes 2 --max_restarts 2 --run_id replaced --rdzv_endpoint "$store" -- "${train[@]}" \
    --checkpoint-dir "$dir/replaced"
done
wait_for_line k0 "Epoch \[1/3\]"
disown "${node_pid[k1]}"
kill_namespace 1
in_ns 1
elastic_node k1b 1 --nnodes 2 --max_restarts 2 --run_id replaced --rdzv_endpoint "$store" -- "${train[@]}" \
  --checkpoint-dir "$dir/replaced"
expect_exit k0 0
expect_exit k1b 0
expect_line k0 "resumed at epoch [0-9]* step [0-9]* with world size 2 (was 2)"
replaced=$(accuracy k0)
awk -v a="$uninterrupted" -v b="$replaced" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01) }' ||
  fail "(a) accuracy $replaced after the replacement, $uninterrupted uninterrupted: more than 1 point apart"
echo "elastic across namespaces (a): node 1 killed and replaced: accuracy $replaced, uninterrupted $uninterrupted"

# --- (b) node 2 lost, not replaced --------------------------------------------------------------
for n in 0 1 2; do
  in_ns $n
  elastic_node b$n $n --nnodes 2:3 --max_restarts 1 --run_id shrink --rdzv_endpoint "$store" -- "${train[@]}" \
    --checkpoint-dir "$dir/shrink"
done
wait_for_line b0 "Epoch \[1/3\]"
disown "${node_pid[b2]}"
kill_namespace 2
expect_exit b0 0
expect_exit b1 0
expect_line b0 "generation 1: node 0 of 2, ranks 0..0 of world size 2, restart 1"
expect_line b0 "resumed at epoch [0-9]* step [0-9]* with world size 2 (was 3)"
expect_line b0 '"world_size":2'
echo "elastic across namespaces (b): node 2 killed: finished at world size 2"
# --- node 2's link cut: no connection resets, only its silence -----------------------------------
for n in 0 1 2; do
  in_ns $n
  elastic_node l$n $n --nnodes 2:3 --max_restarts 1 --run_id cut --rdzv_endpoint "$store" -- "${train[@]}" \
    --checkpoint-dir "$dir/cut"
done
wait_for_line l0 "Epoch \[1/3\]"
disown "${node_pid[l2]}"
ip link set "${netns_links[2]}" down
expect_exit l0 0
expect_exit l1 0
ip link set "${netns_links[2]}" up
kill_namespace 2
expect_line l0 "node '.*' (--node_rank 2) sent no heartbeat for 2 s .*: declared dead"
expect_line l0 "resumed at epoch [0-9]* step [0-9]* with world size 2 (was 3)"
echo "elastic across namespaces (cut link): node 2 declared dead by its heartbeat, finished at world size 2"

# --- in-process recovery: node 2 lost, the others go on in their processes ----------------------
for n in 0 1 2; do
  in_ns $n
  elastic_node i$n $n --nnodes 2:3 --max_restarts 1 --run_id inproc --rdzv_endpoint "$store" -- "${inproc[@]}"
done
wait_for_line i0 "Epoch \[1/3\]"
disown "${node_pid[i2]}"
kill_namespace 2
expect_exit i0 0
expect_exit i1 0
expect_line i0 "lost a peer at step [0-9]* (last commit: step [0-9]*), recovering in this process"
expect_line i0 "recovered in process at epoch [0-9]* step [0-9]* with world size 2"
expect_line i0 '"world_size":2'
reads=$(grep -c 'fashion-mnist train (60000 images' "$dir/i0.log")
[ "$reads" = 1 ] || fail "node 0's worker read the dataset $reads times: it was restarted"
echo "elastic across namespaces (in-process): node 2 killed: $(grep -o 'lost a peer at step [0-9]* (last commit: step [0-9]*)' "$dir/i0.log" | head -n 1), finished at world size 2"
echo "elastic across namespaces: all cases passed"
