"""Hypothesis strategies shared by the tests: small arrays of Tessera's dtypes, mostly zeros
(so sparse formats store something but not everything), with integer-valued floats so that
sums compare exactly whatever the order of addition."""

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

SHAPES_2D = hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=6)


def values(dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return st.booleans()
    if dtype.kind == "f":
        return st.one_of(st.just(0.0), st.integers(-9, 9).map(float))
    if dtype.kind == "u":
        return st.one_of(st.just(0), st.integers(0, 9))
    return st.one_of(st.just(0), st.integers(-9, 9))


def arrays(dtype="float64", shape=SHAPES_2D):
    return hnp.arrays(np.dtype(dtype), shape, elements=values(dtype))


def matrices(dtype="float64"):
    return arrays(dtype, SHAPES_2D)
