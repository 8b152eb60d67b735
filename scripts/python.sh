#!/usr/bin/env bash
# The Python package's set-up and tests (python/, over the C ABI in capi/).
#
#   scripts/python.sh          install what is missing, build, run the tests
#   scripts/python.sh build    build python/sluice/libsluice.so only
#   scripts/python.sh install  build, and make `import sluice` work in $py
#                              (a .pth file in its user site-packages naming python/)
#
# Python, NumPy, pytest and PyTorch are Debian's (/usr/bin/python3 and its
# python3-numpy, python3-pytest, python3-torch), installed with apt-get
# where missing. The library is rebuilt only when a Go file, go.mod or
# go.sum changed since the last build (a stamp of their hashes), so a second
# run goes straight to the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${SLUICE_PYTHON:-/usr/bin/python3}
lib=python/sluice/libsluice.so
gen=python/build/sluice-gen
stamp=python/build/stamp

build() {
	mkdir -p python/build
	local want
	want=$({ go version; git ls-files -co --exclude-standard -- '*.go' go.mod go.sum | grep -v '_test\.go$' | sort | xargs sha256sum; } | sha256sum | cut -d' ' -f1)
	if [[ -f $lib && -f $gen && -f $stamp && $(cat "$stamp") == "$want" ]]; then
		return
	fi
	echo "python.sh: building $lib" >&2
	CGO_ENABLED=1 go build -buildmode=c-shared -ldflags="-s -w" -o "$lib" ./capi
	rm -f python/sluice/libsluice.h
	go build -o "$gen" ./capi/testdata/gen
	echo "$want" >"$stamp"
}

case ${1:-} in
build)
	build
	exit 0
	;;
install)
	build
	site=$("$py" -m site --user-site)
	mkdir -p "$site"
	echo "$PWD/python" >"$site/sluice.pth"
	echo "python.sh: $py imports sluice from $PWD/python ($site/sluice.pth)" >&2
	exit 0
	;;
"") ;;
*)
	echo "usage: scripts/python.sh [build|install]" >&2
	exit 2
	;;
esac

need=()
"$py" -c 'import numpy' 2>/dev/null || need+=(python3-numpy)
"$py" -c 'import pytest' 2>/dev/null || need+=(python3-pytest)
"$py" -c 'import torch' 2>/dev/null || need+=(python3-torch)
if ((${#need[@]})); then
	sudo=
	[[ $(id -u) == 0 ]] || sudo=sudo
	echo "python.sh: installing ${need[*]}" >&2
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >&2
fi
"$py" -c 'import numpy, pytest, torch' # the tests need all three: fail here, never skip
build
# pytest exits 5 when it collects no tests: set -e makes that a failure.
SLUICE_TEST_GEN=$PWD/$gen PYTHONPATH=$PWD/python "$py" -m pytest -q -p no:cacheprovider python/tests
