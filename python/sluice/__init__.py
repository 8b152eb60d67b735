"""sluice from Python: the Go core's datasets, streamed as NumPy arrays,
torch tensors or pyarrow record batches, with exact resume.

    ds = sluice.Dataset("data/", columns=["x", "label"], batch_size=1024,
                        shuffle=True, seed=1, num_splits=8)
    for batch in ds:                  # the rest of this epoch
        x = batch["x"]                # a NumPy array over the batch's memory
        state = ds.state_dict()       # resumes after this batch

Options are Go's stream.Options under Python names (see docs/python.md). The
library (libsluice.so, built from ../capi) is loaded on first use.
"""

import collections
import ctypes
import itertools
import json
import os
import time
import weakref

import numpy as np

from . import _arrow, _lib, _loaderstate, _options
from .errors import (  # noqa: F401
    BusyError, CancelledError, ChangedError, ClosedError, CorruptError, EmptyError, ForkError,
    InternalError, MismatchError, NotFoundError, PositionError, SchemaError,
    SluiceError, UsageError, VersionError)

__all__ = [
    "Dataset", "Mix", "Batch", "Strings", "merge_states", "rank_from_env", "VALID",
    "SluiceError", "UsageError", "MismatchError", "CorruptError", "SchemaError", "NotFoundError",
    "EmptyError", "PositionError", "BusyError", "VersionError", "ClosedError", "CancelledError",
    "InternalError", "ForkError", "ChangedError",
]

# How long one call waits in Go for a batch before Python gets control back
# to run signal handlers (Ctrl-C), then asks again.
_POLL_MS = 100

_STATE_FORMAT = 1

# The most batches one call into the library hands over (those it has
# ready, whole windows where it can): calls into Go cost about what a batch
# of numbers does to decode, and a window's columns are made once. The
# library reads one more ahead (65), to see where a window ends.
_GROUP = 64

# VALID ends the name of the entry beside a column that has nulls in a
# batch: batch["x" + VALID] is a bool array, True where x has a value.
VALID = _arrow.VALID


class Batch(dict):
    """A batch: column name to values. A column with nulls in this batch
    has an entry beside it, its name with ``.valid`` appended (sluice.VALID):
    a bool array, True where the column has a value, False at a null. Being
    entries, they travel wherever the dict's items do (a DataLoader's
    workers and collation, ``{k: v.to(device) for k, v in batch.items()}``).
    ``validity`` maps each column with nulls to that array; ``num_rows`` is
    the batch's length."""

    __slots__ = ("_num_rows",)

    def __init__(self, cols=(), num_rows=None):
        # One argument, a mapping, as torch's default_convert rebuilds a
        # mapping of its type.
        dict.__init__(self, cols)
        self._num_rows = num_rows

    @property
    def num_rows(self):
        if self._num_rows is None:
            self._num_rows = _arrow.rows_of(self)
        return self._num_rows

    @property
    def validity(self):
        n = len(VALID)
        return {k[:-n]: v for k, v in self.items() if k.endswith(VALID) and k[:-n] in self}

    def __reduce__(self):
        return (Batch, (dict(self), self._num_rows))


Strings = _arrow.Strings


def _pieces(v, bounds, sizes, lead):
    """A run's column cut into its batches' rows (bounds: each batch's
    first and end row; sizes: its rows; lead: how many batches lead the
    run with the first's size), views."""
    if isinstance(v, np.ndarray):
        if lead > 1 and v.ndim == 1:
            # The leading batches as the rows of a 2-D view, which NumPy
            # iterates into views in one call: a slice each costs a
            # Python operation per batch on the thread that trains.
            m = sizes[0]
            return list(v[:lead * m].reshape(lead, m)) + [v[a:b] for a, b in bounds[lead:]]
        return [v[a:b] for a, b in bounds]
    if isinstance(v, dict):
        ks = list(v)
        return [dict(zip(ks, p)) for p in zip(*[_pieces(v[k], bounds, sizes, lead) for k in ks])]
    if isinstance(v, Strings):
        return v.cuts(bounds)
    if hasattr(v, "unbind"):  # a tensor: views made in one call
        if lead > 1 and v.dim() == 1:
            m = sizes[0]
            out = list(v[:lead * m].view(lead, m).unbind(0))
            return out + list(v[lead * m:].split(sizes[lead:])) if lead < len(sizes) else out
        return v.split(sizes)
    return [v[a:b] for a, b in bounds]


def _lead(sizes):
    """How many batches lead sizes with the first's size (a window's
    batches but its last)."""
    m, e = sizes[0], 1
    while e < len(sizes) and sizes[e] == m:
        e += 1
    return e if m else 0


def _to_torch(values, pin):
    import torch
    if not isinstance(values, np.ndarray):
        if isinstance(values, Strings):
            return values.as_torch(pin)
        if isinstance(values, dict):
            return {k: _to_torch(v, pin) for k, v in values.items()}
        return values
    if values.dtype == object or values.dtype.names:  # intervals stay NumPy records
        return values
    if values.dtype.kind in "Mm":
        values = values.view(np.int64)
    elif values.dtype == np.uint16:
        values = values.astype(np.int32)
    elif values.dtype == np.uint32:
        values = values.astype(np.int64)
    elif values.dtype == np.uint64:
        return values  # torch has no uint64 in every version we support
    t = torch.from_numpy(values)
    return t.pin_memory() if pin else t


class _Source:
    """What Dataset and Mix share: a handle, iteration, state, close."""

    _kind = None

    def __init__(self, as_torch, pin_memory, strings):
        self._h = None
        self._pid = os.getpid()
        if not isinstance(as_torch, bool):
            raise UsageError("sluice: option as_torch must be a bool")
        if not isinstance(pin_memory, bool):
            raise UsageError("sluice: option pin_memory must be a bool")
        if pin_memory and not as_torch:
            raise UsageError("sluice: option pin_memory needs as_torch=True")
        if strings not in ("objects", "arrays"):
            raise UsageError("sluice: option strings is %r; it must be 'objects' or 'arrays'" % (strings,))
        self._as_torch = as_torch
        self._pin = pin_memory
        self._strings = strings == "arrays"
        self._fields = None
        self._pa_schema = None
        # _pending: batches of the last group received and not handed on
        # yet (of iteration kind _pending_kind): the state leaves them out.
        self._pending = collections.deque()
        self._pending_kind = None
        self._info = (ctypes.c_int64 * (3 * _GROUP))()

    def _init_schema(self):
        s = _arrow.ArrowSchema()
        _lib.call("sluice_schema", self._h, ctypes.byref(s))
        try:
            self._fields = _arrow.Field(s).children
        finally:
            _arrow.release_schema(s)
        _arrow.check_names(self._fields)

    def _handle(self):
        if self._pid != _lib.pid():
            raise ForkError(_lib.fork_message(self._kind) % (self._pid, os.getpid()))
        if self._h is None:
            raise ClosedError("sluice: the %s is closed; open a new one to read on" % self._kind)
        return self._h

    @property
    def column_names(self):
        return [f.name for f in self._fields]

    def _next_group(self):
        """The next batches: (arrays, info), arrays the ArrowArrays of the
        call's runs (batches that follow one another in memory), which the
        caller owns from here, and info three numbers for each batch: its
        run, its first row there and its rows; or None at the end of the
        epoch."""
        counts = (ctypes.c_int64 * 2)()  # the batches, the arrays
        # A room of its own for each group: its arrays stay where Go wrote
        # them, each owned by the Owner made over it (no copy of the
        # structs out of a shared room).
        arrays, info = (_arrow.ArrowArray * _GROUP)(), self._info
        f = _lib.lib().sluice_next
        h = self._handle()
        while True:
            # A Ctrl-C a finalizer swallowed surfaces here, where the loop
            # over batches sees it.
            _arrow.raise_lost_interrupt()
            # The arrays let go of since the last call are released by
            # this one (keep holds them until it returns).
            keep, gone, k = _arrow.released()
            _lib.check(f(h, arrays, _GROUP, info, _POLL_MS, counts, gone, k))
            del keep
            if counts[0] >= 0:
                break
        n, runs = counts[0], counts[1]
        if not n:
            return None
        return [arrays[i] for i in range(runs)], info[:3 * n]

    def _columns(self, owner, strings=None):
        """The columns of the array owner holds, with validity entries for
        those with nulls (strings as Strings where strings is true; by
        default as the dataset was asked)."""
        a = owner.array
        cols = {}
        if strings is None:
            strings = self._strings
        for i, fld in enumerate(self._fields):
            v, ok = _arrow.convert(fld, owner, a.children[i].contents, strings)
            cols[fld.name] = v
            if ok is not None:
                cols[fld.name + VALID] = ok
        return cols

    def _torch(self, cols):
        return {k: _to_torch(v, self._pin) for k, v in cols.items()}

    def _batch(self, owner):
        cols = self._columns(owner)
        return Batch(self._torch(cols) if self._as_torch else cols, owner.array.length)

    def _group(self):
        """The next batches, or None at the end of the epoch. Batches that
        follow one another in memory (cut from one window) cross as one
        array (a run): its columns are made once and each batch is a view
        of its rows."""
        got = self._next_group()
        if got is None:
            return None
        arrays, info = got
        sizes = info[2::3]
        if len(arrays) == 1:
            return self._run_batches(arrays[0], sizes)
        # The batches of a run come in order and cover its rows end to end.
        runs = info[0::3]
        each = [[] for _ in arrays]
        for r, n in zip(runs, sizes):
            each[r].append(n)
        made = [iter(self._run_batches(a, s)) for a, s in zip(arrays, each)]
        return [next(made[r]) for r in runs]

    def _run_batches(self, arr, sizes):
        """The batches of one run of the given sizes, in order."""
        owner = _arrow.Owner(arr)
        if len(sizes) == 1:  # crossed alone
            cols = self._columns(owner)
            return [Batch(self._torch(cols) if self._as_torch else cols, sizes[0])]
        # Strings become Python objects batch by batch, from the run's
        # bytes: made for the whole run at once, the objects of many
        # batches would live at once, to no one's gain.
        cols = self._columns(owner, strings=True)
        objects = () if self._strings else [k for k, v in cols.items() if isinstance(v, Strings)]
        ends = list(itertools.accumulate(sizes))
        bounds = list(zip([0] + ends[:-1], ends))
        # A batch has a validity entry where it has nulls, as one that
        # crossed alone: the run's is cut, and left out where all true.
        valid = {k: [v[a:b] for a, b in bounds] for k, v in cols.items()
                 if k.endswith(VALID) and k[:-len(VALID)] in cols}
        if self._as_torch:
            cols = {k: v if k in objects else _to_torch(v, self._pin) for k, v in cols.items()}
        keys = list(cols)
        lead = _lead(sizes)
        parts = [_pieces(cols[k], bounds, sizes, lead) for k in keys]
        if not valid and not objects:
            return [Batch(zip(keys, p), n) for p, n in zip(zip(*parts), sizes)]
        out = []
        for i, n in enumerate(sizes):
            b = dict(zip(keys, [p[i] for p in parts]))
            for k, v in valid.items():
                if v[i].all():
                    del b[k]
            for k in objects:
                ok = valid.get(k + VALID)
                b[k] = _arrow.objects(b[k], None if ok is None or k + VALID not in b else ok[i])
            out.append(Batch(b, n))
        return out

    def _iterate(self, kind, group):
        self._handle()
        pending = self._pending
        try:
            while True:
                if pending and self._pending_kind != kind:
                    self._drop_pending()
                while pending:
                    # A Ctrl-C a finalizer swallowed surfaces here, where
                    # the loop over batches sees it.
                    if _arrow.lost_interrupt:
                        _arrow.raise_lost_interrupt()
                    # Taken out before it is handed on: the state counts it.
                    yield pending.popleft()
                got = group()
                if got is None:
                    return
                self._pending_kind = kind
                pending.extend(got)
        except BaseException:
            # A break, an error or Ctrl-C: end every goroutine of the
            # iteration; the position stays after the last batch received
            # (batches of a group not handed on yet stay pending here, for
            # the next iteration). At exit the dataset may be closed
            # already (its finalizer runs before an unfinished iteration is
            # collected), which ended them.
            if self._h is not None and self._pid == os.getpid():
                try:
                    _lib.call("sluice_stop", self._h)
                except SluiceError:
                    pass
            raise

    def _drop_pending(self):
        """Give back the batches received and not handed on (of the other
        kind of iteration): the position moves back before them."""
        b = self._state_bytes()
        self._pending.clear()
        _lib.call("sluice_load_state", self._handle(), b, len(b))

    def __iter__(self):
        """The rest of the current epoch, batch by batch; the next iteration
        goes on with the next epoch."""
        return self._iterate("batch", self._group)

    def arrow_batches(self):
        """As iteration, as pyarrow.RecordBatch (needs pyarrow); the batch
        owns the memory, which goes back to Go when pyarrow releases it."""
        import pyarrow as pa
        if self._pa_schema is None:
            s = _arrow.ArrowSchema()
            _lib.call("sluice_schema", self._handle(), ctypes.byref(s))
            self._pa_schema = pa.Schema._import_from_c(ctypes.addressof(s))

        def group():
            got = self._next_group()
            if got is None:
                return None
            arrays, info = got
            made = {}
            out = []
            for i in range(0, len(info), 3):
                r, a, n = info[i:i + 3]
                rb = made.get(r)
                if rb is None:
                    rb = made[r] = pa.RecordBatch._import_from_c(ctypes.addressof(arrays[r]), self._pa_schema)
                out.append(rb if rb.num_rows == n else rb.slice(a, n))
            return out
        return self._iterate("arrow", group)

    def state_dict(self):
        """The position, as plain Python values (torch.save stores them):
        the batches received so far, never those read ahead. "epoch" is
        the epoch a dataset that loads it goes on with."""
        return {"format": _STATE_FORMAT, "kind": self._kind, "epoch": self.epoch, "state": self._state_bytes()}

    def _state_bytes(self):
        """The encoded position alone (what a DataLoader worker sends with
        each batch)."""
        p, n = ctypes.c_void_p(), ctypes.c_int64()
        _lib.call("sluice_state", self._handle(), len(self._pending), ctypes.byref(p), ctypes.byref(n))
        return _lib.take_bytes(p, n.value)

    def load_state_dict(self, state):
        """Move to a position state_dict returned (or merge_states merged).
        A state of another dataset raises MismatchError naming the field."""
        b = _state_bytes(state, self._kind)
        self._pending.clear()
        _lib.call("sluice_load_state", self._handle(), b, len(b))

    def info(self):
        p = ctypes.c_void_p()
        _lib.call("sluice_info", self._handle(), ctypes.byref(p))
        return json.loads(_lib.take_string(p))

    @property
    def epoch(self):
        """The epoch the next batch comes from."""
        return self.info()["epoch"]

    def close(self):
        """End every goroutine and release the files. A second close raises
        ClosedError."""
        h = self._handle()
        self._pending.clear()
        _lib.call("sluice_close", h)
        self._h = None
        self._finalizer.detach()
        _arrow.release_now()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._h is not None:
            self.close()

    def _register(self, h):
        self._h = h
        self._finalizer = weakref.finalize(self, _close_quietly, h, os.getpid())


def _close_quietly(h, pid):
    if pid == os.getpid():
        try:
            _lib.call("sluice_close", h)
        except SluiceError:
            pass


_KIND_NAMES = {"dataset": "a sluice.Dataset's", "mix": "a sluice.Mix's",
               "loader": "a sluice.torch.DataLoader's"}


def check_state(state):
    """state, if it is a dict that a state_dict() returned (of any kind);
    else UsageError or VersionError saying what it is instead."""
    if not isinstance(state, dict):
        raise UsageError("sluice: load_state_dict takes the dict that state_dict() returned; this is a %s"
                         % type(state).__name__)
    missing = [k for k in ("format", "kind") if k not in state]
    if missing or ("state" not in state and "states" not in state):
        raise UsageError("sluice: load_state_dict takes the dict that state_dict() returned, which has the keys "
                         "format, kind and state; this dict has %s"
                         % (("the keys " + ", ".join(sorted(map(repr, state)))) if state else "no keys"))
    if state["format"] != _STATE_FORMAT:
        raise VersionError("sluice: the state's format is %r; this sluice reads format %d: a newer sluice wrote it"
                           % (state["format"], _STATE_FORMAT))
    if state["kind"] not in _KIND_NAMES:
        raise UsageError("sluice: the state's kind is %r; a state is a dataset's, a mix's or a loader's"
                         % (state["kind"],))
    return state


def _state_bytes(state, kind):
    if isinstance(state, (bytes, bytearray)):
        return bytes(state)
    check_state(state)
    if state["kind"] != kind:
        raise MismatchError("sluice: field kind: the state is %s, and this is %s; load it into what saved it"
                            % (_KIND_NAMES[state["kind"]], _KIND_NAMES.get(kind, kind)))
    b = state["state"]
    if not isinstance(b, (bytes, bytearray)):
        raise UsageError("sluice: the state's 'state' entry must be bytes, not %s" % type(b).__name__)
    return bytes(b)


class Dataset(_Source):
    """A dataset: Parquet, ORC, Avro, CSV or JSON files under urls, streamed in an
    exact, elastic, resumable order. Options are stream.Options under Python
    names; as_torch gives torch tensors (torch.from_numpy, no copy) and
    pin_memory pins them."""

    _kind = "dataset"

    def __init__(self, urls, *, as_torch=False, pin_memory=False, strings="objects", **options):
        super().__init__(as_torch, pin_memory, strings)
        opts = _options.check(_options.DATASET, options)
        opts["urls"] = _options.urls(urls)
        self.options = dict(opts)
        h = ctypes.c_int64()
        _lib.call("sluice_open", json.dumps(opts).encode(), ctypes.byref(h))
        self._register(h.value)
        self._init_schema()

    def set_epoch(self, epoch):
        """Move to the start of an epoch."""
        epoch = _options._int(0)("epoch", epoch)
        self._pending.clear()
        _lib.call("sluice_set_epoch", self._handle(), epoch)

    def take(self, positions, epoch=None):
        """The rows at these positions of an epoch's order (default: the
        current epoch), as one Batch."""
        if epoch is None:
            epoch = self.epoch
        pos = np.ascontiguousarray(positions, dtype=np.int64)
        if pos.ndim != 1:
            raise UsageError("sluice: take positions must be one-dimensional")
        owner = _arrow.Owner()
        _lib.call("sluice_take", self._handle(), int(epoch),
                  pos.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)), len(pos), ctypes.byref(owner.array))
        return self._batch(owner)

    def estimate(self):
        """What the shuffle costs and gives in the current epoch, from the
        plan alone (Go's Dataset.Estimate; the CLI's sluice inspect): a dict
        of window_rows, row_bytes (a decoded row), windows, mean_rows and
        max_rows (-1 where unknown before reading), mean_places and
        min_places (the places a window draws from), window_bytes (decoded,
        the largest window), window_stored_bytes, peak_bytes (one window's
        most memory at once, for this dataset's shuffle), mixing (the mean
        total variation distance of a batch's labels on label-sorted data:
        0 perfect, about 0.04 a full shuffle; -1 unknown) and
        mixing_batches (the batches it was measured on)."""
        p = ctypes.c_void_p()
        _lib.call("sluice_estimate", self._handle(), ctypes.byref(p))
        return json.loads(_lib.take_string(p))

    def metrics(self):
        """The pipeline's metrics snapshot (queue depths, times, bytes) as a
        dict; see docs/metrics.md."""
        p = ctypes.c_void_p()
        _lib.call("sluice_metrics", self._handle(), len(self._pending), ctypes.byref(p))
        return json.loads(_lib.take_string(p))


class Mix(_Source):
    """A weighted mix of datasets (Go's stream.Mix): sources is a list of
    (Dataset, weight). The sources stay open while the mix is."""

    _kind = "mix"

    def __init__(self, sources, *, as_torch=False, pin_memory=False, strings="objects", **options):
        super().__init__(as_torch, pin_memory, strings)
        opts = _options.check(_options.MIX, options, "mix option")
        if not isinstance(sources, (list, tuple)) or not sources:
            raise UsageError("sluice: mix sources must be a non-empty list of (Dataset, weight)")
        srcs = []
        for i, s in enumerate(sources):
            if not (isinstance(s, (list, tuple)) and len(s) == 2 and isinstance(s[0], Dataset)
                    and isinstance(s[1], (int, float)) and not isinstance(s[1], bool)):
                raise UsageError("sluice: mix source %d must be a (Dataset, weight) pair" % i)
            srcs.append({"dataset": s[0]._handle(), "weight": float(s[1])})
        opts["sources"] = srcs
        self._sources = [s[0] for s in sources]
        h = ctypes.c_int64()
        _lib.call("sluice_mix", json.dumps(opts).encode(), ctypes.byref(h))
        self._register(h.value)
        self._init_schema()


def merge_states(states):
    """Merge the states of all ranks of one step into one that resumes at
    any world size dividing num_splits (Go's checkpoint.Merge). States of
    sluice.torch.DataLoader (one per rank) merge too, without the library:
    their workers' states are merged where the merge is loaded."""
    if not states:
        raise UsageError("sluice: merge_states needs the states of every rank; it was given none")
    kind = states[0].get("kind") if isinstance(states[0], dict) else "dataset"
    if kind == "loader":
        return _loaderstate.merge([check_state(s) for s in states])
    bufs = [_state_bytes(s, kind) for s in states]
    n = len(bufs)
    ptrs = (ctypes.c_void_p * n)(*[ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p) for b in bufs])
    lens = (ctypes.c_int64 * n)(*[len(b) for b in bufs])
    p, m = ctypes.c_void_p(), ctypes.c_int64()
    _lib.call("sluice_merge_states", ptrs, lens, n, 1 if kind == "mix" else 0, ctypes.byref(p), ctypes.byref(m))
    out = {"format": _STATE_FORMAT, "kind": kind, "state": _lib.take_bytes(p, m.value)}
    epochs = [s.get("epoch") for s in states if isinstance(s, dict)]
    if len(epochs) == n and all(isinstance(e, int) for e in epochs):
        out["epoch"] = min(epochs)  # the merge goes on with the least of the ranks' epochs, as Go's
    return out


def rank_from_env():
    """Where the launcher (torchrun, Slurm, Open MPI, a Kubernetes indexed
    Job) placed this process: a dict with rank and world_size; rank 0 of 1
    and launcher '' when none did."""
    p = ctypes.c_void_p()
    _lib.call("sluice_rank_from_env", json.dumps(dict(os.environ)).encode(), ctypes.byref(p))
    return json.loads(_lib.take_string(p))
