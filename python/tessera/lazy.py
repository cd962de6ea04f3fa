"""Lazy expressions: build a graph with operators and methods, then ``compute()`` runs it in
as few einsum kernels as Tessera's fuser manages (elementwise chains and their reductions in
one statement; a product with a sum as an operand pulls the sum out, so a sparse factor
limits where the contraction runs).

``explain()`` computes the expression and returns the einsum statements that ran, one per
kernel (the core plans while it runs, so there is nothing to show without running).
"""

import numpy as np

from . import _tessera
from ._tensor import Tensor, _axes, _operand, asarray


class LazyTensor:
    """A node of a lazy expression; ``shape`` and ``dtype`` are known without computing."""

    __array_priority__ = 1000

    def __init__(self, node, shape, dtype):
        self._node = node
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        return f"tessera.LazyTensor(shape={self.shape}, dtype={self.dtype.name}, node={self._node[0]})"

    def _map(self, op, others, reflected=False, result=None):
        nodes = [self] + [_lift(o, self.dtype) for o in others]
        if reflected:
            nodes.reverse()
        shape = np.broadcast_shapes(*[n.shape for n in nodes])
        dtype = result or np.result_type(*[n.dtype for n in nodes])
        if op == "div" and dtype.kind != "f":
            dtype = np.dtype("float64")
        return LazyTensor(("map", op, [n._node for n in nodes]), shape, dtype)

    def __add__(self, o): return self._map("add", [o])
    def __radd__(self, o): return self._map("add", [o], True)
    def __sub__(self, o): return self._map("sub", [o])
    def __rsub__(self, o): return self._map("sub", [o], True)
    def __mul__(self, o): return self._map("mul", [o])
    def __rmul__(self, o): return self._map("mul", [o], True)
    def __truediv__(self, o): return self._map("div", [o])
    def __rtruediv__(self, o): return self._map("div", [o], True)
    def __neg__(self): return self._map("neg", [])
    def __abs__(self): return self._map("abs", [])
    def __lt__(self, o): return self._map("lt", [o], result=np.dtype(bool))
    def __le__(self, o): return self._map("le", [o], result=np.dtype(bool))
    def __gt__(self, o): return self._map("gt", [o], result=np.dtype(bool))
    def __ge__(self, o): return self._map("ge", [o], result=np.dtype(bool))

    def map(self, op, *others):
        """An elementwise operation by name (``add sub mul div minimum maximum lt le gt ge eq
        ne and or neg not abs sqrt exp log``, and the float functions ``sin cos tan asin acos
        atan sinh cosh tanh asinh acosh atanh expm1 log1p log2 log10 round ceil trunc pow
        atan2 hypot copysign logaddexp nextafter``, ``signbit``, the floored ``mod fld`` and
        ``xor lshift rshift``)."""
        float_ops = ("sqrt", "exp", "log", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
                     "cosh", "tanh", "asinh", "acosh", "atanh", "expm1", "log1p", "log2", "log10",
                     "round", "ceil", "trunc", "pow", "atan2", "hypot", "copysign", "logaddexp",
                     "nextafter")
        bool_ops = ("lt", "le", "gt", "ge", "eq", "ne", "and", "or", "not", "signbit")
        result = np.dtype(bool) if op in bool_ops else (np.dtype("float64") if op in float_ops else None)
        return self._map(op, list(others), result=result)

    def _reduce(self, how, axis):
        axes = _axes(axis, self.ndim)
        if axes is None:
            return self
        keep = [d for k, d in enumerate(self.shape) if axes and k not in axes]
        dtype = np.dtype(bool) if how in ("any", "all") else self.dtype
        return LazyTensor(("reduce", how, self._node, axes), keep, dtype)

    def sum(self, axis=None): return self._reduce("sum", axis)
    def prod(self, axis=None): return self._reduce("prod", axis)
    def max(self, axis=None): return self._reduce("max", axis)
    def min(self, axis=None): return self._reduce("min", axis)
    def any(self, axis=None): return self._reduce("any", axis)
    def all(self, axis=None): return self._reduce("all", axis)

    def permute_dims(self, axes):
        axes = [int(a) % self.ndim for a in axes]
        return LazyTensor(("permute", self._node, axes), [self.shape[a] for a in axes], self.dtype)

    def transpose(self, axes=None):
        return self.permute_dims(list(range(self.ndim))[::-1] if axes is None else axes)

    @property
    def T(self):
        return self.transpose()

    def expand_dims(self, axis):
        axis = int(axis) % (self.ndim + 1)
        shape = list(self.shape)
        shape.insert(axis, 1)
        return LazyTensor(("expand_dims", self._node, axis), shape, self.dtype)

    def __matmul__(self, o):
        o = _lift(o, self.dtype)
        shape = self.shape[:-1] + o.shape[1:]
        return LazyTensor(("matmul", self._node, o._node), shape, np.result_type(self.dtype, o.dtype))

    def __rmatmul__(self, o):
        return _lift(o, self.dtype) @ self

    matmul = __matmul__

    def compute(self):
        """The value, as a Tensor."""
        return Tensor(_tessera.lazy_compute(self._node)[0])

    def compute_explained(self):
        """The value and the einsum statements that ran (one per kernel)."""
        t, statements = _tessera.lazy_compute(self._node)
        return Tensor(t), statements

    def explain(self):
        """The einsum statements computing this expression runs, one per kernel."""
        return self.compute_explained()[1]


def _lift(value, like=None):
    if isinstance(value, LazyTensor):
        return value
    if isinstance(value, Tensor):
        return lazy(value)
    raw = _operand(value, like)
    t = Tensor(raw)
    return LazyTensor(("input", raw), t.shape, t.dtype)


def lazy(obj):
    """Start a lazy expression from a tensor (anything :func:`tessera.asarray` takes)."""
    t = asarray(obj)
    return LazyTensor(("input", t._raw), t.shape, t.dtype)
