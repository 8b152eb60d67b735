"""Loading libsluice (the C ABI of ../capi) with ctypes, and calling it.

The library is loaded on first use, not on import. The Go runtime inside it
does not survive fork(): a forked child has the parent's memory but none of
its threads, and calling into that copy can hang. So a process forked after
the library was loaded (by it or by an ancestor) loads a private copy of the
library instead, whose runtime starts afresh in the child; the parent's
datasets and batches stay the parent's (using one of them in the child raises
ForkError). The copy is made once per parent, just before its first fork,
into an anonymous in-memory file that every child forked from it shares.
"""

import ctypes
import os
import tempfile
import threading

from . import errors

ABI_VERSION = 5

_lock = threading.Lock()
_lib = None
# _lib_pid is the process that loaded _lib: a forked child inherits _lib but
# must not call it.
_lib_pid = None
# _mapped holds (st_dev, st_ino) of every copy of the library mapped into
# this process's memory, by it or by an ancestor: dlopen of a file already
# mapped would hand back that copy, whose runtime is dead here.
_mapped = set()
# _spare is (fd, (st_dev, st_ino)) of an unmapped copy, made before a fork
# for the children to load; inherited by them.
_spare = None


# _pid is this process's id, kept by the fork hook below: the hot paths
# (every call for batches, every array released) ask it rather than make a
# system call each time (a getpid costs about a microsecond in a VM).
_pid = os.getpid()


def pid():
    """This process's id (os.getpid, without the system call)."""
    return _pid


def _after_fork_in_child():
    global _lock, _pid
    # A thread of the parent may have held the lock at the fork.
    _lock = threading.Lock()
    _pid = os.getpid()


def _before_fork():
    """Make the children's copy of the library, if this process has one
    mapped (made here, not in each child, so that all of them share its
    pages)."""
    global _spare
    if not _mapped or (_spare is not None and _spare[1] not in _mapped):
        return
    try:
        _spare = _memfd_copy(library_path())
    except OSError:
        _spare = None  # each child copies for itself (_private_copy)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


def _memfd_copy(src):
    fd = os.memfd_create("libsluice.so", os.MFD_CLOEXEC)
    try:
        with open(src, "rb") as f:
            while True:
                b = f.read(1 << 22)
                if not b:
                    break
                os.write(fd, b)
        st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd, (st.st_dev, st.st_ino)


def _private_copy(src):
    """A path to a copy of the library that this process has not mapped,
    and a function to call once it is loaded."""
    if _spare is not None and _spare[1] not in _mapped:
        return "/proc/self/fd/%d" % _spare[0], lambda: None
    if hasattr(os, "memfd_create"):
        try:
            fd, _ = _memfd_copy(src)
            return "/proc/self/fd/%d" % fd, lambda: None  # kept open: the loaded copy is read from it
        except OSError:
            pass
    d = tempfile.mkdtemp(prefix="sluice-lib-")
    path = os.path.join(d, "libsluice.so")
    with open(src, "rb") as f, open(path, "wb") as g:
        while True:
            b = f.read(1 << 22)
            if not b:
                break
            g.write(b)

    def remove():
        os.unlink(path)
        os.rmdir(d)
    return path, remove


def library_path():
    """Where the library is looked for: $SLUICE_LIBRARY, else next to this
    file (where scripts/python.sh builds it)."""
    p = os.environ.get("SLUICE_LIBRARY")
    if p:
        return p
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "libsluice.so")


def fork_message(what):
    return ("sluice: this %s was opened in process %%d, and this process (%%d) was forked from it: the Go "
            "runtime that holds it does not survive fork(). Open the %s again in this process (a "
            "sluice.torch.IterableDataset does so in each DataLoader worker by itself)." % (what, what))


def loaded_here():
    """Whether this process loaded the library itself (not inherited it)."""
    return _lib is not None and _lib_pid == os.getpid()


def lib():
    """The library, loading it on the first call in this process."""
    global _lib, _lib_pid
    if _lib is not None and _lib_pid == _pid:
        return _lib
    with _lock:
        if _lib is not None and _lib_pid == os.getpid():
            return _lib
        src = library_path()
        if not os.path.exists(src):
            raise errors.SluiceError(
                "sluice: the library %s is not built: run scripts/python.sh (or "
                "go build -buildmode=c-shared -o %s ./capi), or set SLUICE_LIBRARY" % (src, src))
        path, done = src, lambda: None
        if _mapped:
            path, done = _private_copy(src)
        st = os.stat(path)
        l = ctypes.CDLL(path)
        _mapped.add((st.st_dev, st.st_ino))
        done()
        # The version first: a library of another has other functions.
        l.sluice_abi_version.restype = ctypes.c_int64
        v = l.sluice_abi_version()
        if v != ABI_VERSION:
            raise errors.SluiceError(
                "sluice: %s has C ABI version %d, this package needs %d: rebuild it" % (src, v, ABI_VERSION))
        _declare(l)
        _lib, _lib_pid = l, os.getpid()
        return l


def _declare(l):
    i64, i64p = ctypes.c_int64, ctypes.POINTER(ctypes.c_int64)
    vp, vpp = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
    sigs = {
        "sluice_abi_version": ([], i64),
        "sluice_free": ([vp], None),
        "sluice_open": ([ctypes.c_char_p, i64p], vp),
        "sluice_mix": ([ctypes.c_char_p, i64p], vp),
        "sluice_close": ([i64], vp),
        "sluice_schema": ([i64, vp], vp),
        "sluice_next": ([i64, vp, i64, i64p, i64, i64p, vp, i64], vp),
        "sluice_release": ([vp, i64], vp),
        "sluice_stop": ([i64], vp),
        "sluice_state": ([i64, i64, vpp, i64p], vp),
        "sluice_load_state": ([i64, ctypes.c_char_p, i64], vp),
        "sluice_merge_states": ([vpp, i64p, i64, ctypes.c_int, vpp, i64p], vp),
        "sluice_info": ([i64, vpp], vp),
        "sluice_metrics": ([i64, i64, vpp], vp),
        "sluice_estimate": ([i64, vpp], vp),
        "sluice_set_epoch": ([i64, i64], vp),
        "sluice_take": ([i64, i64, i64p, i64, vp], vp),
        "sluice_rank_from_env": ([ctypes.c_char_p, vpp], vp),
        "sluice_set_max_procs": ([i64, i64p], vp),
    }
    for name, (args, res) in sigs.items():
        f = getattr(l, name)
        f.argtypes = args
        f.restype = res


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


def set_max_procs(n):
    """Size the library to n cores (n < 1: leave it): the decoders that
    datasets opened from here on run by default, with the Go runtime's
    GOMAXPROCS one more, for the calling thread; returns the cores it was
    sized for."""
    prev = ctypes.c_int64()
    call("sluice_set_max_procs", n, ctypes.byref(prev))
    return prev.value


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
