#!/usr/bin/env python3
"""Train a small model on a Parquet dataset with sluice, resumable exactly.

    PYTHONPATH=python python3 examples/python/train.py --data DIR --ckpt run.pt

Every --save-every steps, the model, the optimizer and the loader's state are
saved together with torch.save (written to a temporary file and renamed, so
a kill never leaves half a checkpoint). Started again with the same --ckpt,
the run goes on from the last save: the rows it trains on are exactly those
an uninterrupted run would have, in the same order.

Under torchrun (or any launcher setting RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT), each process joins a gloo process group, wraps the model in
DistributedDataParallel and reads its own splits; each rank saves its own
loader state beside the model (--ckpt with .rankN appended).

--log writes, per step, the step number and the ids of the rows trained, for
tests; lines past the last save are dropped on resume, as the steps are.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist

import sluice.torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="a directory of Parquet files with columns id, label, x")
    ap.add_argument("--ckpt", required=True, help="checkpoint file: resumed from if it exists")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=100)
    ap.add_argument("--num-splits", type=int, default=4, help="fixed for the job's life: a multiple of every world size it runs at")
    ap.add_argument("--save-every", type=int, default=10, help="steps between checkpoints")
    ap.add_argument("--log", help="append 'step id id ...' per step to this file")
    ap.add_argument("--step-delay", type=float, default=0.0, help="seconds to sleep per step (tests kill mid-epoch)")
    args = ap.parse_args()

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        dist.init_process_group("gloo")  # CPU; use "nccl" on GPUs
    rank = dist.get_rank() if world > 1 else 0
    ckpt = args.ckpt if world == 1 else "%s.rank%d" % (args.ckpt, rank)
    log = None if args.log is None else (args.log if world == 1 else "%s.rank%d" % (args.log, rank))

    torch.manual_seed(0)
    model = torch.nn.Linear(1, 10)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ds = sluice.torch.IterableDataset(args.data, columns=["id", "label", "x"], batch_size=args.batch_size,
                                      shuffle=True, seed=42, num_splits=args.num_splits, drop_remainder=True)
    loader = torch.utils.data.DataLoader(ds, batch_size=None)

    step = 0
    if os.path.exists(ckpt):
        saved = torch.load(ckpt)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["optimizer"])
        ds.load_state_dict(saved["loader"])
        step = saved["step"]
    if log is not None:
        keep_log(log, step)

    def save():
        tmp = ckpt + ".tmp"
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                    "loader": ds.state_dict(), "step": step}, tmp)
        os.replace(tmp, ckpt)

    logf = open(log, "a") if log is not None else None
    # The dataset's epoch is where the loader's state left it; a pass over
    # the loader is the rest of that epoch.
    while ds.epoch < args.epochs:
        for batch in loader:
            x = batch["x"].float().unsqueeze(1)
            loss = torch.nn.functional.cross_entropy(model(x), batch["label"] % 10)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if logf is not None:
                logf.write("%d %s\n" % (step, " ".join(map(str, batch["id"].tolist()))))
                logf.flush()
            if step % args.save_every == 0:
                save()
            if args.step_delay:
                time.sleep(args.step_delay)
    save()
    if world > 1:
        dist.destroy_process_group()


def keep_log(path, step):
    """Keep the log's lines of steps up to the checkpoint's: the steps after
    it are trained again."""
    if not os.path.exists(path):
        return
    with open(path) as f:
        lines = [l for l in f if l.endswith("\n")]
    kept = [l for l in lines if int(l.split(" ", 1)[0]) <= step]
    with open(path, "w") as f:
        f.writelines(kept)


if __name__ == "__main__":
    main()
