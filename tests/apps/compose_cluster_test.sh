#!/usr/bin/env bash
# scripts/compose_cluster.sh on a real Docker engine (root): the full run (3 nodes, one on half a
# CPU, links at 1 Gbit/s, lenet 3 epochs) and a node killed after epoch 1 (the others go on at
# world size 2, the node is started again and rejoins, accuracy like the full run's), node0
# killed after epoch 2 and left dead (node1 becomes rank 0, the job ends at world size 2); then bad
# input, each refused in one line with a non-zero exit and no container or network left behind
# (`docker ps -a` and `docker network ls` before and after). Skips (77) without root, or where no
# Docker engine can be had (the script's own message says why).
#   compose_cluster_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
source_dir=$1
build_dir=$2
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAILED: $*"; exit 1; }
[ "$(id -u)" = 0 ] || skip "needs root (Docker's engine)"
script=$source_dir/scripts/compose_cluster.sh
work=$(mktemp -d)
project=ringtorch-test$$
source "$source_dir/scripts/compose/docker_engine.sh"
cleanup() {
  docker network rm "${project}_default" >/dev/null 2>&1
  [ -z "${listener:-}" ] || kill "$listener" 2>/dev/null
  engine_down >/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
engine_was_running=0
docker info >/dev/null 2>&1 && engine_was_running=1

# run NAME ARGS...: the script with ARGS, output in $work/NAME.log, its status in $code.
run() {
  local name=$1
  shift
  timeout 900 bash "$script" --build-dir "$build_dir" "$@" >"$work/$name.log" 2>&1
  code=$?
}
accuracy() { grep -o '"test_accuracy":[0-9.]*' "$1" | tail -n 1 | cut -d: -f2; }
final_line_of() { tail -n 1 "$1"; }

# 1. The full run.
run full
if [ $code -ne 0 ] && grep -qE "error: (no Docker Engine|dockerd did not come up)" "$work/full.log"; then
  skip "$(grep -oE 'error: .*' "$work/full.log" | head -n 1)"
fi
[ $code -eq 0 ] || { cat "$work/full.log"; fail "the full run exited $code"; }
for n in 0 1 2; do
  grep -q "^\[node$n\] \[ringrun node $n\] all workers succeeded" "$work/full.log" || fail "node$n's output or success missing"
  grep -q "^\[node$n\] ringtorch-node: node$n: eth0 shaped to 1gbit" "$work/full.log" || fail "node$n's link was not shaped"
done
grep -q "compose_cluster: .*node0 exit 0 node1 exit 0 node2 exit 0" "$work/full.log" || fail "no exit summary"
final_line_of "$work/full.log" | grep -q '^{.*"world_size":3' || fail "the last line is not rank 0's final JSON at world size 3"
full_accuracy=$(accuracy "$work/full.log")
echo "full run: 3 nodes, exit 0, accuracy $full_accuracy ($(grep -c '^\[node' "$work/full.log") lines of node output)"
if [ $engine_was_running = 0 ]; then
  docker info >/dev/null 2>&1 && fail "the dockerd the script started is still running"
  echo "the dockerd it started was stopped"
fi
# The rest runs on one engine that this test holds (and stops if it started it).
engine_up || skip "$engine_why"
containers_before=$(docker ps -aq | sort)
networks_before=$(docker network ls -q | sort)
nothing_left() {
  [ "$(docker ps -aq | sort)" = "$containers_before" ] || { docker ps -a; fail "$1: containers left behind"; }
  [ "$(docker network ls -q | sort)" = "$networks_before" ] || { docker network ls; fail "$1: networks left behind"; }
}

# 2. A node killed after epoch 1, started again.
run killed --kill-node 2 --after-epoch 1
[ $code -eq 0 ] || { cat "$work/killed.log"; fail "the run with a killed node exited $code"; }
grep -q "compose_cluster: .*killed node2 (docker kill) after rank 0 reported epoch 1" "$work/killed.log" || fail "no kill"
grep -q "compose_cluster: .*the other nodes go on at world size 2" "$work/killed.log" || fail "the others did not go on at world size 2"
# Epoch 1 or 2: see the race described at the left-dead run below.
grep -qE "recovered in process at epoch [12] step [0-9]+ with world size 2" "$work/killed.log" ||
  { cat "$work/killed.log"; fail "no in-process recovery at world size 2"; }
grep -q "compose_cluster: .*node2 rejoined: generation [0-9]*, world size 3" "$work/killed.log" || fail "node2 did not rejoin"
killed_accuracy=$(accuracy "$work/killed.log")
/usr/bin/python3 -c "import sys; sys.exit(abs($killed_accuracy - $full_accuracy) > 0.04)" ||
  fail "accuracy $killed_accuracy with a node killed against $full_accuracy (more than 4 points apart)"
echo "killed node: the others went on at world size 2, node2 rejoined, accuracy $killed_accuracy (full run $full_accuracy)"
nothing_left "the killed-node run"

# 3. Node 0 (rank 0's) killed and left dead: the job ends on the other two, node1's worker now
# rank 0 (its lines say so) and printing the final JSON.
run left-dead --kill-node 0 --after-epoch 2 --no-restart
[ $code -eq 0 ] || { cat "$work/left-dead.log"; fail "the run with a node left dead exited $code"; }
grep -q "compose_cluster: .*node0 killed node1 exit 0 node2 exit 0; node0 not started again (--no-restart)" "$work/left-dead.log" ||
  fail "no summary of a node left dead"
# The kill follows rank 0's epoch-2 line, which train() prints before it evaluates and commits
# the epoch's end: a kill in between leaves the survivors at the last commit inside epoch 2, a
# later one at epoch 3's start. Either is right; the check is that node1's worker is rank 0.
sed -n '/killed node0/,$p' "$work/left-dead.log" | grep -qE '^\[node1\] \[rank 0\]: recovered in process at epoch [23] step [0-9]+ with world size 2' || {
  cat "$work/left-dead.log"
  fail "node1's worker did not recover as rank 0"
}
final_line_of "$work/left-dead.log" | grep -q '^{.*"world_size":2' || fail "the job did not end at world size 2"
echo "node0 left dead: node1 took rank 0, the job ended at world size 2, accuracy $(accuracy "$work/left-dead.log")"
nothing_left "the left-dead run"

# 4. Bad input: one line, non-zero, nothing left.
expect_refused() {
  local what=$1 pattern=$2
  shift 2
  run refused "$@"
  [ $code -ne 0 ] || { cat "$work/refused.log"; fail "$what: exit 0"; }
  local said
  said=$(grep -E 'compose_cluster: error:' "$work/refused.log")
  [ "$(wc -l <<<"$said")" = 1 ] && [[ $said == *"$pattern"* ]] ||
    { cat "$work/refused.log"; fail "$what: expected one line with '$pattern'"; }
  nothing_left "$what"
  echo "$what: ${said#*error: }"
}
docker network create "${project}_default" >/dev/null
networks_before=$(docker network ls -q | sort)
expect_refused "a name taken" "compose project '$project' already has containers or a network" --project "$project"
docker network inspect "${project}_default" >/dev/null 2>&1 || fail "the script removed a network it did not make"
docker network rm "${project}_default" >/dev/null
networks_before=$(docker network ls -q | sort)

port=$(/usr/bin/python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
/usr/bin/python3 -c "import socket, time; s = socket.socket(); s.bind(('127.0.0.1', $port)); s.listen(1); time.sleep(300)" &
listener=$!
sleep 0.5
expect_refused "a port taken" "--redis-port $port is taken on this machine" --project "$project" --redis-port "$port"
kill "$listener"
listener=""

printf 'services:\n  redis:\n    command: ["--port", "notaport"]\n' >"$work/bad-redis.yml"
expect_refused "a Redis that does not come up" "Redis exited at start" --project "$project" \
  --file "$source_dir/docker-compose.yml" --file "$work/bad-redis.yml"

/usr/bin/python3 -c "import sys, yaml; c = yaml.safe_load(open(sys.argv[1])); c['services']['node3'] = dict(c['services']['node2'])
yaml.safe_dump(c, sys.stdout)" "$source_dir/docker-compose.yml" >"$work/four-nodes.yml"
expect_refused "four node services" "4 node services (node0..node3) but their ringrun says --nnodes 2:3" --project "$project" \
  --file "$work/four-nodes.yml"
expect_refused "too few nodes" "--nodes 1: the job needs at least 2" --project "$project" --nodes 1
expect_refused "a kill that stops the job" "leaves 1, below the file's --nnodes 2:3" --project "$project" --nodes 2 \
  --kill-node 1 --after-epoch 1
expect_refused "a bad link rate" "--link-rate '1gb'" --project "$project" --link-rate 1gb
expect_refused "an image that is not here" "image ringtorch-cuda:latest (in the compose files) is not on this machine" \
  --project "$project" --file "$source_dir/docker-compose.yml" --file "$source_dir/docker-compose.gpu.yml"
out=$(DOCKER_HOST=unix:///nonexistent/docker.sock bash "$script" --build-dir "$build_dir" 2>&1)
code=$?
[ $code -ne 0 ] && [[ $out == *"no Docker Engine answers at DOCKER_HOST=unix:///nonexistent/docker.sock"* ]] ||
  fail "an engine that is not there: exit $code: $out"
nothing_left "no engine at DOCKER_HOST"
echo "no engine at DOCKER_HOST: ${out#*error: }"
if command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups test -r "$script"; then
  out=$(setpriv --reuid=65534 --regid=65534 --clear-groups bash "$script" --build-dir "$build_dir" 2>&1)
  code=$?
  [ $code -ne 0 ] && [[ $out == *"needs root"* ]] || fail "without root: exit $code: $out"
  nothing_left "without root"
  echo "without root: ${out#*error: }"
fi
echo "compose cluster: all checks passed"
