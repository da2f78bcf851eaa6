#!/usr/bin/env bash
# The compose files without a Docker engine: docker-compose.yml and the GPU override load
# (`docker-compose config`); the override's node0 runs docker-compose.yml's command plus
# --device cuda on one reserved NVIDIA GPU (so the two files cannot drift apart); and
# scripts/compose/compose_nodes.py reads the cluster's shape and refuses files
# scripts/compose_cluster.sh cannot run, each with its own message.
#   compose_files_test.sh SOURCE_DIR
set -uo pipefail
source_dir=$1
command -v docker-compose >/dev/null || { echo "SKIP: docker-compose not installed"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
cd "$source_dir"
docker-compose -f docker-compose.yml config >"$work/base.yml" || fail "docker-compose.yml does not load"
docker-compose -f docker-compose.yml -f docker-compose.gpu.yml config >"$work/gpu.yml" || fail "docker-compose.gpu.yml does not load"
echo "docker-compose.yml and docker-compose.gpu.yml load"

/usr/bin/python3 - "$work/base.yml" "$work/gpu.yml" <<'PY' || exit 1
import sys, yaml
base = yaml.safe_load(open(sys.argv[1]))["services"]
gpu = yaml.safe_load(open(sys.argv[2]))["services"]
def fail(message):
    print("FAILED:", message); sys.exit(1)
if gpu["node0"]["command"] != base["node0"]["command"] + ["--device", "cuda"]:
    fail("docker-compose.gpu.yml's node0 command is not docker-compose.yml's plus --device cuda:\n"
         f"  {gpu['node0']['command']}\n  {base['node0']['command']}")
devices = gpu["node0"]["deploy"]["resources"]["reservations"]["devices"]
if devices != [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]:
    fail(f"node0's GPU reservation is {devices}")
for name in ("node1", "node2", "redis"):
    if gpu[name] != base[name]:
        fail(f"docker-compose.gpu.yml changes {name}")
if base["node1"].get("cpus") != 0.5:
    fail("node1 is not the node on half a CPU")
if any("image" not in s or "build" in s for s in base.values()):
    fail("a service of docker-compose.yml builds or pulls instead of using the ringtorch image")
print("the GPU override is docker-compose.yml's node0 + --device cuda + one NVIDIA GPU")
PY

shape=$(/usr/bin/python3 scripts/compose/compose_nodes.py <"$work/base.yml") || fail "compose_nodes.py refused docker-compose.yml: $shape"
[ "$shape" = "nodes_in_file=3 min_nodes=2 max_nodes=3 epochs=3 images=ringtorch:latest" ] || fail "read $shape"
echo "read: $shape"

# Edited files: each refused with what to change.
expect_refused() {
  local what=$1 pattern=$2 edit=$3 out
  /usr/bin/python3 -c "import sys, yaml; c = yaml.safe_load(open(sys.argv[1])); s = c['services']
$edit
yaml.safe_dump(c, sys.stdout)" "$work/base.yml" >"$work/edited.yml" || fail "editing for '$what'"
  if out=$(/usr/bin/python3 scripts/compose/compose_nodes.py <"$work/edited.yml"); then fail "$what: accepted ($out)"; fi
  [[ $out == *"$pattern"* ]] || fail "$what: said '$out', expected '*$pattern*'"
  echo "$what: $out"
}
expect_refused "a fourth node" "4 node services (node0..node3) but their ringrun says --nnodes 2:3" "s['node3'] = dict(s['node2'])"
expect_refused "a node missing in the middle" "node services are ['node0', 'node2']" "del s['node1']"
expect_refused "one node" "with N >= 2" "del s['node1']; del s['node2']"
expect_refused "no redis" "no service 'redis'" "del s['redis']"
expect_refused "different ranges" "different --nnodes" "s['node1']['command'] = [w.replace('2:3', '1:3') for w in s['node1']['command']]"
expect_refused "no --nnodes" "runs no ringrun --nnodes" "s['node2']['command'] = ['sleep', '1']"
echo "compose files: all checks passed"
