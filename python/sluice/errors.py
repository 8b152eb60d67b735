"""Exceptions for the Go side's error kinds.

Every error the library returns carries a kind; ``from_kind`` turns it into
the class below, so ``except sluice.MismatchError`` catches a state of
another dataset whatever wording the message has.
"""


class SluiceError(Exception):
    """Base of every error sluice raises; ``kind`` is the Go side's kind."""

    kind = "error"


class UsageError(SluiceError, ValueError, TypeError):
    """A bad option, argument or call order (checked before Go is called
    where Python can tell)."""

    kind = "usage"


class MismatchError(SluiceError, ValueError):
    """A state taken from another dataset, order or world size; the message
    names the field that differs."""

    kind = "mismatch"


class CorruptError(SluiceError, ValueError):
    """Corrupt or unreadable data, or state bytes that are not a state."""

    kind = "corrupt"


class ChangedError(SluiceError, RuntimeError):
    """A file or object rewritten since the dataset was planned: reads are
    of the version planned only, so the epoch ends here; the message names
    the file and both versions. Open the dataset again to read the new data."""

    kind = "changed"


class SchemaError(SluiceError, ValueError):
    """Files whose schemas differ, or a filter that does not fit them."""

    kind = "schema"


class NotFoundError(SluiceError, FileNotFoundError):
    """A URL that names no data."""

    kind = "not_found"


class EmptyError(SluiceError, ValueError):
    """A mix source with no rows, whose weight no order can honour (an
    empty dataset itself opens and yields no batches)."""

    kind = "empty"


class PositionError(SluiceError, IndexError):
    """A take position outside the epoch."""

    kind = "position"


class BusyError(SluiceError, RuntimeError):
    """A second iteration of one dataset at once."""

    kind = "busy"


class VersionError(SluiceError, ValueError):
    """A state written by a newer sluice."""

    kind = "version"


class ClosedError(SluiceError, ValueError):
    """A dataset used after close()."""

    kind = "closed"


class CancelledError(SluiceError):
    """An operation cancelled (by close(), or Ctrl-C)."""

    kind = "cancelled"


class InternalError(SluiceError, RuntimeError):
    """A bug on the Go side (a panic caught at the boundary)."""

    kind = "internal"


class ForkError(SluiceError, RuntimeError):
    """A dataset or mix used in a process forked from the one that opened
    it: the Go runtime that holds it does not survive fork() (the child
    opens its own, with its own copy of the library)."""

    kind = "fork"


_KINDS = {c.kind: c for c in (
    SluiceError, UsageError, MismatchError, CorruptError, ChangedError, SchemaError, NotFoundError,
    EmptyError, PositionError, BusyError, VersionError, ClosedError, CancelledError,
    InternalError, ForkError)}


def from_kind(kind, message):
    """The exception for a Go error of this kind."""
    return _KINDS.get(kind, SluiceError)(message)
