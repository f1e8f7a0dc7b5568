"""SciPy rules in programs: `scipy.special.polygamma` given an array, float or fractional
order, first and second derivatives."""

import numpy as np
import pytest
from scipy import special

import srcgrad


V3 = np.array([1.0, 2.0, -1.0])


def numerical_hvp(f, x, v, eps=1e-5):
    """Central differences of srcgrad's gradient (itself checked against differences above)."""
    g = srcgrad.grad(f)
    return (g(x + eps * v) - g(x - eps * v)) / (2 * eps)


# ---- crash: scipy.special.polygamma given an array or a float order ---------------------
# The rule computes `math.factorial(n + 1)`: TypeError for an integer array `n` (NumPy's
# broadcasting is what polygamma itself does) or a float `n` (SciPy accepts 1.0).

def polygamma_of_orders(x):
    return np.sum(special.polygamma(np.array([0, 1, 2]), x))


def polygamma_float_order(x):
    return np.sum(special.polygamma(1.0, x))


def polygamma_orders_in_a_loop(x):
    t = 0.0
    for k in range(3):
        t = t + np.sum(special.polygamma(k * 1.0, x) + special.polygamma(np.arange(3) + k, x))
    return t


@pytest.mark.parametrize("f, n", [(polygamma_of_orders, np.array([0, 1, 2])), (polygamma_float_order, 1),
                                  (polygamma_orders_in_a_loop, (0, 1, 2) + tuple(np.arange(3) + k for k in range(3)))],
                         ids=["array_order", "float_order", "orders_in_a_loop"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_polygamma_with_an_array_or_float_order(f, n, dtype):
    x = np.array([0.7, 1.5, 3.0])
    expected = sum(special.polygamma(k + 1, x) for k in (n if isinstance(n, tuple) else (n,)))
    g = srcgrad.grad(f)(x.astype(dtype))
    assert g.dtype == dtype
    np.testing.assert_allclose(g, expected, rtol=1e-10 if dtype == np.float64 else 1e-5)


# (In a loop, an order the loop computes reaches the gradient code through the loop's stack,
# and forward mode over it refuses `zeta`'s order as differentiated: refused at the line.)
@pytest.mark.parametrize("f", [polygamma_of_orders, polygamma_float_order], ids=lambda f: f.__name__)
def test_polygamma_second_derivative_with_an_array_or_float_order(f):
    x = np.array([0.7, 1.5, 3.0])
    np.testing.assert_allclose(srcgrad.hvp(f)(x, V3), numerical_hvp(f, x, V3), rtol=1e-6)


def polygamma_fractional_order(x):
    return np.sum(special.polygamma(1.5, x))  # NaN, as SciPy's own


def test_polygamma_with_a_fractional_order_is_nan_as_scipy():
    x = np.array([0.7, 1.5])
    with np.errstate(invalid="ignore"):
        assert np.isnan(polygamma_fractional_order(x))
        assert np.isnan(srcgrad.grad(polygamma_fractional_order)(x)).all()
