"""examples/python/quickstart.py, the twin of the Go quickstart, runs to the
end against the sluice under test (the installed package under
scripts/python.sh) and checks its own epochs and resume."""

import os
import subprocess
import sys

import sluice

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_quickstart(tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(sluice.__file__)))
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "python", "quickstart.py"), "--rows", "40000"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("wrote 40000 rows in 8 CSV files")
    assert "every row once" in lines[1] and "another order" in lines[2]
    assert lines[3].startswith("resumed epoch 1 at batch 20 in a new dataset: the remaining") and "match exactly" in lines[3]
