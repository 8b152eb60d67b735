"""Loading libsluice (the C ABI of ../capi) with ctypes, and calling it.

The library is loaded on first use, not on import, so that a process that
only builds datasets' options (the parent of DataLoader workers) never starts
the Go runtime and may fork safely. A process forked after loading gets
ForkError on every call: the Go runtime's threads are not copied by fork(),
and calling into it there can hang.
"""

import ctypes
import os
import threading

from . import errors

ABI_VERSION = 2

_lock = threading.Lock()
_lib = None
_pid = None
_forked = False


def _after_fork_in_child():
    global _forked
    if _lib is not None:
        _forked = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def library_path():
    """Where the library is looked for: $SLUICE_LIBRARY, else next to this
    file (where scripts/python.sh builds it)."""
    p = os.environ.get("SLUICE_LIBRARY")
    if p:
        return p
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "libsluice.so")


FORK_MESSAGE = (
    "sluice: this process was forked from one that had already loaded the sluice library "
    "(the Go runtime does not survive fork). Start DataLoader workers with "
    "multiprocessing_context='spawn' or 'forkserver', or do not open a sluice Dataset in "
    "the parent before the workers start (sluice.torch.IterableDataset opens it in each worker)."
)


def check_fork():
    if _forked:
        raise errors.ForkError(FORK_MESSAGE)


def forked():
    return _forked


def lib():
    """The loaded library, loading it on first call."""
    global _lib, _pid
    check_fork()
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        path = library_path()
        if not os.path.exists(path):
            raise errors.SluiceError(
                "sluice: the library %s is not built: run scripts/python.sh (or "
                "go build -buildmode=c-shared -o %s ./capi), or set SLUICE_LIBRARY" % (path, path))
        l = ctypes.CDLL(path)
        _declare(l)
        v = l.sluice_abi_version()
        if v != ABI_VERSION:
            raise errors.SluiceError(
                "sluice: %s has C ABI version %d, this package needs %d: rebuild it" % (path, v, ABI_VERSION))
        _pid = os.getpid()
        _lib = l
        return l


def _declare(l):
    c_char_pp = ctypes.POINTER(ctypes.c_char_p)
    i64, i64p = ctypes.c_int64, ctypes.POINTER(ctypes.c_int64)
    vp, vpp = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
    sigs = {
        "sluice_abi_version": ([], i64),
        "sluice_free": ([vp], None),
        "sluice_open": ([ctypes.c_char_p, i64p], vp),
        "sluice_mix": ([ctypes.c_char_p, i64p], vp),
        "sluice_close": ([i64], vp),
        "sluice_schema": ([i64, vp], vp),
        "sluice_next": ([i64, vp, i64, ctypes.POINTER(ctypes.c_int)], vp),
        "sluice_stop": ([i64], vp),
        "sluice_state": ([i64, vpp, i64p], vp),
        "sluice_load_state": ([i64, ctypes.c_char_p, i64], vp),
        "sluice_merge_states": ([vpp, i64p, i64, ctypes.c_int, vpp, i64p], vp),
        "sluice_info": ([i64, vpp], vp),
        "sluice_metrics": ([i64, vpp], vp),
        "sluice_estimate": ([i64, vpp], vp),
        "sluice_set_epoch": ([i64, i64], vp),
        "sluice_take": ([i64, i64, i64p, i64, vp], vp),
        "sluice_rank_from_env": ([ctypes.c_char_p, vpp], vp),
    }
    for name, (args, res) in sigs.items():
        f = getattr(l, name)
        f.argtypes = args
        f.restype = res
    del c_char_pp


def check(err):
    """Raise the exception for an error string the library returned."""
    if not err:
        return
    l = _lib
    try:
        msg = ctypes.string_at(err).decode("utf-8", "replace")
    finally:
        l.sluice_free(err)
    kind, _, text = msg.partition("\t")
    raise errors.from_kind(kind, text)


def call(name, *args):
    """Call a library function that returns an error string."""
    check(getattr(lib(), name)(*args))


def take_bytes(ptr, n):
    """Copy n bytes the library allocated and free them."""
    try:
        return ctypes.string_at(ptr, n)
    finally:
        _lib.sluice_free(ptr)


def take_string(ptr):
    try:
        return ctypes.string_at(ptr).decode("utf-8")
    finally:
        _lib.sluice_free(ptr)
