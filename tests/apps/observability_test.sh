#!/usr/bin/env bash
# What a job leaves to look at, end to end with real processes (docs/observability.md):
#  1. a 2-rank 1-epoch ringtrain run on the real Fashion-MNIST under ringrun with --timeline
#     (ringrun merges the workers' parts) and ringtrain's own --timeline (gathered to rank 0):
#     both are valid Chrome traces with both ranks and the expected span names; the straggler
#     table is printed and the final JSON and metrics carry per-rank times; --plot writes an SVG;
#     ringtrace plot and ringtrace draw make pictures from the files;
#  2. a mismatched collective between two real processes: every rank writes its flight recorder,
#     ringrun prints the summary, and `ringtrace DIR --json` says both ranks failed at the same
#     operation with different calls;
#  3. bad input to ringtrace and --plot exits non-zero with a message.
set -euo pipefail
ringrun=$1
ringtrain=$2
ringtrace=$3
collective_caller=$4
source "$(dirname "$0")/fashion_mnist_or_skip.sh"

out=$(RINGTORCH_TIMELINE="$dir/launcher.json" "$ringrun" --standalone --nproc_per_node 2 --use_env --timeout 120 \
  "$ringtrain" --model lenet --epochs 1 --max-train-samples 4096 --progress off \
  --timeline "$dir/gathered.json" --plot "$dir/run.svg" --metrics "$dir/metrics.jsonl" 2>&1) || { echo "$out"; exit 1; }
echo "$out"
grep -q "\[ringtorch\] epoch 1, per rank: " <<<"$out" || { echo "FAILED: no per-rank table"; exit 1; }
grep -q "\[ringtorch\] slowest: rank [01] " <<<"$out" || { echo "FAILED: no slowest-rank line"; exit 1; }
grep -q "\[ringrun\] timeline: $dir/launcher.json (2 of 2 ranks" <<<"$out" || { echo "FAILED: ringrun did not merge"; exit 1; }
ls "$dir"/launcher.json.rank*.json 2>/dev/null && { echo "FAILED: timeline parts left behind"; exit 1; }
/usr/bin/python3 - "$dir" "$(grep -o '{"device".*' <<<"$out")" <<'PY'
import html, json, re, sys
d, final = sys.argv[1], json.loads(sys.argv[2])
for name in ("launcher.json", "gathered.json"):
    trace = json.load(open(f"{d}/{name}"))
    events = trace["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert all(k in e for e in spans for k in ("name", "ts", "dur", "pid", "tid")), name
    assert {e["pid"] for e in spans} == {0, 1}, (name, {e["pid"] for e in spans})
    for rank in (0, 1):
        names = {e["name"] for e in spans if e["pid"] == rank}
        expected = {"rendezvous", "process group", "epoch", "step", "load batch", "forward", "backward",
                    "optimizer", "evaluate", "allreduce", "bucket 0", "broadcast"}
        assert expected <= names, (name, rank, expected - names)
        buckets = [e for e in spans if e["pid"] == rank and e["name"] == "allreduce" and
                   e["args"].get("label", "").startswith("ddp bucket")]
        assert buckets and all(e["args"]["bytes"] > 0 and e["args"]["path"] for e in buckets), name
    ts = [e["ts"] for e in events if e["ph"] == "X"]
    assert ts == sorted(ts), name + ": not sorted by time"
    threads = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"training loop", "collectives", "ddp bucket 0"} <= threads, threads
    print(f"{name}: {len(spans)} spans, ranks 0 and 1")
ranks = final["ranks"]
assert [r["rank"] for r in ranks] == [0, 1] and all(r["samples"] == 2048 and r["compute_s"] > 0 for r in ranks), ranks
metrics = [json.loads(l) for l in open(f"{d}/metrics.jsonl")]
assert len(metrics[0]["ranks"]) == 2 and metrics[0]["ranks"][1]["samples_per_s"] > 0, metrics
def svg_text(path):  # PLplot writes each character as an entity inside <text>
    svg = open(path).read()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg, svg[:200]
    return re.sub(r"<[^>]+>", "", html.unescape(svg))
assert "samples/s per rank" in svg_text(f"{d}/run.svg")
print("final JSON and metrics carry per-rank times; run.svg drawn")
PY
out=$("$ringtrace" plot "$dir/metrics.jsonl" "$dir/again.svg") && grep -q "1 epochs" <<<"$out"
out=$("$ringtrace" draw "$dir/gathered.json" "$dir/timeline.svg" --from-step 5 --ms 10) && grep -q "10 ms" <<<"$out"
/usr/bin/python3 -c 'import html, re, sys; t = re.sub(r"<[^>]+>", "", html.unescape(open(sys.argv[1]).read()));
assert "rank 1: training loop" in t and "forward" in t, "the timeline picture has no rank 1 lane"' "$dir/timeline.svg"

# 2. A mismatch between two real processes.
flight="$dir/flight"
if out=$(RINGTORCH_FLIGHT_RECORDER_DIR="$flight" "$ringrun" --standalone --nproc_per_node 2 --use_env --timeout 60 \
  "$collective_caller" allreduce:float32:4 allreduce:float64:4 2>&1); then
  echo "$out"; echo "FAILED: a mismatch succeeded"; exit 1
fi
echo "$out"
grep -q "flight recorder: $flight/rank0.json (read every rank's: ringtrace $flight)" <<<"$out" ||
  { echo "FAILED: rank 0's error does not say where its file is"; exit 1; }
grep -q "\[ringrun\] flight recorder: group 'default': ranks 0,1 failed at operation #0, where the calls differ" <<<"$out" ||
  { echo "FAILED: ringrun printed no summary"; exit 1; }
/usr/bin/python3 - "$("$ringtrace" "$flight" --json)" <<'PY'
import json, sys
a = json.loads(sys.argv[1])
g = a["groups"][0]
assert g["group"] == "default" and g["size"] == 2, g
for r in g["ranks"]:
    assert r["dumped"] and r["state"] == "failed" and r["sequence"] == 0 and r["op"] == "allreduce", r
    assert r["reason"].startswith("MismatchError in allreduce #0"), r
assert "float32" in g["ranks"][0]["detail"] and "float64" in g["ranks"][1]["detail"], g["ranks"]
assert any("where the calls differ" in line for line in a["summary"]), a["summary"]
print("mismatch: both ranks' files read, the calls named")
PY

# 3. Bad input.
expect_failure() {
  local expected=$1; shift
  if out=$("$@" 2>&1); then echo "FAILED: accepted $*"; exit 1; fi
  grep -q -- "$expected" <<<"$out" || { echo "$out"; echo "FAILED: '$*' does not say '$expected'"; exit 1; }
}
expect_failure "no flight-recorder file" "$ringtrace" "$dir"
expect_failure "is not a directory" "$ringtrace" "$dir/absent"
echo '{"epoch": "x"}' >"$dir/bad.jsonl"
expect_failure "bad.jsonl line 1" "$ringtrace" plot "$dir/bad.jsonl" "$dir/bad.svg"
expect_failure "give a file name ending in .svg" "$ringtrain" --plot "$dir/run.png"
expect_failure "not a Chrome trace" "$ringtrace" merge "$dir/m.json" "$dir/metrics.jsonl"
echo "observability: OK"
