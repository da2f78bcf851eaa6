# ringrun "nodes" for the elastic tests (sourced; needs $ringrun, $dir and $conf):
#   elastic_node NAME NODE_RANK RINGRUN_FLAGS... -- PROGRAM ARGS...   starts one in the background
#   kill_node NAME                  SIGKILL to all its processes (ringrun and workers)
#   expect_exit NAME CODE           waits (bounded) for its exit status
#   wait_for_line / expect_line NAME REGEX, accuracy NAME, expect_within_one_point A B, fail MESSAGE
# A script that defines place_node N (setting node_prefix, e.g. to "ip netns exec NS") runs
# node N elsewhere. Every node runs under `timeout`, so nothing outlives the test.
declare -A node_pid=()
node_prefix=()
fail() {
  echo "FAILED: $*"
  for f in "$dir"/*.log; do echo "== $f"; tail -n 40 "$f"; done
  exit 1
}
elastic_node() {
  local name=$1 rank=$2 flags=()
  shift 2
  while [ "$1" != "--" ]; do flags+=("$1"); shift; done
  shift
  if declare -F place_node >/dev/null; then place_node "$rank"; fi
  setsid "${node_prefix[@]}" timeout -s KILL 300 "$ringrun" --node_rank "$rank" --nproc_per_node 1 --use_env \
    --timeout 30 --monitor_interval 0.1 --rdzv_conf "$conf" "${flags[@]}" "$@" >"$dir/$name.log" 2>&1 &
  node_pid[$name]=$!
}
elastic_nodes() {  # elastic_nodes PREFIX COUNT FLAGS... -- COMMAND...: nodes PREFIX0.. at node ranks 0..COUNT-1
  local prefix=$1 count=$2 n
  shift 2
  for ((n = 0; n < count; n++)); do elastic_node "$prefix$n" "$n" "$@"; done
}
kill_node() {  # every process of the node: its session (setsid), ringrun and workers
  local pid=${node_pid[$1]}
  disown "$pid"  # killed on purpose: no job notice
  pkill -9 -s "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
}
expect_exit() {
  local rc=0
  wait "${node_pid[$1]}" || rc=$?
  [ "$rc" = "$2" ] || fail "$1 exited with $rc, expected $2"
}
wait_for_line() {
  for _ in $(seq 1200); do
    grep -q "$2" "$dir/$1.log" && return 0
    sleep 0.1
  done
  fail "$1 never printed '$2'"
}
expect_line() { grep -q -- "$2" "$dir/$1.log" || fail "$1 did not print '$2'"; }
accuracy() { grep -o 'Test accuracy: [0-9.]*' "$dir/$1.log" | tail -n 1 | cut -d' ' -f3; }
expect_within_one_point() {  # ACCURACY UNINTERRUPTED_ACCURACY
  awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01) }' ||
    fail "accuracy $1 after the node was replaced, $2 uninterrupted: more than 1 point apart"
}
