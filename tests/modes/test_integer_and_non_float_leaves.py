"""Integer and other non-float leaves: no tangent and no adjoint (`None`), under a root and a
hessian; turned into a float, differentiated."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad


X3 = np.array([0.5, -1.0, 2.0])


# ---- silently wrong (forward mode): an integer leaf's zero tangent times an infinite derivative
# `x ** o.n` with `o.n = 3` an int attribute (or a dict's or tuple's int entry), x < 0: forward
# mode gave the int a zero tangent, and `0 * log(x)` is NaN.  An integer entry is a constant of
# the specialised code now (TreeRank.constants): no tangent, no adjoint.  Turned into a float,
# it compiles again and is differentiated.

class PowerModel:
    def __init__(self, n=3):
        self.a = np.array([1.5, -0.5])
        self.n = n


def power_of_an_attribute(o, x):
    return o.a * x ** o.n


def power_of_an_entry(p, x):
    return p["a"] * x ** p["n"]


def power_of_a_pair(p, x):
    a, n = p
    return a * x ** n


def root_of_an_entry(p, x):
    return p["a"] * np.sqrt(p["k"]) + x


XN = np.array([-1.2, 0.7])


@pytest.mark.parametrize("f, make", [
    (power_of_an_attribute, lambda: PowerModel()), (power_of_an_entry, lambda: {"a": np.array([1.5, -0.5]), "n": 3}),
    (power_of_a_pair, lambda: (np.array([1.5, -0.5]), 3))], ids=["attribute", "dict", "tuple"])
def test_an_integer_leaf_has_no_tangent(f, make):
    p = make()
    a = p.a if isinstance(p, PowerModel) else p["a"] if isinstance(p, dict) else p[0]
    jac = srcgrad.jacfwd(f, wrt=1)(p, XN)
    np.testing.assert_allclose(jac, np.diag(3 * a * XN ** 2), rtol=1e-12)
    jac_p = srcgrad.jacfwd(f)(p, XN)
    block = jac_p.a if isinstance(p, PowerModel) else jac_p["a"] if isinstance(p, dict) else jac_p[0]
    np.testing.assert_allclose(block, np.diag(XN ** 3), rtol=1e-12)
    assert not np.isnan(block).any()


def test_an_integer_leaf_under_a_root_and_a_hessian():
    p = {"a": np.array([1.0, 2.0, 3.0]), "k": 0}
    _, t = srcgrad.jvp(root_of_an_entry)(p, X3, {"a": np.ones(3), "k": 0})
    np.testing.assert_array_equal(t, np.zeros(3))

    def loss(q):
        return np.sum(q["a"] ** q["n"])
    h = srcgrad.hessian(loss)({"a": np.array([1.5, -0.5]), "n": 3})
    np.testing.assert_allclose(h["a"]["a"], np.diag(6 * np.array([1.5, -0.5])), rtol=1e-12)


def test_an_integer_leaf_turned_float_is_differentiated():
    o = PowerModel(n=2)
    g = srcgrad.grad(lambda_free_power_loss)(o, XN)
    assert g.n is None
    o.n = 2.0  # a float now: a parameter, whose gradient is d/dn sum(a x^n) = sum(a x^n log|x|)... at x > 0
    x = np.abs(XN)
    g = srcgrad.grad(lambda_free_power_loss)(o, x)
    np.testing.assert_allclose(g.n, np.sum(o.a * x ** 2.0 * np.log(x)), rtol=1e-12)


def lambda_free_power_loss(o, x):
    return np.sum(power_of_an_attribute(o, x))


OPT = [True, False]


# ---- A12: non-float leaves ---------------------------------------------------

@pytest.mark.parametrize("optimize", OPT)
def test_non_float_leaves_are_none(optimize):
    def f(p, x):
        s = np.sum(p["w"] * x)
        return s * p["n"] if p["flag"] else s
    p = {"w": np.ones(3), "n": 3, "flag": True, "name": "lin", "idx": np.arange(2)}
    g = srcgrad.grad(f, optimize=optimize)(p, np.ones(3))
    np.testing.assert_allclose(g["w"], 3.0)
    assert g["n"] is None and g["flag"] is None and g["name"] is None and g["idx"] is None

    class M:
        def __init__(self):
            self.w, self.n, self.scale = np.ones(2), 3, 2.0

    def h(m, x):
        return np.sum(m.w * x) * m.n * m.scale
    g = srcgrad.grad(h, optimize=optimize)(M(), np.ones(2))
    assert g.n is None and g.scale == pytest.approx(6.0)
