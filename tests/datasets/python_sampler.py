#!/usr/bin/python3
"""Prints, one JSON object per line, the indices Python's DistributedSampler yields for the grid
the C++ parity test checks (tests/datasets/distributed_sampler_test.cc)."""
import json
import sys

from torch.utils.data.distributed import DistributedSampler


class Sized:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


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
                            print(json.dumps({"n": n, "replicas": replicas, "rank": rank, "seed": seed,
                                              "epoch": epoch, "drop_last": drop_last, "shuffle": shuffle,
                                              "len": len(s), "indices": list(s)}))
sys.stdout.flush()
