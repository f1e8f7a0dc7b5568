"""``scipy.linalg.cholesky`` and ``solve_triangular`` (as autograd's ``autograd.scipy.linalg``
programs use them): gradients against central differences in every form (lower and upper,
``trans``, ``unit_diagonal``, a vector or a matrix right-hand side), forward mode against
differences of the function, the Hessian against differences of the gradient, float32."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from srcgrad.testing import check_grads

linalg = pytest.importorskip("scipy.linalg")

RNG = np.random.default_rng(0)
M = RNG.standard_normal((3, 3))
A = M @ M.T + 3 * np.eye(3)
B = RNG.standard_normal((3, 2))
V = RNG.standard_normal(3)


def _symmetric(a):
    return (a + a.T) / 2  # (cholesky reads one triangle: perturb both)


def lower_factor(a):
    return np.sum(np.sin(linalg.cholesky(_symmetric(a), lower=True)))


def upper_factor(a):
    return np.sum(np.sin(linalg.cholesky(_symmetric(a))))


def whitened(a, b):  # a Gaussian process's L^{-1} y
    factor = linalg.cholesky(_symmetric(a), lower=True)
    return np.sum(linalg.solve_triangular(factor, b, lower=True) ** 2)


def transposed_solve(a, b):
    factor = linalg.cholesky(_symmetric(a))
    return np.sum(np.tanh(linalg.solve_triangular(factor, b, trans=1)))


def unit_lower(a, b):
    return np.sum(linalg.solve_triangular(np.tril(a), b, lower=True, unit_diagonal=True) ** 3)


@pytest.mark.parametrize("f, args", [(lower_factor, (A,)), (upper_factor, (A,)), (whitened, (A, V)),
                                     (whitened, (A, B)), (transposed_solve, (A, B)), (unit_lower, (A, V))])
def test_gradients(f, args):
    check_grads(f, args, wrt=tuple(range(len(args))))


def test_forward_mode_and_the_hessian():
    e, da = 1e-6, RNG.standard_normal((3, 3))
    _, tangent = srcgrad.jvp(whitened, wrt=(0, 1))(A, V, (da, V))
    np.testing.assert_allclose(tangent, (whitened(A + e * da, V + e * V) - whitened(A - e * da, V - e * V)) / (2 * e),
                               rtol=1e-6)
    H = srcgrad.hessian(whitened, wrt=1)(A, V)
    grad = srcgrad.grad(whitened, wrt=1)
    columns = np.stack([(grad(A, V + e * v) - grad(A, V - e * v)) / (2 * e) for v in np.eye(3)])
    np.testing.assert_allclose(H, columns, rtol=1e-6, atol=1e-9)


def test_float32():
    g = srcgrad.grad(whitened, wrt=(0, 1))(A.astype(np.float32), V.astype(np.float32))
    assert g[0].dtype == np.float32 and g[1].dtype == np.float32
    want = srcgrad.grad(whitened, wrt=(0, 1))(A, V)
    np.testing.assert_allclose(g[1], want[1], rtol=1e-3)
