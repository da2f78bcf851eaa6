# Network namespaces as "nodes" on one bridge, each with its own address: sourced by
# scripts/netns_cluster.sh, the benches and tests/faults/fault_matrix.sh (needs root and iproute2).
#
#   source scripts/netns_nodes.sh
#   netns_up rt 2 || echo "$netns_why"   # nodes rt$$-n0, rt$$-n1 at 10.X.Y.10, .11
#   netns_up rt 2 1gbit                  # the same, each node's link shaped to 1 Gbit/s both ways
#   ip netns exec "${netns_nodes[1]}" ...
#   netns_down                            # kills what runs in them, removes them and the bridge
#
# Names carry this shell's PID, so parallel runs do not collide.
#
# RATE (tc's units: 100mbit, 1gbit, 10gbit) shapes each node's link with a token bucket (tbf,
# scripts/link_shaping.sh) on both ends of its veth pair, so traffic leaving and entering the
# node is held to RATE.
#
# Frames between the nodes cross a Linux bridge. Where br_netfilter is loaded (Docker's daemon
# loads it) those frames go through iptables' FORWARD chain, whose policy Docker sets to DROP:
# the nodes then cannot reach each other and connections time out without a word. netns_up adds
# an accept rule scoped to its own bridge (removed by netns_down) and then checks that node 0
# answers node 1 before returning, so a host firewall that still drops the traffic is reported
# in one line instead of a job that times out.

source "$(dirname "${BASH_SOURCE[0]}")/link_shaping.sh"

# netns_up PREFIX COUNT [RATE]: sets netns_nodes, netns_addresses, netns_links (each node's veth
# on the bridge side, for `ip link set ... down`) and netns_bridge; 1 with netns_why when the
# namespaces cannot be made here or cannot reach each other.
netns_up() {
  local prefix=$1 count=$2 rate=${3:-} tag=$$ i
  local net=10.$((100 + tag % 100)).$((tag / 100 % 250))
  netns_nodes=()
  netns_addresses=()
  netns_links=()
  netns_bridge=${prefix}br$((tag % 100000))
  netns_forward_rule=0
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
    if [ -n "$rate" ]; then
      netns_shape "${netns_nodes[$i]}" "${netns_links[$i]}" "$rate" || return 1
    fi
  done
  # Bridged frames pass iptables only where br_netfilter is loaded; accept ours there.
  if [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ] && command -v iptables >/dev/null &&
    iptables -I FORWARD -i "$netns_bridge" -o "$netns_bridge" -j ACCEPT 2>/dev/null; then
    netns_forward_rule=1
  fi
  if [ "$count" -gt 1 ] && ! netns_reachable "${netns_nodes[1]}" "${netns_addresses[0]}"; then
    netns_why="node ${netns_nodes[1]} cannot reach ${netns_addresses[0]} across bridge $netns_bridge: the host's firewall drops bridged traffic (iptables FORWARD; Docker sets its policy to DROP) and no accept rule could be added"
    return 1
  fi
}

# netns_shape NODE HOST_SIDE_LINK RATE: tbf at RATE on both ends of the node's veth.
netns_shape() {
  local node=$1 link=$2 rate=$3
  shape_link eth0 "$rate" "$node" && shape_link "$link" "$rate" || { netns_why=$shape_link_why; return 1; }
}

# netns_reachable NODE ADDRESS: a TCP connection from NODE to a listener at ADDRESS (in node 0)
# within 3 s.
netns_reachable() {
  local from=$1 address=$2 port=47311
  ip netns exec "${netns_nodes[0]}" timeout 5 /usr/bin/python3 -c "
import socket; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('$address', $port)); s.listen(1); s.settimeout(4); s.accept()" 2>/dev/null &
  local listener=$!
  local ok=1 attempt
  for attempt in 1 2 3 4 5 6; do
    if ip netns exec "$from" timeout 1 /usr/bin/python3 -c "
import socket; socket.create_connection(('$address', $port), timeout=0.5)" 2>/dev/null; then
      ok=0
      break
    fi
    sleep 0.2
  done
  kill "$listener" 2>/dev/null
  wait "$listener" 2>/dev/null
  return $ok
}

netns_down() {
  local n
  for n in "${netns_nodes[@]}"; do ip netns pids "$n" 2>/dev/null | xargs -r kill -9 2>/dev/null || true; done
  for n in "${netns_nodes[@]}"; do ip netns delete "$n" 2>/dev/null || true; done
  if [ "${netns_forward_rule:-0}" = 1 ]; then
    iptables -D FORWARD -i "$netns_bridge" -o "$netns_bridge" -j ACCEPT 2>/dev/null || true
    netns_forward_rule=0
  fi
  ip link delete "$netns_bridge" 2>/dev/null || true
  netns_nodes=()
  return 0
}
