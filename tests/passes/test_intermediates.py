"""Intermediates: a name assigned in a loop is ambiguous, an intermediate the path taken never
assigned."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad


X = np.array([0.3, -1.2, 0.7])


def loop_intermediate(x):
    for i in range(3):
        h = x * (i + 1)
    return np.sum(h**2)


def test_intermediates_of_a_name_assigned_in_a_loop_is_ambiguous():
    with pytest.raises(srcgrad.UserCodeError, match="more than once"):
        srcgrad.grad(loop_intermediate, intermediates=("h",))(X)


OPT = [True, False]


# ---- B7: an intermediate the path taken never assigned -----------------------

@pytest.mark.parametrize("optimize", OPT)
def test_intermediate_in_branch_not_taken(optimize):
    def f(x):
        if np.sum(x) > 100:
            z = x * 3
            return np.sum(z)
        return np.sum(x ** 2)
    g = srcgrad.grad(f, intermediates=("z",), optimize=optimize)
    grads, watched = g(np.ones(2))
    np.testing.assert_allclose(grads, [2.0, 2.0])
    assert watched["z"] == 0.0
    grads, watched = g(np.full(2, 60.0))
    np.testing.assert_allclose(grads, [3.0, 3.0])
    np.testing.assert_allclose(watched["z"], [1.0, 1.0])
