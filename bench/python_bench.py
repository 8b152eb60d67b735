"""The bench's Python side (bench/python.go runs it): rows/s reaching Python
through the sluice package, as NumPy arrays, as torch tensors, as NumPy
arrays with strings in their zero-copy form (strings="arrays"), and through
a DataLoader with workers.

    python3 bench/python_bench.py DIR BATCH_SIZE

reads one run per line on stdin, {"name", "mode": "numpy"|"torch"|"strings"|
"dataloader"|"floor", "columns", "shuffle", "workers", "first_batch", "epochs"}, measures it once and
answers one JSON line {"name", "rows", "rows_per_s", "read_bytes",
"first_batch_s", "cpu_s"} (read_bytes: 0 where the reads happened in
workers; cpu_s: the CPU seconds the process used in a pass without a
DataLoader, Go's threads included, else 0): the Go
side alternates its own passes with these, so that both see the same
machine. A pass is timed from opening the dataset to the last batch of its
"epochs" epochs (default 1), like the Go lines. A DataLoader run
(sluice.torch.DataLoader) times its second epoch (spawned persistent
workers), so that workers' start-up (an interpreter and
torch each) is not counted; with first_batch, it times instead a first epoch
on spawned workers from iter() to the first batch (first_batch_s: what a
user waits), and reads the epoch through. "floor" is the DataLoader's own
floor: a plain torch IterableDataset whose workers yield batches of the same
tensors' shapes and dtypes from memory (each batch's tensors new, as a
dataset's are), through torch's DataLoader.
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
        t, cpu = time.perf_counter(), time.process_time()
        ds = sluice.Dataset(cfg["dir"], columns=r["columns"], batch_size=cfg["batch_size"], shuffle=r["shuffle"],
                            seed=42, as_torch=r["mode"] == "torch",
                            strings="arrays" if r["mode"] == "strings" else "objects")
        rows = 0
        for _ in range(r.get("epochs") or 1):  # each pass over the dataset is the next epoch
            for b in ds:
                rows += b.num_rows
        secs, cpu = time.perf_counter() - t, time.process_time() - cpu
        read = ds.metrics()["read_bytes"]
        ds.close()
    return rows, rows / secs, read, cpu


try:  # the floor's base; the lines that need torch are skipped without it
    from torch.utils.data import IterableDataset as _IterableBase
except ImportError:
    _IterableBase = object


class FloorDataset(_IterableBase):
    """The floor's dataset, a torch IterableDataset:
    worker w of k yields batches w, w+k, ... of the dataset's rows as new
    tensors cloned from prototypes of a real batch's shapes and dtypes."""

    def __init__(self, proto, rows, batch_size):
        super().__init__()
        self.proto, self.rows, self.batch_size = proto, rows, batch_size

    def __iter__(self):
        import torch.utils.data
        info = torch.utils.data.get_worker_info()
        w, k = (info.id, info.num_workers) if info else (0, 1)
        n = -(-self.rows // self.batch_size)
        for i in range(w, n, k):
            m = min(self.batch_size, self.rows - i * self.batch_size)
            yield {c: t[:m].clone() for c, t in self.proto.items()}


def _first_batch_and_rest(dl, column):
    t = time.perf_counter()
    it = iter(dl)
    b = next(it)
    first = time.perf_counter() - t
    rows = len(b[column])
    for b in it:
        rows += len(b[column])
    return rows, first


def run_loader(cfg, r):
    import torch  # noqa: F401
    import sluice.torch
    k = r["workers"]
    ds = sluice.torch.IterableDataset(cfg["dir"], columns=r["columns"], batch_size=cfg["batch_size"],
                                      shuffle=r["shuffle"], seed=42, num_splits=4)
    kw = {}
    if k:
        kw = dict(num_workers=k, multiprocessing_context="spawn", persistent_workers=not r.get("first_batch"))
    dl = sluice.torch.DataLoader(ds, **kw)
    if r.get("first_batch"):
        t = time.perf_counter()
        rows, first = _first_batch_and_rest(dl, r["columns"][0])
        secs = time.perf_counter() - t
        del dl
        ds.close()
        return rows, rows / secs, 0, first
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
    return rows, rows / secs, read, 0


def run_floor(cfg, r):
    import torch
    import sluice
    one = sluice.Dataset(cfg["dir"], columns=r["columns"], batch_size=cfg["batch_size"], as_torch=True)
    proto = {c: v.clone() for c, v in next(iter(one)).items()}
    one.close()
    ds = FloorDataset(proto, cfg["rows"], cfg["batch_size"])
    k = r["workers"]
    if r.get("first_batch"):
        dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=k, multiprocessing_context="spawn")
        t = time.perf_counter()
        n, first = _first_batch_and_rest(dl, r["columns"][0])
        return n, n / (time.perf_counter() - t), 0, first
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=k, multiprocessing_context="spawn",
                                     persistent_workers=True)
    for _ in dl:
        pass
    t = time.perf_counter()
    n = 0
    for b in dl:
        n += len(b[r["columns"][0]])
    return n, n / (time.perf_counter() - t), 0, 0


def main():
    cfg = {"dir": sys.argv[1], "batch_size": int(sys.argv[2]), "rows": int(sys.argv[3])}
    for line in sys.stdin:
        r = json.loads(line)
        if r["mode"] in ("dataloader", "floor"):
            rows, rate, read, first = (run_loader if r["mode"] == "dataloader" else run_floor)(cfg, r)
            cpu = 0
        else:
            (rows, rate, read, cpu), first = run_direct(cfg, r), 0
        print(json.dumps({"name": r["name"], "rows": rows, "rows_per_s": rate, "read_bytes": read,
                          "first_batch_s": first, "cpu_s": cpu}), flush=True)


if __name__ == "__main__":
    main()
