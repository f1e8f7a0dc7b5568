"""``scipy.linalg.cholesky`` and ``solve_triangular`` (what autograd's ``autograd.scipy.linalg``
programs use): registered only where SciPy is installed (see ``scipy_special.py``).

``cholesky(a, lower=False)`` is ``np.linalg.cholesky(a, upper=not lower)``: the same adjoint
(Murray 2016, "Differentiation of the Cholesky decomposition").  ``x = solve_triangular(a, b)``
solves ``op(a) x = b`` with ``op`` the identity (``trans=0``) or the transpose (``trans=1``):
``b_bar = solve(op(a)^T, x_bar)`` and ``a_bar = -b_bar x^T`` (``-x b_bar^T`` for the transpose),
kept to ``a``'s triangle (without its diagonal where ``unit_diagonal``): the other entries are
never read (Giles 2008, "Collected matrix derivative results", the inverse's rule).
"""
from __future__ import annotations

import numpy as np
from scipy import linalg

from ..runtime import cholesky_adjoint, cholesky_tangent
from . import _ndim
from .registry import defadjoint, deftangent


@defadjoint(linalg.cholesky, ndim=_ndim.same_as("a"), diff=("a",))
def cholesky(ans_bar, ans, a, lower=False, overwrite_a=False, check_finite=True):
    return cholesky_adjoint(ans_bar, ans, a, not lower)


@deftangent(linalg.cholesky)
def cholesky_dot(ans, a, lower=False, overwrite_a=False, check_finite=True, a_dot=None):
    return cholesky_tangent(ans, a, not lower, a_dot)


@defadjoint(linalg.solve_triangular, diff=("a", "b"), ndim=_ndim.same_as("b"))
def solve_triangular(ans_bar, ans, a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     debug=None, check_finite=True):
    transposed = trans in (1, 2, "T", "C")
    b_bar = linalg.solve_triangular(a, ans_bar, trans=0 if transposed else 1, lower=lower,
                                    unit_diagonal=unit_diagonal)
    n = np.shape(a)[0]
    x, g = np.reshape(ans, (n, -1)), np.reshape(b_bar, (n, -1))  # (columns: b a vector or a matrix)
    outer = -(x @ g.T) if transposed else -(g @ x.T)
    k = 1 if unit_diagonal else 0
    return np.tril(outer, -k) if lower else np.triu(outer, k), b_bar


@deftangent(linalg.solve_triangular)
def solve_triangular_dot(ans, a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False, debug=None,
                         check_finite=True, a_dot=None, b_dot=None):
    """``op(a) x = b``: ``op(a) x_dot = b_dot - op(a_dot) x``, ``a_dot`` on ``a``'s triangle (run as
    it is, not as a template: it asks which tangents it was given)."""
    return _solve_triangular_tangent(ans, a, trans, lower, unit_diagonal, a_dot, b_dot)


def _solve_triangular_tangent(ans, a, trans, lower, unit_diagonal, a_dot, b_dot):
    rhs = np.zeros_like(ans) if b_dot is None else b_dot
    if a_dot is not None:
        k = 1 if unit_diagonal else 0
        moved = np.tril(a_dot, -k) if lower else np.triu(a_dot, k)
        rhs = rhs - (moved.T if trans in (1, 2, "T", "C") else moved) @ ans
    return linalg.solve_triangular(a, rhs, trans=trans, lower=lower, unit_diagonal=unit_diagonal)
