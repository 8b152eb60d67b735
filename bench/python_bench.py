"""The bench's Python side (bench/python.go runs it): rows/s reaching Python
through the sluice package, as NumPy arrays, as torch tensors, and through a
DataLoader with workers. Prints one JSON object per measurement.

    python3 bench/python_bench.py '{"dir": ..., "batch_size": ..., "reps": ..., "runs": [...]}'

A run is {"name", "mode": "numpy"|"torch"|"dataloader", "columns", "shuffle",
"workers"}. Each is timed from opening the dataset to its last batch, like
the Go lines; the fastest of reps is reported. A DataLoader run times its
second epoch (persistent workers), so that workers' start-up (an interpreter
and torch each) is not counted.
"""

import json
import sys
import time


def run_direct(cfg, r):
    import sluice
    if r["mode"] == "torch":
        import torch  # noqa: F401  (imported before the clock starts)
    best = 0.0
    for i in range(cfg["reps"] + 1):  # the first pass warms up (library, page cache) and is not counted
        t = time.perf_counter()
        ds = sluice.Dataset(cfg["dir"], columns=r["columns"], batch_size=cfg["batch_size"], shuffle=r["shuffle"],
                            seed=42, as_torch=r["mode"] == "torch")
        rows = 0
        for b in ds:
            rows += b.num_rows
        secs = time.perf_counter() - t
        ds.close()
        if i > 0:
            best = max(best, rows / secs)
    return rows, best


def run_loader(cfg, r):
    import torch
    import sluice.torch
    k = r["workers"]
    best = 0.0
    for _ in range(cfg["reps"]):
        ds = sluice.torch.IterableDataset(cfg["dir"], columns=r["columns"], batch_size=cfg["batch_size"],
                                          shuffle=r["shuffle"], seed=42, num_splits=4)
        kw = {}
        if k:
            kw = dict(num_workers=k, multiprocessing_context="spawn", persistent_workers=True)
        dl = torch.utils.data.DataLoader(ds, batch_size=None, **kw)
        for _ in dl:  # warm-up epoch: workers start
            pass
        t = time.perf_counter()
        rows = 0
        for b in dl:
            rows += len(b[r["columns"][0]])
        secs = time.perf_counter() - t
        best = max(best, rows / secs)
        del dl
        ds.close()
    return rows, best


def main():
    cfg = json.loads(sys.argv[1])
    for r in cfg["runs"]:
        rows, rate = (run_loader if r["mode"] == "dataloader" else run_direct)(cfg, r)
        print(json.dumps({"name": r["name"], "rows": rows, "rows_per_s": rate}), flush=True)


if __name__ == "__main__":
    main()
