"""Errors become exceptions of tessera.errors with the core's message and place, and the
interpreter survives them (kernel faults included)."""

import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp

import tessera as ts
from tessera import errors


def test_bad_format_strings():
    with pytest.raises(ts.FormatError, match="unknown level `Bogus`") as e:
        ts.asarray(np.zeros((2, 2)), format="Dense(Bogus(Element(0.0)))")
    assert isinstance(e.value, ValueError) and isinstance(e.value, ts.TesseraError)
    with pytest.raises(ts.FormatError):
        ts.formats.parse("Dense(SparseList(Element(0.0)))", 3)
    with pytest.raises(ts.FormatError):
        ts.asarray(np.zeros(3)).to_format("Dense(SparseList(Element(0.0), coord=i16))")


def test_shape_mismatches():
    with pytest.raises(ts.DimensionMismatchError, match="do not broadcast"):
        ts.asarray(np.zeros(3)) + ts.asarray(np.zeros(4))
    with pytest.raises(ts.DimensionMismatchError):
        ts.asarray(np.zeros((2, 3))) @ ts.asarray(np.zeros((4, 2)))
    with pytest.raises(ts.DimensionMismatchError) as e:
        ts.run("for i = _\n  y[i] += a[i] * b[i]\nend", out="y", a=np.zeros(3), b=np.zeros(4))
    assert e.value.line == 2 and e.value.place.startswith("2:")


def test_unsupported_dtypes():
    for bad in (np.zeros(3, dtype=np.complex128), np.zeros(3, dtype=np.float16),
                np.zeros(3, dtype=np.int16), np.array(["a"]), np.array([object()])):
        with pytest.raises(ts.UnsupportedDtypeError, match="unsupported dtype"):
            ts.asarray(bad)
    with pytest.raises(TypeError):  # also a TypeError, as NumPy users expect
        ts.asarray(sp.csr_array(np.eye(2, dtype=np.complex64)))


def test_program_errors_carry_the_place():
    with pytest.raises(ts.ParseError) as e:
        ts.run("for i = _\n  y[i] += x[i] +\nend", out="y", x=np.zeros(2))
    assert (e.value.line, e.value.column) == (3, 1) and "syntax error" in str(e.value)
    with pytest.raises(ts.ProgramError, match="unknown tensor `z`"):
        ts.run("for i = _\n  y[i] += z[i]\nend", out="y", x=np.zeros(2))
    with pytest.raises(ts.UsageError, match="unknown backend"):
        ts.run("y[] += 1", out="y", backend="fortran")
    with pytest.raises(ts.ProgramError):
        ts.einsum("y[i] += A[i, j] * x[j, k, l]", A=np.eye(2), x=np.ones(2))


def test_kernel_faults_are_exceptions_and_the_interpreter_lives():
    prog = "for i = _\n  h[I[i]] += 1\nend"
    for _ in range(3):
        with pytest.raises(ts.KernelError) as e:
            ts.run(prog, out="h", shapes={"h": [3]}, I=np.array([0, 7, 1]))
        assert e.value.kernel_kind == "OutOfBounds" and e.value.tensor == "h"
        assert e.value.place == "2:5" and "index 7 is outside dimension 0 of `h`" in str(e.value)
        assert isinstance(e.value, RuntimeError)
    # a sparse output written out of order
    with pytest.raises(ts.KernelError):
        ts.run("for i = _\n  y[I[i]] = 1.0\nend", out={"y": "SparseList(Element(0.0))"},
               shapes={"y": [5]}, I=np.array([3, 1]))
    # and everything still works afterwards
    h = ts.run(prog, out="h", shapes={"h": [3]}, I=np.array([0, 2, 2]))
    np.testing.assert_array_equal(h.to_numpy(), [1, 0, 2])


def test_every_error_class_is_a_tessera_error():
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.TesseraError)
        assert getattr(ts, name) is getattr(errors, name)


def test_kernels_release_the_gil():
    """A kernel runs in one thread while the main thread goes on running Python. With the
    interpreter's forced switches pushed far beyond the run (`setswitchinterval`), the worker
    gives the GIL up only where it releases it itself; the main thread, which sleeps between
    its steps (releasing the GIL each time), then takes steps only while a kernel runs.
    (No wall-clock threshold: the machine may be loaded.)"""
    import sys

    n = 200
    prog = "C .= 0\nfor i = _, k = _, j = _\n  C[i, j] += A[i, k] * B[k, j]\nend"
    a = ts.asarray(np.random.default_rng(0).random((n, n)))
    ts.run(prog, out="C", backend="jit", A=a, B=a)  # compile first
    started, done = threading.Event(), threading.Event()
    steps = 0

    def work():
        started.set()
        for _ in range(20):
            ts.run(prog, out="C", backend="jit", A=a, B=a)
        done.set()

    old = sys.getswitchinterval()
    sys.setswitchinterval(30.0)
    try:
        worker = threading.Thread(target=work)
        worker.start()
        started.wait()
        while not done.is_set():
            steps += 1
            time.sleep(0.0005)
        worker.join()
    finally:
        sys.setswitchinterval(old)
    # Holding the GIL through the kernels would leave the main thread no step before `done`.
    assert steps > 10, steps


def test_bad_axes_and_indices():
    t = ts.asarray(np.ones((2, 3)), format="csr")
    with pytest.raises(IndexError, match="axis 5 is out of bounds"):
        t.sum(axis=5)
    with pytest.raises(ValueError, match="repeated axis"):
        t.max(axis=(0, -2))
    with pytest.raises(ts.TensorError):
        t[2, 0]
    with pytest.raises(IndexError):
        t[0, 0, 0]  # too many indices: IndexError, as NumPy's and the Array API's
    with pytest.raises(TypeError):
        t["a"]
    np.testing.assert_array_equal(t[0].to_numpy(), np.ones(3))  # a row: a copy
