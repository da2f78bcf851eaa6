#!/usr/bin/env bash
# libFuzzer over ringtorch's parsers of untrusted input (tests/fuzz/), each for a bounded time.
#
#   bash scripts/fuzz.sh                       # every target, 600 s each, one after another
#   bash scripts/fuzz.sh --seconds 5           # the smoke run .ci/run does
#   bash scripts/fuzz.sh --seconds 60 idx_reader checkpoint
#
# Builds the targets with clang, ASan and UBSan into build-fuzz/ (FUZZ_BUILD_DIR), fuzzes each
# on a working corpus (build-fuzz/corpus/NAME, seeded from tests/fuzz/corpus/NAME) and prints one
# line per target: executions, executions per second, corpus size, findings. A finding (crash,
# leak, out-of-memory, timeout) is saved as build-fuzz/findings/NAME/<kind>-<sha1>, to replay
# with `build-fuzz/NAME_fuzz FILE`; the script exits 1 when there is any.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=600
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    -h|--help) sed -n 2,12p "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(idx_reader cifar_reader init_method launch_flags job_config checkpoint)
BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}

bash scripts/install_packages.sh fuzz clang-14 libclang-rt-14-dev cmake ninja-build libtorch-dev nlohmann-json3-dev \
  zlib1g-dev libcli11-dev libspdlog-dev

# The build is quiet when it works; when it fails, its errors are what CI shows.
mkdir -p "$BUILD_DIR"
build_log="$BUILD_DIR/build.log"
if ! { cmake -S tests/fuzz -B "$BUILD_DIR" -G Ninja -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 &&
       cmake --build "$BUILD_DIR" --target $(printf '%s_fuzz ' "${targets[@]}") -- -j"$(nproc)"; } >"$build_log" 2>&1; then
  echo "fuzz: building the targets failed; the log is $build_log:" >&2
  grep -E "error|FAILED|undefined reference" "$build_log" | head -20 >&2 || tail -20 "$build_log" >&2
  exit 1
fi

# LibTorch is not built with ASan (its code is not checked, only its calls into memcpy and
# malloc); leaks are reported except those inside LibTorch (tests/lsan_suppressions.txt).
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan_suppressions.txt:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=0
printf '%-14s %12s %10s %8s  %s\n' target executions exec/s corpus findings
for name in "${targets[@]}"; do
  corpus="$BUILD_DIR/corpus/$name"
  findings="$BUILD_DIR/findings/$name"
  mkdir -p "$corpus" "$findings"
  cp -n tests/fuzz/corpus/"$name"/* "$corpus"/ 2>/dev/null || true
  log="$BUILD_DIR/$name.log"
  started="$BUILD_DIR/$name.started"  # findings newer than this are this run's; older ones stay
  touch "$started"
  status=0
  "$BUILD_DIR/${name}_fuzz" "$corpus" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 \
    -malloc_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$findings/" >"$log" 2>&1 || status=$?
  stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
  found=$(find "$findings" -type f -newer "$started" | wc -l)
  printf '%-14s %12s %10s %8s  %s\n' "$name" "$(stat number_of_executed_units)" "$(stat average_exec_per_sec)" \
    "$(ls "$corpus" | wc -l)" "$found"
  if [ "$status" -ne 0 ] || [ "$found" -ne 0 ]; then
    failed=1
    echo "fuzz: $name: a finding (exit $status); the log is $log:" >&2
    grep -m 20 -E "ERROR|SUMMARY|runtime error|terminate|Test unit written" "$log" >&2 || tail -20 "$log" >&2
  fi
done
exit $failed
