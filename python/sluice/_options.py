"""The Dataset's options: names, types and ranges, checked in Python before
the Go side is called so that a mistake names the option."""

import datetime
import difflib
import numbers
import os

from .errors import UsageError

_U64 = 1 << 64


def _int(lo=None, hi=None):
    def check(name, v):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise UsageError("sluice: option %s must be an int, not %s" % (name, type(v).__name__))
        v = int(v)
        if lo is not None and v < lo:
            raise UsageError("sluice: option %s is %d; it must be at least %d" % (name, v, lo))
        if hi is not None and v >= hi:
            raise UsageError("sluice: option %s is %d; it must be below %d" % (name, v, hi))
        return v
    return check


def _bool(name, v):
    if not isinstance(v, bool):
        raise UsageError("sluice: option %s must be a bool, not %s" % (name, type(v).__name__))
    return v


def _str(name, v):
    if not isinstance(v, str):
        raise UsageError("sluice: option %s must be a str, not %s" % (name, type(v).__name__))
    return v


_SIZE_UNITS = (("KIB", 1 << 10), ("MIB", 1 << 20), ("GIB", 1 << 30), ("KB", 1 << 10), ("MB", 1 << 20),
               ("GB", 1 << 30), ("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("B", 1))


def _size(name, v):
    """A number of bytes: an int, or a str as the CLI's sizes ("512M",
    "2GiB", "1048576"; K, M and G are powers of 1024)."""
    if isinstance(v, str):
        t, mult = v.strip(), 1
        for suffix, m in _SIZE_UNITS:
            if t.upper().endswith(suffix):
                t, mult = t[:-len(suffix)].strip(), m
                break
        if not t.isdigit():
            raise UsageError("sluice: option %s %r is not a size (a number of bytes, optionally with K, M or G)"
                             % (name, v))
        v = int(t) * mult
    return _int(0, 1 << 63)(name, v)


def _strs(name, v):
    if isinstance(v, str) or not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
        raise UsageError("sluice: option %s must be a list of str, not %r" % (name, v))
    return list(v)


def _columns(name, v):
    v = _strs(name, v)
    if not v:
        raise UsageError("sluice: option %s is empty; leave it out (or None) to read every column" % name)
    return v


def _path(name, v):
    """A local path (str or os.PathLike) or a URL."""
    if isinstance(v, os.PathLike):
        v = os.fspath(v)
    if not isinstance(v, str) or not v:
        raise UsageError("sluice: option %s must be a path or URL (a non-empty str), not %r" % (name, v))
    return v


def _seconds(name, v):
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or v < 0:
        raise UsageError("sluice: option %s must be a number of seconds, at least 0, not %r" % (name, v))
    return float(v)


def _time(name, v):
    """An RFC 3339 time: a str, or a datetime with its time zone."""
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            raise UsageError("sluice: option %s %s has no time zone: give one (such as tzinfo=datetime.timezone.utc)"
                             % (name, v))
        return v.isoformat()
    return _str(name, v)


def _str_map(name, v):
    if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()):
        raise UsageError("sluice: option %s must be a dict of str to str, not %r" % (name, v))
    return dict(v)


# Go's stream.Options under Python names (see its documentation for each);
# 0 means the documented default. The names are the C ABI's
# (capi/options.go, datasetOptions and mixOptionNames); a Go test,
# TestPythonNamesEveryOption, keeps these lists the same as those.
DATASET = {
    "columns": _columns,
    "filter": _str,
    "batch_size": _int(0),
    "shuffle": _bool,
    "seed": _int(0, _U64),
    "epoch": _int(0),
    "clump_size": _int(0),
    "shuffle_window": _int(0),
    "shuffle_memory": _size,
    "shuffle_passes": _int(0),
    "chunk_bytes": _int(0),
    "num_splits": _int(0),
    "drop_remainder": _bool,
    "equal_batches": _bool,
    "rank": _int(0),
    "world_size": _int(0),
    "fetch_concurrency": _int(0),
    "read_concurrency": _int(0),
    "transform_concurrency": _int(0),
    "prefetch_batches": _int(0),
    "prefetch_windows": _int(0),
    "prefetch_bytes": _int(0),
    "fetch_ahead_bytes": _size,
    "read_batch_size": _int(0),
    "take_cache_bytes": _int(),
    "plan_concurrency": _int(0),
    "format": _str,
    "delimiter": _str,
    "quote": _str,
    "escape": _str,
    "comment": _str,
    "no_header": _bool,
    "header": _bool,
    "null_padding": _bool,
    "null_strings": _strs,
    "count_rows": _bool,
    "skip_bad_rows": _bool,
    # Tables, as the CLI's --iceberg, --catalog, --catalog-name, --snapshot-id,
    # --ref, --as-of and --rewrite: the one URL is the table's metadata
    # location, or its identifier (db.table) in the catalog.
    "iceberg": _bool,
    "catalog": _path,
    "catalog_name": _str,
    "snapshot_id": _int(),
    "ref": _str,
    "as_of": _time,
    "rewrite": _str_map,
    # Plans kept between runs and shared between ranks.
    "plan_cache": _path,
    "plan_store": _path,
    "plan_store_wait": _seconds,
    # A node-local cache of the bytes read from object stores, shared by the
    # ranks and workers on the machine that name the same folder.
    "cache_dir": _path,
    "cache_bytes": _size,
}

MIX = {
    "epoch": _str,
    "rows": _int(0),
    "no_repeat": _bool,
    "seed": _int(0, _U64),
    "start_epoch": _int(0),
    "batch_size": _int(0),
    "rank": _int(0),
    "world_size": _int(0),
    "concurrency": _int(0),
    "prefetch": _int(0),
}


def check(spec, options, what="option"):
    """options checked against spec: unknown names and wrong types are
    UsageError naming the option; None values are left out (defaults)."""
    out = {}
    for name, v in options.items():
        f = spec.get(name)
        if f is None:
            close = difflib.get_close_matches(name, spec, n=1)
            hint = " (did you mean %r?)" % close[0] if close else ""
            raise UsageError("sluice: unknown %s %r%s; known: %s" % (what, name, hint, ", ".join(sorted(spec))))
        if v is None:
            continue
        out[name] = f(name, v)
    if "rank" in out or "world_size" in out:
        rank, world = out.get("rank", 0), out.get("world_size", 0) or 1
        if rank >= world:
            raise UsageError("sluice: option rank %d is outside world_size %d" % (rank, world))
    if spec is DATASET:
        ns, world = out.get("num_splits", 0), out.get("world_size", 0) or 1
        if ns and ns % world:
            raise UsageError("sluice: option num_splits %d is not a multiple of world_size %d" % (ns, world))
        if out.get("shuffle_window") and out.get("shuffle_memory"):
            raise UsageError("sluice: options shuffle_window and shuffle_memory both size the shuffle window: give one")
        if out.get("header") and out.get("no_header"):
            raise UsageError("sluice: options header and no_header contradict each other")
        if out.get("iceberg") and "catalog" in out:
            raise UsageError("sluice: options iceberg and catalog both name a table: iceberg=True reads it by its "
                             "metadata location, catalog by its catalog; give one")
        if "catalog_name" in out and "catalog" not in out:
            raise UsageError("sluice: option catalog_name needs option catalog")
        if "plan_store_wait" in out and "plan_store" not in out:
            raise UsageError("sluice: option plan_store_wait needs option plan_store")
        if len(out.get("delimiter", "")) > 1:
            raise UsageError("sluice: option delimiter %r is more than one character" % out["delimiter"])
        for name in ("quote", "comment"):
            if len(out.get(name, "")) > 1 and out[name] != "none":
                raise UsageError("sluice: option %s %r is neither one character nor 'none'" % (name, out[name]))
        if len(out.get("escape", "")) > 1:
            raise UsageError("sluice: option escape %r is more than one character" % out["escape"])
    if spec is MIX and out.get("epoch", "largest") not in ("largest", "smallest", "rows"):
        raise UsageError("sluice: mix option epoch %r is none of 'largest', 'smallest', 'rows'" % out["epoch"])
    return out


def urls(v):
    if isinstance(v, str):
        return [v]
    if isinstance(v, (list, tuple)) and v and all(isinstance(x, str) for x in v):
        return list(v)
    raise UsageError("sluice: urls must be a str or a non-empty list of str, not %r" % (v,))
