#!/usr/bin/env bash
# A ringrun worker for bench/compare_hetero: the rank whose LOCAL_RANK is $HETERO_SLOW_RANK
# first moves itself into the cgroup $HETERO_CGROUP (a CPU quota: a slower machine), then runs
# the program ("$@") there; every other rank runs it as is.
if [ -n "${HETERO_CGROUP:-}" ] && [ "${LOCAL_RANK:-0}" = "${HETERO_SLOW_RANK:-1}" ]; then
  echo $$ >"$HETERO_CGROUP/cgroup.procs"
fi
exec "$@"
