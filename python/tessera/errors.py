"""Exceptions raised by Tessera, one class per kind of error of the Rust core.

Every class derives from :class:`TesseraError` and from the built-in exception a Python user
would expect (``ValueError`` for a bad program or format, ``RuntimeError`` for a kernel fault,
``MemoryError`` for the memory limit...), so both ``except TesseraError`` and ``except
ValueError`` work. The message is the core's, word for word; the attributes name the place:
``line`` and ``column`` (1-based, in the program text) when the error has a program position,
``tensor`` when it names a tensor, ``path`` for file errors, and ``kernel_kind`` (the
``KernelErrorKind`` variant, e.g. ``"OutOfBounds"``) for faults of a running kernel.
"""


class TesseraError(Exception):
    """Base class of every Tessera error."""

    line = None
    column = None
    tensor = None
    path = None
    kernel_kind = None

    @property
    def place(self):
        """``"line:column"`` of the program position, else the tensor or path named, else None."""
        if self.line is not None:
            return f"{self.line}:{self.column}"
        return self.tensor or self.path


class ParseError(TesseraError, ValueError):
    """Program text that does not parse (``line``/``column`` point at it)."""


class ProgramError(TesseraError, ValueError):
    """A well-formed program that is wrong: unknown name, wrong number of indices, ..."""


class DimensionMismatchError(ProgramError):
    """Extents that do not agree (shapes of operands, loop bounds)."""


class LifecycleError(ProgramError):
    """A tensor read and written in the same scope, or used in the wrong mode."""


class RaceError(ProgramError):
    """Writes under a parallel loop that could race, refused before anything runs."""


class ScheduleError(ProgramError):
    """A schedule command that does not apply or would change the results."""


class FormatError(TesseraError, ValueError):
    """A format string that does not parse or does not fit the tensor."""


class FileError(TesseraError, OSError):
    """A malformed or unreadable file."""


class TensorError(TesseraError, ValueError):
    """A tensor whose storage or values are invalid (e.g. an index out of bounds)."""


class IndexOutOfBoundsError(TensorError, IndexError):
    """An index outside a tensor's shape (``t[2, 0]`` of a 2 × 3 tensor): a ``TensorError``,
    and an ``IndexError`` as Python's sequences raise (which also ends ``for v in t``)."""


class KernelError(TesseraError, RuntimeError):
    """A fault of a running kernel (an index out of bounds, writes out of order, ...)."""


class UnsupportedError(TesseraError, NotImplementedError):
    """Something this version of Tessera cannot generate."""


class MemoryLimitError(TesseraError, MemoryError):
    """A tensor too large for the memory limit, refused before anything was allocated."""


class UsageError(TesseraError, ValueError):
    """A bad argument to a function of this package (an unknown output, backend, ...)."""


class BackendError(TesseraError, RuntimeError):
    """The backend failed to compile generated code (a compiler bug, reported not hidden)."""


class ContinuityError(TesseraError, ValueError):
    """A derivative of a reconstructed field beyond its continuity class."""


class UnsupportedDtypeError(TesseraError, TypeError):
    """A NumPy dtype Tessera has no element type for (complex, float16, int16, object...)."""


__all__ = [name for name in dir() if name.endswith("Error")]
