"""Everything Go reads, Python reads: object-store URLs (S3, GCS, Azure, the
local servers scripts/objectstores.sh starts), Iceberg tables by metadata
location and through a SQLite catalog, a plan cache and a plan store, and
mixes of them. Values are checked row by row against the same rows read
from local Parquet files.

The object-store tests skip, saying how to start the servers, when the
environment names none; SLUICE_REQUIRE_OBJECTSTORES=1 (set by .ci/run)
makes that a failure."""

import json
import os
import subprocess

import pytest

import sluice

STORES = {"S3": "SLUICE_TEST_S3_URL", "GCS": "SLUICE_TEST_GCS_URL", "Azure": "SLUICE_TEST_AZURE_URL"}
COLUMNS = ["id", "label", "x", "s"]


def rows_of(ds):
    """Every row of the rest of the epoch as (id, label, x, s), in order."""
    out = []
    for b in ds:
        assert not b.validity, "no column of these datasets has nulls"
        out += zip(b["id"].tolist(), b["label"].tolist(), b["x"].tolist(), b["s"].tolist())
    return out


def by_id(rows):
    """rows keyed by id, checking that no id comes twice."""
    out = {}
    for r in rows:
        assert r[0] not in out, "id %d delivered twice" % r[0]
        out[r[0]] = r
    return out


@pytest.fixture(scope="session")
def numbers(data):
    """The numbers dataset (ids 0..19,999) read from local files, by id."""
    return by_id(rows_of(sluice.Dataset(str(data / "numbers"), columns=COLUMNS, batch_size=4096)))


@pytest.fixture(scope="session")
def other(data):
    """The other dataset (ids 0..5,999), the Iceberg table's data files, by id."""
    return by_id(rows_of(sluice.Dataset(str(data / "other"), columns=COLUMNS, batch_size=4096)))


@pytest.fixture(scope="session")
def table(data):
    """What capi/testdata/gen says of the Iceberg table it wrote."""
    with open(data / "iceberg.json") as f:
        return json.load(f)


def _missing(name):
    return ("%s server not running (%s is unset): from the repository root run "
            "`eval \"$(bash scripts/objectstores.sh start)\"`, or use `bash .ci/run`" % (name, STORES[name]))


@pytest.fixture(scope="session")
def stores(data):
    """URLs under a fresh prefix of each object store the environment names,
    holding a copy of the numbers files (gen serve); deleted at the end."""
    if not any(os.environ.get(v) for v in STORES.values()):
        yield {}
        return
    gen = os.environ.get("SLUICE_TEST_GEN") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "sluice-gen")
    p = subprocess.Popen([gen, "serve", str(data)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line:
        pytest.fail("gen serve could not copy the files to the object stores (exit status %d; its message is above): "
                    "are the servers running? (bash scripts/objectstores.sh status)" % p.wait(timeout=60))
    try:
        yield json.loads(line)
    finally:
        p.stdin.close()
        assert p.wait(timeout=120) == 0, "gen serve could not delete its prefixes"


def store(stores, name):
    """The URLs of one store, or a skip (a failure where object stores are
    required) saying how to start it."""
    if name not in stores:
        if os.environ.get("SLUICE_REQUIRE_OBJECTSTORES") == "1":
            pytest.fail(_missing(name) + " (SLUICE_REQUIRE_OBJECTSTORES=1 makes this an error)")
        pytest.skip(_missing(name))
    return stores[name]


@pytest.mark.parametrize("name", sorted(STORES))
def test_object_store_urls_read_as_local_files(name, stores, data, numbers):
    urls = store(stores, name)
    opts = dict(columns=COLUMNS, batch_size=700, shuffle=True, seed=3, num_splits=4)
    got = rows_of(sluice.Dataset(urls["numbers"], **opts))
    assert got == rows_of(sluice.Dataset(str(data / "numbers"), **opts))  # the same rows, in the same order
    assert by_id(got) == numbers and len(got) == 20000
    # a state taken after five batches resumes a new dataset after them
    remote = sluice.Dataset(urls["numbers"], **opts)
    it = iter(remote)
    head = sum(len(next(it)["id"]) for _ in range(5))
    again = sluice.Dataset(urls["numbers"], **opts)
    again.load_state_dict(remote.state_dict())
    assert rows_of(again) == got[head:]
    remote.close()


def test_object_store_url_that_names_nothing(stores):
    urls = store(stores, "S3")
    missing = urls["numbers"].replace("/numbers/", "/nothing-here/", 1)
    with pytest.raises(sluice.NotFoundError):
        sluice.Dataset(missing)


def test_plan_store_in_a_bucket_shares_one_plan(stores, data):
    urls = store(stores, "S3")
    opts = dict(columns=["id", "x"], batch_size=1000, shuffle=True, seed=5, num_splits=4, world_size=2,
                plan_store=urls["plan"], plan_store_wait=30)
    r0 = sluice.Dataset(urls["numbers"], rank=0, **opts)  # reads the footers, and writes the plan
    assert r0.metrics()["read_requests"] >= 4
    r1 = sluice.Dataset(urls["numbers"], rank=1, **opts)  # plans from it, reading no footer
    assert r1.metrics()["read_requests"] == 0
    ids = [r[0] for ds in (r0, r1) for b in ds for r in zip(b["id"].tolist())]
    assert sorted(ids) == list(range(20000))
    # a rank with other options meets the plan and is refused, naming the difference
    with pytest.raises(sluice.MismatchError, match="columns"):
        sluice.Dataset(urls["numbers"], rank=1, **dict(opts, columns=["id"]))


def test_plan_store_in_a_local_folder(tmp_path, data):
    plan = tmp_path / "run-7" / "plan.json"
    opts = dict(columns=["id"], batch_size=1000, num_splits=2, world_size=2, plan_store=str(plan))
    r0 = sluice.Dataset(str(data / "numbers"), rank=0, **opts)
    assert plan.exists()
    r1 = sluice.Dataset(str(data / "numbers"), rank=1, **opts)
    assert r1.metrics()["read_requests"] == 0
    ids = [i for ds in (r0, r1) for b in ds for i in b["id"].tolist()]
    assert sorted(ids) == list(range(20000))
    with pytest.raises(sluice.UsageError, match="plan.json"):
        sluice.Dataset(str(data / "numbers"), plan_store=str(tmp_path) + "/")


@pytest.mark.parametrize("where", ["local", "S3"])
def test_plan_cache_keeps_footers_between_runs(where, tmp_path, stores, data, numbers):
    if where == "local":
        cache, url = str(tmp_path / "cache"), str(data / "numbers")
    else:
        urls = store(stores, "S3")
        cache, url = urls["cache"], urls["numbers"]
    opts = dict(columns=COLUMNS, batch_size=900, shuffle=True, seed=4, plan_cache=cache)
    first = sluice.Dataset(url, **opts)
    assert first.metrics()["read_requests"] >= 4  # a footer a file
    if where == "local":
        assert len(os.listdir(cache)) == 4  # an entry a file
    second = sluice.Dataset(url, **opts)
    assert second.metrics()["read_requests"] == 0  # every footer from the cache
    got = rows_of(second)
    assert got == rows_of(first) and by_id(got) == numbers


def check_table(rows, other, below):
    """rows are the table's: other's rows from id below on, each once."""
    got = by_id(rows)
    assert sorted(got) == list(range(below, 6000))
    for i, r in got.items():
        assert r == other[i], (r, other[i])


def test_iceberg_table_by_metadata_location(table, other):
    ds = sluice.Dataset(table["metadata"], iceberg=True, columns=COLUMNS, batch_size=512, shuffle=True, seed=9,
                        num_splits=4)
    check_table(rows_of(ds), other, table["deleted_below"])
    # time travel: the first snapshot is before the deletes
    first = sluice.Dataset(table["metadata"], iceberg=True, columns=COLUMNS, snapshot_id=table["first_snapshot"])
    check_table(rows_of(first), other, 0)


def test_iceberg_table_by_sqlite_catalog(table, other, tmp_path):
    opts = dict(columns=COLUMNS, batch_size=512, shuffle=True, seed=9, num_splits=4)
    ds = sluice.Dataset(table["table"], catalog=table["catalog"], catalog_name=table["catalog_name"], **opts)
    rows = rows_of(ds)
    check_table(rows, other, table["deleted_below"])
    # the same rows in the same order as the table by its metadata file
    assert rows == rows_of(sluice.Dataset(table["metadata"], iceberg=True, **opts))
    # a pyiceberg configuration file, its one entry
    cfg = tmp_path / "catalogs.yaml"
    cfg.write_text("catalog:\n  lake:\n    type: sql\n    uri: %s\n" % table["catalog"])
    assert rows_of(sluice.Dataset(table["table"], catalog=cfg, **opts)) == rows
    # as of a time after the last commit: the current snapshot
    later = sluice.Dataset(table["table"], catalog=table["catalog"], catalog_name="lake", as_of="2100-01-01T00:00:00Z",
                           columns=COLUMNS)
    check_table(rows_of(later), other, table["deleted_below"])


def test_iceberg_catalog_errors_name_what_is_there(table):
    cat = table["catalog"]
    with pytest.raises(sluice.NotFoundError, match=r"no table ns\.nope: it holds ns\.events"):
        sluice.Dataset("ns.nope", catalog=cat, catalog_name="lake")
    with pytest.raises(sluice.NotFoundError, match=r"catalogs lake, not of \"default\" \(name one with option catalog_name\)"):
        sluice.Dataset("ns.events", catalog=cat)
    with pytest.raises(sluice.UsageError, match="not a catalog URI"):
        sluice.Dataset("ns.events", catalog="mysql://x")
    with pytest.raises(sluice.UsageError, match="namespace.table"):
        sluice.Dataset("events", catalog=cat, catalog_name="lake")
    with pytest.raises(sluice.NotFoundError, match="12345"):
        sluice.Dataset(table["metadata"], iceberg=True, snapshot_id=12345)
    with pytest.raises(sluice.UsageError, match="give one"):
        sluice.Dataset(table["metadata"], iceberg=True, catalog=cat)
    with pytest.raises(sluice.UsageError, match="need iceberg=True or catalog"):
        sluice.Dataset(table["metadata"], snapshot_id=1)
    with pytest.raises(sluice.UsageError, match="time zone"):
        import datetime
        sluice.Dataset(table["metadata"], iceberg=True, as_of=datetime.datetime(2020, 1, 1))


def counts_of(rows):
    out = {}
    for r in rows:
        out[r[0]] = out.get(r[0], 0) + 1
    return out


def test_mixes_of_object_stores_and_tables(stores, table, numbers, other):
    # S3's copy of numbers and the first file of GCS's (ids 0..4,999), each
    # one pass: ids below 5,000 twice, the rest once
    s3 = sluice.Dataset(store(stores, "S3")["numbers"], columns=COLUMNS, batch_size=256, shuffle=True, seed=1)
    gcs = sluice.Dataset(store(stores, "GCS")["numbers"].replace("/numbers/", "/numbers/part-00000.parquet", 1),
                         columns=COLUMNS, batch_size=256, shuffle=True, seed=1)
    got = rows_of(sluice.Mix([(s3, 3), (gcs, 1)], batch_size=256, seed=7, no_repeat=True))
    assert all(numbers[r[0]] == r for r in got)
    assert counts_of(got) == {i: 2 if i < 5000 else 1 for i in range(20000)}
    # two tables of one catalog: the current snapshot and, by its metadata
    # file, the first (before the deletes), each one pass: the ids the
    # deletes removed come once, every other id twice
    cur = sluice.Dataset(table["table"], catalog=table["catalog"], catalog_name="lake", columns=COLUMNS,
                         batch_size=256, shuffle=True, seed=2)
    old = sluice.Dataset(table["metadata"], iceberg=True, snapshot_id=table["first_snapshot"], columns=COLUMNS,
                         batch_size=256, shuffle=True, seed=3)
    got = rows_of(sluice.Mix([(cur, 1), (old, 1)], batch_size=256, seed=7, no_repeat=True))
    assert all(other[r[0]] == r for r in got)
    assert counts_of(got) == {i: 1 if i < table["deleted_below"] else 2 for i in range(6000)}
