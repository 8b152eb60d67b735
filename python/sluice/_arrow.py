"""The Arrow C Data Interface, read with ctypes into NumPy arrays.

A batch arrives as one ArrowArray: a struct array whose children are the
columns. Fixed-width columns become NumPy arrays over the batch's own
buffers (no copy); the buffers stay alive while any array made from them
does, and the array's release callback (which hands them back to Go) runs
when the last one goes. Strings and binaries become object arrays (copies
by nature) or, asked for, Strings over the batch's offsets and bytes (no
copy); lists and other variable-width columns become object arrays.

Nulls: a column with nulls in a batch comes with its validity as a bool
array beside it (VALID); float columns hold NaN and datetimes NaT at their
nulls (a copy of that column), others what Arrow leaves there (zeros).
"""

import collections
import ctypes
import decimal
import os
import sys

import numpy as np

from . import _lib, errors


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

_RELEASE_SCHEMA = ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowSchema))

_NULLABLE = 2

# VALID ends the name of a column's validity entry in a batch.
VALID = ".valid"


def _owned(pid):
    """Whether memory exported in process pid may be released here: not in
    a process forked from it, whose copy of the Go runtime is dead (the
    parent still owns the memory)."""
    return pid == _lib.pid()


def check_names(fields):
    """Refuse a schema where a column's validity entry would take the name
    of another column."""
    names = {f.name for f in fields}
    for f in fields:
        if f.name.endswith(VALID) and f.name[:-len(VALID)] in names:
            raise errors.SchemaError(
                "sluice: columns %r and %r: a batch names the validity of %r %r, so the two would "
                "collide; select one of them with columns=[...]"
                % (f.name[:-len(VALID)], f.name, f.name[:-len(VALID)], f.name))
        if f.format == "+s":
            check_names(f.children)


def rows_of(cols):
    """The rows of a mapping of columns: the length of its first column."""
    for v in cols.values():
        if isinstance(v, dict):
            return rows_of(v)
        return len(v)
    return 0


class Field:
    """One field of an exported schema, parsed once per dataset."""

    __slots__ = ("name", "format", "nullable", "children", "dictionary", "dtype")

    def __init__(self, s):
        self.format = s.format.decode()
        self.name = s.name.decode() if s.name else ""
        self.nullable = bool(s.flags & _NULLABLE)
        self.children = [Field(s.children[i].contents) for i in range(s.n_children)]
        self.dictionary = Field(s.dictionary.contents) if s.dictionary else None
        # The NumPy dtype of a fixed-width column, else None: found once
        # here, not for every batch.
        self.dtype = _fixed_dtype(self.format)


def release_schema(s):
    if s.release:
        _RELEASE_SCHEMA(s.release)(ctypes.byref(s))


class Owner:
    """Owns one exported ArrowArray and releases it when the last NumPy
    array over its buffers is gone (queued, and released by the next call
    into the library that takes the queue). Not in a forked child: its Go
    runtime is gone, and the parent still owns the memory."""

    __slots__ = ("array", "pid", "__weakref__")

    def __init__(self, array=None):
        self.array = ArrowArray() if array is None else array
        self.pid = _lib.pid()

    def release(self):
        a = self.array
        if not a.release:
            return
        if not _owned(self.pid):
            a.release = None
            return
        # Released by the next call for batches (or a close, or once
        # enough wait), with others: a call into Go for each array would
        # cost as much as making its columns did, and must wait for a
        # thread of Go's to be free.
        _released.append(a)
        if len(_released) >= _RELEASE_AT:
            release_now()

    def __del__(self):
        # Python runs a signal's handler between any two bytecodes, so a
        # Ctrl-C can land in this finalizer, where its KeyboardInterrupt
        # would be printed as "Exception ignored" and lost while the
        # training loop goes on. Release all the same (a release that ran
        # has set a.release to NULL, as the C data interface requires, so
        # trying again is safe) and keep the interrupt for the iteration,
        # which raises it where the loop sees it (raise_lost_interrupt).
        global lost_interrupt
        while True:
            try:
                self.release()
                break
            except KeyboardInterrupt:
                lost_interrupt = True


# _released holds the arrays whose last view is gone, for Go to release
# (the structs stay alive here until it has): a deque, whose append and
# popleft are atomic, since finalizers run in any thread.
_released = collections.deque()

# _RELEASE_AT is how many arrays wait at most before a finalizer releases
# them itself: a program that stops asking for batches holds no more.
_RELEASE_AT = 64


def released():
    """The arrays waiting for release, taken out: (keep, addresses, n) to
    pass to the library, where keep holds the structs alive until the call
    that releases them returns."""
    if not _released:
        return None, None, 0
    keep = []
    pop = _released.popleft
    try:
        while True:
            keep.append(pop())
    except IndexError:
        pass
    n = len(keep)
    return keep, (ctypes.c_void_p * n)(*[ctypes.addressof(a) for a in keep]), n


def release_now():
    """Release the arrays waiting for it."""
    keep, ptrs, n = released()
    if n:
        _lib.check(_lib.lib().sluice_release(ptrs, n))


if hasattr(os, "register_at_fork"):
    # A forked child's arrays waiting for release are its parent's, whose
    # runtime is not running here (the parent still owns the memory).
    os.register_at_fork(after_in_child=_released.clear)


# lost_interrupt is set when a Ctrl-C landed in a finalizer (Owner.__del__).
lost_interrupt = False

# A Ctrl-C can also land on the finalizer's first line, before its try:
# Python then hands the KeyboardInterrupt to sys.unraisablehook, which
# prints "Exception ignored". This hook keeps that one for the iteration
# and passes everything else to the hook it replaces.
_prev_unraisablehook = sys.unraisablehook


def _unraisable(u):
    global lost_interrupt
    if isinstance(u.exc_value, KeyboardInterrupt) and u.object is Owner.__del__:
        lost_interrupt = True
        return
    _prev_unraisablehook(u)


sys.unraisablehook = _unraisable


def raise_lost_interrupt():
    """Raise the KeyboardInterrupt a finalizer could not, if there is one."""
    global lost_interrupt
    if lost_interrupt:
        lost_interrupt = False
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
    # Intervals as Arrow lays them out (Avro's duration is month_day_nano):
    # structured views, no copy; NumPy has no calendar interval of its own.
    "tiM": "<i4",
    "tiD": [("days", "<i4"), ("milliseconds", "<i4")],
    "tin": [("months", "<i4"), ("days", "<i4"), ("nanoseconds", "<i8")],
}
_TS_UNITS = {"s": "s", "m": "ms", "u": "us", "n": "ns"}


def _fixed_dtype(fmt):
    t = _FIXED.get(fmt)
    if t is not None:
        return np.dtype(t)
    if fmt.startswith("ts") and len(fmt) >= 4 and fmt[3] == ":" and fmt[2] in _TS_UNITS:
        return np.dtype("<M8[%s]" % _TS_UNITS[fmt[2]])
    return None


def _wrap(owner, ptr, n, dtype):
    if n == 0 or not ptr:
        return np.zeros(0, dtype)
    if dtype.names:  # a record: the interface's typestr names its size only
        return np.asarray(_View(owner, ptr, n, dtype.str)).view(dtype)
    return np.asarray(_View(owner, ptr, n, dtype.str))


def _bits(owner, ptr, offset, n):
    """n bits from offset of a bitmap, as bools (a copy)."""
    if n == 0:
        return np.zeros(0, bool)
    nbytes = (offset + n + 7) // 8
    raw = np.asarray(_View(owner, ptr, nbytes, "|u1"))
    return np.unpackbits(raw, bitorder="little")[offset:offset + n].astype(bool)


def validity(owner, a):
    """The validity of array a as bools, or None when it has no nulls."""
    if a.null_count == 0 or a.n_buffers == 0 or not a.buffers[0]:  # a null array has no buffers
        return None
    return _bits(owner, a.buffers[0], a.offset, a.length)


def _fill_nulls(vals, valid):
    """vals with NaN (floats) or NaT (datetimes) where valid is False: a
    copy. Other kinds are left as they are."""
    if valid is None or vals.dtype.kind not in "fMm":
        return vals
    vals = vals.copy()
    vals[~valid] = np.nan if vals.dtype.kind == "f" else np.datetime64("NaT")
    return vals


def convert(field, owner, a, strings=False):
    """Array a of the given field as a NumPy array: a zero-copy view for
    fixed-width types, object arrays for strings (Strings where strings is
    true), lists and decimals, a dict of columns for a struct. Returns
    (values, validity)."""
    dt = field.dtype
    if dt is not None and field.dictionary is None:  # the common case first
        ptr = a.buffers[1]
        vals = _wrap(owner, (ptr + a.offset * dt.itemsize) if ptr else 0, a.length, dt)
        if not a.null_count:
            return vals, None
        valid = validity(owner, a)
        return _fill_nulls(vals, valid), valid
    fmt = field.format
    n, off = a.length, a.offset
    valid = validity(owner, a)
    if field.dictionary is not None:
        idx, _ = convert(_index_field(fmt), owner, a)
        d, dvalid = convert(field.dictionary, owner, a.dictionary.contents, strings)
        if isinstance(d, Strings):
            return d.take(idx, valid), valid
        vals = d[idx.astype(np.intp)] if len(d) else np.zeros(n, d.dtype)
        if valid is not None and vals.dtype == object:
            vals[~valid] = None
        return _fill_nulls(vals, valid), valid
    if fmt == "b":
        return (_bits(owner, a.buffers[1], off, n) if a.buffers[1] else np.zeros(n, bool)), valid
    if fmt == "tdD":
        ptr = a.buffers[1]
        days = _wrap(owner, (ptr + off * 4) if ptr else 0, n, np.dtype("<i4"))
        return days.astype("datetime64[D]"), valid
    if fmt in ("u", "U", "z", "Z"):
        if strings:
            return _strings(owner, a, fmt), valid
        return _binary(owner, a, fmt, valid), valid
    if fmt in ("+l", "+L"):
        return _list(field, owner, a, valid), valid
    if fmt.startswith("w:"):
        return _fixed_binary(owner, a, int(fmt[2:]), strings, valid), valid
    if fmt == "+m":
        return _map(field, owner, a, valid), valid
    if fmt.startswith(("+ud:", "+us:")):
        return _union(field, owner, a), None
    if fmt.startswith("+w:"):
        width = int(fmt[3:])
        child, cvalid = convert(field.children[0], owner, a.children[0].contents)
        if isinstance(child, dict):  # structs: each row a list of dicts
            rows = _values(child, cvalid)
            out = np.empty(n, object)
            for i in range(n):
                if valid is None or valid[i]:
                    out[i] = rows[(off + i) * width:(off + i + 1) * width]
            return out, valid
        child = _nulls_as_none(child, cvalid)
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
            v, ok = convert(ch, owner, c, strings)
            whole = c.length == n and not off
            cols[ch.name] = v if whole else v[off:off + n]
            if ok is not None:
                cols[ch.name + VALID] = ok if whole else ok[off:off + n]
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
        self.dtype = _fixed_dtype(fmt)


def _binary(owner, a, fmt, valid):
    n, off = a.length, a.offset
    odt = np.dtype("<i4" if fmt in ("u", "z") else "<i8")
    if n == 0:
        return np.empty(0, object)
    offs = np.array(_wrap(owner, a.buffers[1] + off * odt.itemsize, n + 1, odt))
    lo, hi = int(offs[0]), int(offs[-1])
    data = ctypes.string_at(a.buffers[2] + lo, hi - lo) if hi > lo else b""
    return _objects(offs - lo, data, fmt in ("u", "U"), valid)


def _objects(offs, data, text, valid):
    """Values as an object array: str (text) or bytes, None where valid is
    False; value i is data[offs[i]:offs[i+1]]."""
    out = np.empty(len(offs) - 1, object)
    starts, ends = offs[:-1].tolist(), offs[1:].tolist()
    if text:
        out[:] = [data[s:e].decode("utf-8") for s, e in zip(starts, ends)]
    else:
        out[:] = [data[s:e] for s, e in zip(starts, ends)]
    if valid is not None:
        out[~valid] = None
    return out


def objects(s, valid=None):
    """A Strings over NumPy arrays as an object array (a copy): what a
    batch of strings="objects" holds."""
    return _objects(np.asarray(s.offsets) - int(s.offsets[0]), s.data.tobytes(), s.text, valid)


class Strings:
    """A string or binary column as Arrow lays it out, without a copy:
    value i is the bytes data[offsets[i]:offsets[i+1]] (UTF-8 text where
    text is true). offsets (int32, or int64 for large strings; n+1 of them,
    not starting at 0 where the batch is a slice) and data (uint8) are NumPy
    arrays, or torch tensors in a batch of tensors. A null is an empty
    value (as sluice writes them); the column's validity entry tells nulls
    apart."""

    __slots__ = ("offsets", "data", "text")

    def __init__(self, offsets, data, text):
        self.offsets, self.data, self.text = offsets, data, text

    def __len__(self):
        return len(self.offsets) - 1

    def _value(self, raw, lo, hi):
        b = raw[lo:hi].tobytes()
        return b.decode("utf-8") if self.text else b

    def __getitem__(self, i):
        offs = np.asarray(self.offsets)
        n = len(offs) - 1
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("sluice: Strings index %d is outside its %d values" % (i, n))
        return self._value(np.asarray(self.data), int(offs[i]), int(offs[i + 1]))

    def cut(self, a, b):
        """Values a to b: their bytes a view of data (no copy), their
        offsets made to start at 0 (a copy of b - a + 1 numbers), so that
        what the values hold is all that a DataLoader worker sends."""
        offs = self.offsets[a:b + 1]
        lo, hi = int(offs[0]), int(offs[-1])
        return Strings(offs - lo, self.data[lo:hi], self.text)

    def cuts(self, bounds):
        """cut(a, b) of each (a, b) of bounds, which follow one another
        (b of one is a of the next). The leading cuts of equal size, a
        window's batches, have their offsets made to start at 0 in one
        NumPy operation over all of them, not one for each."""
        offs = self.offsets
        k = len(bounds)
        if k < 2 or not isinstance(offs, np.ndarray):
            return [self.cut(a, b) for a, b in bounds]
        a0, b0 = bounds[0]
        m = b0 - a0
        e = 1
        while e < k and bounds[e][1] - bounds[e][0] == m:
            e += 1
        if e < 2 or m == 0:
            return [self.cut(a, b) for a, b in bounds]
        step = offs.strides[0]
        # Row i is the offsets of cut i (overlapping windows of offs, one
        # shared at each edge): the subtraction copies them apart.
        win = np.lib.stride_tricks.as_strided(offs[a0:], shape=(e, m + 1), strides=(m * step, step),
                                              writeable=False)
        rows = win - win[:, :1]
        lo = offs[a0:a0 + e * m + 1:m].tolist()
        data, text = self.data, self.text
        out = [Strings(rows[i], data[lo[i]:lo[i + 1]], text) for i in range(e)]
        out += [self.cut(a, b) for a, b in bounds[e:]]
        return out

    def tolist(self):
        """The values as a list of str (bytes for binaries)."""
        offs = np.asarray(self.offsets).tolist()
        raw = np.asarray(self.data)
        return [self._value(raw, offs[i], offs[i + 1]) for i in range(len(offs) - 1)]

    def take(self, idx, valid=None):
        """The values at positions idx, as new Strings (a copy); empty
        where valid is False."""
        offs = np.asarray(self.offsets).astype(np.int64)
        idx = np.asarray(idx).astype(np.intp)
        if len(offs) < 2:  # no values to take: every position is a null
            return Strings(np.zeros(len(idx) + 1, np.int64), np.zeros(0, np.uint8), self.text)
        if valid is not None:
            idx = np.where(valid, idx, 0)
        starts, lens = offs[idx], offs[idx + 1] - offs[idx]
        if valid is not None:
            lens[~valid] = 0
        out = np.zeros(len(idx) + 1, np.int64)
        np.cumsum(lens, out=out[1:])
        # The byte positions of every value, end to end: each value's start
        # repeated over its length, plus the position within it.
        pos = np.repeat(starts - out[:-1], lens) + np.arange(out[-1])
        return Strings(out, np.asarray(self.data)[pos], self.text)

    def as_torch(self, pin=False):
        import torch
        o, d = torch.from_numpy(np.asarray(self.offsets)), torch.from_numpy(np.asarray(self.data))
        if pin:
            o, d = o.pin_memory(), d.pin_memory()
        return Strings(o, d, self.text)

    def pin_memory(self):
        """Pinned copies of the tensors (torch's DataLoader calls this with
        pin_memory=True)."""
        return Strings(self.offsets.pin_memory(), self.data.pin_memory(), self.text)

    def __repr__(self):
        return "sluice.Strings(%d %s)" % (len(self), "strings" if self.text else "binaries")


def _strings(owner, a, fmt):
    n, off = a.length, a.offset
    odt = np.dtype("<i4" if fmt in ("u", "z") else "<i8")
    text = fmt in ("u", "U")
    if n == 0 or not a.buffers[1]:
        return Strings(np.zeros(n + 1, odt), np.zeros(0, np.uint8), text)
    offs = _wrap(owner, a.buffers[1] + off * odt.itemsize, n + 1, odt)
    end = int(offs[-1])
    data = _wrap(owner, a.buffers[2], end, np.dtype(np.uint8)) if a.buffers[2] else np.zeros(0, np.uint8)
    return Strings(offs, data, text)


def _fixed_binary(owner, a, width, strings, valid):
    """A fixed-size binary column (UUIDs, hashes) as a binary column is
    given: Strings over its own bytes (no copy; offsets every width bytes,
    a null's value the bytes the writer left there) or bytes objects."""
    n, off = a.length, a.offset
    odt = np.int32 if (n + 1) * width < 2**31 else np.int64
    offs = np.arange(0, (n + 1) * width, width, dtype=odt) if width else np.zeros(n + 1, odt)
    if n == 0 or not width or not a.buffers[1]:
        data = np.zeros(0, np.uint8)
    else:
        data = _wrap(owner, a.buffers[1] + off * width, n * width, np.dtype(np.uint8))
    if strings:
        return Strings(offs, data, False)
    return _objects(offs, data.tobytes(), False, valid)


def _list(field, owner, a, valid):
    n, off = a.length, a.offset
    odt = np.dtype("<i4" if field.format == "+l" else "<i8")
    out = np.empty(n, object)
    if n == 0:
        return out
    offs = _wrap(owner, a.buffers[1] + off * odt.itemsize, n + 1, odt).tolist()
    child, cvalid = convert(field.children[0], owner, a.children[0].contents)
    # A list of structs is a list of dicts a row; others are arrays.
    child = _values(child, cvalid) if isinstance(child, dict) else _nulls_as_none(child, cvalid)
    for i in range(n):
        if valid is not None and not valid[i]:
            out[i] = None
        else:
            out[i] = child[offs[i]:offs[i + 1]]
    return out


def _nulls_as_none(child, cvalid):
    """Values inside a list with None at their nulls (an object array)
    where they have any: nested values have no validity entry of their own
    to tell their nulls from zeros."""
    if cvalid is None or child.dtype == object:
        return child
    child = child.astype(object)
    child[~cvalid] = None
    return child


def _union(field, owner, a):
    """A union column (ORC's and Avro's unions) as an object array of each
    row's value, whichever member holds it (None for a null member)."""
    n, off = a.length, a.offset
    out = np.empty(n, object)
    if n == 0:
        return out
    codes = [int(c) for c in field.format[4:].split(",")]
    member = {c: i for i, c in enumerate(codes)}
    types = _wrap(owner, a.buffers[0] + off, n, np.dtype("|i1")).tolist()
    dense = field.format.startswith("+ud:")
    # A dense union's rows point into their member; a sparse union's
    # members are as long as the union, its offset theirs as well.
    at = _wrap(owner, a.buffers[1] + off * 4, n, np.dtype("<i4")).tolist() if dense else range(off, off + n)
    members = []
    for i, ch in enumerate(field.children):
        v, ok = convert(ch, owner, a.children[i].contents)
        members.append(_values(v, ok))
    for i in range(n):
        out[i] = members[member[types[i]]][at[i]]
    return out


def _map(field, owner, a, valid):
    """A map column as pyarrow gives one: for each row a list of its
    (key, value) pairs in the order written (a map may repeat a key, and a
    key need not be hashable), None for a null map or value."""
    n, off = a.length, a.offset
    out = np.empty(n, object)
    if n == 0:
        return out
    offs = _wrap(owner, a.buffers[1] + off * 4, n + 1, np.dtype("<i4")).tolist()
    entries = field.children[0]
    cols, _ = convert(entries, owner, a.children[0].contents)
    key, value = (f.name for f in entries.children)
    keys, values = _values(cols[key], cols.get(key + VALID)), _values(cols[value], cols.get(value + VALID))
    for i in range(n):
        if valid is None or valid[i]:
            lo, hi = offs[i], offs[i + 1]
            out[i] = list(zip(keys[lo:hi], values[lo:hi]))
    return out


def _values(col, valid):
    """A converted column as a list of Python values, None at its nulls
    (a struct's rows as dicts)."""
    if isinstance(col, dict):
        fields = [k for k in col if not k.endswith(VALID)]
        rows = [dict(zip(fields, r)) for r in zip(*(_values(col[k], col.get(k + VALID)) for k in fields))]
    elif col.dtype.kind in "Mm":
        rows = list(col)  # tolist() would make nanoseconds ints
    else:
        rows = col.tolist()
    if valid is not None:
        for i in np.flatnonzero(~valid).tolist():
            rows[i] = None
    return rows


def _decimal(owner, a, fmt, valid):
    parts = fmt[2:].split(",")
    scale = int(parts[1])
    width = int(parts[2]) if len(parts) > 2 else 128
    size = width // 8
    n, off = a.length, a.offset
    raw = ctypes.string_at(a.buffers[1] + off * size, n * size) if n else b""
    out = np.empty(n, object)
    for i in range(n):
        if valid is not None and not valid[i]:
            out[i] = None
            continue
        v = int.from_bytes(raw[i * size:(i + 1) * size], "little", signed=True)
        out[i] = decimal.Decimal(v).scaleb(-scale, _EXACT)
    return out


# _EXACT holds every digit of a 256-bit decimal (77 at most): the default
# context's 28 would round a decimal(38, s) silently.
_EXACT = decimal.Context(prec=80)
