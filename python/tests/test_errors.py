import ctypes
import os
import signal
import subprocess
import sys
import time

import pytest

import sluice
from sluice import _lib


def test_options_refused_before_go_is_called(data, monkeypatch):
    def no_go(*a):
        raise AssertionError("the Go side was called")
    monkeypatch.setattr(_lib, "call", no_go)
    with pytest.raises(sluice.UsageError, match="'batchsize'.*did you mean 'batch_size'"):
        sluice.Dataset(str(data / "numbers"), batchsize=10)
    with pytest.raises(sluice.UsageError, match="option batch_size must be an int"):
        sluice.Dataset(str(data / "numbers"), batch_size="10")
    with pytest.raises(sluice.UsageError, match="option shuffle must be a bool"):
        sluice.Dataset(str(data / "numbers"), shuffle=1)
    with pytest.raises(sluice.UsageError, match="option seed is -1"):
        sluice.Dataset(str(data / "numbers"), seed=-1)
    with pytest.raises(sluice.UsageError, match="option columns must be a list of str"):
        sluice.Dataset(str(data / "numbers"), columns="id")
    with pytest.raises(sluice.UsageError, match="option columns is empty; leave it out"):
        sluice.Dataset(str(data / "numbers"), columns=[])
    with pytest.raises(sluice.UsageError, match="num_splits 3 is not a multiple of world_size 2"):
        sluice.Dataset(str(data / "numbers"), num_splits=3, world_size=2)
    with pytest.raises(sluice.UsageError, match="rank 2 is outside world_size 2"):
        sluice.Dataset(str(data / "numbers"), rank=2, world_size=2)
    with pytest.raises(sluice.UsageError, match="urls"):
        sluice.Dataset(3)
    with pytest.raises(sluice.UsageError, match="unknown mix option 'weights'"):
        sluice.Mix([], weights=[1])


def test_every_go_error_kind_arrives_as_its_exception(data, tmp_path):
    numbers = str(data / "numbers")
    with pytest.raises(sluice.NotFoundError, match="no-such"):
        sluice.Dataset(str(tmp_path / "no-such"))
    with pytest.raises(sluice.UsageError, match="[Ff]ilter"):
        sluice.Dataset(numbers, filter="label = = 3")
    with pytest.raises(sluice.SchemaError):
        sluice.Dataset(numbers, filter="s > 3")
    ds = sluice.Dataset(numbers, columns=["id"], batch_size=100, shuffle=True, seed=1)
    other = sluice.Dataset(numbers, columns=["id"], batch_size=100, shuffle=True, seed=2)
    with pytest.raises(sluice.MismatchError, match="seed"):
        other.load_state_dict(ds.state_dict())
    with pytest.raises(sluice.CorruptError):
        ds.load_state_dict({"format": 1, "kind": "dataset", "state": b"not a state at all"})
    with pytest.raises(sluice.VersionError):
        ds.load_state_dict({"format": 99, "kind": "dataset", "state": b""})
    with pytest.raises(sluice.PositionError):
        ds.take([-1])
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.parquet").write_bytes(b"PAR1" + b"\0" * 100 + b"PAR1")
    with pytest.raises(sluice.CorruptError, match="x.parquet"):
        sluice.Dataset(str(bad))
    (tmp_path / "empty").mkdir()
    with pytest.raises(sluice.NotFoundError, match="empty"):
        sluice.Dataset(str(tmp_path / "empty"))
    ds.close()
    other.close()


def test_closed_twice_and_iterated_after_close(data):
    ds = sluice.Dataset(str(data / "numbers"), columns=["id"])
    it = iter(ds)
    next(it)
    ds.close()
    with pytest.raises(sluice.ClosedError):
        ds.close()
    with pytest.raises(sluice.ClosedError):
        next(iter(ds))
    with pytest.raises(sluice.ClosedError):
        ds.state_dict()


def test_used_from_a_forked_child(data):
    """A forked child cannot use the parent's dataset (its Go runtime is
    the parent's, dead in the child) and says so; it opens its own, which
    loads a copy of the library, and reads every row; the parent is
    unharmed."""
    ds = sluice.Dataset(str(data / "numbers"), columns=["id"])
    b = next(iter(ds))
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            next(iter(ds))
        except sluice.ForkError as e:
            code = 0 if "forked" in str(e) and "Open the dataset again in this process" in str(e) else 2
        except BaseException:
            code = 3
        try:
            own = sluice.Dataset(str(data / "numbers"), columns=["id"], batch_size=999, shuffle=True, seed=1)
            if sorted(int(i) for x in own for i in x["id"]) != list(range(20000)):
                code = 4
        except BaseException:
            code = 5
        del b  # must not call into the parent's Go runtime
        os._exit(code)
    # Calling into the copied Go runtime hangs: a regression must fail, not
    # hang the suite.
    deadline = time.time() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.time() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung calling into the parent's Go runtime")
        time.sleep(0.05)
    assert os.WEXITSTATUS(status) == 0
    assert len(next(iter(ds))["id"]) > 0  # the parent is unharmed


def test_break_keeps_position_and_state_is_after_last_batch(data):
    opts = dict(columns=["id"], batch_size=100)
    ds = sluice.Dataset(str(data / "numbers"), **opts)
    for n, b in enumerate(ds):
        if n == 4:
            break
    st = ds.state_dict()
    nxt = next(iter(ds))["id"]
    assert nxt[0] == 500
    again = sluice.Dataset(str(data / "numbers"), **opts)
    again.load_state_dict(st)
    assert next(iter(again))["id"][0] == 500


def test_ctrl_c_interrupts_iteration_and_close_ends_it(data, tmp_path):
    """SIGINT (Ctrl-C) in a loop over batches raises KeyboardInterrupt in
    Python, as without sluice, and close() after it ends the stream: the
    process exits at once instead of hanging on Go's goroutines."""
    script = tmp_path / "loop.py"
    script.write_text(
        "import sys, sluice\n"
        f"ds = sluice.Dataset({str(data / 'numbers')!r}, columns=['id', 'x'], batch_size=64, shuffle=True)\n"
        "try:\n"
        "    first = True\n"
        "    while True:\n"
        "        for b in ds:\n"
        "            if first:\n"
        "                print('started', flush=True)\n"
        "                first = False\n"
        "except KeyboardInterrupt:\n"
        "    ds.close()\n"
        "    print('interrupted', flush=True)\n"
        "    sys.exit(7)\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(sluice.__file__)))  # the sluice under test
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout.readline().strip() == "started"
        time.sleep(0.2)
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail("the loop did not end after SIGINT")
    assert "interrupted" in out
    assert p.returncode == 7


def test_ctrl_c_in_a_finalizer_is_raised_by_the_next_batch(data, monkeypatch):
    """A Ctrl-C whose handler runs inside the finalizer of an exported
    array (Owner.__del__) would be swallowed by Python as "Exception
    ignored" and the loop would go on; the array is released all the same
    (queued for the library, which releases it with the next call) and the
    next batch raises the KeyboardInterrupt."""
    from sluice import _arrow

    released = []

    @ctypes.CFUNCTYPE(None, ctypes.POINTER(_arrow.ArrowArray))
    def release(a):
        released.append(1)
        a.contents.release = None  # as every producer of the C data interface does

    interrupts = [KeyboardInterrupt()]
    real = _arrow._owned

    def owned(pid):
        # The check before the release call is where the signal lands.
        if interrupts:
            raise interrupts.pop()
        return real(pid)

    ds = sluice.Dataset(str(data / "numbers"), columns=["id"], batch_size=64)
    it = iter(ds)
    next(it)
    monkeypatch.setattr(_arrow, "_owned", owned)
    o = _arrow.Owner()
    o.array.release = ctypes.cast(release, ctypes.c_void_p).value
    del o  # the finalizer meets the interrupt; nothing escapes it
    _arrow.release_now()
    assert released == [1]
    monkeypatch.setattr(_arrow, "_owned", real)
    with pytest.raises(KeyboardInterrupt):
        next(it)
    ds.close()


def test_ctrl_c_on_a_finalizers_first_line_is_raised_by_the_next_batch(data):
    """A Ctrl-C can land on Owner.__del__'s first line, before its try:
    Python then hands the KeyboardInterrupt to sys.unraisablehook. sluice's
    hook keeps it, and the next batch raises it."""
    from types import SimpleNamespace

    from sluice import _arrow

    ds = sluice.Dataset(str(data / "numbers"), columns=["id"], batch_size=64)
    it = iter(ds)
    next(it)
    # pytest swaps sys.unraisablehook during a test, so call sluice's own.
    _arrow._unraisable(SimpleNamespace(exc_type=KeyboardInterrupt, exc_value=KeyboardInterrupt(),
                                       exc_traceback=None, err_msg=None, object=_arrow.Owner.__del__))
    with pytest.raises(KeyboardInterrupt):
        next(it)
    ds.close()


def test_state_messages_read_as_sentences(data):
    ds = sluice.Dataset(str(data / "numbers"), columns=["id"])
    with pytest.raises(sluice.UsageError) as e:
        ds.load_state_dict({"foo": 1})
    assert str(e.value) == ("sluice: load_state_dict takes the dict that state_dict() returned, which has the keys "
                            "format, kind and state; this dict has the keys 'foo'")
    with pytest.raises(sluice.UsageError) as e:
        ds.load_state_dict([1])
    assert str(e.value) == "sluice: load_state_dict takes the dict that state_dict() returned; this is a list"
    with pytest.raises(sluice.MismatchError) as e:
        ds.load_state_dict({"format": 1, "kind": "mix", "state": b""})
    assert str(e.value) == ("sluice: field kind: the state is a sluice.Mix's, and this is a sluice.Dataset's; "
                            "load it into what saved it")
    ds.close()
    with pytest.raises(sluice.ClosedError) as e:
        ds.state_dict()
    assert str(e.value) == "sluice: the dataset is closed; open a new one to read on"


def test_a_file_rewritten_after_planning_is_a_changed_error(tmp_path):
    path = tmp_path / "a.csv"
    path.write_bytes(b"id\n1\n2\n3\n")
    ds = sluice.Dataset(str(path))
    st = path.stat()
    with open(path, "r+b") as f:  # in place, at the same size: only the bytes differ
        f.write(b"id\n7\n8\n9\n")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # as a rewrite a second later
    with pytest.raises(sluice.ChangedError, match=r"a\.csv.*planned"):
        next(iter(ds))
    ds.close()
