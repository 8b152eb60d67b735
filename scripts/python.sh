#!/usr/bin/env bash
# The Python package's set-up and tests (python/, over the C ABI in capi/).
#
#   scripts/python.sh          install what is missing, build the wheel, install
#                              it into a fresh venv and run the tests against it
#   scripts/python.sh build    build python/sluice/libsluice.so only (what
#                              python/setup.py runs for pip)
#   scripts/python.sh wheel    build the wheel into python/build/dist
#   scripts/python.sh install  build, and make `import sluice` work in $py
#                              from the source tree (a .pth file in its user
#                              site-packages naming python/): for working on
#                              the package; users pip install the wheel
#
# Python, NumPy, pytest and PyTorch are Debian's (/usr/bin/python3 and its
# python3-numpy, python3-pytest, python3-torch; python3-venv, -pip,
# -setuptools and -wheel to build and install the wheel), installed with
# apt-get where missing. The library is rebuilt only when a Go file, go.mod
# or go.sum changed since the last build (a stamp of their hashes), and then
# with Go's build cache, so a second run goes straight to the tests.
#
# The tests run from a scratch folder with the venv's Python, so that they
# import the installed package (python/tests/conftest.py checks it), never
# python/ itself.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
py=${SLUICE_PYTHON:-/usr/bin/python3}
lib=python/sluice/libsluice.so
gen=python/build/sluice-gen
stamp=python/build/stamp
dist=python/build/dist
venv=python/build/venv

# sources lists the files the library is built from, where git knows them
# (a checkout) or by name (an unpacked archive).
sources() {
	if git rev-parse --git-dir >/dev/null 2>&1; then
		git ls-files -co --exclude-standard -- '*.go' go.mod go.sum
	else
		find . \( -name '*.go' -o -name go.mod -o -name go.sum \) -not -path './python/build/*' 
	fi
}

build() {
	mkdir -p python/build
	local want
	want=$({ go version; sources | grep -v '_test\.go$' | sort | xargs sha256sum; } | sha256sum | cut -d' ' -f1)
	if [[ -f $lib && -f $stamp && $(cat "$stamp") == "$want" ]]; then
		return
	fi
	echo "python.sh: building $lib" >&2
	local start=$SECONDS
	CGO_ENABLED=1 go build -trimpath -buildmode=c-shared -ldflags="-s -w" -o "$lib" ./capi
	rm -f python/sluice/libsluice.h
	echo "$want" >"$stamp"
	echo "python.sh: built $lib in $((SECONDS - start))s" >&2
}

# debs installs the Debian packages (module=package) whose module $py
# cannot import.
debs() {
	local need=() mod pkg
	for m in "$@"; do
		mod=${m%%=*} pkg=${m#*=}
		"$py" -c "import $mod" 2>/dev/null || need+=("$pkg")
	done
	if ((${#need[@]})); then
		local sudo=
		[[ $(id -u) == 0 ]] || sudo=sudo
		echo "python.sh: installing ${need[*]}" >&2
		$sudo apt-get update -qq
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >&2
	fi
}

# wheel builds the wheel as a user's pip does, without build isolation (no
# download of setuptools): python/setup.py runs build above.
wheel() {
	debs numpy=python3-numpy ensurepip=python3-venv pip=python3-pip setuptools=python3-setuptools wheel=python3-wheel
	build # here, where its progress shows; setup.py's finds the stamp
	rm -rf "$dist" python/build/lib* python/build/bdist.*
	"$py" -m pip wheel -q --no-build-isolation --no-deps -w "$dist" ./python >&2
	ls "$dist"/sluice-*.whl
}

case ${1:-} in
build)
	build
	exit 0
	;;
wheel)
	wheel
	exit 0
	;;
install)
	debs numpy=python3-numpy
	build
	site=$("$py" -m site --user-site)
	mkdir -p "$site"
	echo "$PWD/python" >"$site/sluice.pth"
	echo "python.sh: $py imports sluice from $PWD/python ($site/sluice.pth)" >&2
	exit 0
	;;
"") ;;
*)
	echo "usage: scripts/python.sh [build|wheel|install]" >&2
	exit 2
	;;
esac

debs numpy=python3-numpy pytest=python3-pytest torch=python3-torch
"$py" -c 'import numpy, pytest, torch' # the tests need all three: fail here, never skip
whl=$(wheel)
go build -o "$gen" ./capi/testdata/gen
# A fresh venv that sees Debian's NumPy, pytest and torch, and the wheel
# installed into it as a user would: --no-index, so that a requirement the
# system does not meet fails here rather than downloading.
rm -rf "$venv"
"$py" -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install -q --no-index "$whl"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# pytest exits 5 when it collects no tests: set -e makes that a failure.
(cd "$scratch" && env -u PYTHONPATH -u SLUICE_LIBRARY SLUICE_TEST_GEN="$root/$gen" SLUICE_TEST_INSTALLED="$root/$venv" \
	"$root/$venv/bin/python" -m pytest -q -p no:cacheprovider "$root/python/tests")
