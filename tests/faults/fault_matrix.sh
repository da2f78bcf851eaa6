#!/usr/bin/env bash
# The fault matrix: ringtorch under the faults a cluster meets, real processes and real servers.
# Each case states what must happen, makes the fault, and prints PASS or FAIL with what it
# measured (SKIP when the machine cannot make the fault). Run it before a release:
#
#   sudo bash tests/faults/fault_matrix.sh                  # every case
#   bash tests/faults/fault_matrix.sh --quick               # no root, ~2 min (CTest fault_matrix_quick)
#   bash tests/faults/fault_matrix.sh --list
#   bash tests/faults/fault_matrix.sh --keep worker_sigstop    # keep the logs (path printed)
#   sudo bash tests/faults/fault_matrix.sh node_sigstop link_down
#
# --build DIR (default ./build) holds ringrun, ringtrain and tests/faults/collective_caller.
# The node cases need root (network namespaces, as scripts/netns_cluster.sh); packet loss needs
# nftables (this kernel has no netem). docs/testing.md, "Fault matrix", says what each covers.
# Exit status: 1 when any case FAILs.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$here/../.." && pwd)/build
quick=0
list=0
keep=0
selected=()
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --quick) quick=1; shift ;;
    --list) list=1; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n 2,16p "$0"; exit 0 ;;
    -*) echo "fault_matrix: unknown flag $1 (see --help)" >&2; exit 2 ;;
    *) selected+=("$1"); shift ;;
  esac
done
ringrun=$build/apps/ringrun
ringtrain=$build/apps/ringtrain
caller=$build/tests/faults/collective_caller
timeout_s=10  # the job's --timeout in the cases that wait for one
tag=$$
work=$(mktemp -d)
declare -a background=()
cleanup_case() {
  for p in "${background[@]}"; do kill -9 "$p" 2>/dev/null; done
  for p in "${background[@]}"; do wait "$p" 2>/dev/null; done  # reaped quietly
  background=()
}
trap 'cleanup_case; cleanup_netns; if [ "$keep" = 1 ]; then echo "fault_matrix: logs kept in $work"; else rm -rf "$work"; fi' EXIT

passed=0 failed=0 skipped=0
# verdict NAME PASS|FAIL|SKIP EXPECTATION MEASURED
verdict() {
  printf '%-4s %-28s %s\n     measured: %s\n' "$2" "$1" "$3" "$4"
  case $2 in PASS) passed=$((passed + 1)) ;; FAIL) failed=$((failed + 1)) ;; *) skipped=$((skipped + 1)) ;; esac
  if [ "$2" = FAIL ] && [ -n "${log:-}" ] && [ -f "$log" ]; then sed 's/^/     | /' "$log" | tail -25; fi
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# wait_for FILE PATTERN SECONDS: true once FILE holds a line matching PATTERN.
wait_for() {
  local deadline=$(($(date +%s) + $3))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    grep -q -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.2
  done
  return 1
}
# wait_exit PID SECONDS: sets `status` to the exit status of background PID (a session leader),
# or to 124 after SECONDS, when its whole session is killed. (Not in $(...): a subshell cannot
# wait for this shell's children.)
wait_exit() {
  local deadline=$(($(date +%s) + $2))
  while kill -0 "$1" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.2; done
  if kill -0 "$1" 2>/dev/null; then
    kill -9 -- "-$1" 2>/dev/null || kill -9 "$1" 2>/dev/null
    wait "$1" 2>/dev/null
    status=124
    return
  fi
  wait "$1"
  status=$?
}
# The child processes of PID, from /proc (no procps needed). One pass over every stat file: a
# fork per process took seconds on a loaded machine, long enough for a short job to end first.
# A stat line is "PID (COMM) STATE PPID ...", and COMM may hold spaces and parentheses.
children_of() {
  cat /proc/[0-9]*/stat 2>/dev/null | awk -v parent="$1" '{ pid = $1; sub(/.*\) /, ""); if ($2 == parent) print pid }'
}
# The pid of ringrun's worker of RANK, under ringrun PID.
worker_pid() {
  local p
  for p in $(children_of "$1"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RANK=$2" && { echo "$p"; return; }
  done
}
train_args=(--dataset synthetic --model mlp --log-interval 0)

# --- mismatched calls: every rank names both calls, well before the timeout -------------------
# Two ranks started by hand (not under ringrun, which would stop the second rank when the first
# fails), each making its own call.
mismatch() {  # NAME SHM CALL0 CALL1 [PATTERN0 PATTERN1: what each rank's error must say]
  local name=$1 shm=$2 port t0 rc0 rc1 secs
  local pattern0=${5:-"this rank called .*rank 1 called"} pattern1=${6:-"this rank called .*rank 0 called"}
  port=$(free_port)
  log=$work/$name.log
  : >"$log"
  t0=$(now)
  for r in 0 1; do
    RINGTORCH_SHM=$shm RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      RINGTORCH_TIMEOUT=30 setsid "$caller" "$3" "$4" >"$log.$r" 2>&1 &
    background+=($!)
  done
  wait_exit "${background[0]}" 60
  rc0=$status
  wait_exit "${background[1]}" 60
  rc1=$status
  secs=$(since "$t0")
  cat "$log.0" "$log.1" >"$log"
  background=()
  local expect="both ranks exit 1 naming both calls, well before the 30 s timeout"
  if [ "$rc0" = 1 ] && [ "$rc1" = 1 ] && grep -q "$pattern0" "$log.0" && grep -q "$pattern1" "$log.1" &&
    ! grep -q "terminate called" "$log" && awk -v s="$secs" 'BEGIN { exit !(s < 20) }'; then
    verdict "$name" PASS "$expect" "exits $rc0/$rc1 in ${secs} s; rank 0: $(grep -m1 -o "${pattern0%%.*}.*" "$log.0" | sed 's/ (\(operation\|call\) #[^)]*)//g' | cut -c1-100)"
  else
    verdict "$name" FAIL "$expect" "exits $rc0/$rc1 in ${secs} s"
  fi
}
case_mismatch_dtype_tcp() { mismatch mismatch_dtype_tcp 0 allreduce:float32:4 allreduce:float64:4; }
case_mismatch_same_bytes_tcp() { mismatch mismatch_same_bytes_tcp 0 allreduce:int32:4 allreduce:uint8:16; }
case_mismatch_count_tcp() { mismatch mismatch_count_tcp 0 allreduce:float32:4 allreduce:float32:5; }
case_mismatch_op_tcp() { mismatch mismatch_op_tcp 0 allreduce:float32:4 broadcast:float32:4; }
case_mismatch_dtype_shm() { mismatch mismatch_dtype_shm 1 allreduce:float32:4 allreduce:float64:4; }
case_mismatch_barrier_shm() { mismatch mismatch_barrier_shm 1 allreduce:int64:1 barrier:float32:0; }
case_mismatch_send_recv() {
  mismatch mismatch_send_recv 1 send:float32:100000 recv:float32:4 "this rank sent 100000 float32 on tag 0, rank 1 receives 4" \
    "rank 0 sent 100000 float32 on tag 0, this rank receives 4"
}

# --- a worker dies or stops -------------------------------------------------------------------
# start_job NAME EXTRA_RINGRUN_FLAGS... -- RINGTRAIN_FLAGS...: ringrun with 2 workers in the
# background; sets job (its pid) and log.
start_job() {
  local name=$1
  shift
  local flags=()
  while [ "$1" != -- ]; do flags+=("$1"); shift; done
  shift
  log=$work/$name.log
  setsid "$ringrun" --standalone --nproc_per_node 2 --use_env --timeout "$timeout_s" "${flags[@]}" \
    "$ringtrain" "${train_args[@]}" "$@" >"$log" 2>&1 &
  job=$!
  background+=($job)
}

# worker_fault NAME SIGNAL SECONDS PATTERN EXPECTATION: a 2-worker job under way; rank 1 gets
# SIGNAL; ringrun must exit non-zero within SECONDS, its output must match PATTERN, and neither
# worker may be left.
worker_fault() {
  local name=$1 signal=$2 bound=$3 pattern=$4 expect=$5 t0 rc secs pids
  # Far more epochs than the case lasts: the fault, not the end of training, must end the job.
  start_job "$name" -- --epochs 1000
  wait_for "$log" "Epoch \[1/" 120 || { verdict "$name" FAIL "$expect" "training never started"; cleanup_case; return; }
  pids=("$(worker_pid "$job" 0)" "$(worker_pid "$job" 1)")
  if [ -z "${pids[0]}" ] || [ -z "${pids[1]}" ]; then
    verdict "$name" FAIL "$expect" "ringrun's workers not found under pid $job"
    cleanup_case
    return
  fi
  t0=$(now)
  kill "-$signal" "${pids[1]}"
  wait_exit "$job" "$bound"
  rc=$status
  secs=$(since "$t0")
  if [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "$pattern" "$log" && ! kill -0 "${pids[0]}" 2>/dev/null &&
    ! kill -0 "${pids[1]}" 2>/dev/null; then
    verdict "$name" PASS "$expect" "exit $rc ${secs} s after SIG$signal: $(grep -m1 -o "$pattern[^;]*" "$log")"
  else
    verdict "$name" FAIL "$expect" "exit $rc ${secs} s after SIG$signal"
  fi
  cleanup_case
}
case_worker_kill9() {
  worker_fault worker_kill9 KILL 30 "rank 1 .*SIGKILL" \
    "ringrun exits non-zero within 30 s naming rank 1 and SIGKILL; no worker left"
}
case_worker_sigstop() {
  worker_fault worker_sigstop STOP $((timeout_s + 40)) "timed out after [0-9]* s waiting for peer rank 1" \
    "a stopped worker: rank 0 names rank 1 within the ${timeout_s} s timeout; ringrun exits non-zero, no worker left"
}

case_worker_kill9_restart() {
  local expect="with --max_restarts 1 the group restarts, resumes from the last checkpoint and exits 0" rc
  # 20 epochs (~5 s of synthetic data): the job must still be running when the kill lands.
  start_job worker_kill9_restart --max_restarts 1 -- --epochs 20 --checkpoint-dir "$work/restart-ck" --resume
  wait_for "$log" "Epoch \[1/" 120 || { verdict worker_kill9_restart FAIL "$expect" "training never started"; cleanup_case; return; }
  # The epoch's line comes before its checkpoint is written (slow under a sanitizer): kill only
  # once a checkpoint and its checksum are there, or the restart has nothing to resume from.
  local deadline=$(($(date +%s) + 120))
  until compgen -G "$work/restart-ck/checkpoint-*.pt.crc32" >/dev/null; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      verdict worker_kill9_restart FAIL "$expect" "no checkpoint written within 120 s of the first epoch"
      cleanup_case
      return
    fi
    sleep 0.2
  done
  local victim
  victim=$(worker_pid "$job" 1)
  if [ -z "$victim" ]; then
    verdict worker_kill9_restart FAIL "$expect" "ringrun's rank 1 worker not found under pid $job"
    cleanup_case
    return
  fi
  kill -9 "$victim"
  wait_exit "$job" 180
  rc=$status
  if [ "$rc" = 0 ] && grep -q "restart 1 of 1" "$log" && grep -q "resumed at epoch" "$log" && grep -q '"final_loss"' "$log"; then
    verdict worker_kill9_restart PASS "$expect" "exit 0; $(grep -m1 -o "resumed at epoch.*" "$log")"
  else
    verdict worker_kill9_restart FAIL "$expect" "exit $rc"
  fi
  cleanup_case
}

# --- damaged checkpoints ----------------------------------------------------------------------
# One run writes two checkpoints (one per epoch); each case damages a copy and resumes.
checkpoints_made=""
make_checkpoints() {
  [ -n "$checkpoints_made" ] && return 0
  log=$work/checkpoints.log
  "$ringrun" --standalone --nproc_per_node 1 --use_env --timeout 60 "$ringtrain" "${train_args[@]}" --epochs 2 \
    --checkpoint-dir "$work/ck" >"$log" 2>&1 || return 1
  [ "$(ls "$work"/ck/checkpoint-*.pt | wc -l)" = 2 ] || return 1
  checkpoints_made=1
}
resume() {  # DIR EPOCHS [extra flags]: runs a resume into $log, prints the exit status
  local dir=$1 epochs=$2
  shift 2
  "$ringrun" --standalone --nproc_per_node 1 --use_env --timeout 60 "$ringtrain" "${train_args[@]}" --epochs "$epochs" \
    --checkpoint-dir "$dir" --resume "$@" >"$log" 2>&1
  echo $?
}
damage() {  # KIND FILE
  case $1 in
    truncated) truncate -s $(($(stat -c %s "$2") / 2)) "$2" ;;
    bit_flip) /usr/bin/python3 -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[len(b)//2]^=0x10; open(p,"wb").write(b)' "$2" ;;
    empty) : >"$2" ;;
    no_checksum) rm "$2.crc32" ;;
    garbled_checksum) echo "not a checksum" >"$2.crc32" ;;
    optimizer_state)  # valid weights, damaged optimizer state, a checksum that matches
      /usr/bin/python3 - "$2" <<'PY'
import sys, zlib, torch
p = sys.argv[1]
ckpt = torch.load(p)
ckpt["optimizer_state"] = "damaged"
torch.save(ckpt, p)
data = open(p, "rb").read()
open(p + ".crc32", "w").write("%x %d\n" % (zlib.crc32(data), len(data)))
PY
      ;;
  esac
}
checkpoint_case() {  # KIND
  local name=checkpoint_$1 dir=$work/$1 newest rc
  local expect="newest checkpoint damaged ($1): a warning names it, the previous one is resumed, exit 0"
  log=$work/$name.log
  make_checkpoints || { verdict "$name" FAIL "$expect" "could not write the checkpoints"; return; }
  cp -r "$work/ck" "$dir"
  newest=$(ls "$dir"/checkpoint-*.pt | tail -1)
  damage "$1" "$newest"
  rc=$(resume "$dir" 3)
  if [ "$rc" = 0 ] && grep -q "skipping checkpoint $newest" "$log" && grep -q "resumed at epoch 2 step" "$log" &&
    ! grep -q "Epoch \[1/3\]" "$log"; then
    verdict "$name" PASS "$expect" "$(grep -m1 -o 'skipping checkpoint [^ ]*: .*' "$log" | sed "s|$work/||g" | cut -c1-130)"
  else
    verdict "$name" FAIL "$expect" "exit $rc"
  fi
}
case_checkpoint_truncated() { checkpoint_case truncated; }
case_checkpoint_bit_flip() { checkpoint_case bit_flip; }
case_checkpoint_empty() { checkpoint_case empty; }
# newest_resumed_case NAME EXPECTATION PREPARE: PREPARE FILE changes a copy of the newest
# checkpoint (its checksum file already removed); the resume must take that checkpoint, exit 0.
newest_resumed_case() {
  local name=$1 expect=$2 prepare=$3 dir=$work/$1 newest rc
  log=$work/$name.log
  make_checkpoints || { verdict "$name" FAIL "$expect" "could not write the checkpoints"; return; }
  cp -r "$work/ck" "$dir"
  newest=$(ls "$dir"/checkpoint-*.pt | tail -1)
  rm "$newest.crc32"
  "$prepare" "$newest" || { verdict "$name" SKIP "$expect" "$prepare could not prepare it"; return; }
  rc=$(resume "$dir" 3)
  if [ "$rc" = 0 ] && grep -q "has no checksum file" "$log" && grep -q "resumed at epoch 3 step" "$log" &&
    ! grep -q "skipping checkpoint" "$log" && ! grep -q "Epoch \[[12]/3\]" "$log"; then
    verdict "$name" PASS "$expect" "exit 0: $(grep -m1 -o 'resumed at epoch [0-9]* step [0-9]*' "$log")"
  else
    verdict "$name" FAIL "$expect" "exit $rc"
  fi
}
# The newest checkpoint without its checksum file (its writer stopped between the two renames):
# whole, so it loads, said to be unverified.
case_checkpoint_no_checksum() {
  newest_resumed_case checkpoint_no_checksum \
    "newest checkpoint without its checksum file: it is resumed (a warning says its bytes are unverified), exit 0" true
}
# Python loads the newest checkpoint and saves it again with torch.save (one-entry dicts pickled
# with SETITEM, no checksum file): the resume takes it, optimizer state included.
resave_with_python() { /usr/bin/python3 "$here/../runtime/torch_save_cases.py" resave "$1" "$1"; }
case_checkpoint_python_resaved() {
  newest_resumed_case checkpoint_python_resaved \
    "newest checkpoint loaded and saved again by Python's torch.save: resumed from it (not skipped, no fresh start), exit 0" \
    resave_with_python
}
# --init-from: a state_dict Python saved (the model of models/python, wrapped as DDP wraps it)
# starts training; another model's is refused before the first step, naming an entry.
case_init_from_python() {
  local rc rc2 sum
  local expect="--init-from a Python state_dict: every rank starts from its weights (checksum = Python's sum); another model's: exit 1 naming the entry, no step trained"
  log=$work/init_from_python.log
  sum=$(/usr/bin/python3 - "$work/mlp_state.pt" "$work/lenet_state.pt" "$here/../../models/python" <<'PY'
import sys, torch
sys.path.insert(0, sys.argv[3])
from ringtorch_models import build
class Wrapped(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.module = m
model = build("mlp")
with torch.no_grad():
    for p in model.parameters():
        p.mul_(3)
torch.save(Wrapped(model).state_dict(), sys.argv[1])
torch.save(build("lenet").state_dict(), sys.argv[2])
print("%.6f" % sum(float(p.double().sum()) for p in model.parameters()))
PY
  ) || { verdict init_from_python SKIP "$expect" "Python's torch could not write the state_dicts"; return; }
  "$ringrun" --standalone --nproc_per_node 2 --use_env --timeout 60 "$ringtrain" "${train_args[@]}" --epochs 1     --max-train-samples 128 --lr 1e-12 --momentum 0 --init-from "$work/mlp_state.pt" >"$log" 2>&1
  rc=$?
  local checksum
  checksum=$(grep -o '"parameter_checksums":\[[^,]*' "$log" | sed 's/.*\[//')
  "$ringrun" --standalone --nproc_per_node 2 --use_env --timeout 60 "$ringtrain" "${train_args[@]}" --epochs 1     --init-from "$work/lenet_state.pt" >"$log.other" 2>&1
  rc2=$?
  cat "$log.other" >>"$log"
  if [ "$rc" = 0 ] && grep -q "initialized the model from" "$log" &&
    /usr/bin/python3 -c 'import sys; sys.exit(abs(float(sys.argv[1]) - float(sys.argv[2])) > 1e-4)' "$checksum" "$sum" &&
    [ "$rc2" = 1 ] && grep -q "does not fit the model; missing 'fc.weight'" "$log.other" && ! grep -q "Epoch \[" "$log.other"; then
    verdict init_from_python PASS "$expect" "checksum $checksum (Python $sum); other model: exit 1: $(grep -m1 -o 'does not fit the model[^;]*;[^;]*' "$log.other")"
  else
    verdict init_from_python FAIL "$expect" "exits $rc/$rc2, checksum '$checksum', Python $sum"
  fi
}
case_checkpoint_garbled_checksum() { checkpoint_case garbled_checksum; }
case_checkpoint_optimizer_state() { checkpoint_case optimizer_state; }
case_checkpoint_all_damaged() {
  local dir=$work/all rc f
  local expect="every checkpoint damaged: each is named with why, 'none of the 2 checkpoints' is said, exit 1 without training (no quiet start over)"
  log=$work/checkpoint_all_damaged.log
  make_checkpoints || { verdict checkpoint_all_damaged FAIL "$expect" "could not write the checkpoints"; return; }
  cp -r "$work/ck" "$dir"
  for f in "$dir"/checkpoint-*.pt; do damage bit_flip "$f"; done
  rc=$(resume "$dir" 1)
  if [ "$rc" = 1 ] && [ "$(grep -c 'skipping checkpoint' "$log")" = 2 ] && grep -q "none of the 2 checkpoints" "$log" &&
    ! grep -q "Epoch \[" "$log"; then
    verdict checkpoint_all_damaged PASS "$expect" "exit 1: $(grep -m1 -o 'none of the 2 checkpoints[^(]*' "$log" | sed "s|$work/||g")"
  else
    verdict checkpoint_all_damaged FAIL "$expect" "exit $rc"
  fi
}
case_checkpoint_other_model() {
  local rc
  local expect="resuming another model's checkpoint: exit 1 with 'does not fit the model', no fallback"
  log=$work/checkpoint_other_model.log
  make_checkpoints || { verdict checkpoint_other_model FAIL "$expect" "could not write the checkpoints"; return; }
  cp -r "$work/ck" "$work/other"
  rc=$(resume "$work/other" 3 --model mlp3)
  if [ "$rc" != 0 ] && grep -q "does not fit the model" "$log"; then
    verdict checkpoint_other_model PASS "$expect" "exit $rc: $(grep -m1 -o 'does not fit the model[^(]*' "$log" | cut -c1-100)"
  else
    verdict checkpoint_other_model FAIL "$expect" "exit $rc"
  fi
}

# start_redis [PASSWORD]: a redis-server on a free loopback port, persistence off; sets the
# caller's `port` and `redis` (its pid, killed by cleanup_case) and returns once it answers.
start_redis() {
  port=$(free_port)
  redis-server --port "$port" --bind 127.0.0.1 ${1:+--requirepass "$1"} --save "" --appendonly no --daemonize no \
    >/dev/null 2>&1 &
  redis=$!
  disown  # some cases kill it on purpose; no job notice
  background+=($redis)
  for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
}

# --- training that diverges ---------------------------------------------------------------------
case_diverged_training() {
  local dir=$work/diverged rc rc2 first after after2
  local expect="the loss turns NaN on resume: exit 1 naming rank, epoch and step; with --allow-non-finite exit 0 and no checkpoint written from NaN; the finite one stays the newest"
  local args=(--dataset synthetic --model mlp3 --log-interval 0 --max-train-samples 3200)
  log=$work/diverged_training.log
  "$ringrun" --standalone --nproc_per_node 1 --use_env --timeout 60 "$ringtrain" "${args[@]}" --epochs 1 \
    --checkpoint-dir "$dir" >"$log" 2>&1 || { verdict diverged_training FAIL "$expect" "the first epoch failed"; return; }
  first=$(ls "$dir" | sort | tail -1)
  "$ringrun" --standalone --nproc_per_node 1 --use_env --timeout 60 "$ringtrain" "${args[@]}" --epochs 3 \
    --checkpoint-dir "$dir" --resume --lr 1e4 --momentum 0.99 >"$log" 2>&1
  rc=$?
  after=$(ls "$dir" | sort | tail -1)
  grep -q "rank 0: the loss is .*nan at epoch 2 step [0-9]* of [0-9]*: training diverged" "$log" || rc="$rc, no message"
  "$ringrun" --standalone --nproc_per_node 1 --use_env --timeout 60 "$ringtrain" "${args[@]}" --epochs 3 \
    --checkpoint-dir "$dir" --resume --lr 1e4 --momentum 0.99 --allow-non-finite >"$log.allowed" 2>&1
  rc2=$?
  after2=$(ls "$dir" | sort | tail -1)
  grep -q "not written: .* holds NaN or inf" "$log.allowed" || rc2="$rc2, no warning"
  if [ "$rc" = 1 ] && [ "$rc2" = 0 ] && [ "$first" = "$after" ] && [ "$first" = "$after2" ]; then
    verdict diverged_training PASS "$expect" "exit 1: $(grep -m1 -o 'the loss is [^:]*' "$log"); allowed: exit 0; newest still $first"
  else
    verdict diverged_training FAIL "$expect" "exit $rc, allowed exit $rc2; newest checkpoint $first -> $after -> $after2"
  fi
}

# --- a job that never ran is no success ------------------------------------------------------
case_duplicate_run_id() {
  local first second rc1 rc2 t0 secs
  local expect="a second ringrun with a running fixed-size job's run id and store: refused within 30 s, exit 1, naming the run id; the first job finishes, exit 0"
  log=$work/duplicate_run_id.log
  # Heartbeats every second, so that the second sees the first's members alive at once.
  setsid "$ringrun" --nproc_per_node 1 --use_env --rdzv_endpoint "file://$work/dup-store" --run_id "dup-$tag" \
    --rdzv_conf keep_alive_interval=1 --timeout "$timeout_s" "$ringtrain" "${train_args[@]}" --epochs 60 \
    >"$log.first" 2>&1 &
  first=$!
  background+=($first)
  wait_for "$log.first" "Epoch \[1/" 120 || { verdict duplicate_run_id FAIL "$expect" "the first job never trained"; cleanup_case; return; }
  t0=$(now)
  timeout 120 "$ringrun" --nproc_per_node 1 --use_env --rdzv_endpoint "file://$work/dup-store" --run_id "dup-$tag" \
    --rdzv_conf keep_alive_interval=1 --timeout "$timeout_s" "$ringtrain" "${train_args[@]}" --epochs 1 >"$log" 2>&1
  rc2=$?
  secs=$(since "$t0")
  wait_exit "$first" 120
  rc1=$status
  if [ "$rc2" = 1 ] && grep -q "already runs under this run id" "$log" && ! grep -q "Epoch \[" "$log" && [ "$rc1" = 0 ] &&
    awk -v s="$secs" 'BEGIN { exit !(s < 30) }'; then
    verdict duplicate_run_id PASS "$expect" "second: exit 1 in ${secs} s: $(grep -m1 -o 'a job of .* already runs under this run id' "$log"); first: exit 0"
  else
    verdict duplicate_run_id FAIL "$expect" "second: exit $rc2 in ${secs} s; first: exit $rc1"
  fi
  cleanup_case
}

# --- output paths are checked before training ------------------------------------------------
case_output_path_unwritable() {
  local rc1 rc2
  local expect="--plot into a missing directory and ringrun --timeline into one: exit 1 before any epoch, naming the flag and the path"
  log=$work/output_path_unwritable.log
  "$ringrun" --standalone --nproc_per_node 1 --use_env --timeout "$timeout_s" "$ringtrain" "${train_args[@]}" \
    --epochs 3 --plot "$work/no/such/dir/run.svg" >"$log" 2>&1
  rc1=$?
  grep -q "Epoch \[" "$log" && rc1="$rc1 after training"
  grep -q -- "--plot $work/no/such/dir/run.svg: cannot write into" "$log" || rc1="$rc1 without the message"
  "$ringrun" --standalone --nproc_per_node 1 --use_env --timeline "$work/no/such/dir/t.json" "$ringtrain" \
    "${train_args[@]}" --epochs 3 >"$log.ringrun" 2>&1
  rc2=$?
  grep -q "Epoch \[" "$log.ringrun" && rc2="$rc2 after training"
  grep -q -- "--timeline $work/no/such/dir/t.json: cannot write into" "$log.ringrun" || rc2="$rc2 without the message"
  if [ "$rc1" = 1 ] && [ "$rc2" = 1 ]; then
    verdict output_path_unwritable PASS "$expect" "exit 1 and 1: $(grep -m1 -o -- '--plot [^(]*' "$log" | sed "s|$work/||")"
  else
    verdict output_path_unwritable FAIL "$expect" "ringtrain exit $rc1, ringrun exit $rc2"
  fi
}

# --- messages that must not mislead ----------------------------------------------------------------
case_master_addr_wrong() {
  local rc last
  local expect="node 0 given a MASTER_ADDR that is not this machine's: exit 1, the last line names the address and says so, one prefix"
  log=$work/master_addr_wrong.log
  timeout 60 "$ringrun" --nnodes 1 --nproc_per_node 1 --master_addr 192.0.2.1 --master_port "$(free_port)" --timeout 3 \
    "$ringtrain" "${train_args[@]}" --epochs 1 >"$log" 2>&1
  rc=$?
  last=$(grep -v '^[WE][0-9]\{8\} ' "$log" | tail -1)  # LibTorch's own glog lines aside
  if [ "$rc" = 1 ] && [[ "$last" == *"MASTER_ADDR 192.0.2.1 is not an address of this machine"* ]] &&
    ! grep -q "ringrun: \[ringrun\]" "$log"; then
    verdict master_addr_wrong PASS "$expect" "exit 1: $(echo "$last" | grep -o 'MASTER_ADDR 192.0.2.1 is not[^,]*')"
  else
    verdict master_addr_wrong FAIL "$expect" "exit $rc; last line: $(echo "$last" | cut -c1-150)"
  fi
}

# --- the store (Redis) goes away --------------------------------------------------------------
case_redis_down_before_rendezvous() {
  local port rc t0 secs
  local expect="no Redis at the endpoint: ringrun exits non-zero within the 5 s timeout + 25 s, naming the address"
  command -v redis-server >/dev/null || { verdict redis_down_before_rendezvous SKIP "$expect" "no redis-server"; return; }
  port=$(free_port)
  log=$work/redis_down.log
  t0=$(now)
  timeout 60 "$ringrun" --nproc_per_node 2 --use_env --rdzv_endpoint "redis://127.0.0.1:$port/0" --timeout 5 \
    "$ringtrain" "${train_args[@]}" --epochs 1 >"$log" 2>&1
  rc=$?
  secs=$(since "$t0")
  if [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "127.0.0.1:$port" "$log" && awk -v s="$secs" 'BEGIN { exit !(s < 30) }'; then
    verdict redis_down_before_rendezvous PASS "$expect" "exit $rc in ${secs} s: $(grep -m1 "127.0.0.1:$port" "$log" | cut -c1-130)"
  else
    verdict redis_down_before_rendezvous FAIL "$expect" "exit $rc in ${secs} s"
  fi
}

case_redis_password_private() {
  local port redis job rc p leaked="" checked=0
  local expect="the Redis password from --rdzv_conf password_file: on no process's command line, in no output; the job exits 0"
  command -v redis-server >/dev/null || { verdict redis_password_private SKIP "$expect" "no redis-server"; return; }
  start_redis secretpw7
  (umask 077 && echo secretpw7 >"$work/redis.pw")
  log=$work/redis_password_private.log
  setsid "$ringrun" --nproc_per_node 2 --use_env --run_id "pw-$tag" --rdzv_endpoint "redis://127.0.0.1:$port/0" \
    --rdzv_conf "password_file=$work/redis.pw" --timeout "$timeout_s" "$ringtrain" "${train_args[@]}" --epochs 10 \
    >"$log" 2>&1 &
  job=$!
  background+=($job)
  wait_for "$log" "Epoch \[1/" 120 || { verdict redis_password_private FAIL "$expect" "training never started"; cleanup_case; return; }
  for p in $job $(children_of "$job"); do
    checked=$((checked + 1))
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q secretpw7 && leaked="$leaked $p"
  done
  wait_exit "$job" 120
  rc=$status
  if [ "$rc" = 0 ] && [ -z "$leaked" ] && ! grep -q secretpw7 "$log" && ! grep -q "warning: the Redis password" "$log"; then
    verdict redis_password_private PASS "$expect" "exit 0; the command lines of $checked processes (ringrun, its workers) checked while training: none holds it"
  else
    verdict redis_password_private FAIL "$expect" "exit $rc; on the command line of:${leaked:- none}"
  fi
  cleanup_case
}

case_file_store_read_only() {
  local mnt=$work/rofs job rc
  local expect="the file store's filesystem turns read-only mid-training: no abort; the workers finish, ringrun warns, exit 0"
  [ "$(id -u)" = 0 ] && mkdir -p "$mnt" && mount -t tmpfs -o size=16m tmpfs "$mnt" 2>/dev/null ||
    { verdict file_store_read_only SKIP "$expect" "needs root to mount a tmpfs"; return; }
  log=$work/file_store_read_only.log
  setsid "$ringrun" --nproc_per_node 2 --use_env --rdzv_endpoint "file://$mnt/store" --run_id "ro-$tag" \
    --timeout "$timeout_s" "$ringtrain" "${train_args[@]}" --epochs 30 >"$log" 2>&1 &
  job=$!
  background+=($job)
  wait_for "$log" "Epoch \[1/" 120 && mount -o remount,ro "$mnt"
  wait_exit "$job" 120
  rc=$status
  umount "$mnt" 2>/dev/null
  if [ "$rc" = 0 ] && ! grep -q "terminate called\|SIGABRT" "$log" && grep -q '"final_loss"' "$log" &&
    grep -q -e "could not record" -e "lost the store" "$log"; then
    verdict file_store_read_only PASS "$expect" "exit 0: $(grep -m1 -o -e 'could not record[^(]*' -e 'lost the store [^ ]*' "$log" | sed "s|$work/||")"
  else
    verdict file_store_read_only FAIL "$expect" "exit $rc$(grep -q 'terminate called' "$log" && echo ', terminate called')"
  fi
  cleanup_case
}

# A full disk under --checkpoint-dir: the save whose checksum file finds no room removes its
# data file, the job stops naming the file system's error, and a resume (with room again)
# continues from the checkpoint before, not from a half-recorded one.
case_checkpoint_disk_full() {
  local mnt=$work/fullfs rc rc2 size free filler
  local expect="the checkpoint disk fills between a checkpoint's data file and its checksum: exit 1 naming the error, no data file without checksum left; the resume continues from the one before"
  [ "$(id -u)" = 0 ] && mkdir -p "$mnt" && mount -t tmpfs -o size=16m tmpfs "$mnt" 2>/dev/null ||
    { verdict checkpoint_disk_full SKIP "$expect" "needs root to mount a tmpfs"; return; }
  log=$work/checkpoint_disk_full.log
  "$ringrun" --standalone --nproc_per_node 1 --use_env --timeout 60 "$ringtrain" "${train_args[@]}" --epochs 1 \
    --checkpoint-dir "$mnt/ck" >"$log" 2>&1
  # Leave room for exactly the next data file's blocks: its checksum file finds none.
  size=$(stat -c %s "$mnt"/ck/checkpoint-*.pt)
  free=$(($(stat -f -c '%a * %S' "$mnt")))
  filler=$((free - (size + 4095) / 4096 * 4096))
  fallocate -l "$filler" "$mnt/filler" 2>/dev/null || head -c "$filler" /dev/zero >"$mnt/filler"
  "$ringrun" --standalone --nproc_per_node 1 --use_env --timeout 60 "$ringtrain" "${train_args[@]}" --epochs 2 \
    --checkpoint-dir "$mnt/ck" --resume >"$log" 2>&1
  rc=$?
  local orphans=0 f
  for f in "$mnt"/ck/checkpoint-*.pt; do [ -e "$f.crc32" ] || orphans=$((orphans + 1)); done
  rm -f "$mnt/filler"
  "$ringrun" --standalone --nproc_per_node 1 --use_env --timeout 60 "$ringtrain" "${train_args[@]}" --epochs 2 \
    --checkpoint-dir "$mnt/ck" --resume >"$log.again" 2>&1
  rc2=$?
  cat "$log.again" >>"$log"
  umount "$mnt" 2>/dev/null
  if [ "$rc" = 1 ] && grep -q "No space left on device" "$log" && [ "$orphans" = 0 ] && [ "$rc2" = 0 ] &&
    grep -q "resumed at epoch 2 step" "$log.again" && ! grep -q "skipping checkpoint" "$log.again"; then
    verdict checkpoint_disk_full PASS "$expect" "exit 1: $(grep -m1 -o 'No space left on device' "$log"); no orphan; then exit 0, $(grep -m1 -o 'resumed at epoch [0-9]* step [0-9]*' "$log.again")"
  else
    verdict checkpoint_disk_full FAIL "$expect" "exits $rc/$rc2, $orphans data files without checksum"
  fi
}

case_redis_lost_one_node() {
  local port redis job rc
  local expect="Redis killed mid-training under a one-node ringrun: the store's loss is named, the worker finishes, exit 0 at once"
  command -v redis-server >/dev/null || { verdict redis_lost_one_node SKIP "$expect" "no redis-server"; return; }
  start_redis
  log=$work/redis_lost_one_node.log
  setsid "$ringrun" --nproc_per_node 1 --use_env --run_id "one-$tag" --rdzv_endpoint "redis://127.0.0.1:$port/0" \
    --timeout "$timeout_s" "$ringtrain" "${train_args[@]}" --epochs 40 >"$log" 2>&1 &
  job=$!
  background+=($job)
  wait_for "$log" "Epoch \[1/" 120 || { verdict redis_lost_one_node FAIL "$expect" "training never started"; cleanup_case; return; }
  kill -9 "$redis"
  wait_exit "$job" 120
  rc=$status
  if [ "$rc" = 0 ] && grep -q "lost the store" "$log" && grep -q '"final_loss"' "$log" && grep -q "all workers succeeded" "$log"; then
    verdict redis_lost_one_node PASS "$expect" "exit 0: $(grep -m1 -o 'lost the store [^(]*' "$log")"
  else
    verdict redis_lost_one_node FAIL "$expect" "exit $rc"
  fi
  cleanup_case
}

case_redis_lost_after_rendezvous() {
  local port redis rc0 rc1 i
  local expect="Redis (with a password) killed mid-training under 2 ringruns: the workers (Gloo, not the store) finish; both ringruns name the lost store, never the password; exit 0"
  command -v redis-server >/dev/null || { verdict redis_lost_after_rendezvous SKIP "$expect" "no redis-server"; return; }
  start_redis faultpw
  node_jobs=()
  for i in 0 1; do
    setsid "$ringrun" --nnodes 2 --node_rank "$i" --nproc_per_node 1 --use_env --run_id "redis-lost-$tag" \
      --rdzv_endpoint "redis://:faultpw@127.0.0.1:$port/0" --timeout "$timeout_s" --monitor_interval 0.1 \
      "$ringtrain" "${train_args[@]}" --epochs 40 >"$work/redis_lost.node$i.log" 2>&1 &
    node_jobs+=($!)
    background+=($!)
  done
  log=$work/redis_lost.node0.log
  wait_for "$log" "Epoch \[1/" 120 || { verdict redis_lost_after_rendezvous FAIL "$expect" "training never started"; cleanup_case; return; }
  kill -9 "$redis"
  wait_exit "${node_jobs[0]}" 180
  rc0=$status
  wait_exit "${node_jobs[1]}" 60
  rc1=$status
  cat "$work/redis_lost.node0.log" "$work/redis_lost.node1.log" >"$work/redis_lost.log"
  log=$work/redis_lost.log
  if [ "$rc0" = 0 ] && [ "$rc1" = 0 ] && grep -q "lost the store" "$work/redis_lost.node0.log" &&
    grep -q "lost the store" "$work/redis_lost.node1.log" && grep -q '"final_loss"' "$log" && ! grep -q faultpw "$log"; then
    verdict redis_lost_after_rendezvous PASS "$expect" "exit 0/0; $(grep -m1 -o 'lost the store.*' "$log" | cut -c1-110)"
  else
    verdict redis_lost_after_rendezvous FAIL "$expect" "exits $rc0/$rc1"
  fi
  cleanup_case
}

# --- whole nodes and links (root: two network namespaces on a bridge) -------------------------
source "$here/../../scripts/netns_nodes.sh"
netns_ready=""
cleanup_netns() {
  [ -n "$netns_ready" ] || return 0
  netns_down
  netns_ready=""
}
setup_netns() {
  [ -n "$netns_ready" ] && return 0
  command -v redis-server >/dev/null || { why_skip="no redis-server"; return 1; }
  netns_up rtf 2 || { why_skip=$netns_why; netns_down; return 1; }
  netns_ready=1
  nodes=("${netns_nodes[@]}")
  addresses=("${netns_addresses[@]}")
  ip netns exec "${nodes[0]}" redis-server --port 6379 --bind "${addresses[0]}" --save "" --appendonly no \
    --protected-mode no --daemonize no >/dev/null 2>&1 &
  disown  # killed with the namespace; no job notice
  for _ in $(seq 50); do
    ip netns exec "${nodes[1]}" bash -c "exec 3<>/dev/tcp/${addresses[0]}/6379" 2>/dev/null && break
    sleep 0.1
  done
}
# start_nodes NAME RINGTRAIN_FLAGS...: one ringrun per namespace (2 workers each, world size 4),
# logs $work/NAME.node0.log and .node1.log; sets node_jobs.
start_nodes() {
  local name=$1 i
  shift
  node_jobs=()
  for i in 0 1; do
    ip netns exec "${nodes[$i]}" env RINGTORCH_HOST_ID="fault-node$i" setsid "$ringrun" --nnodes 2 --node_rank "$i" \
      --nproc_per_node 2 --use_env --rdzv_endpoint "redis://${addresses[0]}:6379/0" --run_id "$name-$tag" \
      --timeout "$timeout_s" "$ringtrain" "${train_args[@]}" "$@" >"$work/$name.node$i.log" 2>&1 &
    node_jobs+=($!)
    background+=($!)
  done
  log=$work/$name.node0.log
}
node_case() {  # NAME FAULT EXPECTATION: FAULT is a function run once training is under way
  local name=$1 fault=$2 expect=$3 t0 rc0 secs
  setup_netns || { verdict "$name" SKIP "$expect" "$why_skip"; return; }
  start_nodes "$name" --epochs 30
  disown "${node_jobs[1]}"  # the fault may kill it; only node 0's exit is checked
  wait_for "$work/$name.node0.log" "Epoch \[1/" 180 || { verdict "$name" FAIL "$expect" "training never started"; cleanup_case; return; }
  t0=$(now)
  $fault
  wait_exit "${node_jobs[0]}" $((timeout_s + 50))
  rc0=$status
  secs=$(since "$t0")
  cat "$work/$name.node0.log" "$work/$name.node1.log" >"$work/$name.log"
  log=$work/$name.log
  if [ "$rc0" != 0 ] && [ "$rc0" != 124 ]; then
    verdict "$name" PASS "$expect" "node 0 exit $rc0 ${secs} s after the fault: $(grep -m1 -o '\[rank [0-9]*/[0-9]*\] [a-z]* #[0-9]* (group [^,]*, [^)]*) \(timed out\|lost a peer\) after at most [0-9]* s' "$work/$name.node0.log") ... $(grep -m1 -o '(its peer rank [^)]*)' "$work/$name.node0.log")"
  else
    verdict "$name" FAIL "$expect" "node 0 exit $rc0 ${secs} s after the fault"
  fi
  cleanup_case
  # node 1's processes (stopped ones too) go; node 0's Redis stays for the next case
  ip netns pids "${nodes[1]}" 2>/dev/null | xargs -r kill -9 2>/dev/null
}
kill_node1() { ip netns pids "${nodes[1]}" | xargs -r kill -9; }
stop_node1() { ip netns pids "${nodes[1]}" | xargs -r kill -STOP; }
link_down_node1() { ip link set "${netns_links[1]}" down; }
case_node_kill9() { node_case node_kill9 kill_node1 "every process of node 1 killed: node 0 exits non-zero within the ${timeout_s} s timeout + 50 s"; }
case_node_sigstop() { node_case node_sigstop stop_node1 "every process of node 1 stopped: node 0 exits non-zero within the ${timeout_s} s timeout + 50 s"; }
case_link_down() {
  node_case link_down link_down_node1 "node 1's link down: node 0 exits non-zero within the ${timeout_s} s timeout + 50 s"
  ip link set "${netns_links[1]}" up 2>/dev/null
}

case_packet_loss_1pct() {
  local expect="1% of node 1's packets dropped (nftables, both ways): the job finishes, exit 0 on both nodes, ranks identical" rc0 rc1 json
  setup_netns || { verdict packet_loss_1pct SKIP "$expect" "$why_skip"; return; }
  command -v nft >/dev/null || { verdict packet_loss_1pct SKIP "$expect" "no nft (apt-get install nftables)"; return; }
  ip netns exec "${nodes[1]}" nft -f - <<'NFT'
table inet ringtorch_loss {
  chain in { type filter hook input priority 0; numgen random mod 100 < 1 counter drop; }
  chain out { type filter hook output priority 0; numgen random mod 100 < 1 counter drop; }
}
NFT
  start_nodes packet_loss_1pct --epochs 5
  wait_exit "${node_jobs[0]}" 300
  rc0=$status
  wait_exit "${node_jobs[1]}" 60
  rc1=$status
  local dropped
  dropped=$(ip netns exec "${nodes[1]}" nft list table inet ringtorch_loss 2>/dev/null |
    awk '/counter packets/ { for (i = 1; i <= NF; i++) if ($i == "packets") n += $(i + 1) } END { print n + 0 }')
  ip netns exec "${nodes[1]}" nft delete table inet ringtorch_loss
  cat "$work/packet_loss_1pct.node0.log" "$work/packet_loss_1pct.node1.log" >"$work/packet_loss_1pct.log"
  log=$work/packet_loss_1pct.log
  json=$(grep -o '{"device".*' "$log" | head -1)
  if [ "$rc0" = 0 ] && [ "$rc1" = 0 ] && [ -n "$json" ] &&
    /usr/bin/python3 -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(len(set(r["parameter_checksums"])) != 1 or r["world_size"] != 4)' "$json"; then
    verdict packet_loss_1pct PASS "$expect" "exit 0/0, 4 ranks identical, $(/usr/bin/python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print("%.0f samples/s" % r["samples_per_s"])' "$json") ($dropped packets dropped)"
  else
    verdict packet_loss_1pct FAIL "$expect" "exits $rc0/$rc1"
  fi
  cleanup_case
}

# --- the matrix -------------------------------------------------------------------------------
quick_cases=(mismatch_dtype_tcp mismatch_same_bytes_tcp mismatch_count_tcp mismatch_op_tcp mismatch_dtype_shm
  mismatch_barrier_shm mismatch_send_recv worker_kill9 worker_kill9_restart worker_sigstop checkpoint_truncated checkpoint_bit_flip
  checkpoint_empty checkpoint_no_checksum checkpoint_garbled_checksum checkpoint_optimizer_state
  checkpoint_all_damaged checkpoint_other_model checkpoint_python_resaved init_from_python diverged_training duplicate_run_id output_path_unwritable master_addr_wrong redis_down_before_rendezvous redis_password_private redis_lost_one_node redis_lost_after_rendezvous)
slow_cases=(node_kill9 node_sigstop link_down packet_loss_1pct file_store_read_only checkpoint_disk_full)
if [ "$list" = 1 ]; then
  printf '%s (quick)\n' "${quick_cases[@]}"
  printf '%s (root)\n' "${slow_cases[@]}"
  exit 0
fi
for tool in "$ringrun" "$ringtrain" "$caller"; do
  [ -x "$tool" ] || { echo "fault_matrix: $tool is missing: build first (bash scripts/setup.sh)" >&2; exit 2; }
done
if [ ${#selected[@]} -eq 0 ]; then
  selected=("${quick_cases[@]}")
  [ "$quick" = 1 ] || selected+=("${slow_cases[@]}")
fi
started=$(now)
for c in "${selected[@]}"; do
  declare -F "case_$c" >/dev/null || { echo "fault_matrix: no case '$c' (see --list)" >&2; exit 2; }
  log=""
  "case_$c"
done
echo "fault_matrix: $passed passed, $failed failed, $skipped skipped in $(since "$started") s"
[ "$failed" = 0 ]
