"""examples/python/train.py: an MLP trained through sluice.torch.DataLoader
workers, killed with SIGKILL four times (workers alive) and resumed, logs
exactly the losses of an uninterrupted run, trained on the same rows in the
same order, none of them validation rows; as two processes (gloo), every
training row exactly once across them."""

import os
import random
import signal
import socket
import subprocess
import sys
import time

import pytest

pytest.importorskip("torch")

import sluice  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TRAIN = os.path.join(ROOT, "examples", "python", "train.py")

FILES, ROWS = 4, 1000  # one file a split: 4 splits of 800 training rows


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """CSV files of id, f0..f3 (uniform in [-1, 1)), label (the class a
    fixed linear map of the features scores highest: learnable) and fold
    (id mod 5; fold 0 is the validation split)."""
    d = tmp_path_factory.mktemp("table")
    rnd = random.Random(7)
    for i in range(FILES):
        with open(d / ("part-%d.csv" % i), "w") as f:
            f.write("id,f0,f1,f2,f3,label,fold\n")
            for j in range(ROWS):
                row = i * ROWS + j
                x = [rnd.uniform(-1, 1) for _ in range(4)]
                scores = [x[0] + x[1], x[1] - x[2], x[2] + x[3], -x[0] - x[3]]
                f.write("%d,%r,%r,%r,%r,%d,%d\n" % (row, *x, scores.index(max(scores)), row % 5))
    return d


TRAIN_IDS = [i for i in range(FILES * ROWS) if i % 5 != 0]


def env(**kw):
    e = dict(os.environ)
    # The sluice under test: the installed package under scripts/python.sh.
    e["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(sluice.__file__))) + os.pathsep + e.get("PYTHONPATH", "")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        e.pop(k, None)
    e["CUDA_VISIBLE_DEVICES"] = ""  # the CPU's losses, on a GPU machine too
    e.update(kw)
    return e


def read_log(path):
    """[(step, loss, [ids])] as logged."""
    out = []
    with open(path) as f:
        for line in f:
            step, loss, *ids = line.split()
            out.append((int(step), loss, [int(i) for i in ids]))
    return out


def lines(path):
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        return sum(1 for _ in f)


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return f.read().split()
    except OSError:
        return []


def test_sigkill_resume_logs_the_same_losses(table, tmp_path):
    epochs = 3
    args = [sys.executable, TRAIN, "--data", str(table), "--epochs", str(epochs), "--batch-size", "50",
            "--workers", "2", "--save-every", "7", "--log-ids", "id"]
    whole = tmp_path / "whole.log"
    subprocess.run(args + ["--ckpt", str(tmp_path / "whole.pt"), "--log", str(whole)], env=env(), check=True,
                   timeout=300, stdout=subprocess.DEVNULL)
    want = read_log(whole)
    assert [s for s, _, _ in want] == list(range(1, len(want) + 1))
    # Every training row once an epoch, no validation row.
    assert sorted(i for _, _, ids in want for i in ids) == sorted(TRAIN_IDS * epochs)
    steps = len(want)
    assert steps == len(TRAIN_IDS) * epochs // 50
    # The model learned: the last epoch's losses are well below the first's.
    per_epoch = steps // epochs
    mean = [sum(float(l) for _, l, _ in want[e * per_epoch:(e + 1) * per_epoch]) / per_epoch for e in (0, epochs - 1)]
    assert mean[1] < 0.7 * mean[0], mean

    log, ckpt = tmp_path / "killed.log", tmp_path / "killed.pt"
    run = args + ["--ckpt", str(ckpt), "--log", str(log), "--step-delay", "0.01"]
    rnd = random.Random(3)
    killed_at = []
    for _ in range(4):
        p = subprocess.Popen(run, env=env(), stdout=subprocess.DEVNULL)
        target = lines(log) + rnd.randrange(10, 40)
        deadline = time.time() + 120
        while lines(log) < target and p.poll() is None and time.time() < deadline:
            time.sleep(0.005)
        assert p.poll() is None, "the run ended before it was killed"
        assert len(children(p.pid)) >= 2, "the DataLoader's workers were not running"
        p.send_signal(signal.SIGKILL)
        p.wait()
        killed_at.append(lines(log))
    assert len(set(killed_at)) == 4 and killed_at[-1] < steps, killed_at
    subprocess.run(run, env=env(), check=True, timeout=300, stdout=subprocess.DEVNULL)
    assert read_log(log) == want


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_gloo_exactly_once(table, tmp_path):
    port = str(free_port())
    procs = []
    for r in range(2):
        e = env(RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs.append(subprocess.Popen([sys.executable, TRAIN, "--data", str(table), "--epochs", "1",
                                       "--batch-size", "50", "--workers", "2", "--log-ids", "id",
                                       "--ckpt", str(tmp_path / "ddp.pt"), "--log", str(tmp_path / "ddp.log")],
                                      env=e, stdout=subprocess.DEVNULL))
    for p in procs:
        assert p.wait(timeout=300) == 0
    ids = [i for r in range(2) for _, _, b in read_log(tmp_path / ("ddp.log.rank%d" % r)) for i in b]
    assert sorted(ids) == TRAIN_IDS
    assert os.path.exists(tmp_path / "ddp.pt.rank0") and os.path.exists(tmp_path / "ddp.pt.rank1")
