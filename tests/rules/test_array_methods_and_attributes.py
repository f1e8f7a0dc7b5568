"""Array methods and attributes: a method whose NumPy function has a rule is that function,
`.ndim`/`.shape`/`.size`/`.dtype` of a value known when it runs, `.real` of a real or complex
value, an unknown method named at its line."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from srcgrad import errors, nn


# central differences, float64
def numerical_grad(f, x, eps=1e-6):
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[idx] = eps
        g[idx] = (f(x + step) - f(x - step)) / (2 * eps)
    return g


def line_of(fn, text):
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, s in enumerate(lines) if text in s)


# ---- fixed: array methods whose NumPy function has a rule -----------------------------------
# `np.argsort(x)` has a rule (no derivative); `x.argsort()` was refused ("no derivative rule for
# the array method `.argsort()`"): every method whose function has a rule (or no derivative)
# is that function now, unless the method changes the array where the function copies it.

def top_two(x):
    return np.sum(x[x.argsort()[::-1][:2]])


def top_two_in_a_loop(x):
    total = 0.0
    for i in range(2):
        order = (x * (i + 1.0)).argsort(axis=-1, kind="stable")
        total = total + np.sum(x[order[-2:]]) * (i + 1.0)
    return total


def _positives(x):
    return x[x.nonzero()] ** 2


def nonzero_in_a_helper(x):
    return np.sum(_positives(np.maximum(x, 0.0))) + np.sum(x[(x < 0).nonzero()[0]] ** 3)


@pytest.mark.parametrize("f", [top_two, top_two_in_a_loop, nonzero_in_a_helper])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_index_methods(f, dtype):
    x = np.array([0.5, -1.0, 2.0, 0.25])
    g = srcgrad.grad(f)(x.astype(dtype))
    assert g.dtype == dtype
    np.testing.assert_allclose(g, numerical_grad(f, x), rtol=1e-5)


def test_every_method_whose_function_has_a_rule_is_that_function():
    from srcgrad.rules import registry
    from srcgrad.transforms import anf

    changes_the_array = {"sort", "partition", "resize", "put"}
    for name in dir(np.ndarray):
        function = getattr(np, name, None)
        if name.startswith("_") or not callable(function) or not callable(getattr(np.ndarray, name)) \
                or name in changes_the_array or registry.lookup(function) is None:
            continue
        assert anf._METHODS.get(name) is function, name


# ---- fixed: `.ndim`/`.shape`/`.size`/`.dtype` of a value whose kind is known when it runs ----
# They counted as differentiated (`y.ndim` became `dispatch.vjp_field`, and `s * y.ndim` a
# dispatched operator, which failed: "cannot read the source of `int.__rmul__`").  An array's
# have no derivative; a float held under such a name by another object is refused where read.

class Through:
    def __init__(self, f):
        self.f = f

    def apply(self, x):
        return self.f(x)


def shape_queries(o, x):
    y = o.apply(x)
    return np.sum(y ** 2) * y.ndim + y.shape[0] + y.size * (y.dtype == np.float64)


def _scaled(y):
    return y * (y.shape[-1] / y.size)


def shape_queries_in_a_loop(o, x):
    total = 0.0
    for i in range(3):
        y = o.apply(x * (i + 1.0))
        total = total + np.sum(_scaled(y)) * y.ndim
    return total


@pytest.mark.parametrize("f", [shape_queries, shape_queries_in_a_loop])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_shape_queries_of_a_value_known_when_it_runs(f, dtype):
    o, x = Through(np.sin), np.array([0.1, -0.7, 0.4])
    g = srcgrad.grad(f, wrt=1)(o, x.astype(dtype))
    assert g.dtype == dtype
    np.testing.assert_allclose(g, numerical_grad(lambda v: f(o, v), x), rtol=1e-5)
    value, tangent = srcgrad.jvp(f, wrt=1)(o, x, np.ones(3))
    np.testing.assert_allclose(tangent, np.sum(numerical_grad(lambda v: f(o, v), x)), rtol=1e-5)


class Sized:
    def __init__(self, size):
        self.size = size


def _boxed(v):
    return Sized(np.sum(v ** 2))


def _counted(v):
    return Sized(len(v))


def size_of_a_value_known_when_it_runs(o, x):
    return o.apply(x).size * np.sum(x)


def size_field_of_an_argument(b, x):
    return b.size * np.sum(x)


def test_a_float_under_a_shape_name_is_refused_or_a_field():
    x = np.array([0.1, 0.2])
    with pytest.raises(errors.UnsupportedSyntaxError, match="`.size` of this Sized holds a float") as info:
        srcgrad.grad(size_of_a_value_known_when_it_runs, wrt=1)(Through(_boxed), x)
    assert f":{line_of(size_of_a_value_known_when_it_runs, 'apply(x).size')}:" in str(info.value)
    np.testing.assert_allclose(srcgrad.grad(size_of_a_value_known_when_it_runs, wrt=1)(Through(_counted), x),
                               [2.0, 2.0])  # an int: no derivative
    g = srcgrad.grad(size_field_of_an_argument)(Sized(np.array(2.0)), x)  # known: a field of the argument
    np.testing.assert_allclose(g.size, 0.30000000000000004)


X3 = np.array([0.5, -1.0, 2.0])


def real_part_of_a_complex_value(x):
    return np.sum(np.real(x * 1j) + x)


def test_the_real_part_of_a_complex_value_is_refused():
    with pytest.raises(errors.UserCodeError, match="complex"):
        srcgrad.grad(real_part_of_a_complex_value)(X3)


X = np.array([0.3, -1.2, 0.7])


def unknown_array_method(x):
    return np.sum(x.conjugate())


def test_unknown_array_method_names_the_line():
    with pytest.raises(srcgrad.UnsupportedSyntaxError) as excinfo:
        srcgrad.grad(unknown_array_method)(X)
    assert ".conjugate()" in str(excinfo.value) and "test_array_methods_and_attributes.py:" in str(excinfo.value)


def reads_real(x):
    return np.sum((x * 2).real)


def test_the_real_part_of_a_real_array_is_differentiated():
    """`(x * 2).real` was refused ("array attribute `.real`"): of a real array, the array."""
    np.testing.assert_allclose(srcgrad.grad(reads_real)(X), np.full(np.shape(X), 2.0))
