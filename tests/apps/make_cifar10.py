#!/usr/bin/python3
"""Writes CIFAR-10 binary batches (data_batch_1..5.bin, test_batch.bin under
DIR/cifar-10-batches-bin) of RECORDS records each, in the real format: a label byte, then the
1024 red, green and blue bytes. The images are noise with a bright class-dependent square, so
a model can learn them. Debian ships no CIFAR-10 and these machines cannot download it.
usage: make_cifar10.py DIR RECORDS"""
import os
import random
import sys

directory, records = os.path.join(sys.argv[1], "cifar-10-batches-bin"), int(sys.argv[2])
os.makedirs(directory, exist_ok=True)
rng = random.Random(0)
for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
    out = bytearray()
    for _ in range(records):
        label = rng.randrange(10)
        pixels = bytearray(rng.randrange(0, 128) for _ in range(3 * 1024))
        row, col = 4 + (label // 5) * 16, 2 + (label % 5) * 6
        for c in range(3):
            for y in range(row, row + 6):
                for x in range(col, col + 5):
                    pixels[c * 1024 + y * 32 + x] = 255
        out.append(label)
        out += pixels
    with open(os.path.join(directory, name), "wb") as f:
        f.write(out)
