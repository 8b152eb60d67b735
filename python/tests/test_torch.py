import pytest

torch = pytest.importorskip("torch")

import sluice  # noqa: E402
import sluice.torch  # noqa: E402


def test_worker_split_mapping_documented():
    ds = sluice.torch.IterableDataset("unused", num_splits=8, rank=1, world_size=2)
    o = ds.worker_options(worker_id=3, num_workers=4)
    assert (o["rank"], o["world_size"], o["num_splits"]) == (7, 8, 8)
    with pytest.raises(sluice.UsageError, match="not a multiple of world_size 2 x DataLoader workers 3"):
        ds.worker_options(0, 3)


@pytest.mark.parametrize("world", [1, 2])
def test_dataloader_workers_exactly_once(data, world):
    ids = []
    for rank in range(world):
        ds = sluice.torch.IterableDataset(str(data / "numbers"), columns=["id"], batch_size=250, shuffle=True,
                                          seed=3, num_splits=4, rank=rank, world_size=world)
        dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="spawn")
        for b in dl:
            assert isinstance(b["id"], torch.Tensor)
            ids += b["id"].tolist()
    assert sorted(ids) == list(range(20000))


def test_stateful_protocol_resumes_exactly(data):
    opts = dict(columns=["id"], batch_size=100, shuffle=True, seed=8, num_splits=2)
    whole = [b["id"].tolist() for b in sluice.torch.IterableDataset(str(data / "numbers"), **opts)]
    ds = sluice.torch.IterableDataset(str(data / "numbers"), **opts)
    it = iter(ds)
    first = [next(it)["id"].tolist() for _ in range(7)]
    st = ds.state_dict()
    again = sluice.torch.IterableDataset(str(data / "numbers"), **opts)
    again.load_state_dict(st)  # before iterating: applied when the worker opens it
    assert first + [b["id"].tolist() for b in again] == whole


def test_rank_from_torchrun_environment(data, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    ds = sluice.torch.IterableDataset(str(data / "numbers"), columns=["id"], num_splits=2)
    o = ds.worker_options()
    assert (o["rank"], o["world_size"]) == (1, 2)
