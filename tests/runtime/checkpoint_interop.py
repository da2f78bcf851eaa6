#!/usr/bin/python3
"""Python's side of the checkpoint round trip (checkpoint_test.cc): torch.load a C++
checkpoint, load its model entry into the equivalent Python model with strict=True, add 1 to
every parameter, and torch.save a dict of the same layout for C++ to read back."""
import sys

import torch
from torch import nn


class Net(nn.Module):  # the C++ test's NetImpl: fc1 8->16, fc2 16->4, buffer "steps"
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)
        self.register_buffer("steps", torch.zeros(1))


source, target = sys.argv[1], sys.argv[2]
ckpt = torch.load(source)
assert ckpt["format"] == "ringtorch-checkpoint-2", ckpt.keys()
if "optimizer_state" in ckpt:  # plain values: Python reads them without LibTorch's archive
    state = ckpt["optimizer_state"]
    assert state["kind"] in ("sgd", "adam", "adamw", "adagrad", "rmsprop"), state
    for fields in state["parameters"].values():
        assert all(isinstance(v, (torch.Tensor, int)) for v in fields.values()), fields
net = Net()
net.load_state_dict(ckpt["model"], strict=True)
with torch.no_grad():
    for p in net.parameters():
        p.add_(1)
torch.save({"format": ckpt["format"], "model": dict(net.state_dict()), "epoch": ckpt["epoch"] + 1,
            "step": ckpt["step"] + 1, "samples_in_epoch": 0,
            # One entry on purpose: Python pickles a one-item dict with SETITEM, an opcode
            # LibTorch 1.13's unpickler does not know (ringtorch reads it: pickle_reader.h).
            "metadata": {"written_by": "python"}}, target)
print("python: loaded step", ckpt["step"], "epoch", ckpt["epoch"], "metadata", ckpt["metadata"])
