#!/usr/bin/env bash
# Installs the Debian packages named that are not installed yet (as root, or through sudo);
# shared by setup.sh, check_format.sh and fuzz.sh.
#   bash scripts/install_packages.sh WHO PACKAGE...    # WHO prefixes the message ("setup: installing ...")
set -euo pipefail
who=$1
shift
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -gt 0 ] || exit 0
echo "$who: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
