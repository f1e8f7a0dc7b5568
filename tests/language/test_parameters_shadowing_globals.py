"""A lambda's or a nested function's parameter named like a module's data
(``v = np.array(...)`` at module level, ``key=lambda v: np.sum(v)``) is the parameter
inside it: resolve once read the module's ``v`` there (``model.v``), a silent wrong
gradient (and a wrong order for ``sorted``'s key)."""
import numpy as np
import pytest

import srcgrad
from tests.finite_differences import numerical_grad

v = np.array([5.0, 5.0, 5.0])
z = 3.0
x = np.array([[1.0, 2.0, 3.0]])


def nested_function(w):
    def scale(v):
        return v * 2
    return np.sum(scale(w) * w) + np.sum(v * w)  # (the module's `v` outside)


def lambda_in_a_name(w):
    h = lambda v: v * 3  # noqa: E731
    return np.sum(h(w) * w)


def lambda_as_a_key(w):
    xs = [w * 2, w, np.sin(w)]
    s = sorted(xs, key=lambda v: float(np.sum(v)))
    return np.sum(s[0] * 3 + s[1] * s[2])


def lambda_with_default_of_the_global(w):
    h = lambda u, z=z: u * z  # noqa: E731
    return np.sum(h(w) * w)


def lambdas_in_a_loop(w):
    total = 0.0
    for k in range(3):
        f = lambda x: np.sum(x * k)  # noqa: E731
        total = total + f(w * w)
    return total + np.sum(x * w)


CASES = [nested_function, lambda_in_a_name, lambda_as_a_key, lambda_with_default_of_the_global, lambdas_in_a_loop]


@pytest.mark.parametrize("f", CASES, ids=[f.__name__ for f in CASES])
def test_the_parameter_is_read_not_the_global(f):
    w = np.array([0.3, -0.7, 1.1])
    np.testing.assert_allclose(srcgrad.grad(f)(w), numerical_grad(f, (w,), 0), rtol=1e-6, atol=1e-8)
    _, tangent = srcgrad.jvp(f)(w, np.array([1.0, 0.5, -0.2]))
    np.testing.assert_allclose(tangent, numerical_grad(f, (w,), 0) @ np.array([1.0, 0.5, -0.2]), rtol=1e-6)
