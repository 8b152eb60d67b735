"""Feeding a GPU from sluice: rows/s into CUDA tensors and the fraction of
training steps that waited on data, with pinned memory on and off.

    PYTHONPATH=python python3 bench/python_gpu.py DIR [SECONDS]

DIR is a dataset with columns id, label, x (examples/exampledata). Each
configuration streams shuffled epochs for about SECONDS (default 8) after a
warm-up epoch:

- copy: batches moved to the GPU and nothing else (the loader's ceiling);
- small, large: an MLP (hidden 256 x 2, or 4096 x 4) trained on x, label.

Every step ends with torch.cuda.synchronize(), so that a step's time is its
own: the data wait is the time spent getting the next batch (sluice's
next() and, with pinning, the copy into pinned memory), the rest is the
host-to-device copy and the model. Without a GPU it runs on the CPU
(pinning off) so that the script can be tried anywhere.
"""

import json
import sys
import time

import torch

import sluice


def mlp(hidden, layers):
    mods, width = [], 1
    for _ in range(layers):
        mods += [torch.nn.Linear(width, hidden), torch.nn.ReLU()]
        width = hidden
    mods.append(torch.nn.Linear(width, 10))
    return torch.nn.Sequential(*mods)


def run(data, dev, pin, model, seconds, batch_size):
    cuda = dev.type == "cuda"
    ds = sluice.Dataset(data, columns=["label", "x"], batch_size=batch_size, shuffle=True, seed=1,
                        as_torch=True, pin_memory=pin)
    opt = torch.optim.SGD(model.parameters(), lr=0.01) if model is not None else None

    def step(b):
        x = b["x"].to(dev, non_blocking=pin).float().unsqueeze(1)
        y = b["label"].to(dev, non_blocking=pin)
        if model is not None:
            loss = torch.nn.functional.cross_entropy(model(x), y % 10)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if cuda:
            torch.cuda.synchronize()

    for b in ds:  # warm-up epoch
        step(b)
    rows = steps = 0
    wait = total = 0.0
    waited_steps = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        it = iter(ds)
        while True:
            t0 = time.perf_counter()
            b = next(it, None)
            t1 = time.perf_counter()
            if b is None:
                break
            step(b)
            t2 = time.perf_counter()
            wait += t1 - t0
            total += t2 - t0
            steps += 1
            rows += b.num_rows
            # a step "waited" when getting its batch took a tenth of it or more
            waited_steps += (t1 - t0) >= 0.1 * (t2 - t0)
    ds.close()
    return {"rows_per_s": rows / total, "steps": steps, "wait_fraction": wait / total,
            "steps_waiting_fraction": waited_steps / max(steps, 1), "ms_per_step": 1000 * total / max(steps, 1)}


def main():
    data = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 8.0
    cuda = torch.cuda.is_available()
    dev = torch.device("cuda" if cuda else "cpu")
    info = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0) if cuda else "cpu"}
    print(json.dumps(info), flush=True)
    for name, make in (("copy", lambda: None), ("small", lambda: mlp(256, 2)), ("large", lambda: mlp(4096, 4))):
        if name == "large" and not cuda:
            continue
        for pin in ((False, True) if cuda else (False,)):
            torch.manual_seed(0)
            model = make()
            if model is not None:
                model = model.to(dev)
            r = run(data, dev, pin, model, seconds, 1024)
            r.update(model=name, pin_memory=pin, batch_size=1024)
            print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
