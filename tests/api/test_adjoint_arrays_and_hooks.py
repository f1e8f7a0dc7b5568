"""Adjoints handed out and back: gradients, pullbacks and jvps give new arrays, a rule or a
hook cannot change its adjoint in place, a `None` cotangent is zero, a hook returning
`None` leaves the adjoint."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from srcgrad import errors


X3 = np.array([0.5, -1.0, 2.0])


# ---- silently wrong: results sharing memory ---------------------------------------------
# `grad(f, wrt=(0, 1))` of `sum(x + y)` returned one array twice (`gx *= 0.5` halved gy), a
# vjp of the identity handed back the caller's cotangent, a jvp the caller's tangent; a rule
# or a hook changing its adjoint in place changed another's.

def summed_pair(x, y):
    return np.sum(x + y)


def summed_triple(x, y, z):
    return np.mean(x + y + z)


def identity_scaled(x):
    return x * 1.0


def test_gradients_are_separate_arrays():
    for f, args in ((summed_pair, (X3.copy(), X3.copy())), (summed_triple, (X3.copy(),) * 3)):
        for transform in (srcgrad.grad, srcgrad.value_and_grad):
            out = transform(f, wrt=tuple(range(len(args))))(*args)
            grads = out[1] if transform is srcgrad.value_and_grad else out
            expected = [g.copy() for g in grads]
            first = grads[0]
            first *= 0.5
            for g, e in zip(grads[1:], expected[1:]):
                np.testing.assert_array_equal(g, e)


def test_a_pullback_and_a_jvp_give_new_arrays():
    u = np.ones(3)
    _, pullback = srcgrad.vjp(identity_scaled)(X3)
    back = pullback(u)
    back[0] = 7.0
    np.testing.assert_array_equal(u, np.ones(3))
    t_in = np.ones(3)
    _, t_out = srcgrad.jvp(identity_scaled)(X3, t_in)
    t_out *= 10
    np.testing.assert_array_equal(t_in, np.ones(3))


@srcgrad.custom_adjoint
def tripled(a):
    return a * 3.0


@tripled.defadjoint
def _tripled_adjoint(ans_bar, ans, a):
    ans_bar *= 3.0
    return ans_bar


def tripled_plus(a, b):
    return np.sum(tripled(a) + b)


def test_a_rule_changing_its_adjoint_in_place_is_refused_at_its_line():
    with pytest.raises(errors.UserCodeError, match="changes its argument `ans_bar` in place") as info:
        srcgrad.grad(tripled_plus, wrt=(0, 1))(X3, X3)
    assert "ans_bar *= 3.0" in str(info.value)


def clamped_through_a_hook(a, b):
    p = a * 1.0
    return np.sum((p + b) ** 2)


def _clamp_in_place(p_bar):
    p_bar *= 0.0


def test_a_hook_gets_its_adjoint_read_only():
    with pytest.raises(ValueError, match="read-only"):
        srcgrad.grad(clamped_through_a_hook, wrt=(0, 1), hooks={"p": _clamp_in_place})(X3, X3)
    g = srcgrad.grad(clamped_through_a_hook, wrt=(0, 1), hooks={"p": lambda p_bar: None})(X3, X3)
    np.testing.assert_allclose(g[1], 4 * X3)
    g = srcgrad.grad(clamped_through_a_hook, wrt=(0, 1), hooks={"p": lambda p_bar: 0.0 * p_bar})(X3, X3)
    np.testing.assert_allclose(g[0], 0.0)
    np.testing.assert_allclose(g[1], 4 * X3)


OPT = [True, False]


# ---- A7: None cotangent ------------------------------------------------------

@pytest.mark.parametrize("optimize", OPT)
def test_vjp_none_cotangent_is_zero(optimize):
    def f(x):
        return x * 2.0, np.sum(x)
    _, pb = srcgrad.vjp(f, optimize=optimize)(np.array([1.0, 2.0]))
    np.testing.assert_allclose(pb((np.ones(2), None)), [2.0, 2.0])
    np.testing.assert_allclose(pb((None, 1.0)), [1.0, 1.0])
    np.testing.assert_allclose(pb([None, None]), [0.0, 0.0])


# ---- B8: a hook returning None ----------------------------------------------

@pytest.mark.parametrize("optimize", OPT)
def test_hook_returning_none_leaves_the_adjoint(optimize):
    seen = []

    def f(x):
        h = x * 3
        return np.sum(h ** 2)
    g = srcgrad.grad(f, hooks={"h": seen.append}, optimize=optimize)(np.ones(2))
    np.testing.assert_allclose(g, [18.0, 18.0])
    np.testing.assert_allclose(seen[0], [6.0, 6.0])
