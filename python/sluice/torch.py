"""sluice for PyTorch: an IterableDataset, and a DataLoader that owns its
workers' positions.

    ds = sluice.torch.IterableDataset("data/", batch_size=256, shuffle=True,
                                      seed=1, num_splits=16)
    loader = sluice.torch.DataLoader(ds, num_workers=2)
    for batch in loader:              # each pass is the next epoch
        ...
        state = loader.state_dict()   # exact, whatever num_workers

Batches are dicts of tensors (torch.from_numpy over the batch's memory; no
copy), a column with nulls having its validity beside it (name + ".valid",
see sluice.Batch). sluice cuts the batches: a DataLoader's batch_size is
None.

Rank and world size come from the options, else torch.distributed when it
is initialized, else the launcher's environment (torchrun, Slurm, Open MPI,
Kubernetes), else 0 of 1.

Workers: with K DataLoader workers, worker w of rank r reads as rank r*K + w
of world_size*K, so it owns the splits s with s mod (world_size*K) == r*K +
w. num_splits must be a multiple of world_size*K, and stays the same when
the world size or the workers change. Each worker sizes the Go runtime's
threads to its share of the cores (unless GOMAXPROCS is set).

sluice.torch.DataLoader: a torch DataLoader whose main process keeps the
position each worker sent with the last batch it handed out, so that
state_dict() is exact with any number of workers (torchdata's
StatefulDataLoader protocol: state_dict() at any point, load_state_dict()
before iterating), and a state resumes with another number of workers and,
merged over the ranks, at another world size. A new pass goes on where the
last one stopped: the next epoch after a whole pass, the rest of the epoch
after a break.
With device= ("cuda", "cpu", ...), it hands out batches on that device,
each copied (pinned staging, a side CUDA stream) while the step before runs.

torch.utils.data.DataLoader over the IterableDataset also starts each pass
at the next epoch (after a break too), with fork, spawn or forkserver
workers, persistent or not; set_epoch(e) makes the next pass epoch e. Its
workers' positions are theirs alone: the dataset's state_dict() in the main
process raises once workers have read (use sluice.torch.DataLoader), and is
exact with num_workers=0.
"""

import collections
import fcntl
import os
import pickle
import tempfile
import uuid
import weakref

import torch.utils.data

import sluice

from . import _lib, _loaderstate, _options
from .errors import InternalError, UsageError

_HELLO, _BATCH, _BYE = 0, 1, 2


def _placement():
    """(rank, world_size) from torch.distributed when initialized, else None."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return None


class _Item:
    """What the dataset yields under a sluice.torch.DataLoader: a batch with
    its worker's position after it (kind _BATCH), or the worker's position
    at the start (_HELLO) or the end (_BYE) of its pass, with its epoch. The
    loader takes the batch out before the user sees it."""

    __slots__ = ("kind", "worker", "state", "epoch", "batch")

    def __init__(self, kind, worker, state, epoch=None, batch=None):
        self.kind, self.worker, self.state, self.epoch, self.batch = kind, worker, state, epoch, batch

    def __reduce__(self):
        # Pickled to cross from a worker to the main process: the batch's
        # fixed-width tensors go as one block of shared memory.
        packed = _pack(self.batch) if self.kind == _BATCH else None
        if packed is None:
            return (_Item, (self.kind, self.worker, self.state, self.epoch, self.batch))
        return (_unpack_item, (self.kind, self.worker, self.state, packed))

    def pin_memory(self, device=None):
        """Pins the batch (the DataLoader's pin_memory=True)."""
        from torch.utils.data._utils.pin_memory import pin_memory
        if self.batch is not None:
            self.batch = pin_memory(self.batch) if device is None else pin_memory(self.batch, device)
        return self


_ALIGN = 64


def _packable(t):
    return (isinstance(t, torch.Tensor) and t.device.type == "cpu" and t.layout == torch.strided
            and not t.requires_grad and t.is_contiguous() and not t.is_shared())


def _shared_storage(n):
    """n bytes of storage in shared memory, made there (not moved)."""
    if hasattr(torch, "UntypedStorage"):  # torch 2
        return torch.UntypedStorage._new_shared(n)
    return torch.ByteStorage._new_shared(n)


def _pack(batch):
    """A batch (a mapping) as one shared-memory block holding its plain
    CPU tensors end to end, and what is left: (block, layout, rest, order,
    type, num_rows); None where it holds no such tensor. torch would send
    each tensor as a block of its own, moved into shared memory one by one:
    one block is one copy and one descriptor for the whole batch."""
    if not isinstance(batch, dict):
        return None
    layout, rest, total = [], {}, 0
    for k, v in batch.items():
        if _packable(v):
            off = -(-total // _ALIGN) * _ALIGN
            layout.append((k, None, off, v))
            total = off + v.numel() * v.element_size()
        elif isinstance(v, sluice.Strings) and _packable(v.offsets) and _packable(v.data):
            for part in ("offsets", "data"):
                t = getattr(v, part)
                off = -(-total // _ALIGN) * _ALIGN
                layout.append((k, part, off, t))
                total = off + t.numel() * t.element_size()
        else:
            rest[k] = v
    if not layout:
        return None
    block = torch.empty(0, dtype=torch.uint8).set_(_shared_storage(max(total, 1)))
    spec = []
    for k, part, off, t in layout:
        n = t.numel() * t.element_size()
        if n:
            block[off:off + n].copy_(t.reshape(-1).view(torch.uint8))
        spec.append((k, part, off, t.dtype, tuple(t.shape), batch[k].text if part else None))
    num_rows = batch._num_rows if isinstance(batch, sluice.Batch) else None
    return block, spec, rest, list(batch), isinstance(batch, sluice.Batch), num_rows


def _unpack_item(kind, worker, state, packed):
    block, spec, rest, order, is_batch, num_rows = packed
    cols, strings = dict(rest), {}
    for k, part, off, dtype, shape, text in spec:
        n = 1
        for d in shape:
            n *= d
        size = n * torch.empty(0, dtype=dtype).element_size()
        t = block[off:off + size].view(dtype).view(shape) if size else torch.empty(shape, dtype=dtype)
        if part is None:
            cols[k] = t
        else:
            strings.setdefault(k, {})[part] = t
            strings[k]["text"] = text
    for k, s in strings.items():
        cols[k] = sluice.Strings(s["offsets"], s["data"], s["text"])
    cols = {k: cols[k] for k in order}
    return _Item(kind, worker, state, None, sluice.Batch(cols, num_rows) if is_batch else cols)


class _ToDevice:
    """Copies batches to a device ahead of the step, as Ray's
    iter_torch_batches(device=...): a batch's plain CPU tensors are packed
    end to end into a staging block (pinned where the device is CUDA),
    which goes over as one copy, non_blocking on a side stream, while the
    step before runs; the batch handed out is views of the device block.
    Two staging blocks take turns, each reused once the copy out of it is
    done (its event). On the CPU the same path runs, with plain staging
    memory and the same-device copy. Other values (object arrays,
    sluice.Strings) stay where they are."""

    def __init__(self, device):
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        if self.cuda and not torch.cuda.is_available():
            raise UsageError("sluice: device %r, but torch finds no CUDA device" % (str(device),))
        self.stream = torch.cuda.Stream(self.device) if self.cuda else None
        self.staging = [None, None]  # uint8 blocks
        self.events = [None, None]   # the copy out of each, recorded on the side stream
        self.turn = 0

    def start(self, batch):
        """Begin batch's copy; what finish() takes."""
        if not isinstance(batch, dict):
            return None, batch
        layout, total = [], 0
        for k, v in batch.items():
            if isinstance(v, torch.Tensor) and v.device.type == "cpu" and v.layout == torch.strided:
                off = -(-total // _ALIGN) * _ALIGN
                layout.append((k, off, v))
                total = off + v.numel() * v.element_size()
        if not layout:
            return None, batch
        i, self.turn = self.turn, 1 - self.turn
        if self.events[i] is not None:
            self.events[i].synchronize()  # the staging block's last copy is done
        block = self.staging[i]
        if block is None or block.numel() < total:
            block = self.staging[i] = torch.empty(max(total, 1), dtype=torch.uint8, pin_memory=self.cuda)
        for k, off, v in layout:
            n = v.numel() * v.element_size()
            if n:
                block[off:off + n].view(v.dtype).view(v.shape).copy_(v)
        src = block[:max(total, 1)]
        if self.cuda:
            with torch.cuda.stream(self.stream):
                dev = torch.empty_like(src, device=self.device)
                dev.copy_(src, non_blocking=True)
                self.events[i] = torch.cuda.Event()
                self.events[i].record(self.stream)
        else:
            dev = torch.empty_like(src, device=self.device).copy_(src)
        return (dev, [(k, off, v.dtype, tuple(v.shape)) for k, off, v in layout]), batch

    def finish(self, started):
        """The batch on the device, ready for the current stream's work."""
        copied, batch = started
        if copied is None:
            return batch
        dev, spec = copied
        if self.cuda:
            cur = torch.cuda.current_stream(self.device)
            cur.wait_stream(self.stream)
            dev.record_stream(cur)  # its memory is the current stream's to free
        cols = dict(batch)
        for k, off, dtype, shape in spec:
            size = torch.empty(0, dtype=dtype).element_size()
            for d in shape:
                size *= d
            cols[k] = dev[off:off + size].view(dtype).view(shape) if size else torch.empty(
                shape, dtype=dtype, device=self.device)
        if isinstance(batch, sluice.Batch):
            return sluice.Batch(cols, batch._num_rows)
        return cols


class _Collate:
    """The DataLoader's collate_fn: the user's, applied to the batch of an
    _Item (workers run it, as torch's)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, item):
        if self.fn is not None and item.kind == _BATCH:
            item.batch = self.fn(item.batch)
        return item


class _Passes:
    """The record that the workers of a torch DataLoader share over its
    passes, so that each pass is the next epoch: a small file, locked while
    it is read and written, which the process that made the dataset
    removes. A pass is known by the workers' base seed, which torch draws
    anew for each iterator and gives all its workers, and by the passes the
    worker's copy of the dataset has begun (persistent workers keep theirs).
    The first worker to begin a pass gives it its epoch; the others join.

    Fields: "cur" ({"key", "epoch", "workers", "start"}: the latest pass)
    and "pending" (how the next pass starts: {"epoch": e} or {"state": st},
    from set_epoch or load_state_dict in the main process)."""

    def __init__(self):
        fd, self.path = tempfile.mkstemp(prefix="sluice-passes-")
        os.close(fd)
        weakref.finalize(self, _remove, self.path, os.getpid())

    def __getstate__(self):
        return {"path": self.path}

    def __setstate__(self, s):
        self.path = s["path"]

    def _update(self, fn):
        """fn(record) under the lock; what it returns. fn may change the
        record, which is written back."""
        with open(self.path, "r+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            raw = f.read()
            rec = pickle.loads(raw) if raw else {}
            before = dict(rec)
            out = fn(rec)
            if rec != before:
                f.seek(0)
                f.truncate()
                f.write(pickle.dumps(rec))
            return out

    def begin(self, key, worker, first_epoch):
        """How worker starts the pass key: {"epoch": e} or {"state": st}."""
        def fn(rec):
            cur = rec.get("cur")
            if cur is not None and cur["key"] == key and worker not in cur["workers"]:
                rec["cur"] = dict(cur, workers=cur["workers"] + [worker])
                return cur["start"]
            start = rec.pop("pending", None)
            if start is None:
                start = {"epoch": first_epoch if cur is None else cur["epoch"] + 1}
            epoch = start["epoch"] if "epoch" in start else start["state"].get("epoch")
            rec["cur"] = {"key": key, "epoch": epoch, "workers": [worker], "start": start}
            return start
        return self._update(fn)

    def began(self, key, epoch):
        """The epoch of pass key, where its start (an old state) did not say."""
        def fn(rec):
            cur = rec.get("cur")
            if cur is not None and cur["key"] == key and cur["epoch"] is None:
                rec["cur"] = dict(cur, epoch=epoch)
        self._update(fn)

    def started(self):
        return self._update(lambda rec: rec.get("cur") is not None)

    def pending(self):
        return self._update(lambda rec: rec.get("pending"))

    def take_pending(self):
        return self._update(lambda rec: rec.pop("pending", None))

    def request(self, start):
        """Make the next pass start as start says."""
        def fn(rec):
            rec["pending"] = start
        self._update(fn)

    def next_epoch(self, first_epoch):
        """The epoch the next pass begins (None where a pending state does
        not say)."""
        def fn(rec):
            p = rec.get("pending")
            if p is not None:
                return p["epoch"] if "epoch" in p else p["state"].get("epoch")
            cur = rec.get("cur")
            return first_epoch if cur is None else cur["epoch"] + 1
        return self._update(fn)


def _remove(path, pid):
    if os.getpid() == pid:
        try:
            os.unlink(path)
        except OSError:
            pass


_procs_set = None  # the process whose Go runtime's threads were sized


def _size_threads(num_workers):
    """In a DataLoader worker, size the Go runtime to the worker's share of
    the cores, once per process; GOMAXPROCS set by the user wins."""
    global _procs_set
    if _procs_set == os.getpid() or os.environ.get("GOMAXPROCS"):
        return
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    _lib.set_max_procs(max(1, cores // max(1, num_workers)))
    _procs_set = os.getpid()


_NOT_EXACT = (
    "sluice: state_dict() of a sluice.torch.IterableDataset that torch.utils.data.DataLoader workers have read: "
    "each worker holds its own position, which this process cannot see, and a state of the epoch's start would "
    "repeat what they read. Use sluice.torch.DataLoader(dataset, num_workers=...) in place of "
    "torch.utils.data.DataLoader: its state_dict() is exact with any number of workers (or read with "
    "num_workers=0).")


class IterableDataset(torch.utils.data.IterableDataset):
    """A sluice Dataset as a torch IterableDataset; options as
    sluice.Dataset's (as_torch defaults to True here)."""

    def __init__(self, urls, *, as_torch=True, pin_memory=False, strings="objects", **options):
        super().__init__()
        self._urls = _options.urls(urls)
        self._options = _options.check(_options.DATASET, options)
        if strings not in ("objects", "arrays"):
            raise UsageError("sluice: option strings is %r; it must be 'objects' or 'arrays'" % (strings,))
        self._as_torch = as_torch
        self._pin = pin_memory
        self._strings = strings
        # Resolved here, in the process that initialized torch.distributed:
        # workers do not see its process group.
        p = _placement()
        if p is not None and "rank" not in self._options and "world_size" not in self._options:
            self._options["rank"], self._options["world_size"] = p
        self._ds = None       # the sluice.Dataset open in this process
        self._ds_pid = None
        self._worker = None   # (worker id, workers) it was opened as
        self._local = None    # a state loaded in a worker (torchdata's protocol), for its next pass
        self._spec = None     # set by a sluice.torch.DataLoader: where its workers start
        self._applied = None  # the spec this process's dataset has taken up
        self._loader = None   # the sluice.torch.DataLoader over this dataset (a weak reference)
        self._passes = _Passes()
        self._begun = 0       # passes this copy has begun as a worker of a torch DataLoader
        self._place = None

    def __getstate__(self):
        s = self.__dict__.copy()
        s["_ds"] = s["_ds_pid"] = s["_loader"] = None  # a worker opens its own
        return s

    def _placed(self):
        """(rank, world_size) of this process's loader, before workers."""
        if self._place is None:
            o = self._options
            if "rank" in o or "world_size" in o:
                self._place = (o.get("rank", 0), o.get("world_size", 0) or 1)
            else:
                env = sluice.rank_from_env()
                self._place = (env["rank"], env["world_size"])
        return self._place

    def worker_options(self, worker_id=0, num_workers=1):
        """The Go options worker worker_id of num_workers runs with: rank
        rank*num_workers + worker_id of world_size*num_workers."""
        o = dict(self._options)
        rank, world = self._placed()
        k = num_workers
        ns = o.get("num_splits", 0) or world * k
        if ns % (world * k):
            raise UsageError(
                "sluice: num_splits %d is not a multiple of world_size %d x DataLoader workers %d = %d: "
                "each worker of each rank owns num_splits/%d splits; set num_splits to a multiple of %d"
                % (ns, world, k, world * k, world * k, world * k))
        o["rank"], o["world_size"], o["num_splits"] = rank * k + worker_id, world * k, ns
        return o

    def _open(self, worker_id, num_workers, in_worker):
        """This process's dataset for that worker, opened where it is not."""
        if self._ds is not None and (self._ds_pid != os.getpid() or self._worker != (worker_id, num_workers)):
            if self._ds_pid == os.getpid():
                self._ds.close()
            self._ds = None
        if self._ds is None:
            if in_worker:
                _size_threads(num_workers)
            self._ds = sluice.Dataset(self._urls, as_torch=self._as_torch, pin_memory=self._pin,
                                      strings=self._strings, **self.worker_options(worker_id, num_workers))
            self._ds_pid, self._worker, self._applied = os.getpid(), (worker_id, num_workers), None
        return self._ds

    def _here(self):
        """The dataset open in this process, or None."""
        return self._ds if self._ds is not None and self._ds_pid == os.getpid() else None

    def _take_up(self, ds, start, worker_id, num_workers):
        """Move ds to where start says the pass begins ({"epoch": e}, a
        loader's state, a dataset's); returns the pass's epoch."""
        if "state" not in start and "states" not in start:
            ds.set_epoch(start["epoch"])
            return start["epoch"]
        if start.get("kind") != "loader":
            ds.load_state_dict(start)
            return ds.epoch
        rank, world = self._placed()
        mode, states = _loaderstate.how(start, world, rank, num_workers)
        if mode == "epoch":
            ds.set_epoch(states)
            return states
        if mode == "own":
            ds.load_state_dict(states[worker_id])
            return start["epoch"]
        ds.load_state_dict(sluice.merge_states(states))
        return ds.epoch

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        if self._spec is not None:
            return self._loader_pass(info)
        if info is None:
            return iter(self._main_open())
        return self._worker_pass(info)

    def _main_open(self):
        """The dataset in this process, at the position asked for last."""
        ds = self._here()
        if ds is None:
            ds = self._open(0, 1, False)
        start = self._passes.take_pending()
        if start is not None:
            if "state" in start:
                self._take_up(ds, start["state"], 0, 1)
            elif ds.epoch != start["epoch"]:
                ds.set_epoch(start["epoch"])
        return ds

    def _worker_pass(self, info):
        """A pass of a worker of torch's DataLoader: the next epoch."""
        w, k = info.id, info.num_workers
        ds = self._open(w, k, True)
        key = (info.seed - info.id, self._begun)
        self._begun += 1
        start = self._passes.begin(key, w, self._options.get("epoch", 0))
        if self._local is not None:  # loaded in this worker: its own position wins
            start, self._local = {"state": self._local}, None
        if "state" in start:
            epoch = self._take_up(ds, start["state"], w, k)
            self._passes.began(key, epoch)
        else:
            epoch = start["epoch"]
            ds.set_epoch(epoch)
        if ds.epoch > epoch:  # this worker finished the epoch before the state was taken
            return iter(())
        return iter(ds)

    def _loader_pass(self, info):
        spec = self._spec
        here = info is None
        w, k = (0, 1) if here else (info.id, info.num_workers)
        ds = self._open(w, k, not here)
        if self._applied != spec["id"]:
            epoch = self._take_up(ds, spec["start"], w, k)
            self._applied = spec["id"]
        else:
            epoch = ds.epoch  # where the last pass left it (persistent workers, or this process)
        return self._items(ds, w, here, epoch)

    def _items(self, ds, w, here, epoch):
        # In the main process the loader reads the dataset's position
        # itself; a worker sends it with each batch.
        if not here:
            yield _Item(_HELLO, w, ds._state_bytes(), ds.epoch)
        if ds.epoch <= epoch:  # not a worker whose epoch ended before the state was taken
            for b in ds:
                yield _Item(_BATCH, w, None if here else ds._state_bytes(), None, b)
        if not here:
            yield _Item(_BYE, w, ds._state_bytes(), ds.epoch)

    def _driver(self):
        return self._loader() if self._loader is not None else None

    def state_dict(self):
        """The position: under sluice.torch.DataLoader, the loader's; in a
        DataLoader worker, the worker's (torchdata's protocol); with
        num_workers=0, the dataset's. Raises UsageError where workers of
        torch's DataLoader read it (their positions are not known here)."""
        loader = self._driver()
        if loader is not None:
            return loader.state_dict()
        info = torch.utils.data.get_worker_info()
        if info is not None:
            return self._open(info.id, info.num_workers, True).state_dict()
        ds = self._here()
        if ds is not None:
            return ds.state_dict()
        if self._passes.started():
            raise UsageError(_NOT_EXACT)
        return self._main_open().state_dict()

    def load_state_dict(self, state):
        """Resume from a state: the next pass starts there. Takes what
        state_dict() of this dataset or of a sluice.torch.DataLoader
        returned, or sluice.merge_states of all ranks'."""
        sluice.check_state(state)
        if state.get("kind") == "loader":
            _loaderstate.check(state)
        loader = self._driver()
        if loader is not None:
            loader.load_state_dict(state)
        elif torch.utils.data.get_worker_info() is not None:
            self._local = state
        elif self._here() is not None:
            self._take_up(self._here(), state, 0, 1)
        else:
            self._passes.request({"state": state})

    @property
    def epoch(self):
        """The epoch the next batch comes from (here, or in the next pass
        of a DataLoader's workers)."""
        loader = self._driver()
        if loader is not None:
            return loader.epoch
        if self._here() is None and self._passes.started():
            e = self._passes.next_epoch(self._options.get("epoch", 0))
            if e is not None:
                return e
        return self._main_open().epoch

    def set_epoch(self, epoch):
        """Make the next pass epoch `epoch`: from its start, unless the
        position is in that epoch already (a resumed state, a pass broken
        off), which it keeps."""
        epoch = _options._int(0)("epoch", epoch)
        loader = self._driver()
        if loader is not None:
            loader.set_epoch(epoch)
            return
        ds = self._here()
        if ds is not None:
            if ds.epoch != epoch:
                ds.set_epoch(epoch)
            return
        p = self._passes.pending()
        if p is not None and "state" in p and p["state"].get("epoch") == epoch:
            return
        self._passes.request({"epoch": epoch})

    def metrics(self):
        ds = self._here()
        return None if ds is None else ds.metrics()

    def close(self):
        ds = self._here()
        if ds is not None:
            ds.close()
        self._ds = None


class DataLoader(torch.utils.data.DataLoader):
    """torch.utils.data.DataLoader over a sluice.torch.IterableDataset,
    whose main process owns every worker's position: state_dict() is exact
    with any number of workers (each worker sends its position with each
    batch, and the loader keeps that of the last batch it handed out), and
    load_state_dict() resumes with any number of workers at the same world
    size, or at any world size from sluice.merge_states of all ranks'
    states (num_splits fixed). torchdata's StatefulDataLoader protocol:
    state_dict() whenever, load_state_dict() before a pass.

    Each pass goes on where the last one stopped: the next epoch after a
    whole pass, the rest of the epoch after a break; set_epoch(e) (here or
    on the dataset) makes the next pass epoch e. Persistent workers are
    kept from one whole pass to the next and started anew after a break, a
    set_epoch or a load.

    Arguments are torch's, except that batch_size is None (sluice cuts the
    batches) and samplers do not apply; collate_fn, if given, is applied to
    each batch in the worker.

    device ("cuda", "cuda:1", a torch.device, "cpu"): each batch's tensors
    arrive there, copied one batch ahead of the one handed out (pinned
    staging memory, a side CUDA stream, non_blocking), so that the copy
    overlaps the step; the state still counts only the batches handed out.
    """

    def __init__(self, dataset, *, batch_size=None, collate_fn=None, device=None, **kwargs):
        if not isinstance(dataset, IterableDataset):
            raise UsageError("sluice: sluice.torch.DataLoader reads a sluice.torch.IterableDataset, not %s"
                             % type(dataset).__name__)
        if batch_size is not None:
            raise UsageError("sluice: sluice.torch.DataLoader takes batch_size=None: the dataset's batch_size "
                             "option cuts the batches")
        for k in ("sampler", "batch_sampler", "shuffle", "drop_last"):
            if kwargs.get(k) not in (None, False):
                raise UsageError("sluice: sluice.torch.DataLoader takes no %s: the dataset's options (shuffle, "
                                 "seed, drop_remainder) order and cut the rows" % k)
        if kwargs.get("in_order") is False:
            raise UsageError("sluice: sluice.torch.DataLoader hands out batches in order (in_order=True)")
        if dataset._driver() is not None:
            raise UsageError("sluice: this dataset has a sluice.torch.DataLoader already; make one loader per dataset")
        super().__init__(dataset, batch_size=None, collate_fn=_Collate(collate_fn), **kwargs)
        rank, world = dataset._placed()
        self._pos = _loaderstate.fresh(dataset._options.get("epoch", 0), world, rank, self.num_workers)
        self._live = False     # with 0 workers: the position is the dataset's in this process
        self._standing = False  # persistent workers stand where the last pass ended
        self._pass = None      # the running pass (a generator)
        self._device = None if device is None else _ToDevice(device)
        self._held = None      # with device: the position after the batch handed out, one being read ahead
        dataset._loader = weakref.ref(self)

    def _refresh(self):
        """With 0 workers, the position from the dataset in this process."""
        ds = self.dataset._here()
        if self.num_workers == 0 and self._live and ds is not None:
            rank, world = self.dataset._placed()
            self._pos = dict(_loaderstate.fresh(ds.epoch, world, rank, 1), states=[ds._state_bytes()])

    def state_dict(self):
        """The loader's position: the batches handed out so far, never
        those read ahead (plain values; torch.save stores them)."""
        return self._snapshot() if self._held is None else self._copy(self._held)

    def _snapshot(self):
        self._refresh()
        return self._copy(self._pos)

    @staticmethod
    def _copy(pos):
        st = dict(pos)
        if "states" in st:
            st["states"] = list(st["states"])
        return st

    def load_state_dict(self, state):
        """Resume from state at the next pass: what state_dict() returned,
        sluice.merge_states of all ranks' (at another world size or number
        of workers), or a dataset's state."""
        sluice.check_state(state)
        if state["kind"] == "loader":
            _loaderstate.check(state)
            rank, world = self.dataset._placed()
            _loaderstate.how(state, world, rank, self.num_workers)  # refuses here what workers would
        elif state["kind"] != "dataset":
            raise UsageError("sluice: sluice.torch.DataLoader.load_state_dict takes a loader's or a dataset's "
                             "state, not a %s's" % state["kind"])
        self._end_pass()
        self._pos = dict(state)
        self._live = self._standing = False

    @property
    def epoch(self):
        """The epoch of the pass under way, or of the next one."""
        if self._held is not None:
            return self._held["epoch"]
        self._refresh()
        e = self._pos.get("epoch")
        if e is None:  # a dataset's state from a sluice that did not write its epoch: ask the library
            ds = self.dataset._open(0, 1, False)
            ds.load_state_dict(self._pos)
            e = self._pos["epoch"] = ds.epoch
        return e

    def set_epoch(self, epoch):
        """Make the next pass epoch `epoch`: from its start, unless the
        loader's position is in that epoch already (a loaded state, a pass
        broken off), which it keeps."""
        epoch = _options._int(0)("epoch", epoch)
        self._refresh()
        if (self._pos if self._held is None else self._held).get("epoch") == epoch:
            return
        self._end_pass()
        rank, world = self.dataset._placed()
        self._pos = _loaderstate.fresh(epoch, world, rank, self.num_workers)
        self._live = self._standing = False

    def _end_pass(self):
        if self._pass is not None:
            self._pass.close()
            self._pass = None

    def __iter__(self):
        self._end_pass()
        ds = self.dataset
        if self.num_workers == 0:
            if not self._live:
                ds._spec = {"id": uuid.uuid4().hex, "start": self.state_dict()}
            self._live = True
            gen = self._here_pass(super().__iter__())
        else:
            if not (self._standing and self.persistent_workers and self._iterator is not None):
                if self._iterator is not None:
                    self._iterator._shutdown_workers()
                    self._iterator = None
                ds._spec = {"id": uuid.uuid4().hex, "start": self.state_dict()}
            self._standing = False
            rank, world = ds._placed()
            gen = self._worker_pass(super().__iter__(), _loaderstate.first_worker(self._pos, world, rank,
                                                                                 self.num_workers))
        if self._device is not None:
            gen = self._ahead(gen)
        self._pass = gen
        return gen

    def _ahead(self, it):
        """The batches of it on the device, each copy begun before the
        batch ahead of it is handed out. While a batch is out, the position
        is the one after it (the next is read already); a pass broken off
        goes on, in the next, from there."""
        nxt = next(it, None)
        started = self._device.start(nxt) if nxt is not None else None
        pos = self._snapshot()
        try:
            while nxt is not None:
                nxt = next(it, None)
                ready, started = started, (self._device.start(nxt) if nxt is not None else None)
                self._held, pos = pos, self._snapshot()
                yield self._device.finish(ready)
            self._held = None
        finally:
            if self._held is not None:
                # Broken off with a batch read ahead: the next pass starts
                # after the batch handed out, through the workers' start.
                self._pos, self._held = self._held, None
                self._live = self._standing = False
            it.close()

    def _here_pass(self, it):
        for item in it:
            yield item.batch

    def _worker_pass(self, it, first):
        """Hand out the batches of a pass with workers, keeping the
        position of the last one handed out from each. torch takes one item
        from each worker in turn, skipping workers that ended; the batches
        go out in that order, but with the turn starting at worker `first`:
        a state resumed with the same workers goes on with the worker whose
        turn was next. An item that comes before its turn waits in its
        worker's queue (one turn at most)."""
        k = self.num_workers
        rank, world = self.dataset._placed()
        hello, ended, bye_epochs = {}, set(), []
        queues = [collections.deque() for _ in range(k)]
        turn = first
        it = iter(it)
        while True:
            if len(hello) == k:
                # The next batch whose turn it is, past workers that ended.
                for _ in range(k):
                    if turn in ended:
                        turn = (turn + 1) % k
                        continue
                    q = queues[turn]
                    if q and q[0].kind == _BYE:
                        bye = q.popleft()
                        self._pos["states"][turn] = bye.state
                        ended.add(turn)
                        bye_epochs.append(bye.epoch)
                        turn = (turn + 1) % k
                        self._pos["next"] = turn
                        continue
                    break
                if len(ended) == k:
                    break
                q = queues[turn]
                if q:
                    item = q.popleft()
                    self._pos["states"][turn] = item.state
                    turn = (turn + 1) % k
                    self._pos["next"] = turn
                    yield item.batch
                    continue
            try:
                item = next(it)
            except StopIteration:
                raise InternalError("sluice: internal error (a bug; please report it): the DataLoader's workers "
                                    "ended without worker %d saying where it stopped" % turn) from None
            if item.kind == _HELLO:
                hello[item.worker] = item
                if len(hello) == k:
                    self._pos = dict(_loaderstate.fresh(min(h.epoch for h in hello.values()), world, rank, k),
                                     states=[hello[w].state for w in range(k)], next=first)
            elif len(hello) != k:
                raise InternalError("sluice: internal error (a bug; please report it): worker %d sent a batch "
                                    "before every worker said where it starts" % item.worker)
            else:
                queues[item.worker].append(item)
        # A whole pass: every worker is at the start of its next epoch, and
        # the next pass begins with worker 0.
        self._pos["epoch"] = min(bye_epochs)
        self._pos["next"] = 0
        self._standing = True
