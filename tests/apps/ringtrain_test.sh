#!/usr/bin/env bash
# ringtrain on the real Fashion-MNIST under ringrun: mlp, 2 ranks, 1 epoch reaches the seeds'
# accuracy (>= 0.80; Python DDP: 0.825) with identical parameters on both ranks; checkpoints
# and --resume; bad input exits non-zero with a message naming the problem.
set -euo pipefail
ringrun=$1
ringtrain=$2
data=/usr/share/datasets/fashion-mnist
[ -e "$data/train-images-idx3-ubyte.gz" ] || { echo "SKIP: $data missing (apt-get install dataset-fashion-mnist)"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run() { "$ringrun" --standalone --nproc_per_node 2 --use_env --timeout 120 "$ringtrain" --log-interval 0 "$@" 2>&1; }

out=$(run --model mlp --epochs 1 --checkpoint-dir "$dir/ck" --metrics "$dir/metrics.jsonl") || { echo "$out"; exit 1; }
echo "$out"
grep -q "Rank 0, Epoch \[1/1\], Loss: " <<<"$out" && grep -q "Rank 1, Epoch \[1/1\], Loss: " <<<"$out" ||
  { echo "FAILED: no per-rank epoch lines"; exit 1; }
json=$(grep -o '{"device".*' <<<"$out")
/usr/bin/python3 - "$json" "$dir/metrics.jsonl" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
assert r["world_size"] == 2, r
assert r["test_accuracy"] >= 0.80, "accuracy %s < 0.80" % r["test_accuracy"]
assert len(set(r["parameter_checksums"])) == 1, "ranks differ: %s" % r["parameter_checksums"]
lines = [json.loads(l) for l in open(sys.argv[2])]
assert len(lines) == 1 and lines[0]["epoch"] == 1, lines
print("ringtrain mlp: accuracy %.4f, %.0f samples/s, ranks identical" % (r["test_accuracy"], r["samples_per_s"]))
PY

out=$(run --model mlp --epochs 2 --checkpoint-dir "$dir/ck" --resume) || { echo "$out"; exit 1; }
grep -q "Resumed from epoch 1" <<<"$out" || { echo "$out"; echo "FAILED: no resume"; exit 1; }
if grep -q "Epoch \[1/2\]" <<<"$out"; then echo "$out"; echo "FAILED: epoch 1 ran again"; exit 1; fi

expect_error() {
  local want=$1; shift
  local out rc=0
  out=$(run "$@") || rc=$?
  [ "$rc" -ne 0 ] || { echo "$out"; echo "FAILED: exit 0 for: $*"; exit 1; }
  grep -q -- "$want" <<<"$out" || { echo "$out"; echo "FAILED: no '$want' for: $*"; exit 1; }
  echo "bad input ($*): exit $rc, says '$want'"
}
expect_error "unknown model 'resnet9000'; known models: lenet, mlp, mlp3" --model resnet9000
expect_error "unknown dataset 'imagenet'" --dataset imagenet
expect_error "--batch-size: 0 is outside \[1, 1048576\]" --batch-size 0
expect_error "missing dataset file $dir/none/train-images-idx3-ubyte" --dataset mnist --data-dir "$dir/none"
mkdir -p "$dir/bad"
head -c 1000 <(zcat "$data/train-images-idx3-ubyte.gz") > "$dir/bad/train-images-idx3-ubyte"
cp "$data/train-labels-idx1-ubyte.gz" "$dir/bad/"
expect_error "train-images-idx3-ubyte: truncated: 1000 bytes, the header promises 47040016" --dataset mnist --data-dir "$dir/bad"
cp "$data/t10k-labels-idx1-ubyte.gz" "$dir/bad/train-labels-idx1-ubyte.gz"
cp "$data/train-images-idx3-ubyte.gz" "$dir/bad/"
rm "$dir/bad/train-images-idx3-ubyte"
expect_error "has 10000 labels but .* has 60000 images" --dataset mnist --data-dir "$dir/bad"
echo '{"model": "mlp", "epochs": "many"}' > "$dir/bad.json"
expect_error "--config $dir/bad.json: key 'epochs' = \"many\": --epochs: 'many' is not an integer" --config "$dir/bad.json"
echo '{"modle": "mlp"}' > "$dir/bad2.json"
expect_error "key 'modle' = \"mlp\": unknown key" --config "$dir/bad2.json"
echo '{"model": ' > "$dir/bad3.json"
expect_error "--config $dir/bad3.json: not valid JSON" --config "$dir/bad3.json"
echo "ringtrain: all checks passed"
