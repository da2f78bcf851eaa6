#!/usr/bin/env bash
# ringtrain --balance on the real Fashion-MNIST under ringrun (2 ranks): given weights 3:1 split
# the global batch 96/32 with identical ranks and the seeds' accuracy; --balance auto runs and
# reports its split; a checkpoint taken with one split resumes with another; a rank of weight 0
# sits out and ends with the others' weights; --balance dynamic trains every batch once; bad input
# (ranks given different weights, or auto and dynamic, included) exits non-zero with a message
# naming the problem. (Whether auto follows real speed differences is
# measured by bench/compare_hetero, not asserted here: tests never assert on time.)
set -euo pipefail
ringrun=$1
ringtrain=$2
source "$(dirname "$0")/fashion_mnist_or_skip.sh"
run() { "$ringrun" --standalone --nproc_per_node 2 --use_env --timeout 120 "$ringtrain" --progress off "$@" 2>&1; }
json_of() { grep -o '{"balance".*' <<<"$1"; }

out=$(run --model mlp --epochs 1 --balance 3:1 --checkpoint-dir "$dir/ck" --metrics "$dir/metrics.jsonl") ||
  { echo "$out"; exit 1; }
echo "$out"
grep -q "\[ringtorch\] balance: rank 0 cpu 96/128, rank 1 cpu 32/128$" <<<"$out" || { echo "FAILED: no split line"; exit 1; }
/usr/bin/python3 - "$(json_of "$out")" "$dir/metrics.jsonl" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
assert r["balance"] == "3:1" and r["split"] == [96, 32], r
assert r["test_accuracy"] >= 0.80, "accuracy %s < 0.80" % r["test_accuracy"]
assert len(set(r["parameter_checksums"])) == 1, "ranks differ: %s" % r["parameter_checksums"]
lines = [json.loads(l) for l in open(sys.argv[2])]
assert lines[0]["split"] == [96, 32], lines
print("--balance 3:1: accuracy %.4f, ranks identical" % r["test_accuracy"])
PY

# A new split on resume: weights are not part of the checkpoint.
out=$(run --model mlp --epochs 2 --balance 1:3 --checkpoint-dir "$dir/ck" --resume) || { echo "$out"; exit 1; }
grep -q "resumed at epoch 2 step" <<<"$out" && grep -q "rank 0 cpu 32/128, rank 1 cpu 96/128" <<<"$out" &&
  grep -q "Rank 1, Epoch \[2/2\]" <<<"$out" || { echo "$out"; echo "FAILED: resume with a new split"; exit 1; }

out=$(run --model mlp --epochs 2 --balance auto --max-train-samples 12800) || { echo "$out"; exit 1; }
grep -q "\[ringtorch\] balance: rank 0 cpu 64/128, rank 1 cpu 64/128$" <<<"$out" &&
  /usr/bin/python3 -c 'import json,sys; r=json.loads(sys.argv[1]); assert r["balance"]=="auto" and sum(r["split"])==128, r' \
    "$(json_of "$out")" || { echo "$out"; echo "FAILED: --balance auto"; exit 1; }

# A rank of weight 0 sits out: rank 0 trains alone in a subgroup and hands its state to rank 1
# at each epoch end, so the run equals one rank training on the whole global batch, bit for
# bit, and both ranks finish with those weights (one thread each: the same sums in the same order).
out=$(run --model mlp --epochs 2 --threads 1 --balance 1:0 --max-train-samples 12800 --checkpoint-dir "$dir/sit") ||
  { echo "$out"; exit 1; }
grep -q "\[ringtorch\] balance: rank 0 cpu 128/128, rank 1 cpu sits out$" <<<"$out" ||
  { echo "$out"; echo "FAILED: no sit-out line"; exit 1; }
alone=$("$ringrun" --standalone --nproc_per_node 1 --use_env "$ringtrain" --progress off --model mlp --epochs 2 \
  --threads 1 --balance 1 --global-batch 128 --max-train-samples 12800 2>&1) || { echo "$alone"; exit 1; }
/usr/bin/python3 - "$(json_of "$out")" "$(json_of "$alone")" <<'PY' || { echo "$out"; echo "FAILED: --balance 1:0"; exit 1; }
import json, sys
two, one = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert two["split"] == [128, 0] and two["ranks"][1]["samples"] == 0, two
c = two["parameter_checksums"]
assert c[0] == c[1] == one["parameter_checksums"][0], (c, one["parameter_checksums"])
assert two["test_accuracy"] == one["test_accuracy"], (two, one)
print("--balance 1:0: rank 1 sat out; both ranks equal one rank alone (checksum %r)" % c[0])
PY

# --balance dynamic: local SGD's periods claimed batch by batch through ringrun's store; every
# batch is trained once (by one rank or the other), and the ranks end identical.
out=$(run --model mlp --epochs 1 --local-steps 4 --balance dynamic --max-train-samples 12800) || { echo "$out"; exit 1; }
/usr/bin/python3 - "$(json_of "$out")" <<'PY' || { echo "$out"; echo "FAILED: --balance dynamic"; exit 1; }
import json, sys
r = json.loads(sys.argv[1])
assert r["balance"] == "dynamic", r
assert sum(rank["samples"] for rank in r["ranks"]) == 12800, r["ranks"]
assert sum(rank["steps"] for rank in r["ranks"]) == 12800 // 64, r["ranks"]
assert len(set(r["parameter_checksums"])) == 1, "ranks differ: %s" % r["parameter_checksums"]
print("--balance dynamic: samples per rank %s, ranks identical" % [rank["samples"] for rank in r["ranks"]])
PY

expect_error() {
  local expected=$1; shift
  if out=$(run --model mlp --epochs 1 --max-train-samples 256 "$@"); then echo "FAILED: accepted $*"; exit 1; fi
  grep -q -- "$expected" <<<"$out" || { echo "$out"; echo "FAILED: '$*' does not say '$expected'"; exit 1; }
}
expect_error "every rank's weight is 0" --balance 0:0
expect_error "gives 3 weights for 2 ranks" --balance 3:1:1
expect_error "a global batch of 1 cannot give each of the 2 ranks" --balance auto --global-batch 1
expect_error "needs --balance auto, dynamic or weights" --global-batch 64
expect_error "needs --local-steps H" --balance dynamic
expect_error "is not a number" --balance fast:slow
# Nodes started with command lines of their own: rank 1 given other weights than rank 0.
printf '%s\n' '[ "$LOCAL_RANK" = 0 ] && exec "$@" --balance 3:1; exec "$@" --balance 1:1' >"$dir/per_rank_balance.sh"
if out=$("$ringrun" --standalone --nproc_per_node 2 --use_env --timeout 120 bash "$dir/per_rank_balance.sh" "$ringtrain" \
  --progress off --model mlp --epochs 1 --max-train-samples 256 2>&1); then
  echo "$out"; echo "FAILED: ranks given different weights trained"; exit 1
fi
grep -q "rank 1 was told to split the global batch of 128 as 64/64, rank 0 to split the global batch of 128 as 96/32" \
  <<<"$out" || { echo "$out"; echo "FAILED: different weights per rank not named"; exit 1; }
# auto on rank 0, dynamic on rank 1: the balancer's own checks cannot tell them apart.
printf '%s\n' '[ "$LOCAL_RANK" = 0 ] && exec "$@" --balance auto; exec "$@" --balance dynamic' >"$dir/per_rank_mode.sh"
if out=$("$ringrun" --standalone --nproc_per_node 2 --use_env --timeout 120 bash "$dir/per_rank_mode.sh" "$ringtrain" \
  --progress off --model mlp --epochs 1 --max-train-samples 256 --local-steps 2 2>&1); then
  echo "$out"; echo "FAILED: ranks given auto and dynamic trained"; exit 1
fi
grep -q "rank 1 was told --balance dynamic, rank 0 --balance auto" <<<"$out" ||
  { echo "$out"; echo "FAILED: auto against dynamic not named"; exit 1; }
echo "ringtrain --balance: OK"
