#!/usr/bin/env bash
# ringtrain on the real Fashion-MNIST under ringrun: mlp, 2 ranks, 1 epoch reaches the seeds'
# accuracy (>= 0.80; Python DDP: 0.825) with identical parameters on both ranks; checkpoints
# and --resume; bad input exits non-zero with a message naming the problem.
set -euo pipefail
ringrun=$1
ringtrain=$2
source "$(dirname "$0")/fashion_mnist_or_skip.sh"
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

# The resumed run also draws the progress bar (forced: ringrun's pipes are no terminal).
out=$(run --model mlp --epochs 2 --checkpoint-dir "$dir/ck" --resume --progress bar) || { echo "$out"; exit 1; }
grep -q "resumed at epoch 2 step" <<<"$out" || { echo "$out"; echo "FAILED: no resume"; exit 1; }
if grep -q "Epoch \[1/2\]" <<<"$out"; then echo "$out"; echo "FAILED: epoch 1 ran again"; exit 1; fi
grep -q $'\repoch 2/2 \[####################\] 100%  60000/60000' <<<"$out" ||
  { echo "$out" | cat -A | head -20; echo "FAILED: no progress bar"; exit 1; }

# On a terminal (a pty from script(1)), --progress auto draws the bar; one rank by hand, env://.
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
out=$(MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=1 RANK=0 timeout 120 \
  script -qec "$ringtrain --dataset synthetic --model mlp --epochs 1" /dev/null) || { echo "$out"; exit 1; }
grep -q $'\repoch 1/1 \[' <<<"$out" || { echo "$out" | cat -A | head; echo "FAILED: no bar on a terminal"; exit 1; }

# CIFAR-10 binary batches (written here in the real format) with resnet20: BatchNorm buffers
# broadcast, per-channel normalisation, checkpoint; both ranks end identical.
/usr/bin/python3 "$(dirname "$0")/make_cifar10.py" "$dir/cifar" 200
out=$(run --dataset cifar10 --data-dir "$dir/cifar" --model resnet20 --epochs 1 --batch-size 32 --lr 0.05 \
  --checkpoint-dir "$dir/ck-cifar") || { echo "$out"; exit 1; }
grep -q "cifar10 train (1000 images from $dir/cifar/cifar-10-batches-bin)" <<<"$out" || { echo "$out"; exit 1; }
json=$(grep -o '{"device".*' <<<"$out")
/usr/bin/python3 - "$json" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
assert r["world_size"] == 2 and len(set(r["parameter_checksums"])) == 1, r
print("ringtrain resnet20 on cifar10 batches: accuracy %.3f, ranks identical" % r["test_accuracy"])
PY
ls "$dir/ck-cifar"/checkpoint-*.pt >/dev/null || { echo "FAILED: no resnet20 checkpoint"; exit 1; }

expect_error() {
  local want=$1; shift
  local out rc=0
  out=$(run "$@") || rc=$?
  [ "$rc" -ne 0 ] || { echo "$out"; echo "FAILED: exit 0 for: $*"; exit 1; }
  grep -q -- "$want" <<<"$out" || { echo "$out"; echo "FAILED: no '$want' for: $*"; exit 1; }
  echo "bad input ($*): exit $rc, says '$want'"
}
expect_error "unknown model 'resnet9000'; known models: lenet, mlp, mlp3, resnet20" --model resnet9000
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
head -c 5000 "$dir/cifar/cifar-10-batches-bin/data_batch_1.bin" > "$dir/bad/data_batch_1.bin"
for b in 2 3 4 5; do cp "$dir/cifar/cifar-10-batches-bin/data_batch_$b.bin" "$dir/bad/"; done
expect_error "data_batch_1.bin: 5000 bytes is not a whole number of 3073-byte CIFAR-10 records" \
  --dataset cifar10 --data-dir "$dir/bad"
if [ ! -e /dev/nvidia0 ]; then
  expect_error "--device cuda: no CUDA device is visible" --device cuda
fi
expect_error "--gpus 0,0: a device is listed twice" --gpus 0,0
expect_error "--gpus 0: needs --device cuda or auto" --device cpu --gpus 0
expect_error "--progress fancy: use auto, bar, lines or off" --progress fancy
echo '{"model": "mlp", "epochs": "many"}' > "$dir/bad.json"
expect_error "--config $dir/bad.json: key 'epochs' = \"many\": --epochs: 'many' is not an integer" --config "$dir/bad.json"
echo '{"modle": "mlp"}' > "$dir/bad2.json"
expect_error "key 'modle' = \"mlp\": unknown key" --config "$dir/bad2.json"
echo '{"model": ' > "$dir/bad3.json"
expect_error "--config $dir/bad3.json: not valid JSON" --config "$dir/bad3.json"
# Inputs are regular files read with a bound: a directory, a device or a huge file is refused at once.
expect_error "--config $dir: not a regular file" --config "$dir"
expect_error "--config /dev/zero: not a regular file" --config /dev/zero
head -c 2000000 /dev/zero > "$dir/huge.json"
expect_error "--config $dir/huge.json: 2000000 bytes; at most 1048576 are read" --config "$dir/huge.json"
# Issue 18's findings, each of which passed as success or crashed before.
/usr/bin/python3 -c 'print("{\"x\": " + "[" * 100000 + "]" * 100000 + "}")' > "$dir/deep.json"
expect_error "--config $dir/deep.json: .*values nest deeper than 8 levels" --config "$dir/deep.json"
expect_error "--timeout: 1e300 seconds is more than the longest timeout" --timeout 1e300
expect_error "--timeout: 1e10 seconds is more than the longest timeout" --timeout 1e10
expect_error "--lr: 1e308 is outside" --lr 1e308
mkdir -p "$dir/empty"
printf '\x00\x00\x08\x03\x00\x00\x00\x00\x00\x00\x00\x1c\x00\x00\x00\x1c' > "$dir/empty/train-images-idx3-ubyte"
printf '\x00\x00\x08\x01\x00\x00\x00\x00' > "$dir/empty/train-labels-idx1-ubyte"
expect_error "mnist train (0 images from $dir/empty): no records" --dataset mnist --data-dir "$dir/empty"
mkdir -p "$dir/dirdata/train-images-idx3-ubyte"
cp "$data/train-labels-idx1-ubyte.gz" "$dir/dirdata/"
expect_error "$dir/dirdata/train-images-idx3-ubyte is a directory, not a dataset file" --dataset mnist \
  --data-dir "$dir/dirdata"
mkdir -p "$dir/cut"
cp "$data/train-images-idx3-ubyte.gz" "$dir/cut/"
head -c -5 "$data/train-labels-idx1-ubyte.gz" > "$dir/cut/train-labels-idx1-ubyte.gz"
expect_error "train-labels-idx1-ubyte.gz: corrupt or truncated gzip data" --dataset mnist --data-dir "$dir/cut"
# The command line in argparse's dialect (base/command_line.h), checked before any rendezvous:
# a lone ringtrain with no launcher and no store fails at once with exit 2, it does not wait.
expect_usage() {  # expect_usage STATUS PATTERN ARGS...: ringtrain alone, no rendezvous
  local status=$1 want=$2; shift 2
  local out rc=0
  out=$(timeout 60 "$ringtrain" "$@" 2>&1) || rc=$?
  [ "$rc" = "$status" ] || { echo "$out"; echo "FAILED: exit $rc (not $status) for: $*"; exit 1; }
  grep -q -- "$want" <<<"$out" || { echo "$out"; echo "FAILED: no '$want' for: $*"; exit 1; }
  echo "command line ($*): exit $rc, says '$want'"
}
expect_usage 2 "ringtrain: unknown flag --bogus (see ringtrain --help)" --bogus 1
expect_usage 2 "unknown flag --batchsize; did you mean --batch-size?" --batchsize 64
expect_usage 2 "ringtrain: --model: unknown model 'resnet9000'" --batch_size=64 --model=resnet9000
expect_usage 2 "ringtrain: --resume=maybe: a flag takes true or false" --resume=maybe
expect_usage 2 "ringtrain: --epochs needs a value" --epochs
expect_usage 0 "usage: ringtrain" -h
out=$(run --dataset synthetic --model mlp --epochs 1 --batch_size=32 --resume=false --log_interval=0) ||
  { echo "$out"; echo "FAILED: underscores and --flag=value"; exit 1; }
grep -q '"world_size":2' <<<"$out" || { echo "$out"; echo "FAILED: no final line"; exit 1; }
echo "command line: --batch_size=32 --resume=false --log_interval=0 accepted"
echo "ringtrain: all checks passed"
