#!/usr/bin/python3
"""PyTorch's Python DDP (gloo) training the same models on the same in-memory Fashion-MNIST as
ringtrain, for bench/compare_training. Launch like any env:// program; rank 0 prints one JSON
line: {"impl": "torch", "model", "world_size", "samples_per_s", "test_accuracy"}. --powersgd-rank R
registers PyTorch's powerSGD_hook (rank R, start_powerSGD_iter --powersgd-start-step).
--local-steps H: PyTorch's local SGD instead of DDP, PostLocalSGDOptimizer with a
PeriodicModelAverager (the parameters averaged every H steps; no outer optimizer)."""
import argparse
import gzip
import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook as powerSGD
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed.algorithms.model_averaging.averagers as averagers
from torch.distributed.optim import PostLocalSGDOptimizer
from torch.utils.data.distributed import DistributedSampler


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models", "python"))
from ringtorch_models import MODELS  # noqa: E402  (the same definitions ringtrain's models follow)


def load(directory, prefix):
    with gzip.open(os.path.join(directory, prefix + "-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(os.path.join(directory, prefix + "-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    # ToTensor() + Normalize((0.5,), (0.5,)), as the seeds.
    x = (torch.from_numpy(images.copy()).float() / 255 - 0.5) / 0.5
    return x, torch.from_numpy(labels.astype(np.int64))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="lenet")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--device", default="cpu", help="cpu, or cuda (rank r on cuda:LOCAL_RANK mod the GPU count)")
    p.add_argument("--powersgd-rank", type=int, default=0, help="> 0: DDP with powerSGD_hook at this rank")
    p.add_argument("--powersgd-start-step", type=int, default=2, help="start_powerSGD_iter (at least 2 in torch)")
    p.add_argument("--local-steps", type=int, default=0, help="> 0: local SGD, parameters averaged every H steps")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cpu")
    if a.device == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
        torch.cuda.set_device(device)
    # The data lives where the model does, as ringtrain keeps it (in memory, batches sliced there).
    train_x, train_y = (t.to(device) for t in load(a.data_dir, "train"))
    test_x, test_y = (t.to(device) for t in load(a.data_dir, "t10k"))
    torch.manual_seed(0)
    bucket_cap_mb = 25
    if a.powersgd_rank > 0:
        # One bucket: torch 1.13's powerSGD_hook issues each bucket's second all-reduce from a future
        # callback, and with several buckets the ranks issue them in different orders; gloo then fails
        # ("op.preamble.length <= op.nbytes") or hangs (measured with mlp3's two buckets).
        dist._DEFAULT_FIRST_BUCKET_BYTES = 1 << 30
        bucket_cap_mb = 1024
    net = MODELS[a.model]().to(device)  # the same seed on every rank: the same initial weights
    model = net if a.local_steps > 0 else nn.parallel.DistributedDataParallel(net, bucket_cap_mb=bucket_cap_mb)
    if a.powersgd_rank > 0:
        state = powerSGD.PowerSGDState(process_group=None, matrix_approximation_rank=a.powersgd_rank,
                                       start_powerSGD_iter=max(2, a.powersgd_start_step))
        model.register_comm_hook(state, powerSGD.powerSGD_hook)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    if a.local_steps > 0:
        opt = PostLocalSGDOptimizer(opt, averagers.PeriodicModelAverager(period=a.local_steps, warmup_steps=0))
    sampler = DistributedSampler(range(len(train_y)), num_replicas=world, rank=rank, shuffle=True, seed=0)
    seconds, samples = 0.0, 0
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        idx = torch.tensor(list(sampler), device=device)
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for i in range(0, len(idx), a.batch_size):
            b = idx[i:i + a.batch_size]
            opt.zero_grad()
            F.cross_entropy(model(train_x[b]), train_y[b]).backward()
            opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds += time.perf_counter() - start
        samples += len(idx) * world
    with torch.no_grad():
        if a.local_steps > 0:  # the steps since the last averaging: average them too, as ringtrain ends an epoch
            for p in net.parameters():
                dist.all_reduce(p.data)
                p.data /= world
        mine = torch.arange(rank, len(test_y), world, device=device)
        correct = (net(test_x[mine]).argmax(1) == test_y[mine]).sum()
    counts = torch.tensor([float(correct), seconds])  # on the CPU: gloo reduces either
    dist.all_reduce(counts[:1])
    t = counts[1:].clone()
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(json.dumps({"impl": "torch", "model": a.model, "world_size": world,
                          "samples_per_s": samples / t.item(), "test_accuracy": counts[0].item() / len(test_y)}),
              flush=True)
    os._exit(0)  # Python gloo processes of 1.13 sometimes hang at exit (ENVIRONMENT.md)


if __name__ == "__main__":
    main()
