import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SOURCE = os.path.join(ROOT, "python")


def pytest_configure(config):
    # Under scripts/python.sh the tests are of the wheel installed into its
    # venv: importing python/ instead would test what users never get.
    venv = os.environ.get("SLUICE_TEST_INSTALLED")
    if venv:
        import sluice
        where = os.path.realpath(sluice.__file__)
        if not where.startswith(os.path.realpath(venv) + os.sep):
            raise pytest.UsageError("sluice imported from %s, not from the venv %s that SLUICE_TEST_INSTALLED names"
                                    % (where, venv))


def pytest_report_header(config):
    import sluice
    return "sluice from %s" % os.path.dirname(os.path.abspath(sluice.__file__))


@pytest.fixture(scope="session")
def data(tmp_path_factory):
    """The datasets of capi/testdata/gen: numbers (id, label, x, s; 20,000
    rows), other (6,000 rows), types (a column of each type) and types.json
    (types as the Go API streams it), and catalog.db, a SQLite Iceberg
    catalog holding the table ns.events (iceberg.json)."""
    gen = os.environ.get("SLUICE_TEST_GEN") or os.path.join(SOURCE, "build", "sluice-gen")
    if not os.path.exists(gen):
        subprocess.run(["go", "build", "-o", gen, "./capi/testdata/gen"], cwd=ROOT, check=True)
    d = tmp_path_factory.mktemp("data")
    subprocess.run([gen, str(d)], check=True)
    return d
