import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))


@pytest.fixture(scope="session")
def data(tmp_path_factory):
    """The datasets of capi/testdata/gen: numbers (id, label, x, s; 20,000
    rows), other (6,000 rows), types (a column of each type) and types.json
    (types as the Go API streams it)."""
    gen = os.environ.get("SLUICE_TEST_GEN") or os.path.join(os.path.dirname(HERE), "build", "sluice-gen")
    if not os.path.exists(gen):
        subprocess.run(["go", "build", "-o", gen, "./capi/testdata/gen"], cwd=ROOT, check=True)
    d = tmp_path_factory.mktemp("data")
    subprocess.run([gen, str(d)], check=True)
    return d
