"""The Arrow C Data Interface, read with ctypes into NumPy arrays.

A batch arrives as one ArrowArray: a struct array whose children are the
columns. Fixed-width columns become NumPy arrays over the batch's own
buffers (no copy); the buffers stay alive while any array made from them
does, and the array's release callback (which hands them back to Go) runs
when the last one goes. Strings, lists and other variable-width columns
become object arrays, which are copies by nature.
"""

import ctypes
import decimal
import os
import sys

import numpy as np

from . import _lib


class ArrowSchema(ctypes.Structure):
    pass


ArrowSchema._fields_ = [
    ("format", ctypes.c_char_p),
    ("name", ctypes.c_char_p),
    ("metadata", ctypes.c_void_p),
    ("flags", ctypes.c_int64),
    ("n_children", ctypes.c_int64),
    ("children", ctypes.POINTER(ctypes.POINTER(ArrowSchema))),
    ("dictionary", ctypes.POINTER(ArrowSchema)),
    ("release", ctypes.c_void_p),
    ("private_data", ctypes.c_void_p),
]


class ArrowArray(ctypes.Structure):
    pass


ArrowArray._fields_ = [
    ("length", ctypes.c_int64),
    ("null_count", ctypes.c_int64),
    ("offset", ctypes.c_int64),
    ("n_buffers", ctypes.c_int64),
    ("n_children", ctypes.c_int64),
    ("buffers", ctypes.POINTER(ctypes.c_void_p)),
    ("children", ctypes.POINTER(ctypes.POINTER(ArrowArray))),
    ("dictionary", ctypes.POINTER(ArrowArray)),
    ("release", ctypes.c_void_p),
    ("private_data", ctypes.c_void_p),
]

_RELEASE_ARRAY = ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowArray))
_RELEASE_SCHEMA = ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowSchema))

_NULLABLE = 2


class Field:
    """One field of an exported schema, parsed once per dataset."""

    __slots__ = ("name", "format", "nullable", "children", "dictionary")

    def __init__(self, s):
        self.format = s.format.decode()
        self.name = s.name.decode() if s.name else ""
        self.nullable = bool(s.flags & _NULLABLE)
        self.children = [Field(s.children[i].contents) for i in range(s.n_children)]
        self.dictionary = Field(s.dictionary.contents) if s.dictionary else None


def release_schema(s):
    if s.release:
        _RELEASE_SCHEMA(s.release)(ctypes.byref(s))


class Owner:
    """Owns one exported ArrowArray and releases it when the last NumPy
    array over its buffers is gone. Not in a forked child: its Go runtime is
    gone, and the parent still owns the memory."""

    __slots__ = ("array", "pid", "__weakref__")

    def __init__(self):
        self.array = ArrowArray()
        self.pid = os.getpid()

    def release(self):
        a = self.array
        if a.release and self.pid == os.getpid() and not _lib.forked():
            _RELEASE_ARRAY(a.release)(ctypes.byref(a))
        a.release = None

    def __del__(self):
        # Python runs a signal's handler between any two bytecodes, so a
        # Ctrl-C can land in this finalizer, where its KeyboardInterrupt
        # would be printed as "Exception ignored" and lost while the
        # training loop goes on. Release all the same (a release that ran
        # has set a.release to NULL, as the C data interface requires, so
        # trying again is safe) and keep the interrupt for the iteration,
        # which raises it where the loop sees it (raise_lost_interrupt).
        global _lost_interrupt
        while True:
            try:
                self.release()
                break
            except KeyboardInterrupt:
                _lost_interrupt = True


# _lost_interrupt is set when a Ctrl-C landed in a finalizer (Owner.__del__).
_lost_interrupt = False

# A Ctrl-C can also land on the finalizer's first line, before its try:
# Python then hands the KeyboardInterrupt to sys.unraisablehook, which
# prints "Exception ignored". This hook keeps that one for the iteration
# and passes everything else to the hook it replaces.
_prev_unraisablehook = sys.unraisablehook


def _unraisable(u):
    global _lost_interrupt
    if isinstance(u.exc_value, KeyboardInterrupt) and u.object is Owner.__del__:
        _lost_interrupt = True
        return
    _prev_unraisablehook(u)


sys.unraisablehook = _unraisable


def raise_lost_interrupt():
    """Raise the KeyboardInterrupt a finalizer could not, if there is one."""
    global _lost_interrupt
    if _lost_interrupt:
        _lost_interrupt = False
        raise KeyboardInterrupt


class _View:
    """A NumPy view's base: holds the owner and describes the memory."""

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, owner, ptr, n, typestr):
        self.owner = owner
        self.__array_interface__ = {"data": (ptr, False), "shape": (n,), "typestr": typestr, "version": 3}


_FIXED = {
    "c": "|i1", "C": "|u1", "s": "<i2", "S": "<u2", "i": "<i4", "I": "<u4",
    "l": "<i8", "L": "<u8", "e": "<f2", "f": "<f4", "g": "<f8",
    "tdm": "<M8[ms]",
    "tts": "<i4", "ttm": "<i4", "ttu": "<m8[us]", "ttn": "<m8[ns]",
    "tDs": "<m8[s]", "tDm": "<m8[ms]", "tDu": "<m8[us]", "tDn": "<m8[ns]",
}
_TS_UNITS = {"s": "s", "m": "ms", "u": "us", "n": "ns"}


def _fixed_dtype(fmt):
    t = _FIXED.get(fmt)
    if t is not None:
        return np.dtype(t)
    if fmt.startswith("ts") and len(fmt) >= 4 and fmt[3] == ":":
        return np.dtype("<M8[%s]" % _TS_UNITS[fmt[2]])
    return None


def _wrap(owner, ptr, n, dtype):
    if n == 0 or not ptr:
        return np.zeros(0, dtype)
    v = np.asarray(_View(owner, ptr, n * dtype.itemsize, "|u1"))
    return v.view(dtype)


def _bits(owner, ptr, offset, n):
    """n bits from offset of a bitmap, as bools (a copy)."""
    if n == 0:
        return np.zeros(0, bool)
    nbytes = (offset + n + 7) // 8
    raw = np.asarray(_View(owner, ptr, nbytes, "|u1"))
    return np.unpackbits(raw, bitorder="little")[offset:offset + n].astype(bool)


def validity(owner, a):
    """The validity of array a as bools, or None when it has no nulls."""
    if a.null_count == 0 or not a.buffers[0]:
        return None
    return _bits(owner, a.buffers[0], a.offset, a.length)


def convert(field, owner, a):
    """Array a of the given field as a NumPy array: a zero-copy view for
    fixed-width types, object arrays for strings, lists and decimals, a dict
    of columns for a struct. Returns (values, validity)."""
    fmt = field.format
    n, off = a.length, a.offset
    valid = validity(owner, a)
    if field.dictionary is not None:
        idx, _ = convert(_index_field(fmt), owner, a)
        d, dvalid = convert(field.dictionary, owner, a.dictionary.contents)
        vals = d[idx.astype(np.intp)] if len(d) else np.zeros(n, d.dtype)
        if valid is not None and vals.dtype == object:
            vals[~valid] = None
        return vals, valid
    dt = _fixed_dtype(fmt)
    if dt is not None:
        ptr = a.buffers[1]
        return _wrap(owner, (ptr + off * dt.itemsize) if ptr else 0, n, dt), valid
    if fmt == "b":
        return (_bits(owner, a.buffers[1], off, n) if a.buffers[1] else np.zeros(n, bool)), valid
    if fmt == "tdD":
        ptr = a.buffers[1]
        days = _wrap(owner, (ptr + off * 4) if ptr else 0, n, np.dtype("<i4"))
        return days.astype("datetime64[D]"), valid
    if fmt in ("u", "U", "z", "Z"):
        return _binary(owner, a, fmt, valid), valid
    if fmt in ("+l", "+L"):
        return _list(field, owner, a, valid), valid
    if fmt.startswith("+w:"):
        width = int(fmt[3:])
        child, _ = convert(field.children[0], owner, a.children[0].contents)
        vals = child[off * width:(off + n) * width]
        if vals.dtype != object:
            return vals.reshape(n, width), valid
        out = np.empty(n, object)
        for i in range(n):
            out[i] = None if valid is not None and not valid[i] else vals[i * width:(i + 1) * width]
        return out, valid
    if fmt == "+s":
        cols = {}
        for i, ch in enumerate(field.children):
            c = a.children[i].contents
            v, _ = convert(ch, owner, c)
            cols[ch.name] = v[off:off + n] if c.length != n or off else v
        return cols, valid
    if fmt == "n":
        return np.full(n, None, object), np.zeros(n, bool)
    if fmt.startswith("d:"):
        return _decimal(owner, a, fmt, valid), valid
    raise TypeError("sluice: column %r has Arrow type %r, which has no NumPy conversion here: "
                    "use Dataset.arrow_batches() (pyarrow)" % (field.name, fmt))


class _index_field:
    """The indices of a dictionary-encoded field."""

    def __init__(self, fmt):
        self.format, self.name, self.dictionary, self.children = fmt, "", None, []


def _binary(owner, a, fmt, valid):
    n, off = a.length, a.offset
    odt = np.dtype("<i4" if fmt in ("u", "z") else "<i8")
    out = np.empty(n, object)
    if n == 0:
        return out
    offs = np.array(_wrap(owner, a.buffers[1] + off * odt.itemsize, n + 1, odt))
    lo, hi = int(offs[0]), int(offs[-1])
    data = ctypes.string_at(a.buffers[2] + lo, hi - lo) if hi > lo else b""
    offs -= lo
    text = fmt in ("u", "U")
    starts, ends = offs[:-1].tolist(), offs[1:].tolist()
    if text:
        vals = [data[s:e].decode("utf-8") for s, e in zip(starts, ends)]
    else:
        vals = [data[s:e] for s, e in zip(starts, ends)]
    out[:] = vals
    if valid is not None:
        out[~valid] = None
    return out


def _list(field, owner, a, valid):
    n, off = a.length, a.offset
    odt = np.dtype("<i4" if field.format == "+l" else "<i8")
    out = np.empty(n, object)
    if n == 0:
        return out
    offs = _wrap(owner, a.buffers[1] + off * odt.itemsize, n + 1, odt).tolist()
    child, cvalid = convert(field.children[0], owner, a.children[0].contents)
    if cvalid is not None and child.dtype != object:
        child = child.astype(object)
        child[~cvalid] = None
    for i in range(n):
        if valid is not None and not valid[i]:
            out[i] = None
        else:
            out[i] = child[offs[i]:offs[i + 1]]
    return out


def _decimal(owner, a, fmt, valid):
    parts = fmt[2:].split(",")
    scale = int(parts[1])
    width = int(parts[2]) if len(parts) > 2 else 128
    size = width // 8
    n, off = a.length, a.offset
    raw = ctypes.string_at(a.buffers[1] + off * size, n * size) if n else b""
    out = np.empty(n, object)
    q = decimal.Decimal(1).scaleb(-scale)
    for i in range(n):
        if valid is not None and not valid[i]:
            out[i] = None
            continue
        v = int.from_bytes(raw[i * size:(i + 1) * size], "little", signed=True)
        out[i] = decimal.Decimal(v).scaleb(-scale).quantize(q) if scale >= 0 else decimal.Decimal(v).scaleb(-scale)
    return out
