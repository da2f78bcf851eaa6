#!/usr/bin/env bash
# Elastic jobs on one host (docs/launcher.md, "Elastic jobs"): ringrun nodes rendezvousing
# through a file:// store, ringtrain resuming from its newest checkpoint with the new world
# size. torchelastic's test plan:
#   (a) --nnodes 2, --max_restarts 2: node 1 killed whole, a replacement started: the job
#       finishes within 1 accuracy point of an uninterrupted run;
#   (b) --nnodes 2:3: node 2 killed, not replaced: the others finish at world size 2;
#   (c) 2 nodes running, a third joins: admitted, the job finishes at world size 3;
#   (d) fewer than MIN nodes past the join timeout: an error naming the missing node, exit 1;
#   (e) the restart budget used up: a clear error;
#   (f) a run id reused after a finished job: the new job runs, two generations on;
#   node 0 hosting a tcp:// store killed: the other ends, naming the store and redis://;
#   in-process recovery: a node lost, then one admitted, without restarting a worker.
# The same plan across network namespaces over redis://: tests/apps/elastic_netns_test.sh.
#   bash tests/apps/elastic_test.sh RINGRUN RINGTRAIN
set -euo pipefail
ringrun=$1
ringtrain=$2
source "$(dirname "$0")/fashion_mnist_or_skip.sh"
source "$(dirname "$0")/elastic_nodes.sh"

conf="join_timeout=60,last_call_timeout=2,keep_alive_interval=0.5,keep_alive_max_attempt=4,admit_interval=1"
train=("$ringtrain" --model lenet --max-train-samples 12800 --batch-size 32 --epochs 3 --log-interval 0 --progress off
  --resume --checkpoint-every-steps 20)

# --- (a) a node replaced ------------------------------------------------------------------------
store="file://$dir/store"
elastic_node a0 0 --nnodes 2 --max_restarts 2 --run_id plain --rdzv_endpoint "$store" -- "${train[@]}" --checkpoint-dir "$dir/plain"
elastic_node a1 1 --nnodes 2 --max_restarts 2 --run_id plain --rdzv_endpoint "$store" -- "${train[@]}" --checkpoint-dir "$dir/plain"
expect_exit a0 0
expect_exit a1 0
uninterrupted=$(accuracy a0)
elastic_node k0 0 --nnodes 2 --max_restarts 2 --run_id replaced --rdzv_endpoint "$store" -- "${train[@]}" --checkpoint-dir "$dir/replaced"
elastic_node k1 1 --nnodes 2 --max_restarts 2 --run_id replaced --rdzv_endpoint "$store" -- "${train[@]}" --checkpoint-dir "$dir/replaced"
wait_for_line k0 "Epoch \[1/3\]"
kill_node k1
elastic_node k1b 1 --nnodes 2 --max_restarts 2 --run_id replaced --rdzv_endpoint "$store" -- "${train[@]}" --checkpoint-dir "$dir/replaced"
expect_exit k0 0
expect_exit k1b 0
expect_line k0 "resumed at epoch [0-9]* step [0-9]* with world size 2 (was 2)"
replaced=$(accuracy k0)
awk -v a="$uninterrupted" -v b="$replaced" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01) }' ||
  fail "(a) accuracy $replaced after the replacement, $uninterrupted uninterrupted: more than 1 point apart"
echo "elastic (a): node 1 replaced: accuracy $replaced, uninterrupted $uninterrupted"

# --- (b) a node lost, not replaced --------------------------------------------------------------
for n in 0 1 2; do
  elastic_node b$n $n --nnodes 2:3 --max_restarts 1 --run_id shrink --rdzv_endpoint "$store" -- "${train[@]}" \
    --checkpoint-dir "$dir/shrink"
done
wait_for_line b0 "Epoch \[1/3\]"
kill_node b2
expect_exit b0 0
expect_exit b1 0
expect_line b0 "generation 1: node 0 of 2, ranks 0..0 of world size 2, restart 1"
expect_line b0 "resumed at epoch [0-9]* step [0-9]* with world size 2 (was 3)"
expect_line b0 '"world_size":2'
echo "elastic (b): node 2 lost: finished at world size 2 ($(grep -o 'resumed at epoch [0-9]* step [0-9]*' "$dir/b0.log"))"

# --- (c) a node joins a running job -------------------------------------------------------------
for n in 0 1; do
  elastic_node c$n $n --nnodes 2:3 --run_id grow --rdzv_endpoint "$store" -- "${train[@]}" --checkpoint-dir "$dir/grow"
done
wait_for_line c0 "Epoch \[1/3\]"
elastic_node c2 2 --nnodes 2:3 --run_id grow --rdzv_endpoint "$store" -- "${train[@]}" --checkpoint-dir "$dir/grow"
for n in 0 1 2; do expect_exit c$n 0; done
expect_line c0 "1 node waiting to join; restarting this node's workers to admit them (not counted as a restart)"
expect_line c0 "resumed at epoch [0-9]* step [0-9]* with world size 3 (was 2)"
expect_line c0 '"world_size":3'
echo "elastic (c): a third node admitted: finished at world size 3"

# --- (d) too few nodes --------------------------------------------------------------------------
elastic_node d0 0 --nnodes 2:3 --run_id alone --rdzv_endpoint "$store" --rdzv_conf join_timeout=3 -- sh -c 'exit 0'
expect_exit d0 1
expect_line d0 "rendezvous generation 0: 1 node (node '.*' (--node_rank 0)) of the 2 needed (--nnodes 2:3) after 3 s"
# A generation that loses a node and does not get it back names it.
for n in 0 1; do
  elastic_node e$n $n --nnodes 2 --max_restarts 3 --run_id lost --rdzv_endpoint "$store" --rdzv_conf join_timeout=4 \
    -- sh -c 'sleep 60'
done
wait_for_line e0 "generation 0: node 0 of 2"
kill_node e1
expect_exit e0 1
expect_line e0 "sent no heartbeat for 2 s .*: declared dead"
expect_line e0 "missing since generation 0: node '.*' (--node_rank 1)"
echo "elastic (d): $(grep -o 'rendezvous generation 1: .*' "$dir/e0.log" | cut -c1-160)..."

# --- (e) the restart budget ---------------------------------------------------------------------
for n in 0 1; do
  elastic_node f$n $n --nnodes 2 --max_restarts 1 --run_id budget --rdzv_endpoint "$store" -- \
    sh -c "sleep 0.5; [ \$RANK = 1 ] && exit 3; sleep 60"
done
expect_exit f1 3
expect_exit f0 1
expect_line f0 "generation 0 ended: node 1: rank 1 .* failed with exit code 3; restarting this node's workers (restart 1 of 1)"
expect_line f0 "stopping: node 1: rank 1 .* failed with exit code 3; no restarts left (--max_restarts 1)"
echo "elastic (e): restart budget used up: $(grep -o 'stopping: .*' "$dir/f0.log" | cut -c1-120)"

# --- (f) a run id reused after a finished job ---------------------------------------------------
for n in 0 1; do
  elastic_node g$n $n --nnodes 2 --run_id plain --rdzv_endpoint "$store" -- sh -c 'echo rank $RANK of $WORLD_SIZE'
done
expect_exit g0 0
expect_exit g1 0
expect_line g0 "generation 2: node 0 of 2"
expect_line g1 "rank 1 of 2"
echo "elastic (f): run id 'plain' reused after it finished: generation 2 ran (1 passed over)"
# --- the tcp:// store lives in node 0's ringrun: losing node 0 ends the job, saying so -----------
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for n in 0 1; do
  elastic_node t$n $n --nnodes 2 --max_restarts 2 --master_port "$port" -- sh -c 'sleep 60'
done
wait_for_line t1 "generation 0: node 1 of 2"
kill_node t0
expect_exit t1 1
expect_line t1 "lost the store on node 0 (tcp://127.0.0.1:$port; has node 0's ringrun exited?)"
expect_line t1 "for a job that survives any node, use --rdzv_endpoint redis://HOST:PORT"
echo "elastic (tcp store): node 0 killed: node 1 exits 1 naming the lost store and redis://"

# --- in-process recovery (--elastic in-process): a node lost, then one admitted -----------------
inproc=("$ringtrain" --model lenet --max-train-samples 12800 --batch-size 32 --epochs 3 --log-interval 0 --progress off
  --elastic in-process --commit-every-steps 10)
for n in 0 1 2; do
  elastic_node i$n $n --nnodes 2:3 --max_restarts 1 --run_id inproc --rdzv_endpoint "$store" -- "${inproc[@]}"
done
wait_for_line i0 "Epoch \[1/3\]"
kill_node i2
wait_for_line i0 "recovered in process at epoch [0-9]* step [0-9]* with world size 2"
elastic_node i3 2 --nnodes 2:3 --max_restarts 1 --run_id inproc --rdzv_endpoint "$store" -- "${inproc[@]}"
for n in 0 1 3; do expect_exit i$n 0; done
expect_line i0 "lost a peer at step [0-9]* (last commit: step [0-9]*), recovering in this process"
expect_line i0 "the workers recover in their processes (--elastic in-process)"
expect_line i0 "1 node waiting to join"
expect_line i0 "recovered in process at epoch [0-9]* step [0-9]* with world size 3"
expect_line i0 '"world_size":3'
starts=$(grep -c '^\[ringrun node 0\] generation [0-9]*: node' "$dir/i0.log")
[ "$starts" = 3 ] || fail "node 0 went through $starts generations, expected 3 (start, loss, admission)"
# The dataset is read once per process: once means rank 0's process lived through both changes.
reads=$(grep -c 'fashion-mnist train (60000 images' "$dir/i0.log")
[ "$reads" = 1 ] || fail "node 0's worker read the dataset $reads times: it was restarted"
lost=$(grep -o 'lost a peer at step [0-9]* (last commit: step [0-9]*)' "$dir/i0.log" | head -n 1)
echo "elastic in-process: node 2 lost ($lost), then a node admitted: finished at world size 3 without restarting a worker"
echo "elastic: all cases passed"
