"""The state of a sluice.torch.DataLoader, in plain Python.

A loader's position is its workers' positions: worker w of K on rank r of
world size W reads as rank r*K + w of W*K (sluice.torch), and the main
process keeps the encoded state (Go's checkpoint.Encode) that came with the
last batch it handed out from each worker. So the state is

    {"format": 1, "kind": "loader", "epoch": E, "world_size": W,
     "rank": r, "num_workers": K, "states": [bytes] * K, "next": n}

where "epoch" is the epoch the loader goes on with, "states" are the
workers' positions in worker order (none: the start of epoch E) and "next"
the worker whose turn is next (a DataLoader takes one batch from each
worker in turn, so the same workers resume in the same order). A loader
with 0 workers reads in the main process, as one worker. States of all
ranks merge (merge) into one whose "rank" is None and whose "states" are
all W*K positions in rank order: that, or a state of world size 1, resumes
with any number of workers at any world size (the positions are merged by
the library where they are loaded); a rank's own state resumes that rank
with the same W and K. Nothing here needs the library, so a parent process
that handles states never has to load it.
"""

from .errors import MismatchError, UsageError

FORMAT = 1


def fresh(epoch, world, rank, workers):
    """The state at the start of an epoch."""
    return {"format": FORMAT, "kind": "loader", "epoch": epoch, "world_size": world, "rank": rank,
            "num_workers": max(1, workers), "states": [], "next": 0}


def first_worker(st, world, rank, workers):
    """The worker whose batch comes first when a loader of this placement
    and worker count takes up st: its "next" where st is this loader's own,
    else worker 0."""
    if st.get("kind") == "loader" and st["states"] and st["rank"] is not None and \
            (st["world_size"], st["rank"], st["num_workers"]) == (world, rank, max(1, workers)):
        return st.get("next", 0)
    return 0


def _where(st):
    if st["rank"] is None:
        return "a merge of all %d ranks' states with %d workers each" % (st["world_size"], st["num_workers"])
    return "rank %d of world size %d with %d workers" % (st["rank"], st["world_size"], st["num_workers"])


def check(st):
    """st's loader fields, or UsageError naming the one that is wrong."""
    for k in ("epoch", "world_size", "num_workers"):
        if not isinstance(st.get(k), int) or isinstance(st.get(k), bool) or st[k] < (0 if k == "epoch" else 1):
            raise UsageError("sluice: a loader state's %r must be an int of at least %d, not %r"
                             % (k, 0 if k == "epoch" else 1, st.get(k)))
    r, states = st.get("rank"), st.get("states")
    if r is not None and (not isinstance(r, int) or not 0 <= r < st["world_size"]):
        raise UsageError("sluice: a loader state's rank %r is outside its world size %d" % (r, st["world_size"]))
    if not isinstance(states, list) or not all(isinstance(b, (bytes, bytearray)) for b in states):
        raise UsageError("sluice: a loader state's 'states' must be a list of bytes")
    n = st.get("next", 0)
    if not isinstance(n, int) or not 0 <= n < st["num_workers"]:
        raise UsageError("sluice: a loader state's 'next' %r is not one of its %d workers" % (n, st["num_workers"]))
    want = st["num_workers"] * (st["world_size"] if r is None else 1)
    if states and len(states) != want:
        raise UsageError("sluice: a loader state of %s holds %d positions, not %d" % (_where(st), len(states), want))
    return st


def how(st, world, rank, workers):
    """How a worker of a loader with these placement and worker count
    takes up st: ("epoch", e) to start epoch e, ("own", states) to load its
    own entry, ("merge", states) to load the merge of all of them. Raises
    MismatchError where st cannot resume there."""
    workers = max(1, workers)
    if not st["states"]:
        return "epoch", st["epoch"]
    if st["rank"] is not None and (st["world_size"], st["rank"], st["num_workers"]) == (world, rank, workers):
        return "own", st["states"]
    if st["rank"] is None or st["world_size"] == 1:
        return "merge", st["states"]
    raise MismatchError(
        "sluice: this loader state is %s; it resumes only that rank with that many workers, and here is rank %d "
        "of world size %d with %d workers. To resume at another world size or worker count, merge the states "
        "of all ranks of one step first (sluice.merge_states([...])) and load the merge on every rank."
        % (_where(st), rank, world, workers))


def merge(states):
    """The states of all ranks of one step, one per rank, as one that
    resumes at any world size and worker count."""
    sts = [check(s) for s in states]
    first = sts[0]
    w, k = first["world_size"], first["num_workers"]
    by_rank = {}
    for s in sts:
        if s["rank"] is None:
            raise UsageError("sluice: merge_states of a state that is a merge already")
        if (s["world_size"], s["num_workers"]) != (w, k):
            raise MismatchError("sluice: field world_size/num_workers: rank %d's state is of world size %d with %d "
                                "workers, rank %d's of %d with %d: not states of one step"
                                % (first["rank"], w, k, s["rank"], s["world_size"], s["num_workers"]))
        if s["rank"] in by_rank:
            raise MismatchError("sluice: field rank: rank %d's state appears twice" % s["rank"])
        by_rank[s["rank"]] = s
    missing = sorted(set(range(w)) - set(by_rank))
    if missing:
        raise MismatchError("sluice: merge_states needs all %d ranks' states; missing rank %s"
                            % (w, ", ".join(map(str, missing))))
    epoch = min(s["epoch"] for s in sts)
    started = [s for s in sts if s["states"]]
    if not started:
        if any(s["epoch"] != epoch for s in sts):
            raise MismatchError("sluice: field epoch: the ranks' states are at the starts of different epochs")
        return {"format": FORMAT, "kind": "loader", "epoch": epoch, "world_size": w, "rank": None,
                "num_workers": k, "states": [], "next": 0}
    if len(started) != len(sts):
        raise UsageError("sluice: merge_states: rank %d's state was taken before its loader read anything, rank "
                         "%d's after: take every rank's state at the same step"
                         % (next(s["rank"] for s in sts if not s["states"]), started[0]["rank"]))
    out = []
    for r in range(w):
        out += by_rank[r]["states"]
    return {"format": FORMAT, "kind": "loader", "epoch": epoch, "world_size": w, "rank": None,
            "num_workers": k, "states": out, "next": 0}
