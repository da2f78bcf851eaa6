#!/usr/bin/python3
"""Python's side of models_test's PythonModelsLoadRingtorchCheckpoints: build the model of
models/python/ringtorch_models.py, load the C++ checkpoint's "model" entry with strict=True,
and print as JSON the eval-mode logits for the input both sides construct:
linspace(-1, 1) over batch 2 of the given image shape.
usage: python_models.py CHECKPOINT MODEL CHANNELS HEIGHT WIDTH"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models", "python"))
from ringtorch_models import build  # noqa: E402

path, name = sys.argv[1], sys.argv[2]
c, h, w = (int(v) for v in sys.argv[3:6])
model = build(name, c, h, w)
model.load_state_dict(torch.load(path)["model"], strict=True)
model.eval()
x = torch.linspace(-1, 1, 2 * c * h * w).reshape(2, c, h, w)
with torch.no_grad():
    print(json.dumps(model(x).flatten().tolist()))
