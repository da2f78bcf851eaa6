#!/usr/bin/env bash
# CTest fuzz_corpus: every fuzz target's replay build over its committed corpus.
#   replay_corpus.sh CORPUS_DIR BIN_DIR
set -euo pipefail
corpus=$1 bin=$2
for dir in "$corpus"/*/; do
  name=$(basename "$dir")
  "$bin/fuzz_replay_$name" "$dir"
done
