"""The bench's Python side (bench/python.go runs it): rows/s reaching Python
through the sluice package, as NumPy arrays, as torch tensors, and through a
DataLoader with workers.

    python3 bench/python_bench.py DIR BATCH_SIZE

reads one run per line on stdin, {"name", "mode": "numpy"|"torch"|"dataloader",
"columns", "shuffle", "workers"}, measures it once and answers one JSON line
{"name", "rows", "rows_per_s", "read_bytes"} (read_bytes: 0 where the reads
happened in workers): the Go side alternates its own passes with
these, so that both see the same machine. A pass is timed from opening the
dataset to its last batch, like the Go lines. A DataLoader run times its
second epoch (persistent workers), so that workers' start-up (an interpreter
and torch each) is not counted.
"""

import json
import sys
import time


_warmed = set()


def run_direct(cfg, r):
    import sluice
    if r["mode"] == "torch":
        import torch  # noqa: F401  (imported before the clock starts)
    for i in range(1 if r["name"] in _warmed else 2):  # a first pass warms up (library, page cache)
        _warmed.add(r["name"])
        t = time.perf_counter()
        ds = sluice.Dataset(cfg["dir"], columns=r["columns"], batch_size=cfg["batch_size"], shuffle=r["shuffle"],
                            seed=42, as_torch=r["mode"] == "torch")
        rows = 0
        for b in ds:
            rows += b.num_rows
        secs = time.perf_counter() - t
        read = ds.metrics()["read_bytes"]
        ds.close()
    return rows, rows / secs, read


def run_loader(cfg, r):
    import torch
    import sluice.torch
    k = r["workers"]
    ds = sluice.torch.IterableDataset(cfg["dir"], columns=r["columns"], batch_size=cfg["batch_size"],
                                      shuffle=r["shuffle"], seed=42, num_splits=4)
    kw = {}
    if k:
        kw = dict(num_workers=k, multiprocessing_context="spawn", persistent_workers=True)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, **kw)
    for _ in dl:  # warm-up epoch: workers start
        pass
    before = ds.metrics()  # in this process (0 workers) only
    t = time.perf_counter()
    rows = 0
    for b in dl:
        rows += len(b[r["columns"][0]])
    secs = time.perf_counter() - t
    read = ds.metrics()["read_bytes"] - before["read_bytes"] if before else 0
    del dl
    ds.close()
    return rows, rows / secs, read


def main():
    cfg = {"dir": sys.argv[1], "batch_size": int(sys.argv[2])}
    for line in sys.stdin:
        r = json.loads(line)
        rows, rate, read = (run_loader if r["mode"] == "dataloader" else run_direct)(cfg, r)
        print(json.dumps({"name": r["name"], "rows": rows, "rows_per_s": rate, "read_bytes": read}), flush=True)


if __name__ == "__main__":
    main()
