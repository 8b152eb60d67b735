"""The options that pick drivers and size the shuffle, and the estimate that
prices them."""

import shutil

import numpy as np
import pytest

import sluice


def rows_of(ds):
    out = []
    for b in ds:
        out.extend(zip((int(i) for i in b["id"]), (int(v) for v in b["label"]), (float(v) for v in b["x"]), b["s"]))
    return out


def test_avro_files_read_as_the_same_rows(data):
    # numbers_avro holds the rows of numbers, written by twmb/avro (deflate,
    # blocks of 500 rows): read in order they are the Parquet rows in order.
    want = rows_of(sluice.Dataset(str(data / "numbers"), batch_size=777))
    got = rows_of(sluice.Dataset(str(data / "numbers_avro"), batch_size=777))
    assert len(want) == 20000
    assert got == want
    # Shuffled over 4 ranks: every row exactly once, in another order.
    seen = []
    for r in range(4):
        ds = sluice.Dataset(str(data / "numbers_avro"), batch_size=100, shuffle=True, seed=3,
                            num_splits=8, rank=r, world_size=4)
        seen.extend(rows_of(ds))
    assert sorted(seen) == sorted(want)
    assert seen != want


def test_format_reads_files_named_otherwise(data, tmp_path):
    d = tmp_path / "dat"
    d.mkdir()
    shutil.copy(data / "numbers_avro" / "part-00000.avro", d / "part-00000.dat")
    want = rows_of(sluice.Dataset(str(data / "numbers_avro" / "part-00000.avro"), batch_size=500))
    assert rows_of(sluice.Dataset(str(d), format="avro", batch_size=500)) == want
    assert rows_of(sluice.Dataset(str(d), format="AVRO", batch_size=500)) == want
    # Without format, a file of no known extension is read as Parquet.
    with pytest.raises(sluice.SluiceError):
        rows_of(sluice.Dataset(str(d), batch_size=500))
    with pytest.raises(sluice.UsageError, match='format "orcish" is not a format'):
        sluice.Dataset(str(d), format="orcish")
    with pytest.raises(sluice.UsageError, match="format must be a str"):
        sluice.Dataset(str(d), format=1)


def test_text_header_and_null_padding(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("10,20\n30,40\n50\n")
    # A .txt file is read as CSV where format says so; the first record
    # reads as data (numbers), so without header it is a row.
    with pytest.raises(sluice.CorruptError):
        list(sluice.Dataset(str(p), format="csv", no_header=True))
    b = next(iter(sluice.Dataset(str(p), format="csv", no_header=True, null_padding=True)))
    # column1's validity comes beside it: its last row is a null
    assert list(b) == ["column0", "column1", "column1.valid"]
    assert list(b["column0"]) == [10, 30, 50]
    assert list(b["column1"][:2]) == [20, 40]
    assert list(b["column1.valid"]) == list(b.validity["column1"]) == [True, True, False]
    b = next(iter(sluice.Dataset(str(p), format="csv", header=True, null_padding=True)))
    assert list(b) == ["10", "20", "20.valid"] and list(b["10"]) == [30, 50]
    with pytest.raises(sluice.UsageError, match="contradict"):
        sluice.Dataset(str(p), format="csv", header=True, no_header=True)


def test_shuffle_memory_and_passes(data):
    url = str(data / "numbers")

    def ids(**o):
        return [int(i) for b in sluice.Dataset(url, batch_size=256, shuffle=True, seed=5, **o) for i in b["id"]]

    # A size is bytes, as an int or as the CLI writes one.
    a = ids(shuffle_memory=64 << 10)
    assert ids(shuffle_memory="64K") == a == ids(shuffle_memory="64 KiB")
    assert sorted(a) == list(range(20000))
    assert ids(shuffle_memory="1M") != a
    p2 = ids(shuffle_window=2000, shuffle_passes=2)
    assert sorted(p2) == list(range(20000))
    assert p2 != ids(shuffle_window=2000)
    for bad in ("64Q", "-1", "1.5M", True, -1):
        with pytest.raises(sluice.UsageError, match="shuffle_memory"):
            sluice.Dataset(url, shuffle=True, shuffle_memory=bad)
    with pytest.raises(sluice.UsageError, match="both size the shuffle window"):
        sluice.Dataset(url, shuffle=True, shuffle_window=1000, shuffle_memory="1M")
    # Passes without a shuffle are refused by Go, naming the option.
    with pytest.raises(sluice.SluiceError, match="ShufflePasses"):
        sluice.Dataset(url, shuffle_passes=2)


def test_estimate(data):
    url = str(data / "numbers")
    e = sluice.Dataset(url, batch_size=256, shuffle=True, shuffle_window=2000).estimate()
    assert e["window_rows"] == 2000
    assert e["row_bytes"] > 0 and e["windows"] >= 10 and e["max_rows"] >= e["mean_rows"] > 0
    assert e["min_places"] >= 1 and e["mean_places"] >= e["min_places"]
    assert e["window_bytes"] == int(np.ceil(e["max_rows"] * e["row_bytes"]))
    assert e["peak_bytes"] == e["window_stored_bytes"] + 2 * e["window_bytes"]
    assert 0 <= e["mixing"] < 1 and e["mixing_batches"] > 0
    # Unshuffled, a window is permuted into no copy.
    u = sluice.Dataset(url, batch_size=256, shuffle_window=2000).estimate()
    assert u["peak_bytes"] == u["window_stored_bytes"] + u["window_bytes"]
    # ShuffleMemory buys the rows its bytes hold at row_bytes; a window of
    # the whole dataset mixes better than one of 2,000 rows.
    m = sluice.Dataset(url, batch_size=256, shuffle=True, shuffle_memory="512K").estimate()
    assert m["window_rows"] == int((512 << 10) / m["row_bytes"])
    w = sluice.Dataset(url, batch_size=256, shuffle=True, shuffle_window=20000).estimate()
    assert w["mixing"] < e["mixing"]
