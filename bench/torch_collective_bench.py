#!/usr/bin/python3
"""PyTorch's own torch.distributed (gloo backend) running the same sweep as ringbench, for
bench/compare_torch. Launch like any env:// program (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
Rank 0 prints one JSON object per size, as `ringbench --json` does."""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist

DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int32": torch.int32, "int64": torch.int64, "uint8": torch.uint8}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--op", default="allreduce")
    p.add_argument("--min-bytes", type=int, default=4)
    p.add_argument("--max-bytes", type=int, default=64 << 20)
    p.add_argument("--factor", type=int, default=2)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--dtype", default="float32")
    a = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://")
    n, rank = dist.get_world_size(), dist.get_rank()
    dtype = DTYPES[a.dtype]
    item = torch.tensor([], dtype=dtype).element_size()
    factor = {"allreduce": 2 * (n - 1) / n, "allgather": (n - 1) / n, "broadcast": 1.0,
              "reduce_scatter": (n - 1) / n, "alltoall": (n - 1) / n}[a.op]
    blocked = a.op in ("reduce_scatter", "alltoall")  # sizes as ringbench: the whole input, n blocks
    size = max(a.min_bytes, item)
    while size <= a.max_bytes:
        count = size // item
        if blocked:
            count = max(count // n, 1) * n
        x = torch.ones(count, dtype=dtype)
        outs = [torch.empty(count, dtype=dtype) for _ in range(n)]
        y = torch.empty(count, dtype=dtype)

        def once():
            if a.op == "allreduce":
                dist.all_reduce(x)
            elif a.op == "broadcast":
                dist.broadcast(x, 0)
            elif a.op == "reduce_scatter":
                # Gloo in torch 1.13 has no reduce_scatter: what users do instead (all_reduce a
                # copy, keep this rank's block), which is also what ringtorch does underneath.
                y.copy_(x)
                dist.all_reduce(y)
                y.narrow(0, rank * (count // n), count // n).clone()
            elif a.op == "alltoall":
                dist.all_to_all_single(y, x)
            else:
                dist.all_gather(outs, x)

        for _ in range(a.warmup):
            once()
            x.fill_(1)
        dist.barrier()
        times = []
        for _ in range(a.iters):
            start = time.perf_counter()
            once()
            times.append((time.perf_counter() - start) * 1e6)
            x.fill_(1)
        # The slowest rank's mean and median, as ringbench --json.
        t = torch.tensor([sum(times) / a.iters, sorted(times)[a.iters // 2]], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        us, median = t[0].item(), t[1].item()
        algbw = count * item / (us * 1e3)
        if rank == 0:
            print(json.dumps({"impl": "torch", "op": a.op, "type": a.dtype, "bytes": count * item, "count": count,
                              "world_size": n, "time_us": us, "median_us": median, "algbw_gbs": algbw, "busbw_gbs": algbw * factor}),
                  flush=True)
        if size > a.max_bytes // a.factor:
            break
        size *= a.factor
    dist.barrier()
    # Python DDP/gloo processes of 1.13 sometimes hang at interpreter exit (ENVIRONMENT.md).
    os._exit(0)


if __name__ == "__main__":
    main()
