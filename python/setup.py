"""Builds libsluice.so, the Go core as a C shared library, into the package
before setuptools copies it: `pip install ./python` and `pip wheel ./python`
compile it with Go from this repository (scripts/python.sh build, which
rebuilds only when Go code changed and uses Go's build cache). The metadata
is in pyproject.toml.

SLUICE_GO_SOURCE names the repository where this file is not inside it (a
build from an sdist unpacked elsewhere)."""

import os
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # building an sdist needs no wheel package
    bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))


def _repository():
    root = os.environ.get("SLUICE_GO_SOURCE") or os.path.dirname(HERE)
    if not os.path.exists(os.path.join(root, "go.mod")) or not os.path.exists(
            os.path.join(root, "scripts", "python.sh")):
        raise SystemExit(
            "sluice: libsluice.so is built from the sluice Go module, which is not at %s: build from the "
            "repository (pip wheel --no-build-isolation ./python), or set SLUICE_GO_SOURCE to it" % root)
    return root


class BuildPy(build_py):
    """build_py that first builds libsluice.so next to the package's sources."""

    def run(self):
        root = _repository()
        if shutil.which("go") is None:
            raise SystemExit("sluice: building libsluice.so needs Go 1.26 on PATH (https://go.dev/dl/)")
        subprocess.run(["bash", os.path.join(root, "scripts", "python.sh"), "build"], cwd=root, check=True)
        lib = os.path.join(HERE, "sluice", "libsluice.so")
        if os.path.realpath(root) != os.path.realpath(os.path.dirname(HERE)):
            shutil.copyfile(os.path.join(root, "python", "sluice", "libsluice.so"), lib)
        super().run()


class NativeDistribution(Distribution):
    """The package holds a native library, so it installs where
    platform-specific packages go and its wheel is for one platform."""

    def has_ext_modules(self):
        return True


cmdclass = {"build_py": BuildPy}

if bdist_wheel is not None:
    class PlatformWheel(bdist_wheel):
        """A wheel for this platform that any Python 3 of it loads: the
        library is reached through ctypes, not the Python C API."""

        def get_tag(self):
            _, _, plat = super().get_tag()
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = PlatformWheel

setup(cmdclass=cmdclass, distclass=NativeDistribution)
