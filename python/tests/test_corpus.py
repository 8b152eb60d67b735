"""Files other tools wrote, read from Python against their writers' own
expected rows: ORC's expected outputs (the shared corpus,
../shared/testdata beside the checkout or SLUICE_TESTDATA; .ci/run
requires it). Nested lists of structs, maps, unions, decimals and
nanosecond timestamps, in batches of 37 rows so that batches start inside
windows."""

import decimal
import gzip
import json
import os

import numpy as np
import pytest

import sluice

from conftest import ROOT


def corpus():
    d = os.environ.get("SLUICE_TESTDATA") or os.path.join(ROOT, "..", "shared", "testdata")
    if not os.path.isdir(os.path.join(d, "orc")):
        if os.environ.get("SLUICE_REQUIRE_TESTDATA") == "1" or os.environ.get("CI"):
            pytest.fail("the shared test corpus is not at %s (SLUICE_REQUIRE_TESTDATA)" % d)
        pytest.skip("the shared test corpus is not at %s: put it there or set SLUICE_TESTDATA" % d)
    return d


def plain(v):
    """A value of a batch as ORC's expected JSON writes it."""
    if isinstance(v, np.ndarray):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items() if not k.endswith(sluice.VALID)}
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, tuple):  # a map's (key, value)
        return {"key": plain(v[0]), "value": plain(v[1])}
    if isinstance(v, bytes):
        return list(v)
    if isinstance(v, np.datetime64):
        return v
    if isinstance(v, np.generic):
        return v.item()
    return v


def row_at(cols, valid, i):
    return {k: (None if k in valid and not valid[k][i] else
                row_at(v, {c[:-len(sluice.VALID)]: ok for c, ok in v.items() if c.endswith(sluice.VALID)}, i)
                if isinstance(v, dict) else plain(v[i]))
            for k, v in cols.items() if not k.endswith(sluice.VALID)}


def expected(name, fix=lambda r: r):
    path = os.path.join(corpus(), "orc", "examples", "expected", name + ".jsn.gz")
    with gzip.open(path, "rt") as f:
        return [fix(json.loads(line, parse_float=decimal.Decimal)) for line in f]


def read(name):
    ds = sluice.Dataset(os.path.join(corpus(), "orc", "examples", name + ".orc"), batch_size=37)
    rows = [row_at(dict(b.items()), b.validity, i) for b in ds for i in range(b.num_rows)]
    ds.close()
    return rows


def test_nested_lists_of_structs_and_maps():
    want, got = expected("TestOrcFile.test1"), read("TestOrcFile.test1")
    assert len(got) == len(want) == 2
    for g, w in zip(got, want):
        assert g == w


def test_union_decimal_and_nanosecond_timestamps():
    def fix(r):
        if r["union"] is not None:
            r["union"] = r["union"]["value"]
        if r["time"] is not None:
            r["time"] = np.datetime64(r["time"].replace(" ", "T"), "ns")
        return r

    want, got = expected("TestOrcFile.testUnionAndTimestamp", fix), read("TestOrcFile.testUnionAndTimestamp")
    assert len(got) == len(want) > 5000
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, (i, g, w)
        if w["decimal"] is not None:  # every digit, to the written scale
            assert g["decimal"].as_tuple() == w["decimal"].as_tuple(), (i, g, w)


def test_decimals():
    want, got = expected("decimal"), read("decimal")
    assert len(got) == len(want) > 5000
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, (i, g, w)
