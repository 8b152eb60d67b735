"""DataLoader workers: epochs that advance by themselves, exact states with
any number of workers (sluice.torch.DataLoader), nulls that cross as nulls,
and fork workers after the parent used sluice."""

import math
import multiprocessing
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import sluice  # noqa: E402
import sluice.torch  # noqa: E402
from sluice import _lib  # noqa: E402

OPTS = dict(columns=["id"], batch_size=250, shuffle=True, seed=3, num_splits=4)
ALL = list(range(20000))


def batches(ds):
    return [b["id"].tolist() for b in ds]


def interleave(per_worker):
    """Batches as a DataLoader hands them out: one from each worker in turn,
    the others going on when one has no more."""
    out, i = [], 0
    while any(i < len(w) for w in per_worker):
        out += [w[i] for w in per_worker if i < len(w)]
        i += 1
    return out


def expected_pass(data, workers, epoch, opts=OPTS, rank=0, world=1):
    """The batches of one epoch through `workers` DataLoader workers: worker
    w reads as rank rank*workers + w of world*workers."""
    return interleave([batches(sluice.Dataset(str(data / "numbers"), rank=rank * workers + w,
                                              world_size=world * workers, epoch=epoch, **opts))
                       for w in range(workers)])


def split_orders(data, epoch, opts=OPTS):
    """Each split's rows in their order: the same at every world size."""
    return [[i for b in batches(sluice.Dataset(str(data / "numbers"), rank=s, world_size=opts["num_splits"],
                                               epoch=epoch, **opts)) for i in b]
            for s in range(opts["num_splits"])]


def check_rest(seen, rest, orders):
    """rest is exactly the rows not in seen, each split's in its order."""
    assert sorted(seen + rest) == ALL
    split_of = {i: s for s, o in enumerate(orders) for i in o}
    before = set(seen)
    for s, o in enumerate(orders):
        tail = [i for i in o if i not in before]
        assert [i for i in rest if split_of[i] == s] == tail, s


def take(it, n):
    return [next(it)["id"].tolist() for _ in range(n)]


def flat(bs):
    return [i for b in bs for i in b]


@pytest.mark.parametrize("how", ["fork", "persistent", "spawn"])
def test_torch_dataloader_workers_epochs_advance(data, how):
    """torch's own DataLoader with 2 workers: each pass is the next epoch,
    exactly as the epoch's order has it, every row once."""
    ds = sluice.torch.IterableDataset(str(data / "numbers"), **OPTS)
    kw = dict(num_workers=2, multiprocessing_context="spawn" if how == "spawn" else "fork",
              persistent_workers=how == "persistent")
    dl = torch.utils.data.DataLoader(ds, batch_size=None, **kw)
    first, second = batches(dl), batches(dl)
    assert first == expected_pass(data, 2, 0)
    assert second == expected_pass(data, 2, 1)
    assert sorted(flat(first)) == sorted(flat(second)) == ALL and flat(first) != flat(second)
    assert ds.epoch == 2
    if how != "spawn":
        # set_epoch wins; a pass broken off leaves the next to the next epoch
        ds.set_epoch(7)
        it = iter(dl)
        assert take(it, 3) == expected_pass(data, 2, 7)[:3]
        del it
        assert batches(dl) == expected_pass(data, 2, 8)


def test_torch_dataloader_state_dict_raises_naming_the_loader(data):
    ds = sluice.torch.IterableDataset(str(data / "numbers"), **OPTS)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="fork")
    it = iter(dl)
    take(it, 5)
    with pytest.raises(sluice.UsageError, match="sluice.torch.DataLoader"):
        ds.state_dict()
    del it


def test_loader_state_resumes_exactly_with_0_2_and_4_workers(data):
    opts = dict(OPTS, num_splits=8)
    orders = split_orders(data, 0, opts)
    ds = sluice.torch.IterableDataset(str(data / "numbers"), **opts)
    dl = sluice.torch.DataLoader(ds, num_workers=2, multiprocessing_context="fork")
    it = iter(dl)
    seen = take(it, 23)
    st = dl.state_dict()
    rest = [b["id"].tolist() for b in it]
    whole = seen + rest
    assert whole == expected_pass(data, 2, 0, opts)
    assert st["kind"] == "loader" and st["epoch"] == 0 and len(st["states"]) == 2
    # state_dict's plain values survive torch.save
    import io
    buf = io.BytesIO()
    torch.save({"loader": st}, buf)
    buf.seek(0)
    st = torch.load(buf)["loader"]
    for k in (2, 0, 4):
        again = sluice.torch.DataLoader(sluice.torch.IterableDataset(str(data / "numbers"), **opts), num_workers=k,
                                        **({"multiprocessing_context": "fork"} if k else {}))
        again.load_state_dict(st)
        got = batches(again)
        if k == 2:
            assert got == rest  # the same workers: the same order
        check_rest(flat(seen), flat(got), orders)
        assert again.epoch == 1
        # and the next pass is epoch 1, every row once
        nxt = batches(again)
        assert nxt == expected_pass(data, max(k, 1), 1, opts)


def test_loader_state_at_world_size_1_from_2(data):
    opts = dict(OPTS, num_splits=8)
    orders = split_orders(data, 0, opts)
    seen, states = [], []
    for rank, n in ((0, 9), (1, 14)):
        ds = sluice.torch.IterableDataset(str(data / "numbers"), rank=rank, world_size=2, **opts)
        dl = sluice.torch.DataLoader(ds, num_workers=2, multiprocessing_context="fork")
        it = iter(dl)
        got = take(it, n)
        assert got == expected_pass(data, 2, 0, opts, rank=rank, world=2)[:n]
        seen += flat(got)
        states.append(dl.state_dict())
        del it
    with pytest.raises(sluice.MismatchError, match="merge the states of all ranks"):
        sluice.torch.DataLoader(sluice.torch.IterableDataset(str(data / "numbers"), **opts),
                                num_workers=2).load_state_dict(states[0])
    merged = sluice.merge_states(states)
    assert merged["rank"] is None and len(merged["states"]) == 4
    for k in (2, 0):
        dl = sluice.torch.DataLoader(sluice.torch.IterableDataset(str(data / "numbers"), **opts), num_workers=k,
                                     **({"multiprocessing_context": "fork"} if k else {}))
        dl.load_state_dict(merged)
        check_rest(seen, flat(batches(dl)), orders)


def test_loader_persistent_workers_break_and_go_on(data):
    """A pass broken off goes on where it stopped; a whole pass leads to
    the next epoch on the same persistent workers."""
    ds = sluice.torch.IterableDataset(str(data / "numbers"), **OPTS)
    dl = sluice.torch.DataLoader(ds, num_workers=2, multiprocessing_context="fork", persistent_workers=True)
    want0, want1 = expected_pass(data, 2, 0), expected_pass(data, 2, 1)
    it = iter(dl)
    got = take(it, 11)
    del it
    got += batches(dl)
    assert got == want0
    workers = [w.pid for w in dl._iterator._workers]
    assert batches(dl) == want1
    assert [w.pid for w in dl._iterator._workers] == workers
    dl.set_epoch(1)  # the loader is at epoch 2's start: this goes back
    assert batches(dl) == want1


def test_loader_with_no_workers_is_exact_too(data):
    ds = sluice.torch.IterableDataset(str(data / "numbers"), **OPTS)
    dl = sluice.torch.DataLoader(ds)
    it = iter(dl)
    seen = take(it, 30)
    st = ds.state_dict()  # the dataset answers with its loader's state
    assert st["kind"] == "loader"
    again = sluice.torch.DataLoader(sluice.torch.IterableDataset(str(data / "numbers"), **OPTS))
    again.load_state_dict(st)
    assert seen + batches(again) == batches(sluice.Dataset(str(data / "numbers"), **OPTS))


def test_nulls_arrive_as_nulls_through_a_dataloader(data):
    import json
    want = {r["id"]: r for r in json.load(open(data / "types.json"))}
    assert any(r["f64"] is None for r in want.values()) and any(r["n"] is None for r in want.values())
    kw = dict(columns=["id", "f64", "n", "s"], batch_size=64, shuffle=True, seed=2, num_splits=2)
    for make in (lambda ds: torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2,
                                                         multiprocessing_context="fork"),
                 lambda ds: sluice.torch.DataLoader(ds, num_workers=2, multiprocessing_context="fork")):
        seen = 0
        for strings in ("objects", "arrays"):
            for b in make(sluice.torch.IterableDataset(str(data / "types"), strings=strings, **kw)):
                ids = b["id"].tolist()
                s = b["s"].tolist()
                for i, id_ in enumerate(ids):
                    w = want[id_]
                    for col in ("f64", "n", "s"):
                        valid = b.get(col + sluice.VALID)
                        ok = True if valid is None else bool(valid[i])
                        assert ok == (w[col] is not None), (col, id_)
                    if w["f64"] is None or w["f64"] == "NaN":
                        assert math.isnan(b["f64"][i])  # a null is never a silent 0.0
                    else:
                        assert b["f64"][i].item() == w["f64"]
                    if w["n"] is not None:
                        assert b["n"][i].item() == w["n"]
                    assert s[i] == (w["s"] if w["s"] is not None else (None if strings == "objects" else ""))
                    seen += 1
                if strings == "arrays":
                    assert isinstance(b["s"], sluice.Strings) and b["s"].data.dtype == torch.uint8
        assert seen == 2 * len(want)


def test_strings_arrays_are_the_batch_memory(data):
    ds = sluice.Dataset(str(data / "numbers"), columns=["id", "s"], batch_size=100, strings="arrays")
    objs = sluice.Dataset(str(data / "numbers"), columns=["id", "s"], batch_size=100)
    for a, b in zip(ds, objs):
        s = a["s"]
        assert s.tolist() == list(b["s"])
        assert s[3] == b["s"][3] and s[-1] == b["s"][-1]
        base = s.data
        while isinstance(base, np.ndarray):
            base = base.base
        assert type(base).__name__ == "_View"


def test_fork_workers_after_the_parent_used_sluice(data):
    """The parent opens a dataset, asks its epoch and estimate, merges
    states: fork workers still read (each loads its own copy of the
    library), and the parent is unharmed."""
    path = str(data / "numbers")
    d = sluice.Dataset(path, columns=["id"], shuffle=True, seed=1, num_splits=2)
    d.estimate()
    states = []
    for r in range(2):
        x = sluice.Dataset(path, columns=["id"], shuffle=True, seed=1, num_splits=2, rank=r, world_size=2)
        states.append(x.state_dict())
    sluice.merge_states(states)
    ds = sluice.torch.IterableDataset(path, **OPTS)
    assert ds.epoch == 0
    assert _lib.loaded_here()
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2,
                                     multiprocessing_context=multiprocessing.get_context("fork"))
    assert batches(dl) == expected_pass(data, 2, 0)
    assert sorted(i for b in d for i in b["id"].tolist()) == ALL


def test_worker_threads_sized_to_its_share_of_the_cores(data):
    procs = []

    def record(batch):
        batch["procs"] = torch.tensor([_lib.set_max_procs(0)])
        return batch
    env = os.environ.pop("GOMAXPROCS", None)
    try:
        dl = sluice.torch.DataLoader(sluice.torch.IterableDataset(str(data / "numbers"), **OPTS), num_workers=2,
                                     multiprocessing_context="fork", collate_fn=record)
        for b in dl:
            procs.append(int(b["procs"][0]))
    finally:
        if env is not None:
            os.environ["GOMAXPROCS"] = env
    assert set(procs) == {max(1, len(os.sched_getaffinity(0)) // 2)}


def test_a_partial_iteration_then_exit_is_quiet(data, tmp_path):
    script = tmp_path / "partial.py"
    script.write_text(
        "import sluice\n"
        f"ds = sluice.Dataset({str(data / 'numbers')!r}, columns=['id'], batch_size=64)\n"
        "b = next(iter(ds))\n"
        "print(int(b['id'][0]))\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0 and p.stdout == "0\n"
    assert p.stderr == ""


def _storage(t):
    return t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else t.storage().data_ptr()


def test_loader_batch_crosses_as_one_block(data):
    ds = sluice.torch.IterableDataset(str(data / "types"), columns=["id", "f64", "n", "s"], batch_size=100,
                                      strings="arrays")
    b = next(iter(sluice.torch.DataLoader(ds, num_workers=1, multiprocessing_context="fork")))
    ts = [b["id"], b["f64"], b["n"], b["s"].offsets, b["s"].data] + [v for k, v in b.items() if k.endswith(".valid")]
    assert len(ts) > 5 and len({_storage(t) for t in ts}) == 1
    want = next(iter(sluice.Dataset(str(data / "types"), columns=["id", "f64", "n", "s"], batch_size=100)))
    assert b["id"].tolist() == want["id"].tolist() and b["s"].tolist() == [x or "" for x in want["s"]]
    assert list(b) == list(want) and type(b) is sluice.Batch and b.num_rows == 100
