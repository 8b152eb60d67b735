"""sluice.torch.DataLoader(device=...): batches copied to the device one
ahead of the one handed out, value for value, the state counting only the
batches handed out. CI runs the path with device="cpu"; the CUDA test runs
where torch finds a GPU."""

import pytest

torch = pytest.importorskip("torch")

import sluice  # noqa: E402
import sluice.torch  # noqa: E402

OPTS = dict(columns=["id", "label", "x"], batch_size=250, shuffle=True, seed=3, num_splits=4)
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def plain(data, workers, opts=OPTS, epochs=1):
    """The batches without device=, as lists of values (per column)."""
    dl = sluice.torch.DataLoader(sluice.torch.IterableDataset(str(data / "numbers"), **opts), num_workers=workers,
                                 **({"multiprocessing_context": "fork"} if workers else {}))
    return [values(b) for _ in range(epochs) for b in dl]


def values(b):
    return {k: v.tolist() if isinstance(v, torch.Tensor) else list(v) for k, v in b.items()}


def loader(data, workers, device, opts=OPTS):
    return sluice.torch.DataLoader(sluice.torch.IterableDataset(str(data / "numbers"), **opts), num_workers=workers,
                                   device=device, **({"multiprocessing_context": "fork"} if workers else {}))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("workers", [0, 2])
def test_device_batches_equal_value_for_value(data, workers, device):
    want = plain(data, workers, epochs=2)
    dl = loader(data, workers, device)
    got = []
    for _ in range(2):
        for b in dl:
            assert isinstance(b, sluice.Batch)
            for k in ("id", "label", "x"):
                assert b[k].device.type == device
            assert b["id"].dtype == torch.int64 and b["x"].dtype == torch.float64
            got.append(values(b))
    assert got == want
    assert dl.epoch == 2


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("workers", [0, 2])
def test_device_state_counts_the_batches_handed_out(data, workers, device):
    """With a batch read and copied ahead, state_dict() is the position
    after the one handed out: a new loader resumes at the next batch, and a
    break goes on with it in the next pass."""
    want = plain(data, workers)
    dl = loader(data, workers, device)
    it = iter(dl)
    seen = [values(next(it)) for _ in range(7)]
    assert seen == want[:7]
    st = dl.state_dict()
    assert dl.epoch == 0

    again = loader(data, workers, device)
    again.load_state_dict(st)
    assert [values(b) for b in again] == want[7:]
    assert again.epoch == 1

    # Broken off after 7: the next pass of the same loader is the rest.
    del it
    assert [values(b) for b in dl] == want[7:]
    assert dl.epoch == 1

    # At the last batch the state is still in epoch 0, and after it epoch 1.
    dl2 = loader(data, workers, device)
    it = iter(dl2)
    for _ in range(len(want)):
        next(it)
    assert dl2.state_dict()["epoch"] == 0 and dl2.epoch == 0
    with pytest.raises(StopIteration):
        next(it)
    assert dl2.epoch == 1


def test_device_nulls_and_strings(data):
    """Validity entries go with the tensors; object columns stay as they are."""
    opts = dict(columns=["id", "n", "b", "s"], batch_size=100)
    want = [values(b) for b in sluice.torch.DataLoader(sluice.torch.IterableDataset(str(data / "types"), **opts))]
    got = [b for b in sluice.torch.DataLoader(sluice.torch.IterableDataset(str(data / "types"), **opts),
                                              device="cpu")]
    assert any("n.valid" in b for b in got)
    assert [values(b) for b in got] == want


def test_device_refused_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("torch finds a GPU here")
    with pytest.raises(sluice.UsageError, match="no CUDA device"):
        sluice.torch.DataLoader(sluice.torch.IterableDataset("unused"), device="cuda")
