"""sluice for PyTorch: an IterableDataset for torch.utils.data.DataLoader.

    ds = sluice.torch.IterableDataset("data/", batch_size=256, shuffle=True,
                                      seed=1, num_splits=16)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2,
                                         multiprocessing_context="spawn")

Batches are dicts of tensors (torch.from_numpy over the batch's memory; no
copy). DataLoader's batch_size must be None: sluice cuts the batches.

Rank and world size come from the options, else torch.distributed when it
is initialized, else the launcher's environment (torchrun, Slurm, Open MPI,
Kubernetes), else 0 of 1.

Workers: with K DataLoader workers, worker w of rank r runs as rank
r*K + w of world_size*K, so it owns the splits s with
s mod (world_size*K) == r*K + w. num_splits must be a multiple of
world_size*K (and stays the same when world size or workers change, for an
exact resume: states of all workers and ranks merge with
sluice.merge_states). The Go library is loaded in each worker, never in the
parent, so a fork start works; a worker forked from a process that already
loaded it raises sluice.ForkError: use multiprocessing_context="spawn" or
"forkserver".

state_dict()/load_state_dict() follow torchdata's StatefulDataLoader
protocol: called in a worker they are that worker's; with num_workers=0,
the loader's.
"""

import torch.utils.data

import sluice

from . import _options
from .errors import UsageError


def _placement():
    """(rank, world_size) from torch.distributed when initialized, else None."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return None


class IterableDataset(torch.utils.data.IterableDataset):
    """A sluice Dataset as a torch IterableDataset; options as
    sluice.Dataset's (as_torch defaults to True here)."""

    def __init__(self, urls, *, as_torch=True, pin_memory=False, **options):
        super().__init__()
        self._urls = _options.urls(urls)
        self._options = _options.check(_options.DATASET, options)
        self._as_torch = as_torch
        self._pin = pin_memory
        # Resolved here, in the process that initialized torch.distributed:
        # workers do not see its process group.
        p = _placement()
        if p is not None and "rank" not in self._options and "world_size" not in self._options:
            self._options["rank"], self._options["world_size"] = p
        self._ds = None
        self._pending = None
        self._worker = None

    def __getstate__(self):
        s = self.__dict__.copy()
        s["_ds"] = None  # a worker opens its own
        return s

    def worker_options(self, worker_id=0, num_workers=1):
        """The Go options worker worker_id of num_workers runs with: rank
        rank*num_workers + worker_id of world_size*num_workers."""
        o = dict(self._options)
        if "rank" not in o and "world_size" not in o:
            env = sluice.rank_from_env()
            o["rank"], o["world_size"] = env["rank"], env["world_size"]
        rank, world = o.get("rank", 0), o.get("world_size", 0) or 1
        k = num_workers
        ns = o.get("num_splits", 0) or world * k
        if ns % (world * k):
            raise UsageError(
                "sluice: num_splits %d is not a multiple of world_size %d x DataLoader workers %d = %d: "
                "each worker of each rank owns num_splits/%d splits; set num_splits to a multiple of %d"
                % (ns, world, k, world * k, world * k, world * k))
        o["rank"], o["world_size"], o["num_splits"] = rank * k + worker_id, world * k, ns
        return o

    def _open(self):
        info = torch.utils.data.get_worker_info()
        w, k = (info.id, info.num_workers) if info is not None else (0, 1)
        if self._ds is not None and self._worker == (w, k):
            return self._ds
        if self._ds is not None:
            self._ds.close()
        self._ds = sluice.Dataset(self._urls, as_torch=self._as_torch, pin_memory=self._pin,
                                  **self.worker_options(w, k))
        self._worker = (w, k)
        if self._pending is not None:
            self._ds.load_state_dict(self._pending)
            self._pending = None
        return self._ds

    def __iter__(self):
        return iter(self._open())

    def state_dict(self):
        if self._ds is None:
            return self._pending
        return self._ds.state_dict()

    def load_state_dict(self, state):
        if self._ds is None:
            self._pending = state
        else:
            self._ds.load_state_dict(state)

    @property
    def epoch(self):
        """The epoch the next batch comes from (opens the dataset in this
        process: with DataLoader workers, ask before they start only with a
        spawn or forkserver start)."""
        return self._open().epoch

    def set_epoch(self, epoch):
        self._options["epoch"] = epoch
        if self._ds is not None:
            self._ds.set_epoch(epoch)

    def metrics(self):
        return None if self._ds is None else self._ds.metrics()

    def close(self):
        if self._ds is not None:
            self._ds.close()
            self._ds = None
