"""Tessera from Python: sparse and structured tensor programs compiled for their formats.

``tessera.asarray`` makes tensors from NumPy, SciPy sparse, pydata/sparse, lists and scalars;
``run`` and ``code`` take a loop program, ``einsum`` one statement, ``lazy`` builds fused
expressions; operators and reductions on tensors run Tessera kernels. Errors are the
exceptions of :mod:`tessera.errors`.
"""

from . import errors, formats
from ._compute import (
    BoundKernel, Kernel, abs, add, all, any, code, compile, divide, einsum, equal, exp, floor, greater, greater_equal, less,
    less_equal, log, logical_and, logical_not, logical_or, matmul, max, maximum, min, minimum,
    multiply, negative, not_equal, permute_dims, prod, run, sqrt, subtract, sum, transpose, where,
    sin, cos, tan, asin, acos, atan, sinh, cosh, tanh, asinh, acosh, atanh, expm1, log1p, log2,
    log10, ceil, trunc, round, pow, atan2, hypot, copysign, logaddexp, nextafter, signbit,
    remainder, floor_divide, bitwise_and, bitwise_or, bitwise_xor, bitwise_invert,
    bitwise_left_shift, bitwise_right_shift,
)
from ._tensor import DTYPES, Tensor, asarray, from_dlpack
from .errors import *  # noqa: F401,F403  (the exception classes at the top level)
from .lazy import LazyTensor, lazy
from . import array_api  # the Array API namespace, also as `tessera.array_api`

__version__ = "0.1.0"
