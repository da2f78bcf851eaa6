# The elastic test plan (torchelastic's), as functions of $store and place_node, for
# tests/apps/elastic_test.sh (one host, file://) and tests/apps/elastic_netns_test.sh (network
# namespaces, redis://). Sourced after elastic_nodes.sh; needs $ringtrain, $dir, $conf.
train=("$ringtrain" --model lenet --max-train-samples 12800 --batch-size 32 --epochs 3 --log-interval 0 --progress off
  --resume --checkpoint-every-steps 20)
inproc=("$ringtrain" --model lenet --max-train-samples 12800 --batch-size 32 --epochs 3 --log-interval 0 --progress off
  --elastic in-process --commit-every-steps 10 --grad-compression powersgd:2 --powersgd-start-step 5)

# --- (a) a node replaced ------------------------------------------------------------------------
case_replaced() {
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
  expect_within_one_point "$replaced" "$uninterrupted"
  echo "elastic$where (a): node 1 replaced: accuracy $replaced, uninterrupted $uninterrupted"
}

# --- (b) a node lost, not replaced --------------------------------------------------------------
case_lost() {
  elastic_nodes b 3 --nnodes 2:3 --max_restarts 1 --run_id shrink --rdzv_endpoint "$store" -- "${train[@]}" \
    --checkpoint-dir "$dir/shrink"
  wait_for_line b0 "Epoch \[1/3\]"
  kill_node b2
  expect_exit b0 0
  expect_exit b1 0
  expect_line b0 "generation 1: node 0 of 2, ranks 0..0 of world size 2, restart 1"
  expect_line b0 "resumed at epoch [0-9]* step [0-9]* with world size 2 (was 3)"
  expect_line b0 '"world_size":2'
  echo "elastic$where (b): node 2 lost: finished at world size 2 ($(grep -o 'resumed at epoch [0-9]* step [0-9]*' "$dir/b0.log"))"
}

# --- (c) a node joins a running job -------------------------------------------------------------
case_admitted() {
  elastic_nodes c 2 --nnodes 2:3 --run_id grow --rdzv_endpoint "$store" -- "${train[@]}" --checkpoint-dir "$dir/grow"
  wait_for_line c0 "Epoch \[1/3\]"
  elastic_node c2 2 --nnodes 2:3 --run_id grow --rdzv_endpoint "$store" -- "${train[@]}" --checkpoint-dir "$dir/grow"
  for n in 0 1 2; do expect_exit c$n 0; done
  # Node 0's agent sees the admission first, or its worker first loses node 1's (whose agent saw it
  # first and stopped its workers): either way the generation ended to admit, not as a restart.
  expect_line c0 "1 node waiting to join; restarting this node's workers to admit them (not counted as a restart)\|\
failed with .*; the generation had just ended to admit nodes (not counted as a restart)"
  expect_line c0 "resumed at epoch [0-9]* step [0-9]* with world size 3 (was 2)"
  expect_line c0 '"world_size":3'
  echo "elastic$where (c): a third node admitted: finished at world size 3"
}

# --- (d) too few nodes --------------------------------------------------------------------------
case_too_few() {
  elastic_node d0 0 --nnodes 2:3 --run_id alone --rdzv_endpoint "$store" --rdzv_conf join_timeout=3 -- sh -c 'exit 0'
  expect_exit d0 1
  expect_line d0 "rendezvous generation 0: 1 node (node '.*' (--node_rank 0)) of the 2 needed (--nnodes 2:3) after 3 s"
  # A generation that loses a node and does not get it back names it.
  elastic_nodes e 2 --nnodes 2 --max_restarts 3 --run_id lost --rdzv_endpoint "$store" --rdzv_conf join_timeout=4 \
    -- sh -c 'sleep 60'
  wait_for_line e0 "generation 0: node 0 of 2"
  kill_node e1
  expect_exit e0 1
  expect_line e0 "sent no heartbeat for 2 s .*: declared dead"
  expect_line e0 "missing since generation 0: node '.*' (--node_rank 1)"
  echo "elastic$where (d): $(grep -o 'rendezvous generation 1: .*' "$dir/e0.log" | cut -c1-160)..."
}

# --- (e) the restart budget ---------------------------------------------------------------------
case_budget() {
  elastic_nodes f 2 --nnodes 2 --max_restarts 1 --run_id budget --rdzv_endpoint "$store" -- \
    sh -c "sleep 0.5; [ \$RANK = 1 ] && exit 3; sleep 60"
  expect_exit f1 3
  expect_exit f0 1
  expect_line f0 "generation 0 ended: node 1: rank 1 .* failed with exit code 3; restarting this node's workers (restart 1 of 1)"
  expect_line f0 "stopping: node 1: rank 1 .* failed with exit code 3; no restarts left (--max_restarts 1)"
  echo "elastic$where (e): restart budget used up: $(grep -o 'stopping: .*' "$dir/f0.log" | cut -c1-120)"
}

# --- (f) a run id reused after a finished job ---------------------------------------------------
case_reused() {
  elastic_nodes g 2 --nnodes 2 --run_id plain --rdzv_endpoint "$store" -- sh -c 'echo rank $RANK of $WORLD_SIZE'
  expect_exit g0 0
  expect_exit g1 0
  expect_line g0 "generation 2: node 0 of 2"
  expect_line g1 "rank 1 of 2"
  echo "elastic$where (f): run id 'plain' reused after it finished: generation 2 ran (1 passed over)"
}

# --- in-process recovery (--elastic in-process, with PowerSGD): a node lost, then one admitted ---
case_in_process() {
  elastic_nodes i 3 --nnodes 2:3 --max_restarts 1 --run_id inproc --rdzv_endpoint "$store" -- "${inproc[@]}"
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
  # PowerSGD's state went through both recoveries (Q and step from the synced commit, each
  # survivor's own errors, zeros for the rank that joined) and the replicas still agree.
  expect_line i0 '"grad_compression":"powersgd:2"'
  grep -o '"parameter_checksums":\[[^]]*\]' "$dir/i0.log" | tail -n 1 |
    /usr/bin/python3 -c 'import json,sys; c=json.loads("{"+sys.stdin.read()+"}")["parameter_checksums"]; sys.exit(len(set(c)) != 1)' ||
    fail "the ranks' parameters differ after the in-process recoveries with PowerSGD"
  starts=$(grep -c '^\[ringrun node 0\] generation [0-9]*: node' "$dir/i0.log")
  [ "$starts" = 3 ] || fail "node 0 went through $starts generations, expected 3 (start, loss, admission)"
  # The dataset is read once per process: once means rank 0's process lived through both changes.
  reads=$(grep -c 'fashion-mnist train (60000 images' "$dir/i0.log")
  [ "$reads" = 1 ] || fail "node 0's worker read the dataset $reads times: it was restarted"
  lost=$(grep -o 'lost a peer at step [0-9]* (last commit: step [0-9]*)' "$dir/i0.log" | head -n 1)
  echo "elastic$where in-process: node 2 lost ($lost), then a node admitted: finished at world size 3 without restarting a worker"
}

# --- in-process recovery with local steps (--local-steps): a node lost inside a period ------------
# Every outer step commits, so the survivors go on from the last outer step's parameters. With
# --balance dynamic, so that the batch claims (batch_claims.h) start again over the new group.
case_in_process_local_steps() {
  local local_steps=("$ringtrain" --model lenet --max-train-samples 12800 --batch-size 32 --epochs 3 --log-interval 0
    --progress off --elastic in-process --local-steps 8 --balance dynamic)
  elastic_nodes l 3 --nnodes 2:3 --max_restarts 1 --run_id inproc_local --rdzv_endpoint "$store" -- "${local_steps[@]}"
  wait_for_line l0 "Test accuracy"
  kill_node l2
  for n in 0 1; do expect_exit l$n 0; done
  expect_line l0 "recovered in process at epoch [0-9]* step [0-9]* with world size 2"
  expect_line l0 '"world_size":2'
  expect_line l0 '"local_steps":{'
  expect_line l0 '"balance":"dynamic"'
  lost=$(grep -o 'lost a peer at step [0-9]* (last commit: step [0-9]*)' "$dir/l0.log" | head -n 1)
  [ -n "$lost" ] || fail "node 0 did not say where it lost its peer"
  read -r at committed < <(sed 's/lost a peer at step \([0-9]*\) (last commit: step \([0-9]*\))/\1 \2/' <<<"$lost")
  [ "$at" = "$committed" ] || fail "with --local-steps the last commit (step $committed) is not the last outer step ($at)"
  grep -o '"parameter_checksums":\[[^]]*\]' "$dir/l0.log" | tail -n 1 |
    /usr/bin/python3 -c 'import json,sys; c=json.loads("{"+sys.stdin.read()+"}")["parameter_checksums"]; sys.exit(len(set(c)) != 1)' ||
    fail "the ranks' parameters differ after the in-process recovery with local steps"
  echo "elastic$where in-process with local steps and --balance dynamic: node 2 lost ($lost): went on from the last outer step at world size 2"
}

# (a) to (f), in this order: (f) reuses the run id (a) finished.
torchelastic_plan() {
  case_replaced
  case_lost
  case_admitted
  case_too_few
  case_budget
  case_reused
}
