"""`has_aux` with a return in each branch."""
from __future__ import annotations

import numpy as np

import srcgrad


X = np.array([0.3, -1.2, 0.7])


def loss_and_aux_from_two_returns(x):
    if x[0] > 0:
        return np.sum(x**2), 1
    return np.sum(x * 2), 2


def test_has_aux_with_a_return_in_each_branch():
    """Each `return loss, aux` keeps its pair (it was refused as not returning a pair)."""
    g, aux = srcgrad.grad(loss_and_aux_from_two_returns, has_aux=True)(X)
    np.testing.assert_allclose(g, 2 * X, rtol=1e-14)
    assert aux == 1
    g, aux = srcgrad.grad(loss_and_aux_from_two_returns, has_aux=True)(-X)
    np.testing.assert_allclose(g, np.full(3, 2.0), rtol=1e-14)
    assert aux == 2
