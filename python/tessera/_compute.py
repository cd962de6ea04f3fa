"""Running programs (``run``, ``code``), ``einsum``, and the operations as functions.

Each call releases the GIL while Tessera compiles and runs its kernels, so other Python
threads run meanwhile. Kernels are cached per thread by program and formats: calling again
with new data of the same formats compiles nothing.
"""


import threading

import builtins

import numpy as np

from . import _tessera
from ._tensor import Tensor, _axes, _operand, _standard_dtype, asarray


def _tensors(kwargs):
    # Tensors as they are, without `asarray`'s checks: a call's fixed cost matters on small
    # inputs (a `run` in a loop over images).
    return {name: value._raw if type(value) is Tensor else asarray(value)._raw
            for name, value in kwargs.items()}


def _outs(out):
    if out is None:
        return {}, None
    if isinstance(out, str):
        return {out: None}, "one"
    if isinstance(out, dict):
        return {n: (None if f is None or isinstance(f, np.ndarray) else str(f)) for n, f in out.items()}, "dict"
    names = list(out)
    return {n: None for n in names}, names


def _shaped(result, kind, arrays=None):
    """The outputs as ``out`` named them; those written into ``arrays`` (name → NumPy array)
    are those arrays."""
    result = {n: Tensor(t) for n, t in result.items()}
    if arrays:
        result.update(arrays)
    if kind == "one":
        return next(iter(result.values()))
    if kind == "dict" or kind is None:
        return result
    return tuple(result[n] for n in kind)


def _check_out_array(name, a):
    if isinstance(a, Tensor):
        raise TypeError(f"out={name}: Tessera tensors are immutable; pass a NumPy array "
                        "(np.empty(shape, dtype)) to be written in place")
    if not isinstance(a, np.ndarray):
        raise TypeError(f"out={name}: expected a NumPy array, not {type(a).__name__}")
    return a


def _out_arrays(out, outputs):
    """``out=`` of a kernel call (NumPy's convention): one array for a kernel with one output,
    a tuple with an array or None per output (in the kernel's order), or a dict name → array.
    Returns name → array."""
    if out is None:
        return {}
    if isinstance(out, dict):
        arrays = {n: a for n, a in out.items() if a is not None}
    elif isinstance(out, tuple):
        if len(out) != len(outputs):
            raise ValueError(f"out=: {len(out)} arrays for {len(outputs)} outputs {list(outputs)}")
        arrays = {n: a for n, a in zip(outputs, out) if a is not None}
    elif len(outputs) == 1:
        arrays = {outputs[0]: out}
    else:
        raise TypeError(f"out=: this kernel has {len(outputs)} outputs {list(outputs)}: "
                        "pass a tuple or a dict of arrays")
    for n, a in arrays.items():
        _check_out_array(n, a)
    return arrays


# `run`'s kernels, per thread: a Kernel's compiled state lives in the thread that calls it
# (its Rust side), so a thread keeps the kernels it made. Bounded: cleared at _RUNS_MAX.
_RUNS = threading.local()
_RUNS_MAX = 256


def _all_str(names):
    # (This module's `all` is the tensor reduction.)
    for n in names:
        if type(n) is not str:
            return False
    return True


def _run_kernels():
    try:
        return _RUNS.kernels
    except AttributeError:
        _RUNS.kernels = {}
        return _RUNS.kernels


def run(program, out=None, shapes=None, backend="tiered", **tensors):
    """Run a loop program on tensors given by name (NumPy arrays, SciPy matrices, Tensors,
    scalars; converted by :func:`asarray`). ``out`` names the outputs to return: one name
    (returns a Tensor), a list of names (returns a tuple) or a dict name → format (returns a
    dict). Outputs not given as inputs are created dense float64 unless a format is named;
    their shapes come from the program, or from ``shapes={name: shape}``. In a dict, a NumPy
    array instead of a format is written in place and returned (a dense output of its dtype
    and shape; see :meth:`Kernel.__call__`). ``backend`` is ``"tiered"`` (default), ``"jit"``
    or ``"c"``."""
    if shapes is None and type(program) is str:
        # A call that names its outputs by one name or a list of names is a Kernel kept per
        # thread by (program text, outputs, backend): from the second call on, one dict
        # lookup (CPython caches a str's hash, and compares an identical object without
        # reading it) and the kernel's one crossing into Rust. Equal texts in different
        # objects are equal keys, so they share the kernel.
        if type(out) is str:
            key = (program, out, backend)
        elif type(out) is list and _all_str(out):
            key = (program, tuple(out), backend)
        else:
            key = None
        if key is not None:
            kernels = _run_kernels()
            kernel = kernels.get(key)
            if kernel is None:
                if len(kernels) >= _RUNS_MAX:
                    kernels.clear()
                kernel = compile(program, out=out, backend=backend, **tensors)
                kernels[key] = kernel
            return kernel._call(tensors)
    spec, kind = _outs(out)
    arrays = {}
    if kind == "dict":
        arrays = {n: _check_out_array(n, a) for n, a in out.items() if isinstance(a, (np.ndarray, Tensor))}
    shapes = {n: [int(d) for d in s] for n, s in (shapes or {}).items()}
    raw = _tessera.run(str(program), _tensors(tensors), spec, shapes, backend, arrays or None)
    return _shaped(raw, kind, arrays)


class Kernel(_tessera.RawKernel):
    """A program compiled for the formats of some tensors (:func:`compile`). Calling it with
    tensors of those formats runs the compiled code at once: no parsing, no kernel lookup,
    shapes inferred again only when they change. Tensors of other formats are accepted too
    (the kernel is compiled for them, and they become the ones it expects).

    ``kernel(out=None, **tensors)`` runs on new tensors and returns what :func:`run` would.
    ``out=`` writes outputs into NumPy arrays in place instead of allocating them (NumPy's
    convention: one array for a kernel with one output, else a tuple with an array or None
    per output in :attr:`outputs` order, or a dict name → array; the arrays are returned in
    the outputs' places). An array must be writable, C-contiguous, of the output's shape and
    dtype (no casting), for a dense output, and share no memory with an input or another
    ``out`` array; else ``TypeError`` (dtype, not an array) or ``ValueError``. Its contents
    do not matter: the program's declaration fills it.

    The call itself is the Rust type's ``__call__`` (no Python frame): calls on Tensors with
    outputs returned or written into arrays (one array, or a dict or tuple of them) are
    served there, and a call like the last one runs the kernel with its tensors by
    position; every other call comes to :meth:`_call`.
    """

    __slots__ = ("_kind", "_single")

    def __init__(self, program, tensors, spec, shapes, backend, kind):
        # (The Rust type's constructor compiled the kernel from the same arguments.)
        self._kind = kind
        # The output's name when a call returns one tensor (out= then is one array).
        self._single = self.outputs[0] if kind == "one" else None

    @property
    def _raw(self):
        # The extension's kernel object is this one (the methods `_call` uses are its own).
        return self

    def _call(self, tensors, out=None):
        # `tensors` is a dict name -> value (the call's keywords; `run` passes its own).
        if out is None:
            # One crossing into Rust for the common cases (the per-call cost decides small
            # inputs); None when a value is not a Tensor yet.
            if self._single is not None:
                raw = self._raw.call_single(tensors)
                if raw is not None:
                    return Tensor(raw)
            else:
                made = self._raw.call_tensors(tensors)
                if made is not None:
                    return _shaped(made, self._kind)
        elif self._single is not None and type(out) is np.ndarray:
            # The same for one output written into an array (False: a value is not a Tensor).
            if self._raw.call_out(tensors, out):
                return out
        elif self._single is None:
            # Arrays for some of several outputs (a workspace declared as an output, say):
            # one crossing too, by position when the call is like the last one.
            order = self._kind if isinstance(self._kind, list) else self._raw.outputs
            arrays = _out_arrays(out, order)
            # (`all` and `any` are this module's array reductions, not the builtins.)
            if builtins.all(type(a) is np.ndarray for a in arrays.values()):
                made = self._raw.call_arrays(tensors, arrays)
                if made is not None:
                    return _shaped(made, self._kind, arrays)
        return self._converted(tensors, out)

    def _converted(self, tensors, out):
        # The general path: values converted to Tensors, `out=` in any of its forms.
        raws = {}
        for name, value in tensors.items():
            raws[name] = value._raw if type(value) is Tensor else asarray(value)._raw
        if out is None:
            return _shaped(self._raw.call(raws), self._kind)
        if self._single is not None and type(out) is np.ndarray:
            self._raw.call(raws, {self._single: out})
            return out
        order = self._kind if isinstance(self._kind, list) else self._raw.outputs
        arrays = _out_arrays(out, order)
        return _shaped(self._raw.call(raws, arrays), self._kind, arrays)

    def bind(self, out=None, **tensors):
        """This call kept: ``bound = kernel.bind(out=y, A=A, x=x)``, then ``bound()`` runs
        ``kernel(out=y, A=A, x=x)`` again on the same objects' current contents and returns
        what that call returns. Values that are not Tensors are converted once, here
        (:func:`asarray`: zero-copy where the layouts match, so writes to a NumPy ``x`` are
        seen by the next call). A kernel with one output, returned or written into one
        NumPy array, keeps its arguments in place after the first call: later calls only
        check that the ``out`` array was not changed in place (memory, shape, dtype, flags),
        the cheapest way to call a small kernel again and again. Every other call, and any
        change, runs as the keyword call would (same checks, same errors). While the bound
        call lives its ``out`` array cannot be resized (NumPy refuses)."""
        bound = {n: v if type(v) is Tensor else asarray(v) for n, v in tensors.items()}
        return BoundKernel(self, bound, out)

    def __repr__(self):
        return f"<tessera.Kernel outputs={self.outputs}>"


class BoundKernel(_tessera.RawBound):
    """A kernel call kept with its arguments (:meth:`Kernel.bind`); calling it, with no
    arguments, runs the kernel on them again. ``.kernel``, ``.tensors`` and ``.out`` are
    what it was bound to."""

    __slots__ = ()

    def __repr__(self):
        return f"<tessera.BoundKernel {sorted(self.tensors)} out={'array' if self.out is not None else None}>"


def compile(program, out=None, shapes=None, backend="tiered", **tensors):
    """Compile a loop program for tensors like ``tensors`` (the arguments of :func:`run`) and
    return a :class:`Kernel`; ``kernel(**new_tensors)`` then runs it and returns what
    ``run`` would. Errors in the program or the tensors are raised here."""
    spec, kind = _outs(out)
    shapes = {n: [int(d) for d in s] for n, s in (shapes or {}).items()}
    return Kernel(str(program), _tensors(tensors), spec, shapes, backend, kind)


def code(program, out=None, shapes=None, backend="jit", **tensors):
    """The loop IR (``backend="c"``: the C source) that :func:`run` compiles for these
    tensors' formats."""
    spec, _ = _outs(out)
    shapes = {n: [int(d) for d in s] for n, s in (shapes or {}).items()}
    return _tessera.code(str(program), _tensors(tensors), spec, shapes, backend)


def einsum(spec, format=None, out=None, **tensors):
    """One index-notation statement, ``einsum("y[i] += A[i, j] * x[j]", A=A, x=x)``: Tessera
    plans the loop order and the output format from the inputs' formats (``format=`` fixes
    the output's). ``out=`` a NumPy array writes the (dense) output into it in place and
    returns it (as :meth:`Kernel.__call__`'s ``out=``)."""
    names = list(tensors)
    # Tensors as they are (`asarray` returns them unchanged, after its checks of arguments
    # an einsum does not pass): a call's fixed cost matters on small inputs.
    raws = [v._raw if type(v) is Tensor else asarray(v)._raw for v in tensors.values()]
    fmt = None if format is None else str(format)
    if out is None:
        return Tensor(_tessera.einsum(spec, names, raws, fmt))
    if fmt is not None:
        raise ValueError("einsum: give format= or out=, not both (out= writes a dense array)")
    _tessera.einsum(spec, names, raws, None, _check_out_array("out", out))
    return out


def _map(op, *args):
    like = next((a.dtype for a in args if isinstance(a, Tensor)), None)
    out = Tensor(_tessera.elementwise(op, [_operand(a, like) for a in args]))
    return _standard_dtype(out, args, keep_int_power=op == "pow")


def add(a, b): return _map("add", a, b)
def subtract(a, b): return _map("sub", a, b)
def multiply(a, b): return _map("mul", a, b)
def divide(a, b): return _map("div", a, b)
def minimum(a, b): return _map("minimum", a, b)
def maximum(a, b): return _map("maximum", a, b)
def less(a, b): return _map("lt", a, b)
def less_equal(a, b): return _map("le", a, b)
def greater(a, b): return _map("gt", a, b)
def greater_equal(a, b): return _map("ge", a, b)
def equal(a, b): return _map("eq", a, b)
def not_equal(a, b): return _map("ne", a, b)
def logical_and(a, b): return _map("and", a, b)
def logical_or(a, b): return _map("or", a, b)
def logical_not(a): return _map("not", a)
def negative(a): return _map("neg", a)
def abs(a):
    # Unsigned values are their own magnitude (the core reads a uint64 at or above 2**63 as
    # a negative int64).
    if isinstance(a, Tensor) and a.dtype.kind == "u":
        return a
    return _map("abs", a)
def sqrt(a): return _map("sqrt", a)
def exp(a): return _map("exp", a)
def log(a): return _map("log", a)
def floor(a): return _map("floor", a)


# The float functions (Rust's, the same on every backend): integers are converted to float.
def sin(a): return _map("sin", a)
def cos(a): return _map("cos", a)
def tan(a): return _map("tan", a)
def asin(a): return _map("asin", a)
def acos(a): return _map("acos", a)
def atan(a): return _map("atan", a)
def sinh(a): return _map("sinh", a)
def cosh(a): return _map("cosh", a)
def tanh(a): return _map("tanh", a)
def asinh(a): return _map("asinh", a)
def acosh(a): return _map("acosh", a)
def atanh(a): return _map("atanh", a)
def expm1(a): return _map("expm1", a)
def log1p(a): return _map("log1p", a)
def log2(a): return _map("log2", a)
def log10(a): return _map("log10", a)
def round(a): return _map("round", a)
def ceil(a): return _map("ceil", a)
def trunc(a): return _map("trunc", a)
def pow(a, b): return _map("pow", a, b)
def atan2(a, b): return _map("atan2", a, b)
def hypot(a, b): return _map("hypot", a, b)
def copysign(a, b): return _map("copysign", a, b)
def logaddexp(a, b): return _map("logaddexp", a, b)
def nextafter(a, b): return _map("nextafter", a, b)
def signbit(a): return _map("signbit", a)


# Floored division as NumPy's (Python's `//` and `%`): exact on integers, where a zero divisor
# gives 0 (NumPy's result, without its warning); on floats NumPy's `floor_divide` and
# `remainder` bit for bit.
def remainder(a, b): return _map("mod", a, b)
def floor_divide(a, b): return _map("fld", a, b)


# Bitwise on integers, logical on bools; shifts as NumPy's: an amount that is negative or at
# least the width gives 0 (`<<`) or the sign (`>>`).
def bitwise_and(a, b): return _map("and", a, b)
def bitwise_or(a, b): return _map("or", a, b)
def bitwise_xor(a, b): return _map("xor", a, b)
def bitwise_invert(a): return _map("not", a)
def bitwise_left_shift(a, b): return _map("lshift", a, b)
def bitwise_right_shift(a, b): return _map("rshift", a, b)


def where(condition, a, b):
    """``a`` where ``condition`` holds, else ``b`` (NumPy's ``where``, broadcast; one kernel:
    ``ifelse``). A sparse condition keeps its structure where ``b`` is its fill."""
    like = next((x.dtype for x in (a, b) if isinstance(x, Tensor)), None)
    out = Tensor(_tessera.elementwise("where", [_operand(condition), _operand(a, like), _operand(b, like)]))
    return _standard_dtype(out, (a, b))


def _reduce(how, a, axis):
    a = asarray(a)
    axes = _axes(axis, a.ndim)
    return a if axes is None else Tensor(_tessera.reduce(how, a._raw, axes))


def sum(a, axis=None): return _reduce("sum", a, axis)
def prod(a, axis=None): return _reduce("prod", a, axis)
def max(a, axis=None): return _reduce("max", a, axis)
def min(a, axis=None): return _reduce("min", a, axis)
def any(a, axis=None): return _reduce("any", a, axis)
def all(a, axis=None): return _reduce("all", a, axis)


def matmul(a, b, out=None):
    """The matrix product of 1-d and 2-d tensors (the core's, in float64 or int64); ``out=`` a
    NumPy array of the product's shape and dtype writes it in place and returns it."""
    if out is None:
        return Tensor(_tessera.matmul(_operand(a), _operand(b)))
    _tessera.matmul(_operand(a), _operand(b), _check_out_array("out", out))
    return out


def permute_dims(a, axes):
    return asarray(a).permute_dims(axes)


def transpose(a, axes=None):
    return asarray(a).transpose(axes)


