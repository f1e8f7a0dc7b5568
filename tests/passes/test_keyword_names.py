"""Keyword arguments whose names srcgrad's own call helpers use (``fn``, ``wrt``, ``obj``,
``name``, ``dots``, ``self``): a call that generated code makes through ``dispatch`` passes
them on to the user's function untouched, or, for a differentiated ``self=``, is refused."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad

X = np.array([0.3, -0.7, 1.1])


def _scaled(v, fn=None, wrt=1.0, name=2.0, obj=3.0, dots=1.0):
    return fn(v) * wrt * name * obj * dots


def keywords(x):
    h = _scaled  # called through dispatch: a name rebound in the function
    return np.sum(h(x, fn=np.sin, wrt=x, name=2.0, obj=x, dots=1.5))


def _expected(x):
    return np.cos(x) * x * 2 * x * 1.5 + np.sin(x) * 2 * x * 1.5 * 2


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_keywords_named_like_the_helpers_parameters_reach_the_function(dtype):
    x = X.astype(dtype)
    g = srcgrad.grad(keywords)(x)
    assert g.dtype == dtype
    np.testing.assert_allclose(g, _expected(X), rtol=1e-5 if dtype == np.float32 else 1e-12)
    v = np.array([1.0, -2.0, 0.5], dtype)
    _, tangent = srcgrad.jvp(keywords)(x, v)
    assert tangent == pytest.approx(_expected(X) @ v, rel=1e-5)


class Model:
    def __init__(self, w):
        self.w = w

    def loss(self, x):
        def g(v, *, self):
            return np.tanh(v @ self.w)
        return np.sum(g(x, self=self) + g(2 * x, self=self))


def test_a_differentiated_value_passed_as_self_keyword_is_refused():
    # It once came back as zeros: `self` in a call's wrt names the called object itself.
    m = Model(np.eye(3) * 0.5)
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match="`self=`") as refused:
        srcgrad.grad(Model.loss, wrt=0)(m, X)
    assert str(refused.value).split(":")[0].endswith("test_keyword_names.py")


def test_self_keyword_with_data_only_runs_in_forward_mode():
    m = Model(np.eye(3) * 0.5)
    value, tangent = srcgrad.jvp(Model.loss, wrt=1)(m, X, np.ones(3))
    assert value == pytest.approx(m.loss(X))
    eps = 1e-6
    assert tangent == pytest.approx((m.loss(X + eps) - m.loss(X - eps)) / (2 * eps), rel=1e-6)
