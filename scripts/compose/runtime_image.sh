# The ringtorch runtime image (docker/runtime.Dockerfile) from this machine's build, for
# scripts/compose_cluster.sh (sourced; root, with a Docker engine).
#
#   runtime_image_build BUILD_DIR SOURCE_DIR TAG BASE_IMAGE || die "$runtime_image_why"
#
# Installs BUILD_DIR (cmake --install) into a staging directory under usr/local, finds the Debian
# packages that provide what its programs and libraries link against (their NEEDED entries,
# through dpkg), copies the libraries no package provides (the CUDA runtime of a build with
# RINGTORCH_CUDA), and builds TAG from BASE_IMAGE. The package layer depends only on the package
# list, so rebuilding after a code change reuses it (docker's layer cache): seconds, not minutes.

runtime_image_build() {
  local build_dir=$1 source_dir=$2 tag=$3 base=$4 stage
  stage=$(mktemp -d "${scratch_dir:-/var/tmp}/ringtorch-image.XXXXXX")
  if ! cmake --install "$build_dir" --prefix "$stage/usr/local" >"$stage.log" 2>&1; then
    runtime_image_why="cmake --install $build_dir failed: $(tail -n 1 "$stage.log")"
    rm -rf "$stage" "$stage.log"
    return 1
  fi
  local elves=() f
  while IFS= read -r f; do
    head -c 4 "$f" 2>/dev/null | grep -q ELF && elves+=("$f")
  done < <(find "$stage/usr/local/bin" "$stage/usr/local/lib" -type f)
  # Every library the programs load, as the dynamic linker resolves them, and the package of each
  # (one dpkg call: it takes a quarter of a second per call).
  local closure=() path
  while read -r path; do
    case "$path" in "$stage"/*) ;; *) closure+=("$path") ;; esac
  done < <(ldd "${elves[@]}" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
  local -A package_of=()
  packages_of "${closure[@]}"
  # Packages: those of the libraries named directly (apt brings what those need in turn).
  local packages=(libopenblas0-pthread redis-server iproute2) name
  for f in "${elves[@]}"; do
    while read -r name path; do
      [ -n "$path" ] && [ -n "${package_of[$path]:-}" ] && packages+=("${package_of[$path]}")
    done < <(direct_libraries "$f")
  done
  # Files: every library in the closure that no package provides (the CUDA runtime).
  local copied=()
  for path in "${closure[@]}"; do
    [ -z "${package_of[$path]:-}" ] || continue
    cp -L "$path" "$stage/usr/local/lib/$(basename "$path")"
    copied+=("$(basename "$path")")
  done
  cp "$source_dir/docker/node_entrypoint.sh" "$source_dir/scripts/link_shaping.sh" "$stage/"
  local list
  list=$(printf '%s\n' "${packages[@]}" | sort -u | tr '\n' ' ')
  echo "compose_cluster: image $tag: $base + ${list}+ the build in $build_dir${copied[*]:+ + ${copied[*]} (no package provides them)}"
  if ! timeout 1800 docker build -q -f "$source_dir/docker/runtime.Dockerfile" --build-arg "BASE_IMAGE=$base" \
    --build-arg "PACKAGES=$list" -t "$tag" "$stage" >"$stage.log" 2>&1; then
    runtime_image_why="docker build of $tag failed: $(grep -v '^ *$' "$stage.log" | tail -n 1) (log: $stage.log)"
    rm -rf "$stage"
    return 1
  fi
  rm -rf "$stage" "$stage.log"
}

# NAME PATH for each library FILE names directly, PATH as the dynamic linker resolves it.
direct_libraries() {
  local file=$1 name
  local -A where=()
  while read -r name _ path _; do where[$name]=$path; done < <(ldd "$file" 2>/dev/null | awk '$2 == "=>"')
  for name in $(objdump -p "$file" | awk '$1 == "NEEDED" {print $2}'); do
    echo "$name ${where[$name]:-}"
  done
}

# packages_of PATH...: fills the caller's package_of[PATH] with the Debian package that
# installed PATH, where one did (merged /usr: dpkg may know it under /lib or /usr/lib).
packages_of() {
  local path candidate real
  local -A candidates=() owner=()
  for path in "$@"; do
    real=$(readlink -f "$path")
    for candidate in "$path" "$real" "${real#/usr}" "/usr$path"; do candidates[$candidate]=1; done
  done
  local line
  while IFS= read -r line; do
    owner[${line#*: }]=${line%%: *}
  done < <(dpkg -S "${!candidates[@]}" 2>/dev/null | grep -v '^diversion')
  for path in "$@"; do
    real=$(readlink -f "$path")
    for candidate in "$path" "$real" "${real#/usr}" "/usr$path"; do
      if [ -n "${owner[$candidate]:-}" ]; then
        package_of[$path]=${owner[$candidate]%%[:,]*}
        break
      fi
    done
  done
}
