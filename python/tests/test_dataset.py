import base64
import decimal
import io
import json
import math
import os
import random
import time

import numpy as np
import pytest

import sluice


def ids_of(ds):
    return [int(i) for b in ds for i in b["id"]]


def test_values_equal_the_go_apis(data):
    # The same rows in the same order as Go's stream.Batches with the same
    # options, every type the Go side hands out.
    want = json.load(open(data / "types.json"))
    ds = sluice.Dataset(str(data / "types"), batch_size=100, shuffle=True, seed=7, num_splits=4)
    def at(cols, valid, i):
        # A struct is a dict of its fields' arrays, with their validity
        # entries where they have nulls.
        return {k: (None if k in valid and not valid[k][i] else
                    at(v, {c[:-len(sluice.VALID)]: ok for c, ok in v.items() if c.endswith(sluice.VALID)}, i)
                    if isinstance(v, dict) else v[i])
                for k, v in cols.items() if not k.endswith(sluice.VALID)}

    got = []
    for b in ds:
        assert b.num_rows <= 100
        for i in range(b.num_rows):
            got.append(at(dict(b.items()), b.validity, i))
    assert len(got) == len(want) == 1000
    for g, w in zip(got, want):
        for k, wv in w.items():
            gv = g[k]
            if wv is None:
                assert gv is None, (k, g["id"])
            elif wv == "NaN":
                assert math.isnan(gv), (k, g["id"])
            elif k == "ts":
                assert gv == np.datetime64(wv, "us"), (k, g["id"])
            elif k == "d":
                assert gv == np.datetime64(wv, "D"), (k, g["id"])
            elif k == "l":
                assert list(gv) == wv, (k, g["id"])
            elif k == "fb":
                assert gv == base64.b64decode(wv), (k, g["id"], gv, wv)
            elif k == "mp":
                assert gv == [tuple(p) for p in wv], (k, g["id"], gv, wv)
            elif k == "dec":  # 36 digits, every one of them
                assert gv == decimal.Decimal(wv) and gv.as_tuple().exponent == -10, (k, g["id"], gv, wv)
            elif k == "ln":  # nulls inside a list are None, not zeros
                assert [None if v is None else int(v) for v in gv] == wv, (k, g["id"], gv, wv)
            else:
                assert gv == wv, (k, g["id"], gv, wv)
    # dtypes as Arrow's, not widened
    b = next(iter(sluice.Dataset(str(data / "types"), batch_size=10)))
    assert b["i8"].dtype == np.int8 and b["i16"].dtype == np.int16 and b["u32"].dtype == np.uint32
    assert b["f32"].dtype == np.float32 and b["ts"].dtype == np.dtype("datetime64[us]")
    assert b["b"].dtype == bool and b["s"].dtype == object
    assert b["st"]["a"].dtype == np.int64 and b["fb"].dtype == object


def test_structs_and_fixed_binaries_in_every_form(data):
    # Batches cut from one window (a struct sliced at an offset) as NumPy
    # arrays, with strings="arrays" and as tensors hold the same values.
    def read(**kw):
        ds = sluice.Dataset(str(data / "types"), columns=["id", "st", "fb"], batch_size=30, **kw)
        return list(ds)

    plain, arrays, tensors = read(), read(strings="arrays"), read(as_torch=True)
    assert len(plain) == len(arrays) == len(tensors) > 30
    for p, a, t in zip(plain, arrays, tensors):
        assert list(p["id"]) == list(a["id"]) == t["id"].tolist()
        n = p.num_rows
        assert len(p["st"]["a"]) == len(a["st"]["a"]) == len(t["st"]["a"]) == n
        assert list(p["st"]["a"]) == list(a["st"]["a"]) == t["st"]["a"].tolist()
        # A null is None as an object, an empty value in the zero-copy form.
        assert [v or "" for v in p["st"]["s"]] == a["st"]["s"].tolist()
        assert list(p["st"]["a.valid"]) == t["st"]["a.valid"].tolist()
        fb = a["fb"]
        assert isinstance(fb, sluice.Strings) and len(fb) == n and not fb.text
        assert list(np.diff(np.asarray(fb.offsets))) == [4] * n
        valid = p.validity.get("fb")
        for i in range(n):
            want = p["fb"][i]
            assert (want is None) == (valid is not None and not valid[i])
            if want is not None:
                assert fb[i] == want and t["fb"][i] == want and len(want) == 4


def test_unions_of_several_types_and_durations(data):
    # Avro unions (dense unions), one with a null branch, shuffled in
    # batches that span blocks: each row's value, whichever branch holds it;
    # and Avro durations.
    ds = sluice.Dataset(str(data / "unions"), batch_size=37, shuffle=True, seed=2)
    seen = 0
    for b in ds:
        assert b["u"].dtype == object and b["v"].dtype == object
        for i, rid in enumerate(b["id"].tolist()):
            u = None if rid % 3 == 0 else rid if rid % 3 == 1 else "s%d" % rid
            v = "x" if rid % 4 == 0 else rid * 3
            assert (b["u"][i], b["v"][i]) == (u, v), rid
            # An Avro duration: a month_day_nano interval record, no copy.
            assert b["dur"][i].tolist() == (rid % 12, rid % 31, rid * 1001 * 10**6), rid
            # Unions inside a list and inside a struct (a batch's struct is
            # a slice of its window's).
            assert list(b["lu"][i]) == [rid, "q"][:rid % 3] and b["ru"]["x"][i] == v, rid
            seen += 1
        assert b["dur"].dtype.names == ("months", "days", "nanoseconds")
    assert seen == 5000


def test_fixed_width_columns_are_not_copied(data):
    ds = sluice.Dataset(str(data / "numbers"), columns=["id", "x", "s"], batch_size=256)
    b = next(iter(ds))
    for k in ("id", "x"):
        a = b[k]
        assert not a.flags.owndata
        base = a
        while isinstance(base, np.ndarray):
            base = base.base
        assert type(base).__name__ == "_View", k  # the batch's memory, not a copy
    assert b["s"].dtype == object


def test_exactly_once_across_ranks(data):
    for world in (1, 2, 4):
        seen = []
        for r in range(world):
            seen += ids_of(sluice.Dataset(str(data / "numbers"), columns=["id"], batch_size=128, shuffle=True,
                                          seed=3, num_splits=4, rank=r, world_size=world))
        assert sorted(seen) == list(range(20000)), world


def test_elastic_determinism(data):
    # Each split's sequence is the same whatever the world size.
    opts = dict(columns=["id"], batch_size=100, shuffle=True, seed=5, num_splits=4)
    splits = [ids_of(sluice.Dataset(str(data / "numbers"), rank=s, world_size=4, **opts)) for s in range(4)]
    owner = {i: s for s, ids in enumerate(splits) for i in ids}
    for world in (1, 2):
        for r in range(world):
            got = ids_of(sluice.Dataset(str(data / "numbers"), rank=r, world_size=world, **opts))
            for s in range(r, 4, world):
                assert [i for i in got if owner[i] == s] == splits[s], (world, r, s)


def run_from(ds, nbatches=None):
    out = []
    for n, b in enumerate(ds):
        out.append([int(i) for i in b["id"]])
        if nbatches is not None and n + 1 == nbatches:
            break
    return out


def test_exact_resume_at_random_batches(data):
    opts = dict(columns=["id", "x"], batch_size=97, shuffle=True, seed=11, clump_size=4, num_splits=4)
    whole = run_from(sluice.Dataset(str(data / "numbers"), **opts))
    rnd = random.Random(1)
    for k in [1] + [rnd.randrange(2, len(whole)) for _ in range(4)]:
        ds = sluice.Dataset(str(data / "numbers"), **opts)
        first = run_from(ds, k)
        st = ds.state_dict()
        ds.close()
        again = sluice.Dataset(str(data / "numbers"), **opts)
        again.load_state_dict(st)
        assert first + run_from(again) == whole, k


def test_resume_at_another_world_size(data):
    opts = dict(columns=["id"], batch_size=64, shuffle=True, seed=2, num_splits=4)
    states, before = [], set()
    for r in range(2):
        ds = sluice.Dataset(str(data / "numbers"), rank=r, world_size=2, **opts)
        for b in run_from(ds, 20 + r):
            before.update(b)
        states.append(ds.state_dict())
    merged = sluice.merge_states(states)
    for world in (1, 4):
        after = []
        for r in range(world):
            ds = sluice.Dataset(str(data / "numbers"), rank=r, world_size=world, **opts)
            ds.load_state_dict(merged)
            after += [i for b in run_from(ds) for i in b]
        assert not before & set(after)
        assert sorted(list(before) + after) == list(range(20000)), world


def test_torch_save_round_trip(data):
    torch = pytest.importorskip("torch")
    opts = dict(columns=["id"], batch_size=50, shuffle=True, seed=9)
    ds = sluice.Dataset(str(data / "numbers"), **opts)
    run_from(ds, 33)
    buf = io.BytesIO()
    torch.save({"loader": ds.state_dict()}, buf)
    rest = run_from(ds)
    buf.seek(0)
    again = sluice.Dataset(str(data / "numbers"), **opts)
    again.load_state_dict(torch.load(buf)["loader"])
    assert run_from(again) == rest


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_ten_thousand_batches_resident_memory_flat(data):
    ds = sluice.Dataset(str(data / "numbers"), columns=["id", "label", "x"], batch_size=128, shuffle=True, seed=1)
    n = 0
    for _ in range(3):  # warm up: the pipeline's buffers reach their size
        for b in ds:
            n += 1
    start = rss_bytes()
    while n < 10000 + 3 * 157:
        for b in ds:
            n += 1
    grown = rss_bytes() - start
    # A leaked batch holds 3 KiB here: 10,000 of them would be 30 MiB.
    assert grown < 12 << 20, grown


def test_torch_tensors_share_the_batch_memory(data):
    torch = pytest.importorskip("torch")
    ds = sluice.Dataset(str(data / "numbers"), columns=["id", "x", "s"], batch_size=64, as_torch=True)
    b = next(iter(ds))
    assert isinstance(b["id"], torch.Tensor) and b["id"].dtype == torch.int64
    assert b["x"].dtype == torch.float64
    assert b["id"].tolist() == list(range(64))
    assert list(b["s"][:1])  # strings stay an object array
    ds2 = sluice.Dataset(str(data / "numbers"), columns=["id"], batch_size=64)
    a = next(iter(ds2))["id"]
    t = torch.from_numpy(a)
    assert t.data_ptr() == a.ctypes.data


def test_pyarrow_batches(data):
    pa = pytest.importorskip("pyarrow")
    ds = sluice.Dataset(str(data / "numbers"), columns=["id", "s"], batch_size=1000)
    bs = list(ds.arrow_batches())
    assert all(isinstance(b, pa.RecordBatch) for b in bs)
    assert sum(b.num_rows for b in bs) == 20000


def test_filter_take_mix(data):
    # filter
    all_rows = [b for b in sluice.Dataset(str(data / "numbers"), columns=["id", "label"], batch_size=1000)]
    labels = np.concatenate([b["label"] for b in all_rows])
    ids = np.concatenate([b["id"] for b in all_rows])
    f = sluice.Dataset(str(data / "numbers"), columns=["id", "label"], filter="label = 3 AND id < 10000", batch_size=300)
    got = np.concatenate([b["id"] for b in f])
    assert sorted(got.tolist()) == sorted(ids[(labels == 3) & (ids < 10000)].tolist())
    # take: the rows at positions of the epoch's order, as iteration delivers them
    opts = dict(columns=["id"], batch_size=100, shuffle=True, seed=4, num_splits=4)
    order = [i for b in run_from(sluice.Dataset(str(data / "numbers"), **opts)) for i in b]
    ds = sluice.Dataset(str(data / "numbers"), **opts)
    pos = [0, 19999, 5, 5, 12345]
    assert ds.take(pos, epoch=0)["id"].tolist() == [order[p] for p in pos]
    with pytest.raises(sluice.PositionError):
        ds.take([20000], epoch=0)
    # mix: both sources, at their weights, resumable
    a = sluice.Dataset(str(data / "numbers"), columns=["id", "label"], shuffle=True, seed=1, num_splits=2)
    b = sluice.Dataset(str(data / "other"), columns=["id", "label"], shuffle=True, seed=1, num_splits=2)
    m = sluice.Mix([(a, 3), (b, 1)], batch_size=100, seed=5, epoch="smallest")
    whole = run_from(m)
    n = sum(len(x) for x in whole)
    assert n > 0
    m2 = sluice.Mix([(a, 3), (b, 1)], batch_size=100, seed=5, epoch="smallest")
    first = run_from(m2, 17)
    st = m2.state_dict()
    m3 = sluice.Mix([(a, 3), (b, 1)], batch_size=100, seed=5, epoch="smallest")
    m3.load_state_dict(st)
    assert first + run_from(m3) == whole
    with pytest.raises(sluice.UsageError, match="source of"):
        a.close()  # an open mix reads it
    for x in (m, m2, m3):
        x.close()
    a.close()
    b.close()


def test_metrics(data):
    ds = sluice.Dataset(str(data / "numbers"), columns=["id"], batch_size=1000)
    run_from(ds, 5)
    m = ds.metrics()
    assert m["consumed_rows"] == 5000 and m["consumed_batches"] == 5
    assert m["read_bytes"] > 0


def _rows(b):
    """The rows of a batch as plain values: None at nulls, NaN as "NaN"."""
    out = []
    valid = b.validity
    for i in range(b.num_rows):
        row = {}
        for k, v in b.items():
            if k.endswith(sluice.VALID):
                continue
            if k in valid and not valid[k][i]:
                row[k] = None
                continue
            x = v[i]
            x = x.item() if hasattr(x, "item") else x
            row[k] = "NaN" if isinstance(x, float) and math.isnan(x) else x
        out.append(row)
    return out


@pytest.mark.parametrize("shuffle", [False, True])
def test_batches_read_ahead_equal_batches_one_at_a_time(data, monkeypatch, shuffle):
    """Batches the library read ahead cross several to a call, a window's as
    one array; each batch is views of its rows. Every value, null and
    validity entry (present where the batch has nulls), and the order, are
    those of batches taken one a call."""
    cols = ["id", "i8", "f64", "b", "s", "n", "ts"]

    def read(strings, as_torch=False):
        ds = sluice.Dataset(str(data / "types"), columns=cols, batch_size=10, shuffle=shuffle, seed=3,
                            num_splits=2, strings=strings, as_torch=as_torch)
        it = iter(ds)
        batches = [next(it)]
        time.sleep(0.5)  # the library reads ahead meanwhile
        batches += list(it)
        ds.close()
        return batches

    for strings in ("objects", "arrays"):
        with monkeypatch.context() as m:
            m.setattr(sluice, "_GROUP", 1)
            want = read(strings)
        got = read(strings)
        assert [list(b) for b in got] == [list(b) for b in want]  # the same entries, validity included
        for b in got:
            for k, v in b.validity.items():
                assert not v.all(), k  # an entry only where the batch has nulls
        assert [r for b in got for r in _rows(b)] == [r for b in want for r in _rows(b)]
        assert len(want) == 100
        bases = set()
        for b in got:
            base = b["id"]
            while isinstance(base, np.ndarray):
                base = base.base
            bases.add(id(base))
        assert len(bases) < len(got) / 2, "batches crossed one a call"
    torch = pytest.importorskip("torch")
    got = read("arrays", as_torch=True)
    with monkeypatch.context() as m:
        m.setattr(sluice, "_GROUP", 1)
        want_t = read("arrays", as_torch=True)
    assert [list(b) for b in got] == [list(b) for b in want_t]
    for g, w in zip(got, want_t):
        for k, v in w.items():
            if isinstance(v, sluice.Strings):
                assert g[k].tolist() == v.tolist()
            else:
                assert torch.equal(g[k], v) or (v.is_floating_point() and torch.equal(g[k].isnan(), v.isnan())
                                                and torch.equal(g[k].nan_to_num(), v.nan_to_num())), k


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("batch_size", [7, 120, 999])
def test_batches_cut_from_one_array_hold_their_own_rows(data, shuffle, batch_size):
    # A window's batches cross as one array, cut into views on this side
    # (its leading batches of equal size in one call, the rest one by
    # one): in every form each batch holds its own rows, against the
    # dataset read as one batch.
    whole = next(iter(sluice.Dataset(str(data / "numbers"), batch_size=20000)))
    ref = {int(i): (int(l), float(x), s) for i, l, x, s in zip(whole["id"], whole["label"], whole["x"], whole["s"])}
    assert len(ref) == 20000
    orders = []
    for kw in ({}, {"as_torch": True}, {"strings": "arrays"}, {"as_torch": True, "strings": "arrays"}):
        ds = sluice.Dataset(str(data / "numbers"), batch_size=batch_size, shuffle=shuffle, seed=3, **kw)
        seen, sizes = [], set()
        for b in ds:
            ids, labels, xs = b["id"].tolist(), b["label"].tolist(), b["x"].tolist()
            s = b["s"]
            strs = s.tolist() if isinstance(s, sluice.Strings) else list(s)
            assert len(ids) == len(labels) == len(xs) == len(strs) == b.num_rows, kw
            for i, l, x, t in zip(ids, labels, xs, strs):
                assert ref[i] == (l, x, t), (kw, i)
            seen += ids
            sizes.add(b.num_rows)
        assert sorted(seen) == sorted(ref), kw
        assert len(sizes) > 1, kw  # windows' tails were cut too
        orders.append(seen)
        ds.close()
    assert all(o == orders[0] for o in orders)


def test_batches_held_keep_their_values_while_released_ones_are_reused(data):
    # The library decodes the next windows into the buffers of batches
    # this side has let go of. Batches held (NumPy views, torch tensors,
    # strings as arrays, over epochs) keep their own rows while the
    # others' memory is reused around them.
    import torch
    whole = next(iter(sluice.Dataset(str(data / "numbers"), batch_size=20000)))
    ref = {int(i): (int(l), float(x), s) for i, l, x, s in zip(whole["id"], whole["label"], whole["x"], whole["s"])}
    for kw in ({}, {"as_torch": True}, {"strings": "arrays", "shuffle": True, "seed": 5}):
        ds = sluice.Dataset(str(data / "numbers"), batch_size=96, **kw)
        held, n = [], 0
        for epoch in range(3):
            for b in ds:
                n += 1
                if n % 7 == 0:
                    held.append((b["id"], b["label"], b["x"], b["s"]))
        assert len(held) > 80
        for ids, labels, xs, s in held:
            if isinstance(ids, torch.Tensor):
                ids, labels, xs = ids.numpy(), labels.numpy(), xs.numpy()
            strs = s.tolist() if isinstance(s, sluice.Strings) else list(s)
            for i, l, x, t in zip(ids.tolist(), labels.tolist(), xs.tolist(), strs):
                assert ref[i] == (l, x, t), (kw, i)
        ds.close()
        # Held past the close too.
        ids, labels, xs, s = held[-1]
        assert all(ref[int(i)][0] == int(l) for i, l in zip(ids.tolist(), labels.tolist()))


def test_state_inside_a_group_resumes_exactly(data):
    """A state taken after any batch of a group counts exactly the batches
    handed out; a break keeps the rest for the next iteration."""
    opts = dict(columns=["id"], batch_size=100, shuffle=True, seed=2, num_splits=2)
    whole = ids_of(sluice.Dataset(str(data / "numbers"), **opts))
    ds = sluice.Dataset(str(data / "numbers"), **opts)
    it = iter(ds)
    taken = []
    # Until a call hands over several batches: the library reads ahead
    # while this side sleeps (however loaded the machine).
    deadline = time.monotonic() + 120
    while not ds._pending:
        assert time.monotonic() < deadline, "the batches did not cross several to a call"
        taken += [int(i) for i in next(it)["id"]]
        time.sleep(0.05)
    for _ in range(min(3, len(ds._pending) - 1)):  # inside the group
        taken += [int(i) for i in next(it)["id"]]
    assert ds._pending
    st = ds.state_dict()
    m = ds.metrics()
    assert m["consumed_rows"] == len(taken) and m["consumed_batches"] == len(taken) // 100
    again = sluice.Dataset(str(data / "numbers"), **opts)
    again.load_state_dict(st)
    assert taken + ids_of(again) == whole
    del it  # a break
    for b in ds:
        taken += [int(i) for i in b["id"]]
        break
    for b in ds:
        taken += [int(i) for i in b["id"]]
    assert taken == whole
    for x in (ds, again):
        x.close()


def _array_of(view):
    """The exported ArrowArray under a NumPy view of a batch."""
    base = view
    while isinstance(base, np.ndarray):
        base = base.base
    return base.owner.array


def test_an_array_is_released_after_its_last_view_is_gone(data):
    """An exported array stays alive while any view of it does (other calls
    and the end of the epoch release others, never it); once the last is
    gone it waits to be released by the next call into the library, here
    the close."""
    import gc
    ds = sluice.Dataset(str(data / "numbers"), columns=["id"], batch_size=64)
    it = iter(ds)
    view = next(it)["id"]
    a = _array_of(view)
    rest = sum(len(b["id"]) for b in it)
    assert rest == 20000 - 64
    gc.collect()
    assert a.release, "released while a view of it is alive"
    assert view.tolist() == list(range(64))
    del view
    gc.collect()
    assert a.release, "released before the next call into the library"
    ds.close()
    assert not a.release


def test_arrays_let_go_of_are_released_by_the_next_call(data):
    ds = sluice.Dataset(str(data / "numbers"), columns=["id"], batch_size=64)
    it = iter(ds)
    a = _array_of(next(it)["id"])  # the batch is gone: its array waits
    assert a.release
    while a.release:  # the next call that crosses into Go releases it
        next(it)
    ds.close()
