"""Format constructors: ``Dense(SparseList(Element(0.0)))`` as Python objects.

A format is a chain of levels, root (first index) to leaf, exactly as in Tessera's format
text; ``str(fmt)`` is that text, and every function taking ``format=`` accepts either the
object or the text (``"csr"``, ``"Dense(SparseList(Element(0.0), coord=i32))"``).
:func:`parse` checks a text and returns its canonical spelling.
"""

import numpy as np

from . import _tessera

# NumPy dtype → the type suffix of a leaf's fill in format text (``Element(0, i32)``).
_TYPE_SUFFIX = {
    "float64": None,
    "float32": "f32",
    "int64": None,
    "int32": "i32",
    "int8": "i8",
    "uint8": "u8",
    "uint64": "u64",
    "bool": None,
}


class Level:
    """One level of a format; ``str()`` gives its format text."""

    name = None

    def __init__(self, child=None, **params):
        self.child = child
        self.params = {k: v for k, v in params.items() if v is not None}

    def __str__(self):
        args = [] if self.child is None else [str(self.child)]
        for k, v in self.params.items():
            if isinstance(v, bool):
                v = "true" if v else "false"
            args.append(f"{k}={v}")
        return f"{self.name}({', '.join(args)})"

    def __repr__(self):
        return str(self)

    def __eq__(self, other):
        return str(self) == str(other)

    def __hash__(self):
        return hash(str(self))


def _level(name, doc):
    return type(name, (Level,), {"name": name, "__doc__": doc})


Dense = _level("Dense", "Every coordinate stored.")
SparseList = _level("SparseList", "Sorted stored coordinates (ptr, idx); ``coord='i32'`` for 4-byte indices.")
SparseSliceList = _level(
    "SparseSliceList",
    "Sliced ELLPACK: the fibers of 8 neighbouring positions interleaved entry by entry.",
)
SparsePoint = _level("SparsePoint", "At most one stored coordinate per fiber.")
SparseBlockList = _level("SparseBlockList", "Blocks of consecutive stored coordinates.")
SparseBand = _level("SparseBand", "One band of stored coordinates per fiber.")
SparseByteMap = _level("SparseByteMap", "A flag per slot plus the sorted touched slots.")
SparseDict = _level("SparseDict", "A hash table, sorted for reading.")
RunList = _level("RunList", "Runs covering every coordinate.")
SparseRunList = _level("SparseRunList", "Runs with fill gaps.")
SparseInterval = _level("SparseInterval", "At most one run per fiber.")


class SparseCOO(Level):
    """``SparseCOO{n}``: n coordinates per stored entry."""

    name = "SparseCOO"

    def __init__(self, n, child=None):
        super().__init__(child)
        self.n = n

    def __str__(self):
        return f"SparseCOO{{{self.n}}}({self.child})"


def _float_text(value):
    value = float(value)
    if value != value:
        return "NaN"
    if abs(value) == float("inf"):
        return "Inf" if value > 0 else "-Inf"
    return repr(value)


def _literal(value, dtype):
    if dtype is None:
        if isinstance(value, (bool, np.bool_)):
            return "true" if value else "false"
        if isinstance(value, (float, np.floating)):
            return _float_text(value)
        return str(int(value))
    dtype = np.dtype(dtype).name
    if dtype == "bool":
        return "true" if value else "false"
    text = _float_text(value) if dtype.startswith("float") else str(int(value))
    suffix = _TYPE_SUFFIX.get(dtype)
    return text if suffix is None else f"{text}, {suffix}"


class Element(Level):
    """Leaf: one value per position; ``fill`` everywhere else. ``dtype`` picks the element
    type (default: float64 for a float fill, int64 for an int, bool for a bool)."""

    name = "Element"

    def __init__(self, fill=0.0, dtype=None):
        super().__init__()
        self.fill = fill
        self.dtype = dtype

    def __str__(self):
        return f"Element({_literal(self.fill, self.dtype)})"


class Pattern(Level):
    """Leaf: stored positions are True, everything else False."""

    name = "Pattern"

    def __str__(self):
        return "Pattern()"


def _leaf(dtype):
    dtype = np.dtype(dtype)
    zero = False if dtype == np.bool_ else (0.0 if dtype.kind == "f" else 0)
    return Element(zero, dtype)


def dense(rank=1, dtype="float64"):
    """``Dense(...Dense(Element(0)))`` of ``rank`` levels."""
    fmt = _leaf(dtype)
    for _ in range(rank):
        fmt = Dense(fmt)
    return fmt


def csr(dtype="float64", index="int64"):
    """Compressed rows: ``Dense(SparseList(Element(0)))``; ``index="int32"`` stores 4-byte
    indices as SciPy does."""
    coord = "i32" if np.dtype(index) == np.int32 else None
    return Dense(SparseList(_leaf(dtype), coord=coord))


def dcsr(dtype="float64"):
    """Doubly compressed rows: ``SparseList(SparseList(Element(0)))``."""
    return SparseList(SparseList(_leaf(dtype)))


def sparse_vector(dtype="float64"):
    """``SparseList(Element(0))``."""
    return SparseList(_leaf(dtype))


def parse(text, rank, dtype=None):
    """The canonical text of a format (``parse("csr", 2)`` is
    ``"Dense(SparseList(Element(0.0)))"``); raises FormatError on a bad one."""
    return _tessera.parse_format(str(text), rank, None if dtype is None else np.dtype(dtype).name)


__all__ = [
    "Level", "Dense", "SparseList", "SparseSliceList", "SparsePoint", "SparseBlockList", "SparseBand",
    "SparseByteMap", "SparseDict", "RunList", "SparseRunList", "SparseInterval", "SparseCOO",
    "Element", "Pattern", "dense", "csr", "dcsr", "sparse_vector", "parse",
]
