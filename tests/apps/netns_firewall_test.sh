#!/usr/bin/env bash
# The multi-host harness on a host whose firewall drops bridged frames, as Docker's daemon leaves
# it (br_netfilter on, iptables' FORWARD policy DROP): this test sets that up, checks that it
# really drops the nodes' traffic (without the harness's accept rule node 1 cannot reach node 0),
# that a harness which cannot add its rule says so in one line, and that with the rule two nodes
# train across the bridge; then it restores the policy and the sysctl it changed, and checks that
# no rule of the harness is left. Skips (77) without root, iptables or bridge netfilter.
#   netns_firewall_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
source_dir=$1
build_dir=$2
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (iptables, ip netns)"
command -v iptables >/dev/null || skip "no iptables (apt-get install iptables)"
bridge_nf=/proc/sys/net/bridge/bridge-nf-call-iptables
[ -e "$bridge_nf" ] || modprobe br_netfilter 2>/dev/null || true
[ -e "$bridge_nf" ] || skip "no bridge netfilter in this kernel (br_netfilter)"
policy=$(iptables -S FORWARD | awk '$1 == "-P" {print $3}')
[ -n "$policy" ] || skip "cannot read iptables' FORWARD policy"
call_iptables=$(cat "$bridge_nf")
rules_before=$(iptables -S FORWARD)
source "$source_dir/scripts/netns_nodes.sh"
restore() {
  netns_down
  iptables -P FORWARD "$policy"
  echo "$call_iptables" >"$bridge_nf"
}
trap restore EXIT
iptables -P FORWARD DROP
echo 1 >"$bridge_nf"
fail() { echo "FAILED: $*"; exit 1; }

# 1. A harness that cannot add its accept rule reports the firewall in one line.
iptables() { return 1; }
if netns_up fw 2; then fail "netns_up succeeded although the firewall drops the nodes' traffic"; fi
unset -f iptables
echo "without the accept rule: $netns_why"
[[ $netns_why == *"cannot reach"*"firewall drops bridged traffic"* ]] || fail "unexpected reason: $netns_why"
netns_down

# 2. With it the nodes reach each other; removing it shows the policy really drops their frames.
netns_up fw 2 || fail "netns_up: $netns_why"
rule=(FORWARD -i "$netns_bridge" -o "$netns_bridge" -j ACCEPT)
iptables -C "${rule[@]}" || fail "no accept rule for $netns_bridge"
iptables -D "${rule[@]}"
if netns_reachable "${netns_nodes[1]}" "${netns_addresses[0]}"; then
  fail "node 1 reached node 0 without the rule: the FORWARD policy does not apply here, the test proves nothing"
fi
iptables -I "${rule[@]}"
netns_reachable "${netns_nodes[1]}" "${netns_addresses[0]}" || fail "node 1 cannot reach node 0 with the rule"
echo "policy DROP: node 1 cannot reach node 0 without the rule, can with it"

# 3. Two nodes train across the bridge.
out=$(mktemp)
for n in 1 0; do
  ip netns exec "${netns_nodes[$n]}" env RINGTORCH_HOST_ID="fw-node$n" GLOO_SOCKET_IFNAME=eth0 \
    "$build_dir/apps/ringrun" --nnodes 2 --node_rank "$n" --nproc_per_node 1 --master_addr "${netns_addresses[0]}" \
    --master_port 29581 --use_env "$build_dir/apps/ringtrain" --dataset synthetic --model mlp --epochs 1 \
    --max-train-samples 1024 --threads 1 --log-interval 0 --timeout 60 >>"$out" 2>&1 &
done
wait
json=$(grep -o '{"device".*' "$out")
[ -n "$json" ] || { cat "$out"; fail "no final JSON line from rank 0"; }
rm -f "$out"
/usr/bin/python3 -c 'import json,sys; r=json.loads(sys.argv[1]); assert r["world_size"] == 2, r; assert len(set(r["parameter_checksums"])) == 1, r' \
  "$json" || fail "the job's result: $json"
echo "2 nodes trained across the bridge under FORWARD DROP"

# 4. netns_down removes the harness's rule; the trap then restores the policy and the sysctl.
netns_down
[ "$(iptables -S FORWARD | grep -v '^-P')" = "$(grep -v '^-P' <<<"$rules_before")" ] ||
  fail "rules left behind: $(iptables -S FORWARD)"
restore
trap - EXIT
[ "$(iptables -S FORWARD | awk '$1 == "-P" {print $3}')" = "$policy" ] && [ "$(cat "$bridge_nf")" = "$call_iptables" ] ||
  fail "the policy or the sysctl was not restored"
echo "restored: FORWARD policy $policy, bridge-nf-call-iptables $call_iptables, no rule left"
