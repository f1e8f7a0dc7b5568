"""Every tangent rule, through the compiler, on the rows of ``rule_table.py``.

For each primitive's expressions ``srcgrad.jvp`` (forward mode, all inputs)
is checked two ways: its tangent ``J v`` against central differences of the
function along ``v``, and against the adjoint rule by the dot-product identity
⟨u, J v⟩ (forward mode) = ⟨Jᵀ u, v⟩ (``srcgrad.vjp``), computed from the two
modes, with the optimizer on and off.  A rule registered without a tangent
fails ``test_every_rule_has_a_tangent``.
"""
from __future__ import annotations

import functools
import operator

import numpy as np
import pytest
from tests.rules.rule_table import CASES, assert_close, difference, inner, like, user_function

import srcgrad
from srcgrad.rules import registry


@functools.cache
def compiled_jvp(expr: str, names: tuple, optimize: bool):
    return srcgrad.jvp(user_function(expr, names), wrt=tuple(range(len(names))), optimize=optimize)


def _params():
    return [pytest.param(case, optimize, id=f"{case.id}|{'opt' if optimize else 'noopt'}")
            for case in CASES for optimize in (True, False)]


@pytest.mark.parametrize("case, optimize", _params())
def test_tangent(case, optimize):
    f = user_function(case.expr, case.names)
    xs = case.inputs(np.float64, scalar=float)
    rng = np.random.default_rng(3)
    vs = tuple(np.asarray(rng.standard_normal(np.shape(x))) if np.ndim(x) else float(rng.standard_normal())
               for x in xs)
    try:
        value, tangent = compiled_jvp(case.expr, case.names, optimize)(*xs, vs)
    except srcgrad.SrcgradError as exc:
        pytest.fail(f"{type(exc).__name__}: {exc}", pytrace=False)
    assert_close(value, f(*xs), rtol=1e-15)
    eps = 1e-6
    central = difference(f(*[x + eps * v for x, v in zip(xs, vs)]), f(*[x - eps * v for x, v in zip(xs, vs)]))
    central = tuple(c / (2 * eps) for c in central) if isinstance(central, tuple) else central / (2 * eps)
    assert isinstance(tangent, tuple) == isinstance(value, tuple)
    assert_close(tangent, central, rtol=1e-5, atol=1e-6)
    # ⟨u, J v⟩ from forward mode = ⟨Jᵀ u, v⟩ from reverse mode.
    u = like(value, rng)
    _, pullback = srcgrad.vjp(f, wrt=tuple(range(len(xs))))(*xs)
    bars = pullback(u)
    assert inner(u, tangent) == pytest.approx(sum(np.sum(b * v) for b, v in zip(bars, vs)),
                                                rel=1e-9, abs=1e-9)


def test_every_rule_has_a_tangent():
    """Each of srcgrad's differentiable rules says how forward mode gets its tangent:
    a rule added without one fails here (forward mode would refuse it)."""
    missing = sorted(rule.name for _, rule in registry._RULES.values()
                     if rule.differentiable and rule.adjoint.__module__.startswith("srcgrad.")
                     and rule.tangent is None)
    missing += sorted(rule.name for rule in registry._METHOD_RULES.values()
                      if rule.differentiable and rule.tangent is None)
    assert not missing, f"rules without a tangent: {missing}"


def test_linear_tangents_have_one_argument():
    """A "linear" derivation replaces its differentiable argument by its tangent: one
    parameter (or one sequence of items), else a constant one would need zeros."""
    for _, rule in registry._RULES.values():
        if rule.tangent == "linear":
            assert len(rule.diff_params) == 1, rule.name


def test_no_tangent_rule_is_refused_at_the_users_line():
    @srcgrad.custom_adjoint
    def twice(x):
        return 2 * x

    @twice.defadjoint
    def twice_adjoint(ans_bar, ans, x):
        return 2 * ans_bar

    def f(x):
        return twice(x) + 1.0

    with pytest.raises(srcgrad.NoDerivativeRuleError, match="no tangent rule for `.*twice`") as info:
        srcgrad.jvp(f)(np.ones(3), np.ones(3))
    assert "return twice(x) + 1.0" in str(info.value)
    assert "defjvp" in str(info.value)

    @twice.defjvp
    def twice_tangent(ans, x, x_dot=None):
        return 2 * x_dot

    value, tangent = srcgrad.jvp(f)(np.ones(3), np.arange(3.0))
    np.testing.assert_array_equal(tangent, [0.0, 2.0, 4.0])
    assert operator.eq(value.shape, (3,))
