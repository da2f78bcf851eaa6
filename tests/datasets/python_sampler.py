#!/usr/bin/python3
"""Prints, one JSON object per line, the indices Python's DistributedSampler yields for the grid
the C++ parity test checks (tests/datasets/distributed_sampler_test.cc). With --digest, each
line carries a digest of the indices instead (FNV-1a 64 over "i0,i1,...,"): that is how
python_sampler_digests.jsonl, the fallback for machines without python3-torch, was made."""
import json
import sys

from torch.utils.data.distributed import DistributedSampler


class Sized:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


def digest(indices):
    h = 0xcbf29ce484222325
    for b in "".join("%d," % i for i in indices).encode():
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return "%016x" % h


as_digest = "--digest" in sys.argv
for n in (10, 17, 60000, 1, 2):
    for replicas in (2, 3):
        for seed in (0, 42):
            for epoch in (0, 1):
                for drop_last in (False, True):
                    for shuffle in ((True, False) if n < 100 else (True,)):
                        for rank in range(replicas):
                            s = DistributedSampler(Sized(n), num_replicas=replicas, rank=rank,
                                                   shuffle=shuffle, seed=seed, drop_last=drop_last)
                            s.set_epoch(epoch)
                            case = {"n": n, "replicas": replicas, "rank": rank, "seed": seed, "epoch": epoch,
                                    "drop_last": drop_last, "shuffle": shuffle, "len": len(s)}
                            if as_digest:
                                case["digest"] = digest(list(s))
                            else:
                                case["indices"] = list(s)
                            print(json.dumps(case))
sys.stdout.flush()
