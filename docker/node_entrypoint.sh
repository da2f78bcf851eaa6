#!/usr/bin/env bash
# Entrypoint of the ringtorch image's cluster nodes (docker-compose.yml): holds this container's
# link to LINK_RATE, then runs the container's command.
#
# tbf on eth0 shapes what leaves the node; what enters it left another node through that node's
# shaped eth0, so every byte between two nodes crosses one bucket at LINK_RATE (Redis, which
# carries only the rendezvous, is not shaped). Needs cap_add NET_ADMIN. LINK_RATE is tc's form
# (100mbit, 1gbit); empty or "off" leaves the link as Docker made it.
set -euo pipefail
source /usr/local/share/ringtorch/link_shaping.sh
rate=${LINK_RATE:-off}
if [ "$rate" != off ]; then
  shape_link eth0 "$rate" ||
    { echo "ringtorch-node: $(hostname): $shape_link_why; give the service cap_add: [NET_ADMIN], or LINK_RATE=off" >&2; exit 1; }
  echo "ringtorch-node: $(hostname): eth0 shaped to $rate (tbf)"
fi
exec "$@"
