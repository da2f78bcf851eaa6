#!/usr/bin/python3
"""Python's side of torch_save_test.cc: what Python's torch.save writes, for C++ to read back.

    torch_save_cases.py cases DIR      every case below as DIR/<name>.pt, and a line "<name>
                                       <expected>" in DIR/expected.txt: the value as
                                       torch_save_test.cc describes it (tensors as dtype[shape]sum)
    torch_save_cases.py resave SRC DST torch.load a ringtorch checkpoint and torch.save it again
    torch_save_cases.py state_dict DST FC2_OUT
                                       the state_dict of the C++ test's Net (fc1 8->16,
                                       fc2 16->FC2_OUT, buffer "steps"), wrapped as DDP wraps a
                                       model ("module." names), every value its index + 0.5
"""
import collections
import os
import struct
import sys
import zipfile

import torch
from torch import nn

if sys.argv[1] == "resave":
    torch.save(torch.load(sys.argv[2]), sys.argv[3])
    sys.exit(0)
if sys.argv[1] == "state_dict":
    class Net(nn.Module):
        def __init__(self, fc2_out):
            super().__init__()
            self.fc1 = nn.Linear(8, 16)
            self.fc2 = nn.Linear(16, fc2_out)
            self.register_buffer("steps", torch.zeros(1))

    class Wrapped(nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module = module

    model = Wrapped(Net(int(sys.argv[3])))
    with torch.no_grad():
        for i, v in enumerate(model.state_dict().values()):
            v.fill_(i + 0.5)
    torch.save(model.state_dict(), sys.argv[2])
    sys.exit(0)
assert sys.argv[1] == "cases", sys.argv
out = sys.argv[2]
torch.manual_seed(0)
t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
net = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))  # a state_dict with buffers and _metadata
sgd = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
net(torch.randn(4, 3)).sum().backward()
sgd.step()

cases = {
    # Python pickles a one-entry dict with SETITEM and a one-item list with APPEND.
    "one_entry_dict": ({"a": t}, 2),
    "one_item_list": ([t], 2),
    "nested_one_entry": ({"x": {"y": {"z": 1}}}, 2),
    # model.state_dict() is an OrderedDict carrying a _metadata attribute (BUILD).
    "state_dict": (net.state_dict(), 2),
    "optimizer_state_dict": (sgd.state_dict(), 2),
    # LONG1 shorter than 8 bytes, negative numbers, floats, None, bools, tuples.
    "scalars": ({"i": 1, "f": 0.5, "b": True, "n": None, "s": "x", "big": 2**40, "neg": -3,
                 "neg_big": -(2**40), "tup": (1, 2), "one": (1,)}, 2),
    "int_keys": ({0: t, 1: t + 1}, 2),
    "empty": ({"d": {}, "l": [], "t": ()}, 2),
    # Two names for one tensor, a view into a storage, the dtypes a state_dict holds.
    "shared": ({"a": t, "b": t}, 2),
    "view": ({"row": t[1], "column": t[:, 1]}, 2),
    "dtypes": ({"f64": t.double(), "f16": t.half(), "bf16": t.bfloat16(), "i64": t.long(),
                "i32": t.int(), "u8": t.to(torch.uint8), "bool": t > 2}, 2),
    # torch.save(..., pickle_protocol=4 or 5): FRAME, MEMOIZE, SHORT_BINUNICODE, STACK_GLOBAL.
    "protocol4": ({"a": t, "b": {"c": 1}}, 4),
    "protocol5": ({"a": t, "b": [1]}, 5),
}


def describe(v):
    if isinstance(v, torch.Tensor):
        return "%s%s%g" % (str(v.dtype).replace("torch.", ""), list(v.shape), float(v.double().sum()))
    if isinstance(v, dict):
        return "{" + ", ".join("%s: %s" % (describe(k), describe(x)) for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(describe(x) for x in v) + "]"
    if isinstance(v, tuple):
        return "(" + ", ".join(describe(x) for x in v) + ")"
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        return "%g" % v
    return str(v)


with open(os.path.join(out, "expected.txt"), "w") as expected:
    for name, (value, protocol) in cases.items():
        torch.save(value, os.path.join(out, name + ".pt"), pickle_protocol=protocol)
        expected.write("%s %s\n" % (name, describe(value)))

# torch 2.x's archive layout, emulated on 1.13's (this machine has no torch 2.x): the records 2.x
# adds beside data.pkl (byteorder, .format_version, .storage_alignment, .data/serialization_id)
# and Adam's state with a float tensor "step".
adam = torch.optim.Adam(net.parameters())
net(torch.randn(4, 3)).sum().backward()
adam.step()
value = adam.state_dict()
torch.save(value, os.path.join(out, "torch2_layout.tmp"))
source = zipfile.ZipFile(os.path.join(out, "torch2_layout.tmp"))
with zipfile.ZipFile(os.path.join(out, "torch2_layout.pt"), "w", zipfile.ZIP_STORED) as target:
    prefix = source.namelist()[0].split("/")[0]
    for extra, content in ((".format_version", b"1"), (".storage_alignment", b"64"), ("byteorder", b"little"),
                           (".data/serialization_id", b"0123456789")):
        target.writestr(prefix + "/" + extra, content)
    for name in source.namelist():
        target.writestr(name, source.read(name))
os.remove(os.path.join(out, "torch2_layout.tmp"))
with open(os.path.join(out, "expected.txt"), "a") as expected:
    expected.write("torch2_layout %s\n" % describe(value))
