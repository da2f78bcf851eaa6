#!/usr/bin/python3
"""The same measurements as bench/store_bench.cc, through Python's torch.distributed stores."""
import json
import os
import statistics
import sys
import tempfile
import time

import torch.distributed as dist


def main():
    kind = sys.argv[1]
    iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    if kind == "tcp":
        store = dist.TCPStore("127.0.0.1", 0, 1, True)
    elif kind == "file":
        path = os.path.join(tempfile.mkdtemp(prefix="store_bench-"), "store")
        store = dist.FileStore(path, 1)
    else:
        print("python side: only tcp and file", file=sys.stderr)
        return 2
    value = b"x" * 64

    def time_op(op, fn):
        samples = []
        for _ in range(5):
            start = time.perf_counter()
            for i in range(iterations):
                fn(i)
            samples.append((time.perf_counter() - start) * 1e6 / iterations)
        print(json.dumps({"impl": "python", "store": kind, "op": op,
                          "us_per_op": round(statistics.median(samples), 2)}), flush=True)

    time_op("set", lambda i: store.set("k%d" % (i % 64), value))
    time_op("get", lambda i: store.get("k%d" % (i % 64)))
    time_op("add", lambda i: store.add("counter", 1))
    time_op("wait", lambda i: store.wait(["k%d" % (i % 64)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
