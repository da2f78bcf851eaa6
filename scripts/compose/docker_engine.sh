# Docker's engine and the compose client for scripts/compose_cluster.sh (sourced; root).
#
#   compose_client_ready || die "$engine_why"   # docker-compose 1.29, or `docker compose` v2
#   engine_up || die "$engine_why"              # installs docker.io / starts dockerd when missing
#   "${compose[@]}" -p NAME ... up
#   base_image_ready debian:12 || die "$engine_why"
#   engine_down                                 # stops dockerd only if engine_up started it
#
# dockerd started here writes its log to $engine_log. Starting it switches the host's firewall to
# Docker's (iptables FORWARD policy DROP, bridge netfilter on); engine_down puts the FORWARD
# policy back, and bridge-nf-call-iptables where it existed before. What Docker adds beside them
# stays (its DOCKER chains, docker0, net.ipv4.ip_forward=1), as after any dockerd that stopped;
# scripts/netns_nodes.sh works either way. Images stay in /var/lib/docker for the next run.
# Temporary trees (a debootstrap root) go under $scratch_dir (default /var/tmp).

engine_started=0
engine_log=/var/log/ringtorch-dockerd.log
compose=()

# compose_client_ready: a compose client in $compose (installing Debian's docker-compose when
# there is none); 1 with engine_why. Reading a file (`config`) needs no engine.
compose_client_ready() {
  if command -v docker-compose >/dev/null; then
    compose=(docker-compose)
  elif command -v docker >/dev/null && docker compose version >/dev/null 2>&1; then
    compose=(docker compose)
  else
    bash "$(dirname "${BASH_SOURCE[0]}")/../install_packages.sh" compose_cluster docker-compose >/dev/null 2>&1 ||
      { engine_why="no compose client (docker-compose, or docker compose v2), and apt-get install docker-compose failed"; return 1; }
    compose=(docker-compose)
  fi
}

# engine_up: a Docker engine answering `docker info`; 1 with engine_why when none can be had.
engine_up() {
  if [ -n "${DOCKER_HOST:-}" ]; then
    # The user chose an engine: use it or say so, never start another one beside it.
    command -v docker >/dev/null || { engine_why="DOCKER_HOST is set but there is no docker client (apt-get install docker.io)"; return 1; }
    timeout 20 docker info >/dev/null 2>&1 ||
      { engine_why="no Docker Engine answers at DOCKER_HOST=$DOCKER_HOST: start it there, or unset DOCKER_HOST to use (or start) this machine's"; return 1; }
    return 0
  fi
  if command -v docker >/dev/null && timeout 20 docker info >/dev/null 2>&1; then return 0; fi
  engine_save_firewall
  if ! command -v dockerd >/dev/null || ! command -v docker >/dev/null; then
    echo "compose_cluster: no Docker Engine here: installing Debian's docker.io"
    bash "$(dirname "${BASH_SOURCE[0]}")/../install_packages.sh" compose_cluster docker.io >/dev/null 2>&1 ||
      { engine_why="no Docker Engine, and apt-get install docker.io failed: install Docker Engine (Debian: docker.io) and run again"; return 1; }
    # Where an init system runs, the package starts its daemon: then this run started it.
    if timeout 20 docker info >/dev/null 2>&1; then
      engine_pid=$(pidof dockerd | awk '{print $1}')
      [ -z "$engine_pid" ] || engine_started=1
      return 0
    fi
  fi
  engine_start
}

# What starting dockerd changes, to put back in engine_down.
engine_save_firewall() {
  engine_forward_policy=$(iptables -S FORWARD 2>/dev/null | awk '$1 == "-P" {print $3}')
  engine_bridge_nf=$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null || echo absent)
}

engine_start() {
  echo "compose_cluster: starting dockerd (log: $engine_log)"
  # Its own session: a Ctrl-C in this terminal reaches this script, which tears the cluster down
  # before it stops the daemon, not the daemon first.
  setsid dockerd >>"$engine_log" 2>&1 </dev/null &
  engine_pid=$!
  engine_started=1
  local i
  for ((i = 0; i < 60; i++)); do
    if timeout 5 docker info >/dev/null 2>&1; then return 0; fi
    kill -0 "$engine_pid" 2>/dev/null || break
    sleep 0.5
  done
  engine_why="dockerd did not come up within 30 s: $(tail -n 1 "$engine_log" 2>/dev/null) (whole log: $engine_log)"
  engine_down
  return 1
}

engine_down() {
  [ "$engine_started" = 1 ] || return 0
  engine_started=0
  kill "$engine_pid" 2>/dev/null || true
  local i
  for ((i = 0; i < 60; i++)); do
    kill -0 "$engine_pid" 2>/dev/null || break
    sleep 0.5
  done
  kill -9 "$engine_pid" 2>/dev/null || true
  [ -z "${engine_forward_policy:-}" ] || iptables -P FORWARD "$engine_forward_policy" 2>/dev/null || true
  if [ "${engine_bridge_nf:-absent}" != absent ] && [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]; then
    echo "$engine_bridge_nf" >/proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null || true
  fi
  echo "compose_cluster: stopped the dockerd it started (images are kept for the next run)"
}

# base_image_ready IMAGE: IMAGE (debian:12) on this engine: already there, pulled, or built
# offline with debootstrap from this machine's own apt sources and `docker import`; says which.
base_image_ready() {
  local image=$1
  if docker image inspect "$image" >/dev/null 2>&1; then
    echo "compose_cluster: base image $image: already on this machine"
    return 0
  fi
  if timeout 60 docker pull -q "$image" >/dev/null 2>&1; then
    echo "compose_cluster: base image $image: pulled"
    return 0
  fi
  local mirror
  mirror=$(apt_mirror) || { engine_why="base image $image: cannot be pulled, and no Debian mirror in /etc/apt/sources.list(.d) to build it from"; return 1; }
  command -v debootstrap >/dev/null || bash "$(dirname "${BASH_SOURCE[0]}")/../install_packages.sh" compose_cluster debootstrap >/dev/null 2>&1 ||
    { engine_why="base image $image: cannot be pulled, and debootstrap cannot be installed"; return 1; }
  local root
  root=$(mktemp -d "${scratch_dir:-/var/tmp}/ringtorch-rootfs.XXXXXX")
  echo "compose_cluster: base image $image: cannot be pulled (offline?); building it with debootstrap from this machine's apt mirror"
  if ! timeout 600 debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1; then
    engine_why="base image $image: debootstrap bookworm failed: $(tail -n 1 "$root.log") (log: $root.log)"
    remove_root "$root"
    return 1
  fi
  tar -C "$root" -c . | timeout 300 docker import - "$image" >/dev/null || { engine_why="base image $image: docker import failed"; remove_root "$root"; return 1; }
  remove_root "$root"
  rm -f "$root.log"
  echo "compose_cluster: base image $image: built offline (debootstrap --variant=minbase bookworm, docker import)"
}

# A debootstrap root, with whatever it still had mounted (/proc, /sys of a run cut short).
remove_root() {
  local root=$1
  findmnt -rn -o TARGET | grep "^$root/" | sort -r | xargs -r umount -l 2>/dev/null
  rm -rf --one-file-system "$root"
}

# The Debian archive this machine's apt uses for bookworm itself (not -security or -updates):
# deb822 .sources first, then one-line sources.list.
apt_mirror() {
  local uri
  uri=$(awk 'BEGIN {RS = ""} /(^|\n)Suites:([^\n]* )?bookworm( |\n|$)/ {
               if (match($0, /URIs: *[^ \n]+/)) { split(substr($0, RSTART, RLENGTH), f, " "); print f[2]; exit } }' \
    /etc/apt/sources.list.d/*.sources 2>/dev/null)
  [ -n "$uri" ] || uri=$(awk '$1 == "deb" && / bookworm / {print ($2 ~ /^\[/) ? $3 : $2; exit}' \
    /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null)
  [ -n "$uri" ] || return 1
  echo "$uri"
}
