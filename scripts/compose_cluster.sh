#!/usr/bin/env bash
# docker-compose.yml for real: a Redis and N node containers on Docker's engine, offline, each
# node's link shaped, one node on half a CPU; optionally one node killed and started again.
# Root; installs docker.io and starts dockerd when they are missing (and stops only what it
# started). Reference and a run's output: docs/cluster.md.
#
#   sudo bash scripts/compose_cluster.sh [--nodes N] [--link-rate RATE|off] [--kill-node K --after-epoch E
#        [--no-restart]] [--keep] [--project NAME] [--file FILE]... [--redis-port PORT] [--build-dir DIR] [--timeout SECONDS]
#
# Prints every node's output prefixed with its name, then each node's exit status, and ends with
# rank 0's final JSON line. Exit 0 only when every node's workers succeeded (a node killed on
# purpose counts by its second life, when it had one). Everything it made is removed at the end
# unless --keep: containers, network, the dockerd it started; images stay, for the next run.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/.." && pwd)
source "$here/link_shaping.sh"
source "$here/compose/docker_engine.sh"
source "$here/compose/runtime_image.sh"

image=ringtorch:latest
base=debian:12

usage() {
  sed -n '2,/^set /{/^set /d;p}' "$0" | sed 's/^# \{0,1\}//'
  cat <<'EOF'

  --nodes N           node services to run, node0..nodeN-1 (default: all the file has)
  --link-rate RATE    tc's form (100mbit, 1gbit) or off; sets LINK_RATE (default: the file's, 1gbit)
  --kill-node K       docker kill nodeK once rank 0 reports epoch --after-epoch E; the others go on
  --after-epoch E     without it, and nodeK is started again at once to rejoin (docs/cluster.md)
  --no-restart        with --kill-node: leave nodeK dead; the job ends at one node fewer
  --keep              leave the cluster (and a dockerd started here) running at the end
  --project NAME      compose project name (default ringtorch-cluster)
  --file FILE         compose file, repeatable (default docker-compose.yml; add docker-compose.gpu.yml)
  --redis-port PORT   publish the cluster's Redis on 127.0.0.1:PORT (to watch the rendezvous)
  --build-dir DIR     the build to install into the image (default build)
  --timeout SECONDS   the whole job's limit once the nodes start (default 1200)
EOF
}

# Our lines carry the seconds since the nodes started, to read beside theirs.
say() { echo "compose_cluster:${started_at:+ [$((SECONDS - started_at)) s]} $*"; }
# One line, exit 1 (the EXIT trap then takes down what was made).
die() {
  echo "compose_cluster: error: $*" >&2
  exit 1
}

nodes="" rate="" kill_node="" after_epoch="" restart=1 keep=0 project=ringtorch-cluster files=() redis_port=""
build_dir=$source_dir/build timeout_s=1200
while [ $# -gt 0 ]; do
  flag=$1 value=""
  case "$flag" in
    --*=*) value=${flag#*=} flag=${flag%%=*} ;;
    --keep | --no-restart | -h | --help) ;;
    --*)
      [ $# -ge 2 ] || die "$flag needs a value (--help)"
      value=$2
      shift
      ;;
  esac
  shift
  case "${flag//_/-}" in
    --nodes) nodes=$value ;;
    --link-rate) rate=$value ;;
    --kill-node) kill_node=$value ;;
    --after-epoch) after_epoch=$value ;;
    --keep) keep=1 ;;
    --no-restart) restart=0 ;;
    --project) project=$value ;;
    --file) files+=("$value") ;;
    --redis-port) redis_port=$value ;;
    --build-dir) build_dir=$value ;;
    --timeout) timeout_s=$value ;;
    -h | --help) usage; exit 0 ;;
    *) echo "compose_cluster: error: unknown argument $flag (--help)" >&2; exit 2 ;;
  esac
done
[ ${#files[@]} -gt 0 ] || files=("$source_dir/docker-compose.yml")

# ---- Input that needs nothing but this machine -------------------------------------------------
is_count() { [[ $1 =~ ^[0-9]+$ ]]; }
[ -z "$nodes" ] || is_count "$nodes" || die "--nodes '$nodes': give a whole number of nodes"
[ -z "$kill_node" ] || is_count "$kill_node" || die "--kill-node '$kill_node': give a node number (2 for node2)"
[ -z "$after_epoch" ] || { is_count "$after_epoch" && [ "$after_epoch" -ge 1 ]; } || die "--after-epoch '$after_epoch': give an epoch, 1 or more"
if [ -n "$kill_node" ] && [ -z "$after_epoch" ]; then die "--kill-node needs --after-epoch E (the epoch after which to kill it)"; fi
if [ -z "$kill_node" ] && [ -n "$after_epoch" ]; then die "--after-epoch needs --kill-node K (the node to kill)"; fi
if [ -z "$kill_node" ] && [ "$restart" = 0 ]; then die "--no-restart goes with --kill-node K --after-epoch E"; fi
{ is_count "$timeout_s" && [ "$timeout_s" -ge 1 ]; } || die "--timeout '$timeout_s': give seconds, 1 or more"
[ -z "$rate" ] || [ "$rate" = off ] || link_burst_bytes "$rate" >/dev/null ||
  die "--link-rate '$rate': give tc's form (100mbit, 1gbit, 10gbit) or off"
[[ $project =~ ^[a-z0-9][a-z0-9_-]*$ ]] || die "--project '$project': lower-case letters, digits, - and _"
if [ -n "$redis_port" ]; then
  { is_count "$redis_port" && [ "$redis_port" -ge 1 ] && [ "$redis_port" -le 65535 ]; } || die "--redis-port '$redis_port': give a port, 1 to 65535"
fi
[ "$(id -u)" = 0 ] || die "needs root (it runs Docker's engine, and its nodes shape their links): run it with sudo"
for f in "${files[@]}"; do [ -f "$f" ] || die "--file $f: no such file"; done
[ -x "$build_dir/apps/ringtrain" ] && [ -x "$build_dir/apps/ringrun" ] ||
  die "no ringtorch build in $build_dir (apps/ringtrain, apps/ringrun): run bash scripts/setup.sh first, or give --build-dir"
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
  die "no Fashion-MNIST in /usr/share/datasets/fashion-mnist (the nodes mount it): apt-get install dataset-fashion-mnist"

# ---- The compose files (no engine needed), then Docker's engine -------------------------------
work=$(mktemp -d /var/tmp/ringtorch-cluster.XXXXXX)
scratch_dir=$work
trap 'engine_down; rm -rf --one-file-system "$work"' EXIT
compose_client_ready || die "$engine_why"
file_args=()
for f in "${files[@]}"; do file_args+=(-f "$f"); done
if [ -n "$redis_port" ]; then
  # Publishing a port is an override of our own, not an edit of the user's file.
  printf 'services:\n  redis:\n    ports: ["127.0.0.1:%s:6379"]\n' "$redis_port" >"$work/redis-port.yml"
  file_args+=(-f "$work/redis-port.yml")
fi
[ -z "$rate" ] || export LINK_RATE=$rate
# Every call into the engine is bounded: a daemon that stops answering ends the run, said.
cluster() { timeout 300 "${compose[@]}" -p "$project" "${file_args[@]}" "$@"; }
config=$(cluster config 2>"$work/config.err") || die "the compose files do not load: $(tail -n 1 "$work/config.err")"
shape=$(/usr/bin/python3 "$here/compose/compose_nodes.py" <<<"$config" 2>"$work/shape.err") ||
  die "${shape:-reading the compose configuration failed: $(tail -n 1 "$work/shape.err")}"
eval "$shape"
nodes=${nodes:-$nodes_in_file}
[ "$nodes" -le "$nodes_in_file" ] || die "--nodes $nodes: the compose file has $nodes_in_file node services (node0..node$((nodes_in_file - 1)))"
[ "$nodes" -ge "$min_nodes" ] || die "--nodes $nodes: the job needs at least $min_nodes (the file's ringrun --nnodes $min_nodes:$max_nodes)"
if [ -n "$kill_node" ]; then
  [ "$kill_node" -lt "$nodes" ] || die "--kill-node $kill_node: the nodes are node0..node$((nodes - 1))"
  [ $((nodes - 1)) -ge "$min_nodes" ] ||
    die "--kill-node with $nodes nodes leaves $((nodes - 1)), below the file's --nnodes $min_nodes:$max_nodes: the job would stop; run more nodes"
  [[ $epochs =~ ^[0-9]+$ ]] || die "--after-epoch: node0's command gives no --epochs to count against"
  [ "$after_epoch" -lt "$epochs" ] || die "--after-epoch $after_epoch: the job trains $epochs epochs; kill the node after epoch $((epochs - 1)) or earlier"
fi
node_services=()
for ((i = 0; i < nodes; i++)); do node_services+=("node$i"); done

engine_up || die "$engine_why"
down_hint="$(printf '%s ' "${compose[@]}")-p $project$(printf ' -f %s' "${files[@]}") down"
taken=$( (docker ps -aq --filter "label=com.docker.compose.project=$project"
  docker network ls -q --filter "label=com.docker.compose.project=$project"
  docker network ls -q --filter "name=^${project}_default$") | sort -u)
[ -z "$taken" ] || die "compose project '$project' already has containers or a network here (a run with --keep?): remove them with: $down_hint, or give --project ANOTHER"
if [ -n "$redis_port" ] && [ -n "$(ss -Hltn "sport = :$redis_port" 2>/dev/null)" ]; then
  die "--redis-port $redis_port is taken on this machine: $(ss -Hltnp "sport = :$redis_port" | awk '{print $NF; exit}'); give another"
fi

base_image_ready "$base" || die "$engine_why"
runtime_image_build "$build_dir" "$source_dir" "$image" "$base" || die "$runtime_image_why"
for other in $images; do
  [ "$other" = "$image" ] || docker image inspect "$other" >/dev/null 2>&1 ||
    die "image $other (in the compose files) is not on this machine: build or load it first (docker-compose.gpu.yml: RINGTORCH_GPU_IMAGE)"
done

# ---- From here on, what was made is taken down on every exit -----------------------------------
followers=()
teardown() {
  for p in "${followers[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ "$keep" = 1 ]; then
    say "--keep: the cluster stays; remove it with: $down_hint"
    engine_started=0
  else
    cluster down -v --remove-orphans -t 5 >"$work/down.log" 2>&1 || say "docker-compose down failed: $(tail -n 1 "$work/down.log")"
  fi
  engine_down
  rm -rf --one-file-system "$work"
}
trap teardown EXIT
trap 'say "interrupted"; exit 130' INT TERM

# SERVICE's container, by the labels docker-compose 1.29 and `docker compose` v2 both set (their
# `ps -q` differ: v2 lists only running containers). Looked up once: `docker start` keeps the id.
declare -A container_ids=()
container_of() {
  local service=$1
  if [ -z "${container_ids[$service]:-}" ]; then
    container_ids[$service]=$(docker ps -aq --filter "label=com.docker.compose.project=$project" \
      --filter "label=com.docker.compose.service=$service" | head -n 1)
  fi
  echo "${container_ids[$service]}"
}
running() { [ "$(docker inspect -f '{{.State.Running}}' "$1" 2>/dev/null)" = true ]; }

# follow SERVICE [SINCE]: its output, prefixed, on ours; unprefixed in $work/SERVICE.log to read.
# The pid kept is docker logs' own: killing it ends the tee and sed behind it.
follow() {
  local service=$1 since=${2:-}
  docker logs -f ${since:+--since "$since"} "$(container_of "$service")" \
    > >(tee -a "$work/$service.log" | sed -u "s/^/[$service] /") 2>&1 &
  followers+=($!)
}

say "project $project: redis + ${node_services[*]} from $image${rate:+, links at $rate}"
cluster up -d --no-build redis >"$work/up.log" 2>&1 || die "starting redis: $(tail -n 1 "$work/up.log")"
redis=$(container_of redis)
for ((i = 0; i < 60; i++)); do
  [ "$(timeout 5 docker exec "$redis" redis-cli ping 2>/dev/null)" = PONG ] && break
  running "$redis" || break
  sleep 0.5
done
if [ "$(timeout 5 docker exec "$redis" redis-cli ping 2>/dev/null)" != PONG ]; then
  running "$redis" && when="did not answer within 30 s" || when="exited at start"
  die "Redis $when: $(docker logs "$redis" 2>&1 | tail -n 1); fix the redis service of the compose file"
fi
cluster up -d --no-build --no-deps "${node_services[@]}" >"$work/up.log" 2>&1 || die "starting the nodes: $(tail -n 1 "$work/up.log")"
for s in "${node_services[@]}"; do follow "$s"; done
started_at=$SECONDS
deadline=$((SECONDS + timeout_s))

any_node_running() {
  local s
  for s in "${node_services[@]}"; do running "$(container_of "$s")" && return 0; done
  return 1
}
# lines PATTERN: matching lines of every node's output so far.
lines() { cat "$work"/node*.log 2>/dev/null | grep -E "$1"; }
# wait_for PATTERN AFTER: until more than AFTER lines match (or no node runs, or the deadline).
wait_for() {
  while [ "$(lines "$1" | wc -l)" -le "$2" ]; do
    any_node_running && [ $SECONDS -lt $deadline ] || return 1
    sleep 0.5
  done
}

rejoin=""
if [ -n "$kill_node" ]; then
  victim=node$kill_node
  wait_for "^\[rank 0\]: Rank 0, Epoch \[$after_epoch/" 0 || die "rank 0 never reported epoch $after_epoch (the nodes stopped, or --timeout $timeout_s passed: their output is above)"
  smaller=$(lines "world size $((nodes - 1))" | wc -l)
  timeout 30 docker kill "$(container_of "$victim")" >/dev/null || die "docker kill $victim failed"
  say "killed $victim (docker kill) after rank 0 reported epoch $after_epoch"
  wait_for "world size $((nodes - 1))" "$smaller" || die "the other nodes did not go on at world size $((nodes - 1)) (they stopped, or --timeout $timeout_s passed: their output is above)"
  say "the other nodes go on at world size $((nodes - 1))"
  if [ "$restart" = 1 ]; then
    # At once: joining takes seconds (a container, ringrun, the next commit of the others), and a
    # node that arrives after the job's last step never runs.
    full=$(lines "world size $nodes" | wc -l)
    echo "--- started again ---" >>"$work/$victim.log"
    since=$(date +%s)
    timeout 60 docker start "$(container_of "$victim")" >/dev/null || die "docker start $victim failed"
    follow "$victim" "$since"
    say "started $victim again"
    if wait_for "world size $nodes" "$full"; then
      rejoin="$victim rejoined: $(lines "generation [0-9]+: .*world size $nodes" | tail -n 1 | grep -o 'generation [0-9]*'), world size $nodes"
    else
      rejoin="$victim did not rejoin: $(tail -n 1 "$work/$victim.log")"
    fi
  else
    rejoin="$victim not started again (--no-restart): the job ends at world size $((nodes - 1))"
  fi
  say "$rejoin"
fi

while any_node_running; do
  [ $SECONDS -lt $deadline ] || die "the job did not finish within $timeout_s s (--timeout): stopping it"
  sleep 1
done
for s in "${node_services[@]}"; do
  state=$(docker inspect -f '{{.State.Status}}' "$(container_of "$s")" 2>&1)
  [ "$state" = exited ] || die "$s is '$state', not exited, after the job (docker inspect)"
done
sleep 1 # the last lines through docker logs
for p in "${followers[@]}"; do kill "$p" 2>/dev/null; done
followers=()

status=0
summary=()
for s in "${node_services[@]}"; do
  code=$(docker inspect -f '{{.State.ExitCode}}' "$(container_of "$s")")
  if [ "$s" = "node$kill_node" ] && [ "$restart" = 0 ]; then
    summary+=("$s killed")
  else
    summary+=("$s exit $code")
    [ "$code" = 0 ] || status=1
  fi
done
final=$(lines '^\[rank 0\]: \{' | tail -n 1 | sed 's/^\[rank 0\]: //')
say "${summary[*]}${rejoin:+; $rejoin}"
[ -n "$final" ] || { say "rank 0 printed no final JSON line"; status=1; }
teardown
trap - EXIT
[ -z "$final" ] || echo "$final"
exit $status
