"""examples/python/train.py: killed with SIGKILL mid-epoch and resumed, it
trains on exactly the rows of an uninterrupted run, in order; as two
processes (gloo), every row exactly once across them."""

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


def env(**kw):
    e = dict(os.environ)
    # The sluice under test: the installed package under scripts/python.sh.
    e["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(sluice.__file__))) + os.pathsep + e.get("PYTHONPATH", "")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        e.pop(k, None)
    e.update(kw)
    return e


def read_log(path):
    rows = []
    with open(path) as f:
        for line in f:
            rows += [int(x) for x in line.split()[1:]]
    return rows


def lines(path):
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        return sum(1 for _ in f)


def test_sigkill_resume_trains_the_same_rows(data, tmp_path):
    args = [sys.executable, TRAIN, "--data", str(data / "numbers"), "--epochs", "2", "--save-every", "7"]
    whole = tmp_path / "whole.log"
    subprocess.run(args + ["--ckpt", str(tmp_path / "whole.pt"), "--log", str(whole)], env=env(), check=True, timeout=300)
    want = read_log(whole)
    assert sorted(want) == sorted(list(range(20000)) * 2)

    log, ckpt = tmp_path / "killed.log", tmp_path / "killed.pt"
    run = args + ["--ckpt", str(ckpt), "--log", str(log), "--step-delay", "0.004"]
    rnd = random.Random(3)
    kills = 0
    for _ in range(4):
        p = subprocess.Popen(run, env=env())
        target = lines(log) + rnd.randrange(15, 90)
        deadline = time.time() + 120
        while lines(log) < target and p.poll() is None and time.time() < deadline:
            time.sleep(0.01)
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            kills += 1
        p.wait()
    assert kills >= 3
    subprocess.run(run, env=env(), check=True, timeout=300)
    assert read_log(log) == want


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_gloo_exactly_once(data, tmp_path):
    port = str(free_port())
    procs = []
    for r in range(2):
        e = env(RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs.append(subprocess.Popen([sys.executable, TRAIN, "--data", str(data / "numbers"), "--epochs", "1",
                                       "--ckpt", str(tmp_path / "ddp.pt"), "--log", str(tmp_path / "ddp.log")], env=e))
    for p in procs:
        assert p.wait(timeout=300) == 0
    ids = read_log(tmp_path / "ddp.log.rank0") + read_log(tmp_path / "ddp.log.rank1")
    assert sorted(ids) == list(range(20000))
    assert os.path.exists(tmp_path / "ddp.pt.rank0") and os.path.exists(tmp_path / "ddp.pt.rank1")
