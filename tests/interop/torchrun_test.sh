#!/usr/bin/env bash
# PyTorch's own launcher starts a ringtorch program: Debian's torchrun (python3-torch, through
# scripts/torchrun.py, which works around torchrun 1.13's crash on Python 3.11) runs two
# ringhello workers that rendezvous through torchrun's store (rank 0 hosts it under 1.13;
# torchrun 2.x's agent hosts it, TORCHELASTIC_USE_AGENT_STORE=True: both paths are ours).
# Then the same launcher runs ringtrain (mlp, 1 epoch on Fashion-MNIST) when it is given.
# Exit 77 (skipped) when /usr/bin/python3 has no torch.
set -uo pipefail
ringhello=$1
wrapper=$2
ringtrain=${3:-}
if ! /usr/bin/python3 -c 'import torch.distributed.run' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no torch (apt-get install python3-torch)"
  exit 77
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
env -u RANK -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT -u RINGTORCH_RUN_ID \
  timeout 240 /usr/bin/python3 "$wrapper" --standalone --nproc_per_node 2 --no_python "$ringhello" --timeout 60 \
  >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 0 ] || { echo "torchrun exited with $rc"; exit 1; }
n=$(grep -c "sum of ranks through the store: 1 (expected 1) OK" "$out")
[ "$n" -eq 2 ] || { echo "expected 2 ranks to finish, saw $n"; exit 1; }
echo "torchrun launched 2 ringtorch workers"
[ -n "$ringtrain" ] || exit 0
[ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || { echo "no Fashion-MNIST: ringtrain part skipped"; exit 0; }
env -u RANK -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT -u RINGTORCH_RUN_ID OMP_NUM_THREADS=1 \
  timeout 300 /usr/bin/python3 "$wrapper" --standalone --nproc_per_node 2 --no_python "$ringtrain" \
  --model mlp --epochs 1 --log-interval 0 --timeout 60 >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 0 ] || { echo "torchrun (ringtrain) exited with $rc"; exit 1; }
grep -q '"world_size":2' "$out" || { echo "ringtrain under torchrun did not finish with world size 2"; exit 1; }
echo "torchrun launched 2 ringtrain workers"
