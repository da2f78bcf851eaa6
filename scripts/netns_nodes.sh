# Network namespaces as "nodes" on one bridge, each with its own address: sourced by
# scripts/netns_cluster.sh and tests/faults/fault_matrix.sh (needs root and iproute2).
#
#   source scripts/netns_nodes.sh
#   netns_up rt 2 || echo "$netns_why"   # nodes rt$$-n0, rt$$-n1 at 10.X.Y.10, .11
#   ip netns exec "${netns_nodes[1]}" ...
#   netns_down                            # kills what runs in them, removes them and the bridge
#
# Names carry this shell's PID, so parallel runs do not collide.

# netns_up PREFIX COUNT: sets netns_nodes, netns_addresses, netns_links (each node's veth on the
# bridge side, for `ip link set ... down`) and netns_bridge; 1 with netns_why when namespaces
# cannot be made here.
netns_up() {
  local prefix=$1 count=$2 tag=$$ i
  local net=10.$((100 + tag % 100)).$((tag / 100 % 250))
  netns_nodes=()
  netns_addresses=()
  netns_links=()
  netns_bridge=${prefix}br$((tag % 100000))
  for ((i = 0; i < count; i++)); do
    netns_nodes+=("$prefix$tag-n$i")
    netns_addresses+=("$net.$((10 + i))")
    netns_links+=("${prefix}v$tag$i")
  done
  [ "$(id -u)" = 0 ] || { netns_why="needs root for ip netns"; return 1; }
  command -v ip >/dev/null || { netns_why="no ip (apt-get install iproute2)"; return 1; }
  ip netns add "${netns_nodes[0]}" 2>/dev/null || { netns_why="cannot create network namespaces here (ip netns add failed)"; return 1; }
  for ((i = 1; i < count; i++)); do ip netns add "${netns_nodes[$i]}"; done
  ip link add "$netns_bridge" type bridge
  ip link set "$netns_bridge" up
  for ((i = 0; i < count; i++)); do
    ip link add "${netns_links[$i]}" type veth peer name eth0 netns "${netns_nodes[$i]}"
    ip link set "${netns_links[$i]}" master "$netns_bridge" up
    ip -n "${netns_nodes[$i]}" addr add "${netns_addresses[$i]}/24" dev eth0
    ip -n "${netns_nodes[$i]}" link set eth0 up
    ip -n "${netns_nodes[$i]}" link set lo up
  done
}

netns_down() {
  local n
  for n in "${netns_nodes[@]}"; do ip netns pids "$n" 2>/dev/null | xargs -r kill -9 2>/dev/null || true; done
  for n in "${netns_nodes[@]}"; do ip netns delete "$n" 2>/dev/null || true; done
  ip link delete "$netns_bridge" 2>/dev/null || true
  netns_nodes=()
  return 0
}
