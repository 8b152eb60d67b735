"""The Dataset's options: names, types and ranges, checked in Python before
the Go side is called so that a mistake names the option."""

import difflib
import numbers

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


# Go's stream.Options under Python names (see its documentation for each);
# 0 means the documented default.
DATASET = {
    "columns": _strs,
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
