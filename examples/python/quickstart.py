"""The quickstart (examples/quickstart) from Python: writes a small dataset to
a temporary folder, streams two shuffled epochs, takes a state in the middle
of the second, resumes from it in a new dataset, checks that the resume was
exact, and prints the throughput.

    python3 examples/python/quickstart.py [--rows N]

It needs only the installed package and NumPy. Python's standard library
writes no Parquet, so the data is CSV (the columns of examples/exampledata:
id, label, x, s); sluice reads Parquet, ORC, Avro and JSON the same way.
"""

import argparse
import csv
import os
import random
import shutil
import sys
import tempfile
import time

import numpy as np

import sluice


def write_dataset(folder, files, rows_per_file, seed=1):
    """files CSV files of rows_per_file rows: id numbers the rows from 0,
    label is a class in [0, 10) that is a function of id, x a normal
    feature, s 16 random letters and digits."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz0123456789"
    for f in range(files):
        with open(os.path.join(folder, "part-%05d.csv" % f), "w", newline="") as out:
            w = csv.writer(out)
            w.writerow(["id", "label", "x", "s"])
            for i in range(f * rows_per_file, (f + 1) * rows_per_file):
                w.writerow([i, (i * 2654435761) % 2**32 % 10, repr(rng.gauss(0, 1)),
                            "".join(rng.choices(letters, k=16))])


def take(ds, after=None):
    """The ids of the rest of ds's epoch; after(batch, rows) once each
    batch is taken."""
    ids = []
    for n, batch in enumerate(ds):
        ids.append(batch["id"].copy())
        if after is not None:
            after(n, sum(len(a) for a in ids))
    return np.concatenate(ids) if ids else np.array([], dtype=np.int64)


def exactly_once(ids, rows, what):
    if len(ids) != rows or not np.array_equal(np.sort(ids), np.arange(rows)):
        raise SystemExit("%s: %d rows, not every row of %d exactly once" % (what, len(ids), rows))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000, help="rows to write (8 files)")
    args = p.parse_args()
    files = 8
    per_file = max(1, args.rows // files)
    rows = files * per_file
    folder = tempfile.mkdtemp(prefix="sluice-quickstart-")
    try:
        write_dataset(folder, files, per_file)
        print("wrote %d rows in %d CSV files to %s" % (rows, files, folder))
        opts = dict(columns=["id", "x", "label"], batch_size=1024, shuffle=True, seed=42, num_splits=8,
                    count_rows=True)
        ds = sluice.Dataset(folder, **opts)

        # Epoch 0: one full shuffled pass.
        start = time.perf_counter()
        epoch0 = take(ds)
        secs = time.perf_counter() - start
        exactly_once(epoch0, rows, "epoch 0")
        print("epoch 0: %d rows in %.2fs, %.0f rows/s, every row once" % (len(epoch0), secs, len(epoch0) / secs))

        # Epoch 1: a full pass, with the state taken halfway through.
        half = rows // opts["batch_size"] // 2
        mid = {}

        def after(batch, taken):
            if batch == half:
                mid["state"], mid["rows"] = ds.state_dict(), taken

        start = time.perf_counter()
        epoch1 = take(ds, after)
        secs = time.perf_counter() - start
        exactly_once(epoch1, rows, "epoch 1")
        if np.array_equal(epoch0, epoch1):
            raise SystemExit("epochs 0 and 1 came in the same order")
        print("epoch 1: %d rows in %.2fs, %.0f rows/s, another order" % (len(epoch1), secs, len(epoch1) / secs))

        # Resume epoch 1 from the state in a new dataset, as a restarted job would.
        resumed = sluice.Dataset(folder, **opts)
        resumed.load_state_dict(mid["state"])
        rest = take(resumed)
        if not np.array_equal(rest, epoch1[mid["rows"]:]):
            raise SystemExit("resume was not exact: %d rows after the state, want %d in the same order"
                             % (len(rest), len(epoch1) - mid["rows"]))
        print("resumed epoch 1 at batch %d in a new dataset: the remaining %d rows match exactly" % (half + 1, len(rest)))
        resumed.close()
        ds.close()
    finally:
        shutil.rmtree(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
