#!/usr/bin/env bash
# A ringrun worker for bench/compare_hetero: the rank whose LOCAL_RANK is $HETERO_SLOW_RANK
# first moves itself into the cgroup $HETERO_CGROUP (a CPU quota: a slower machine; none when
# empty) and trains on the CPU; every other rank trains on $HETERO_FAST_DEVICE (default cpu).
# The device goes last on the command line ("$@" is the program and its flags): ringtrain takes
# the last --device it is given, so this one overrides any given before it.
slow_device=cpu
if [ "${LOCAL_RANK:-0}" = "${HETERO_SLOW_RANK:-1}" ]; then
  [ -n "${HETERO_CGROUP:-}" ] && echo $$ >"$HETERO_CGROUP/cgroup.procs"
  exec "$@" --device "$slow_device"
fi
exec "$@" --device "${HETERO_FAST_DEVICE:-cpu}"
