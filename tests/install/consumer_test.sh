#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, builds tests/install/consumer against it with
# find_package(ringtorch), and runs the result.
set -euo pipefail
build_dir=$1
consumer_src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
test -x "$work/prefix/bin/ringrun" || { echo "ringrun was not installed"; exit 1; }
test -f "$work/prefix/lib/cmake/ringtorch/ringtorchConfig.cmake" || { echo "no ringtorchConfig.cmake"; exit 1; }
# Only the public API is installed, flat under include/ringtorch/, and none of it names Gloo (or
# another of the libraries' private engines) or an internal header.
headers=$(cd "$work/prefix/include" && find . -type f | sort)
if grep -qv '^\./ringtorch/[a-z_]*\.h$' <<<"$headers"; then
  echo "installed headers outside include/ringtorch/*.h:"; grep -v '^\./ringtorch/[a-z_]*\.h$' <<<"$headers"; exit 1
fi
if grep -lE '#include [<"](gloo|hiredis|spdlog|CLI)/|#include "' "$work"/prefix/include/ringtorch/*.h; then
  echo "the public headers above include Gloo, a private engine or an internal header"; exit 1
fi
test -f "$work/prefix/include/ringtorch/ringtorch.h" || { echo "no umbrella header <ringtorch/ringtorch.h>"; exit 1; }
cmake -S "$consumer_src" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
# The libraries carry major.minor in their SONAME (cmake/Install.cmake), and what links to them
# records that name: a program built against another minor version does not start.
soname=$(readelf -d "$work/prefix/lib/libringtorch_runtime.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ "$soname" =~ ^libringtorch_runtime\.so\.[0-9]+\.[0-9]+$ ]] ||
  { echo "libringtorch_runtime.so's SONAME is '$soname', not libringtorch_runtime.so.MAJOR.MINOR"; exit 1; }
needed=$(readelf -d "$work/build/consumer" | sed -n 's/.*(NEEDED).*\[\(libringtorch_.*\)\]/\1/p')
if [ -z "$needed" ] || grep -qvE '\.so\.[0-9]+\.[0-9]+$' <<<"$needed"; then
  echo "the consumer should record ringtorch's libraries by versioned names; it records: ${needed:-none}"
  exit 1
fi
"$work/build/consumer" "$work/store" | tee "$work/run.log"
grep -q "consumer: rank 0/1, store says ok, all-reduce 1 over route none" "$work/run.log"
echo "consumer project built and ran against the installed ringtorch"
