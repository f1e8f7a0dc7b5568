"""Casts and scalar operators: `%`, `float(...)`, NumPy float casts, `np.array` of values
and its keywords, augmented assignment on a scalar; each carries the gradient."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from srcgrad.testing import check_grads


X = np.array([0.3, -1.2, 0.7])


def modulo(x):
    return np.sum(x % 1.0 + np.mod(x, 0.5) * x)


def through_float(x):
    return float(np.sum(x)) * np.sum(x) + np.sum(x).item()


def cast(x):
    return np.sum(x.astype(np.float64) * x)


def scalar_augmented(x):
    s = 0.0
    for i in range(3):
        s += x[i] ** 2
    y = x * 2
    y += 1.0  # a new array no other name sees: the same as y = y + 1.0
    return s + np.sum(y)


@pytest.mark.parametrize("fn", [modulo, through_float, cast, scalar_augmented], ids=lambda f: f.__name__)
def test_now_differentiated(fn):
    check_grads(fn, (X,), rtol=1e-5, atol=1e-6)


def stacked_by_np_array(x):
    return np.sum(np.array([x[0], x[1] * 2.0]) ** 2) + np.sum(np.array([[x[0], x[2]], [x[1], x[0]]])
                                                             * np.array([[1.0, 2.0], [3.0, 4.0]]))


def cast_to_numpy_floats(x):
    return np.float64(np.sum(x**2)) * 3.0 + np.sum(np.float32(x) * x)


def test_np_array_and_numpy_float_casts_carry_the_gradient():
    """Both gave a zero gradient silently: `np.array` and `np.float64` counted as constructors."""
    check_grads(stacked_by_np_array, (X,))
    np.testing.assert_allclose(srcgrad.grad(stacked_by_np_array)(np.ones(3)),
                               [2.0 + 5.0, 8.0 + 3.0, 2.0], rtol=1e-14)
    # d/dx [3 sum(x^2) + sum(float32(x) x)] = 6x + 2x (the float32 copy's rounding aside)
    np.testing.assert_allclose(srcgrad.grad(cast_to_numpy_floats)(X), 8.0 * X, rtol=1e-6)


def writes_into_a_new_array_from_a_list(x):
    y = np.array([x[0], x[1]], dtype=np.float64)
    y[0] = 3.0
    return np.sum(y * x[:2]) + np.sum(np.asarray(x, dtype=np.float64) ** 2)


def test_np_array_keywords_and_a_write_into_its_result():
    """`np.array(..., dtype=)` is a new array (writing into it is fine); `np.asarray(x, dtype=)`
    was refused ("does not accept these arguments")."""
    check_grads(writes_into_a_new_array_from_a_list, (X,))
