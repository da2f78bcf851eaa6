#!/usr/bin/env bash
# The format check CI runs: every tracked C++ and CUDA file must be as clang-format 14 (Debian
# 12's, pinned so that the result never depends on the machine) formats it with .clang-format.
#   bash scripts/check_format.sh          # check; lists the files that differ, exits 1 if any
#   bash scripts/check_format.sh --fix    # rewrite them in place
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_packages.sh check_format clang-format-14
mapfile -t files < <(git ls-files '*.h' '*.cc' '*.cu')
if [ "${1:-}" = "--fix" ]; then
  clang-format-14 -i "${files[@]}"
  exit 0
fi
differ=()
for f in "${files[@]}"; do
  clang-format-14 "$f" | cmp -s - "$f" || differ+=("$f")
done
if [ ${#differ[@]} -gt 0 ]; then
  echo "check_format: ${#differ[@]} file(s) differ from clang-format-14; run bash scripts/check_format.sh --fix:"
  printf '  %s\n' "${differ[@]}"
  exit 1
fi
echo "check_format: ${#files[@]} files formatted as clang-format-14 formats them"
