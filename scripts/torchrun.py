#!/usr/bin/python3
"""torchrun for Debian 12's python3-torch 1.13 on Python 3.11.

torchrun 1.13 crashes there before it starts a worker: Std.from_str() returns None because
Python 3.11 changed how IntFlag members are looked up, and elastic/multiprocessing/api.py then
calls .get() on None. This wrapper replaces Std.from_str with a parser that builds the enum
from its integer value, then runs torch.distributed.run.main() unchanged. Newer torchrun
releases need no wrapper: run `torchrun` directly.

  /usr/bin/python3 scripts/torchrun.py --standalone --nproc_per_node 2 --no_python build/apps/ringhello
"""
import re
import sys

from torch.distributed.elastic.multiprocessing import api


def _std_from_str(value):
    """Parses "0".."3" (one setting for every rank) or "0:1,1:2" (per local rank)."""
    def to_std(v):
        return api.Std(int(v))

    if re.fullmatch(r"\d", value):
        return to_std(value)
    pairs = {}
    for item in value.split(","):
        local_rank, setting = item.split(":")
        pairs[int(local_rank)] = to_std(setting)
    return pairs


api.Std.from_str = staticmethod(_std_from_str)

if __name__ == "__main__":
    from torch.distributed.run import main
    sys.exit(main())
