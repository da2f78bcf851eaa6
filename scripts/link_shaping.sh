# A link held to a rate with a token bucket (tc's tbf), sourced by scripts/netns_nodes.sh (the
# namespaces' veth pairs) and by docker/node_entrypoint.sh (a container's eth0).
#
#   source scripts/link_shaping.sh
#   shape_link eth0 1gbit || echo "$shape_link_why"
#   shape_link eth0 100mbit mynamespace           # the same inside a network namespace
#
# tbf because it is what this kernel has (netem, fq and cake are not built). RATE is tc's form:
# 100mbit, 1gbit, 10gbit. The burst is sized for RATE at a 1 ms tick, at least 64 KiB; the
# latency (100 ms) bounds the queue.

# Bytes a token bucket needs to pass RATE at a 1 ms tick, at least 64 KiB; 1 when RATE is not
# tc's form.
link_burst_bytes() {
  local rate=$1 number unit bits
  [[ $rate =~ ^([0-9]+)([kmg]?)bit$ ]] || return 1
  number=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2]}
  case "$unit" in
    k) bits=$((number * 1000)) ;;
    m) bits=$((number * 1000000)) ;;
    g) bits=$((number * 1000000000)) ;;
    *) bits=$number ;;
  esac
  local bytes=$((bits / 8 / 1000))
  [ "$bytes" -ge 65536 ] || bytes=65536
  echo "$bytes"
}

# shape_link DEVICE RATE [NETNS]: tbf at RATE on DEVICE's outgoing traffic (replacing its root
# qdisc); 1 with shape_link_why when RATE is malformed or tc refuses.
shape_link() {
  local device=$1 rate=$2 netns=${3:-} burst
  local in=()
  [ -z "$netns" ] || in=(-n "$netns")
  burst=$(link_burst_bytes "$rate") ||
    { shape_link_why="link rate '$rate': give tc's form, e.g. 100mbit, 1gbit, 10gbit"; return 1; }
  command -v tc >/dev/null || { shape_link_why="no tc to shape $device (apt-get install iproute2)"; return 1; }
  ip "${in[@]}" link set "$device" txqueuelen 1000 2>/dev/null || true
  tc "${in[@]}" qdisc replace dev "$device" root tbf rate "$rate" burst "$burst" latency 100ms 2>/dev/null ||
    { shape_link_why="tc cannot shape $device at $rate (tbf refused: needs CAP_NET_ADMIN and sch_tbf in the kernel)"; return 1; }
}
