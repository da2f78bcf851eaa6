#!/usr/bin/env bash
# clang-tidy 14 with the project's .clang-tidy over ringtorch's sources (CONTRIBUTING.md).
#   bash scripts/clang_tidy.sh                          # the core: rendezvous, comm, shm, training
#   bash scripts/clang_tidy.sh runtime/comm/work.cc ...  # the files given
# Needs a configured build (BUILD_DIR, default build) for compile_commands.json. The GCC
# precompiled-header flags in it are dropped (clang cannot read GCC's .gch). Prints the
# findings and a count; exits 1 when there are any.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
if ! command -v clang-tidy-14 >/dev/null; then
  echo "clang_tidy: installing clang-tidy-14"
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang-tidy-14 >/dev/null
fi
test -f "$BUILD_DIR/compile_commands.json" || { echo "clang_tidy: configure $BUILD_DIR first (bash scripts/setup.sh)"; exit 2; }
db=$(mktemp -d)
trap 'rm -rf "$db"' EXIT
/usr/bin/python3 - "$BUILD_DIR/compile_commands.json" "$db/compile_commands.json" <<'PY'
import json, re, sys
entries = json.load(open(sys.argv[1]))
for e in entries:
    e["command"] = re.sub(r"-include \S+cmake_pch\.hxx|-Winvalid-pch", "", e["command"])
json.dump(entries, open(sys.argv[2], "w"))
PY
if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(ls rendezvous/*.cc runtime/comm/*.cc runtime/comm/shm/*.cc runtime/training/*.cc)
fi
out=$(mktemp)
status=0
for f in "${files[@]}"; do
  clang-tidy-14 -p "$db" --quiet "$f" 2>/dev/null | grep -E "warning:|error:" -A3 >>"$out" || true
done
count=$(grep -cE "warning:|error:" "$out" || true)
cat "$out"
echo "clang_tidy: ${#files[@]} files, $count findings"
[ "$count" -eq 0 ] || status=1
rm -f "$out"
exit $status
