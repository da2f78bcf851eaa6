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
#   in-process recovery: a node lost, then one admitted, without restarting a worker; with
#   --local-steps and --balance dynamic, a node lost inside a period: the survivors go on from
#   the last outer step.
# The same plan across network namespaces over redis://: tests/apps/elastic_netns_test.sh.
#   bash tests/apps/elastic_test.sh RINGRUN RINGTRAIN
set -euo pipefail
ringrun=$1
ringtrain=$2
source "$(dirname "$0")/fashion_mnist_or_skip.sh"
source "$(dirname "$0")/elastic_nodes.sh"
conf="join_timeout=60,last_call_timeout=2,keep_alive_interval=0.5,keep_alive_max_attempt=4,admit_interval=1"
source "$(dirname "$0")/elastic_cases.sh"
store="file://$dir/store"
where=""

torchelastic_plan
# --- the tcp:// store lives in node 0's ringrun: losing node 0 ends the job, saying so -----------
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
elastic_nodes t 2 --nnodes 2 --max_restarts 2 --master_port "$port" -- sh -c 'sleep 60'
wait_for_line t1 "generation 0: node 1 of 2"
kill_node t0
expect_exit t1 1
expect_line t1 "lost the store on node 0 (tcp://127.0.0.1:$port; has node 0's ringrun exited?)"
expect_line t1 "for a job that survives any node, use --rdzv_endpoint redis://HOST:PORT"
echo "elastic (tcp store): node 0 killed: node 1 exits 1 naming the lost store and redis://"

case_in_process
case_in_process_local_steps
echo "elastic: all cases passed"
