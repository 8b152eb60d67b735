#!/usr/bin/env python3
"""Train a small MLP on a table's feature columns with sluice, resumable exactly.

    PYTHONPATH=python python3 examples/python/train.py --data DIR --ckpt run.pt \\
        --features f0,f1,f2,f3 --label label --log loss.log

The rows come through sluice.torch.DataLoader workers (--workers), which
read ahead while the model trains, on the GPU where there is one (the
loader's device= copies each batch there ahead of its step). Rows whose
--fold column is --val-fold are kept out of training by a filter and score
the model at the end. The loss of each step goes to --log, and that of
every --save-every-th step to stdout.

Every --save-every steps, the model, the optimizer and the loader's state are
saved together with torch.save (written to a temporary file and renamed, so
a kill never leaves half a checkpoint). Started again with the same --ckpt,
the run goes on from the last save: the rows it trains on are exactly those
an uninterrupted run would have, in the same order, so (torch being
deterministic and single-threaded here) every loss is the same too. Lines
of --log past the last save are dropped on resume, as those steps are
trained again.

Under torchrun (or any launcher setting RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT), each process joins a gloo process group, wraps the model in
DistributedDataParallel and reads its own splits; each rank saves its own
loader state beside the model (--ckpt with .rankN appended).
"""

import argparse
import os
import sys
import time

# Deterministic cuBLAS, for torch.use_deterministic_algorithms on a GPU;
# read when CUDA starts, so set before it does.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import sluice.torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="a dataset: directory, files or URLs sluice reads")
    ap.add_argument("--ckpt", required=True, help="checkpoint file: resumed from if it exists")
    ap.add_argument("--features", default="f0,f1,f2,f3", help="numeric feature columns, comma-separated")
    ap.add_argument("--label", default="label", help="integer class column, 0 to --classes-1")
    ap.add_argument("--classes", type=int, default=4)
    ap.add_argument("--fold", default="fold", help="integer column that picks the validation rows")
    ap.add_argument("--val-fold", type=int, default=0, help="rows with this --fold are validation, never trained on")
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers")
    ap.add_argument("--num-splits", type=int, default=4,
                    help="fixed for the job's life: a multiple of world size x workers at every size it runs at")
    ap.add_argument("--save-every", type=int, default=20, help="steps between checkpoints")
    ap.add_argument("--log", help="append 'step loss' per step to this file")
    ap.add_argument("--log-ids", help="with --log: this id column's values of the step's rows follow the loss")
    ap.add_argument("--step-delay", type=float, default=0.0, help="seconds to sleep per step (tests kill mid-epoch)")
    args = ap.parse_args()
    features = args.features.split(",")

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        dist.init_process_group("gloo")  # use "nccl" where every rank has a GPU
    rank = dist.get_rank() if world > 1 else 0
    ckpt = args.ckpt if world == 1 else "%s.rank%d" % (args.ckpt, rank)
    log = None if args.log is None else (args.log if world == 1 else "%s.rank%d" % (args.log, rank))

    # The same rows in the same order give the same losses only with
    # deterministic kernels; one thread keeps CPU reductions in one order.
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    model = torch.nn.Sequential(
        torch.nn.Linear(len(features), args.hidden), torch.nn.ReLU(),
        torch.nn.Linear(args.hidden, args.hidden), torch.nn.ReLU(),
        torch.nn.Linear(args.hidden, args.classes)).to(device)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)

    columns = features + [args.label] + ([args.log_ids] if args.log_ids else [])
    train = sluice.torch.IterableDataset(
        args.data, columns=columns, filter='"%s" <> %d' % (args.fold, args.val_fold),
        batch_size=args.batch_size, shuffle=True, seed=42, num_splits=args.num_splits)
    # device=: each batch is copied to the GPU while the step before runs.
    loader = sluice.torch.DataLoader(train, num_workers=args.workers, device=device)

    step = 0
    if os.path.exists(ckpt):
        saved = torch.load(ckpt)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["optimizer"])
        loader.load_state_dict(saved["loader"])
        step = saved["step"]
        print("resumed at step %d (epoch %d)" % (step, loader.epoch), flush=True)
    if log is not None:
        keep_log(log, step)

    def save():
        tmp = ckpt + ".tmp"
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                    "loader": loader.state_dict(), "step": step}, tmp)
        os.replace(tmp, ckpt)

    def inputs(batch):
        x = torch.stack([batch[f].to(device, torch.float32) for f in features], dim=1)
        return x, batch[args.label].to(device, torch.int64)

    logf = open(log, "a") if log is not None else None
    model.train()
    # The loader's epoch is where its state left it; a pass over the loader
    # is the rest of that epoch, and the next pass the next epoch.
    while loader.epoch < args.epochs:
        for batch in loader:
            x, y = inputs(batch)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            # repr of a float is exact: equal lines mean bit-equal losses.
            line = "%d %r" % (step, loss.item())
            if args.log_ids:
                line += " " + " ".join(map(str, batch[args.log_ids].tolist()))
            if logf is not None:
                logf.write(line + "\n")
                logf.flush()
            if step % args.save_every == 0:
                save()
                print("step %d (epoch %d): loss %.4f" % (step, loader.epoch, loss.item()), flush=True)
            if args.step_delay:
                time.sleep(args.step_delay)
    save()

    # Validation: the rows the filter kept out, every one (no shuffle, no
    # rows dropped), this rank's share under a launcher.
    val = sluice.torch.IterableDataset(args.data, columns=features + [args.label],
                                       filter='"%s" = %d' % (args.fold, args.val_fold), batch_size=1024)
    model.eval()
    total, correct, rows = 0.0, 0, 0
    with torch.no_grad():
        for batch in val:
            x, y = inputs(batch)
            out = model(x)
            total += torch.nn.functional.cross_entropy(out, y, reduction="sum").item()
            correct += (out.argmax(1) == y).sum().item()
            rows += len(y)
    if rows:
        print("step %d: validation loss %.4f, accuracy %.3f over %d rows" % (step, total / rows, correct / rows, rows),
              file=sys.stderr, flush=True)
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
