"""The user-facing safety net: ``check=True`` / ``SRCGRAD_CHECK=1``, errors that
point at the user (without srcgrad's frames), and the crashes that became right
answers or named refusals (a gradient function inside a loss, a wrongly shaped
cotangent, a None output, complex values)."""
from __future__ import annotations

import inspect
import os
import random
import traceback
from collections import namedtuple

import numpy as np
import pytest
import scipy.special
from tests.finite_differences import numerical_grad

import srcgrad

HERE = os.path.abspath(__file__)
SRCGRAD_DIR = os.path.dirname(os.path.abspath(srcgrad.__file__))


def _line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if text in line:
            return first + i
    raise AssertionError(text)


def _first_line(excinfo):
    return str(excinfo.value).splitlines()[0]


# ---- 1. check=True / SRCGRAD_CHECK=1 ------------------------------------------------
def mlp(x, w):
    return np.sum(np.tanh(x @ w) ** 2)


def helper(v, s):
    return np.sin(v) * s


def loops_and_helpers(x, s):
    total = 0.0
    for i in range(3):
        total = total + np.sum(helper(x, s) * i)
    if s > 0:
        total = total * s
    return total


class Scaled:
    def __init__(self, w, scale):
        self.w, self.scale = w, scale

    def loss(self, x):
        return np.sum((x @ self.w) ** 2) * self.scale


def method_loss(model, x):
    return model.loss(x)


def structure_loss(p):
    return np.sum(p["a"] * p["b"]) + p["c"][0] ** 2 * 3.0 + np.sum(p["c"][1])


@pytest.mark.parametrize("optimize", [True, False])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_check_passes_and_changes_nothing(optimize, dtype):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((3, 4)).astype(dtype), rng.standard_normal((4, 2)).astype(dtype)
    plain = srcgrad.grad(mlp, wrt=(0, 1), optimize=optimize)(x, w)
    checked = srcgrad.grad(mlp, wrt=(0, 1), optimize=optimize, check=True)(x, w)
    for p, c in zip(plain, checked):
        assert c.dtype == dtype
        np.testing.assert_array_equal(p, c)
    value, g = srcgrad.value_and_grad(loops_and_helpers, wrt=(0, 1), optimize=optimize, check=True)(
        x[0], dtype(0.7))
    assert np.isclose(value, loops_and_helpers(x[0], dtype(0.7)), rtol=1e-5)
    np.testing.assert_allclose(g[0], numerical_grad(loops_and_helpers, (x[0].astype(float), 0.7), 0),
                               rtol=1e-3 if dtype == np.float32 else 1e-6)


def test_check_on_structures_methods_and_tuples():
    p = {"a": np.ones(2), "b": np.arange(2.0), "c": [1.5, np.array([2.0, 3.0])]}
    g = srcgrad.grad(structure_loss, check=True)(p)
    np.testing.assert_allclose(g["a"], [0.0, 1.0])
    np.testing.assert_allclose(g["b"], [1.0, 1.0])
    assert g["c"][0] == pytest.approx(9.0)
    np.testing.assert_allclose(g["c"][1], [1.0, 1.0])
    model = Scaled(np.ones((2, 2)), 0.5)
    x = np.array([[1.0, 2.0]])
    gm = srcgrad.grad(method_loss, check=True)(model, x)
    np.testing.assert_allclose(gm.w, 0.5 * 2 * x.T @ (x @ model.w))


def test_check_covers_float_attributes():
    model = Scaled(np.ones((2, 2)), 0.5)
    x = np.array([[1.0, 2.0]])
    gm = srcgrad.grad(method_loss, check=True)(model, x)
    assert gm.scale == pytest.approx(np.sum((x @ model.w) ** 2))


def test_check_with_aux_intermediates_and_varargs():
    def f(x, *ws):
        h = x * ws[0]
        return np.sum(h * ws[1]), {"h": h}

    x, w0, w1 = np.ones(3), np.arange(3.0), np.full(3, 2.0)
    (g, aux) = srcgrad.grad(f, wrt=(1, 2), has_aux=True, check=True)(x, w0, w1)
    np.testing.assert_allclose(g[0], x * w1)
    np.testing.assert_allclose(aux["h"], x * w0)

    def k(x):
        h = np.sin(x)
        return np.sum(h * h)

    g, watched = srcgrad.grad(k, intermediates=("h",), check=True)(np.ones(2))
    np.testing.assert_allclose(watched["h"], 2 * np.sin(np.ones(2)))


def test_check_vjp_checks_each_pullback():
    x, w = np.ones((3, 4)), np.linspace(-1, 1, 8).reshape(4, 2)
    value, pullback = srcgrad.vjp(lambda x, w: np.tanh(x @ w), wrt=1, check=True)(x, w)
    u = np.arange(6.0).reshape(3, 2)
    np.testing.assert_allclose(pullback(u), x.T @ (u * (1 - value ** 2)))


def _wrong_sin(x):
    return np.sin(x)


srcgrad.custom_adjoint(_wrong_sin)


@_wrong_sin.defadjoint
def _wrong_sin_adjoint(ans_bar, ans, x):
    return ans_bar * np.cos(x) * 1.01  # deliberately 1% off


def uses_wrong_rule(x):
    return np.sum(_wrong_sin(x) * 2.0)


@pytest.mark.parametrize("mode", ["grad", "value_and_grad", "vjp"])
def test_check_catches_a_wrong_gradient(mode):
    transform = getattr(srcgrad, mode)
    srcgrad.grad(uses_wrong_rule)(np.ones(3))  # unchecked: no error, a wrong answer
    with pytest.raises(srcgrad.GradientCheckError) as excinfo:
        out = transform(uses_wrong_rule, check=True)(np.ones(3))
        if mode == "vjp":
            out[1](1.0)
    message = str(excinfo.value)
    line = inspect.getsourcelines(uses_wrong_rule)[1]
    assert message.startswith(f"{HERE}:{line}:")
    assert "uses_wrong_rule" in message
    got, expected = excinfo.value.srcgrad_value, excinfo.value.expected
    assert got == pytest.approx(1.01 * expected, rel=1e-4)
    assert repr(got) in message and repr(expected) in message
    assert isinstance(excinfo.value, AssertionError) and not isinstance(excinfo.value, srcgrad.UserCodeError)


def test_check_catches_a_wrong_value(monkeypatch):
    gf = srcgrad.value_and_grad(mlp, wrt=1, check=True)
    x, w = np.ones((2, 4)), np.ones((4, 2)) * 0.1
    gf(x, w)
    program = next(iter(gf._cache.values()))
    right = program.function
    monkeypatch.setattr(program, "function", lambda *a: (right(*a)[0] + 1e-6, right(*a)[1]))
    with pytest.raises(srcgrad.GradientCheckError, match="different value of mlp"):
        gf(x, w)


def test_environment_variable_turns_checking_on(monkeypatch):
    monkeypatch.setenv("SRCGRAD_CHECK", "1")
    with pytest.raises(srcgrad.GradientCheckError):
        srcgrad.grad(uses_wrong_rule)(np.ones(3))
    assert srcgrad.grad(uses_wrong_rule, check=False)(np.ones(3)).shape == (3,)  # check=False wins
    monkeypatch.setenv("SRCGRAD_CHECK", "0")
    srcgrad.grad(uses_wrong_rule)(np.ones(3))


def draws(x):
    noise = np.random.normal(size=3)
    jitter = random.random()
    return np.sum(x * noise) + jitter * np.sum(x)


def test_check_replays_random_numbers_and_leaves_the_state_as_one_call_does():
    np.random.seed(3)
    random.seed(3)
    g = srcgrad.grad(draws, check=True)(np.ones(3))
    after = np.random.normal(), random.random()
    np.random.seed(3)
    random.seed(3)
    expected = np.random.normal(size=3) + random.random()
    np.testing.assert_allclose(g, expected)
    assert (np.random.normal(), random.random()) == after  # as if f had run once


# ---- 2. errors point at the user's line, without srcgrad's frames ------------------------
def uses_spherical_jn(x):  # a SciPy function without a rule, whose source srcgrad cannot follow
    return np.sum(scipy.special.spherical_jn(1, x))


def with_try(x):
    try:
        y = x * 2
    except ValueError:
        y = x
    return np.sum(y)


def _srcgrad_frames(tb):
    return [f for f in traceback.extract_tb(tb) if os.path.abspath(f.filename).startswith(SRCGRAD_DIR)]


def test_traceback_ends_at_the_users_call(monkeypatch):
    monkeypatch.delenv("SRCGRAD_TRACEBACK", raising=False)
    with pytest.raises(srcgrad.UnsupportedSyntaxError) as excinfo:
        srcgrad.grad(with_try)(np.ones(3))
    frames = traceback.extract_tb(excinfo.tb)
    internal = _srcgrad_frames(excinfo.tb)
    assert len(internal) == 1 and internal[0].name == "__call__"  # only the re-raise at the boundary
    assert frames[-2].filename == __file__ and "srcgrad.grad(with_try)" in frames[-2].line
    assert _first_line(excinfo).startswith(f"{__file__}:{_line_of(with_try, 'try:')}:")


def test_srcgrad_traceback_keeps_the_internals(monkeypatch):
    monkeypatch.setenv("SRCGRAD_TRACEBACK", "1")
    with pytest.raises(srcgrad.UnsupportedSyntaxError) as excinfo:
        srcgrad.grad(with_try)(np.ones(3))
    names = {os.path.basename(f.filename) for f in _srcgrad_frames(excinfo.tb)}
    assert {"pipeline.py", "validate.py"} <= names


def test_source_errors_end_at_the_users_call():
    with pytest.raises(srcgrad.UnsupportedSyntaxError) as excinfo:
        srcgrad.source(srcgrad.grad(with_try), np.ones(3))
    assert len(_srcgrad_frames(excinfo.tb)) == 1
    assert _first_line(excinfo).startswith(f"{__file__}:{_line_of(with_try, 'try:')}:")


def test_wrt_errors_end_at_the_users_call():
    with pytest.raises(srcgrad.WrtError) as excinfo:
        srcgrad.grad(mlp, wrt="nope")
    internal = _srcgrad_frames(excinfo.tb)
    assert len(internal) <= 2 and all(f.filename.endswith("api.py") for f in internal)


@pytest.mark.parametrize("optimize", [True, False])
def test_unsupported_code_inside_a_library_names_the_users_call_and_the_library_line(optimize):
    with pytest.raises(srcgrad.UnsupportedSyntaxError) as excinfo:
        srcgrad.grad(uses_spherical_jn, optimize=optimize)(np.ones(3))
    message = str(excinfo.value)
    first, shown, caret = message.splitlines()[:3]
    line = _line_of(uses_spherical_jn, "scipy.special.spherical_jn(1, x)")
    assert first.startswith(f"{__file__}:{line}:")
    assert "`scipy.special.spherical_jn`" in first
    assert caret.index("^") == shown.index("scipy.special.spherical_jn")
    # The library's line is there as a note, not as the place to fix.
    notes = [ln for ln in message.splitlines() if ": note: " in ln]
    assert notes and "scipy" in notes[0]  # (the line of SciPy's code that srcgrad could not follow)
    assert "help: give `scipy.special.spherical_jn` a derivative rule" in message
    assert len(_srcgrad_frames(excinfo.tb)) == 1


def calls_library_in_a_helper(x):
    return np.sum(library_helper(x) * 2.0)


def library_helper(x):
    y = x * 3.0
    return scipy.special.spherical_jn(1, y)


def test_library_call_inside_a_helper_names_the_helpers_line():
    with pytest.raises(srcgrad.UnsupportedSyntaxError) as excinfo:
        srcgrad.grad(calls_library_in_a_helper)(np.ones(3))
    assert _first_line(excinfo).startswith(f"{__file__}:{_line_of(library_helper, 'spherical_jn(1, y)')}:")


def test_no_error_names_srcgrads_own_files():
    for fn in (uses_spherical_jn, with_try, calls_library_in_a_helper):
        with pytest.raises(srcgrad.UserCodeError) as excinfo:
            srcgrad.grad(fn)(np.ones(3))
        assert SRCGRAD_DIR not in _first_line(excinfo)


# ---- 3. crashes that became refusals ------------------------------------------------
def inner_loss(x):
    return np.sum(x ** 2)


d_inner = srcgrad.grad(inner_loss)


def calls_a_gradient(x):
    g = d_inner(x)
    return np.sum(g * x)


def calls_a_gradient_in_a_loop(x):
    total = 0.0
    for i in range(2):
        total = total + np.sum(d_inner(x * i))
    return total


def calls_a_gradient_passed_in(x, fn):
    return np.sum(fn(x))


class UsesGradient:
    def __init__(self):
        self.d = d_inner

    def loss(self, x):
        return np.sum(self.d(x))


def calls_a_method(x):
    return USES_GRADIENT.loss(x)


USES_GRADIENT = UsesGradient()


@pytest.mark.parametrize("optimize", [True, False])
@pytest.mark.parametrize("fn, expected", [
    (calls_a_gradient, lambda x: 4 * x),  # sum(2x * x)
    (calls_a_gradient_in_a_loop, lambda x: 2 + 0 * x),  # d_inner(0 * x) + d_inner(x)
    (calls_a_gradient_passed_in, lambda x: 2 + 0 * x),
    (calls_a_method, lambda x: 2 + 0 * x),
], ids=["direct", "loop", "passed-in", "method"])
def test_a_gradient_inside_a_loss_is_differentiated(fn, expected, optimize):
    # (these were refused as "higher-order derivatives ... not supported yet": reverse over
    # reverse now pulls back through the Hessian, tests/modes/test_reverse_over_reverse.py)
    x = np.array([1.0, -2.0, 0.5])
    args = (x, d_inner) if fn is calls_a_gradient_passed_in else (x,)
    np.testing.assert_allclose(srcgrad.grad(fn, optimize=optimize)(*args), expected(x))


def inner_with_aux(x):
    return np.sum(x ** 2), x


d_inner_aux = srcgrad.grad(inner_with_aux, has_aux=True)
hvp_inner = srcgrad.hvp(inner_loss)


def calls_a_gradient_with_aux(x):
    g, _ = d_inner_aux(x)
    return np.sum(g * x)


def calls_an_hvp(x):
    return np.sum(hvp_inner(x, x))


@pytest.mark.parametrize("optimize", [True, False])
@pytest.mark.parametrize("fn, marker", [
    (calls_a_gradient_with_aux, "g, _ = d_inner_aux(x)"),
    (calls_an_hvp, "return np.sum(hvp_inner(x, x))"),
], ids=["has_aux", "hvp"])
def test_a_gradient_function_srcgrad_cannot_differentiate_is_refused_at_the_users_line(fn, marker, optimize):
    with pytest.raises(srcgrad.UnsupportedSyntaxError) as excinfo:
        srcgrad.grad(fn, optimize=optimize)(np.ones(3))
    message = str(excinfo.value)
    assert _first_line(excinfo).startswith(f"{__file__}:{_line_of(fn, marker)}:")
    assert "a function srcgrad made" in message and "has_aux=" in message
    assert "api.py" not in message and "higher.py" not in message


def test_a_gradient_of_a_constant_inside_a_loss_is_a_constant():
    def f(x, c):
        return np.sum(x * d_inner(c))

    c = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(srcgrad.grad(f)(np.ones(3), c), 2 * c)


@pytest.mark.parametrize("optimize", [True, False])
def test_vjp_pullback_checks_the_cotangents_shape(optimize):
    _, pullback = srcgrad.vjp(lambda x: np.sin(x) * 2, optimize=optimize)(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"shape of its output \(2, 3\).*shape \(3,\)"):
        pullback(np.ones(3))
    with pytest.raises(ValueError, match=r"shape \(\)"):
        pullback(1.0)
    np.testing.assert_allclose(pullback(np.ones((2, 3))), 2 * np.cos(np.ones((2, 3))))
    _, pullback = srcgrad.vjp(lambda x: (x * 2, np.sum(x)))(np.ones(2))
    with pytest.raises(ValueError, match="tuple of 2 adjoints"):
        pullback(np.ones(2))
    with pytest.raises(ValueError, match=r"value\[1\] \(\)"):
        pullback((np.ones(2), np.ones(2)))
    np.testing.assert_allclose(pullback((np.ones(2), 1.0)), [3.0, 3.0])


def returns_none_literally(x):
    x = x * 2
    return None  # noqa: RET501, PLR1711 - the case under test


def returns_none_on_a_path(x):
    if np.sum(x) > 0:
        return np.sum(x * 2)


def returns_none_on_a_path_in_a_loop(x):
    out = None
    for i in range(2):
        if np.sum(x) > i:
            out = np.sum(x) * i
    return out


@pytest.mark.parametrize("optimize", [True, False])
def test_a_none_output_is_refused(optimize):
    with pytest.raises(srcgrad.UserCodeError) as excinfo:
        srcgrad.grad(returns_none_literally, optimize=optimize)(np.ones(3))
    assert _first_line(excinfo).startswith(f"{__file__}:{_line_of(returns_none_literally, 'return None')}:")
    for fn in (returns_none_on_a_path, returns_none_on_a_path_in_a_loop):
        g = srcgrad.grad(fn, optimize=optimize)
        np.testing.assert_allclose(g(np.full(3, 1.0)), numerical_grad(fn, (np.full(3, 1.0),), 0))
        for transform in (srcgrad.grad, srcgrad.value_and_grad, srcgrad.vjp):
            with pytest.raises(srcgrad.UserCodeError, match="returned None") as excinfo:
                transform(fn, optimize=optimize)(-np.ones(3))
            assert _first_line(excinfo).startswith(f"{__file__}:")


def complex_output(x):
    z = x * 1j
    return np.sum(z ** 2)


def abs_squared(z):
    return np.sum(np.abs(z) ** 2)


@pytest.mark.parametrize("optimize", [True, False])
def test_complex_values_are_refused(optimize):
    for z in (np.array([1 + 1j, 2.0]), 1 + 1j, np.complex64(1 + 1j)):
        with pytest.raises(srcgrad.WrtError, match="complex") as excinfo:
            srcgrad.grad(abs_squared, optimize=optimize)(z)
        assert _first_line(excinfo).startswith(f"{__file__}:")
    for transform in (srcgrad.grad, srcgrad.value_and_grad, srcgrad.vjp):
        with pytest.raises(srcgrad.UserCodeError, match="complex") as excinfo:
            transform(complex_output, optimize=optimize)(np.ones(3))
        assert _first_line(excinfo).startswith(f"{__file__}:")


def test_named_tuple_fields_under_check():
    Params = namedtuple("Params", ["w", "b"])

    def f(p, x):
        return np.sum((x * p.w + p.b) ** 2)

    p = Params(np.array([1.0, 2.0]), 0.5)
    g = srcgrad.grad(f, check=True)(p, np.array([1.0, -1.0]))
    r = np.array([1.0, -1.0]) * p.w + p.b
    np.testing.assert_allclose(g.w, 2 * r * np.array([1.0, -1.0]))
    assert g.b == pytest.approx(np.sum(2 * r))


def relu_sum(x):
    return np.sum(np.maximum(x, 0.0) * np.arange(1.0, 4.0))


def test_check_warns_instead_of_failing_at_a_kink():
    x = np.array([0.0, 1.0, -2.0])  # the ReLU's kink at x[0]: srcgrad's convention gives 0 there
    with pytest.warns(srcgrad.errors.GradientCheckWarning, match="not smooth"):
        g = srcgrad.grad(relu_sum, check=True)(x)
    np.testing.assert_allclose(g, [0.0, 2.0, 0.0])
    with pytest.raises(srcgrad.GradientCheckError):  # a wrong rule away from a kink still raises
        srcgrad.grad(uses_wrong_rule, check=True)(np.array([0.0, 1.0, -2.0]))
