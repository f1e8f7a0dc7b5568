"""Messages in the user's words: refusals name the user's function, file and line (not one of
srcgrad's own names) for third-order derivatives, imports inside a function, hvp over
run-time calls, list methods, partials, and the CLI reports a user error without a
traceback."""
from __future__ import annotations

import math

import numpy as np
import pytest

import srcgrad
from srcgrad import errors
from tests.finite_differences import numerical_grad


def test_cli_reports_a_user_error_without_a_traceback(tmp_path, capsys):
    from srcgrad import cli

    (tmp_path / "m.py").write_text("import numpy as np\n\ndef loss(x):\n    return np.sum(x)\n")
    assert cli.main(["show", f"{tmp_path}/m.py:loss", "--wrt", "q"]) == 1
    err = capsys.readouterr().err
    assert "names no parameter" in err and "Traceback" not in err


HERE = __file__


X = np.array([0.5, 1.0, 2.0])


def _line(fn, text):
    """The line number of ``text`` in this file, at or after ``fn``'s def."""
    lines = open(HERE).read().splitlines()
    start = fn.__code__.co_firstlineno
    return next(i + 1 for i in range(start - 1, len(lines)) if text in lines[i])


# ---- srcgrad's own names kept out of messages ----------------------------------------------

def sin_cubed(x):
    return np.sin(x) * x ** 3


def test_fifth_order_is_refused_at_the_users_function():
    grad = srcgrad.grad
    with pytest.raises(errors.UnsupportedSyntaxError, match="a fifth by nesting") as info:
        grad(grad(grad(grad(grad(sin_cubed)))))(0.3)
    assert "_def" not in str(info.value).splitlines()[1]
    assert info.value.origin.line == sin_cubed.__code__.co_firstlineno


def test_grad_of_grad_still_right():
    g = srcgrad.grad(srcgrad.grad(sin_cubed))
    assert g.__name__ == "grad(grad(sin_cubed))"
    d1 = srcgrad.grad(sin_cubed)
    np.testing.assert_allclose(g(0.3), (d1(0.3 + 1e-6) - d1(0.3 - 1e-6)) / 2e-6, rtol=1e-6)


def imports_inside(x):
    from math import sin
    return sin(x)


def test_an_import_inside_is_named_so():
    with pytest.raises(errors.UnsupportedSyntaxError, match="an import inside the function") as info:
        srcgrad.grad(imports_inside)(0.3)
    assert "importfrom" not in str(info.value)
    assert info.value.origin.line == _line(imports_inside, "from math import sin")
    assert "import at the top of the module" in info.value.advice


class Scaled:
    def __init__(self):
        self.w = np.array([0.3, -0.2, 0.9])
        self.k = 2.0

    def forward(self, x):
        return np.sum(np.tanh(x * self.w) ** 2) * self.k


SCALED = Scaled()


def scaled_loss(m, x):
    return m.forward(x)


def scaled_global(x):
    return SCALED.forward(x)


def test_hvp_refusal_names_what_the_gradient_code_runs():
    with pytest.raises(errors.UnsupportedSyntaxError, match="`\\*` on a value whose kind") as info:
        srcgrad.hvp(scaled_loss, wrt=1)(SCALED, X, X)
    assert "specialised" not in str(info.value)
    with pytest.raises(errors.UnsupportedSyntaxError, match="the method `forward`") as info:
        srcgrad.hvp(scaled_global)(X, X)
    assert "specialised" not in str(info.value)


# ---- a list's methods named as such --------------------------------------------------------

def reversed_list(x):
    vals = list(x)
    vals.reverse()
    return vals[0] * vals[1]


def sorted_list(x):
    vals = list(x)
    vals.sort()
    return vals[0] * vals[1]


@pytest.mark.parametrize("f", [reversed_list, sorted_list])
def test_a_list_method_is_not_called_the_array_method(f):
    """`list(x)` is a list of the rows: its own `reverse`/`sort` (once refused, now each with
    an adjoint rule: tests/language/test_container_operations.py)."""
    np.testing.assert_allclose(srcgrad.grad(f)(X), numerical_grad(f, (X,), 0), rtol=1e-6, atol=1e-8)


# ---- a functools.partial named by its function ---------------------------------------------

def powf(x, p):
    return x ** p


CUBED = __import__("functools").partial(powf, p=3)


def calls_partial(x):
    return np.sum(CUBED(x))


def test_a_partial_is_named_by_its_function():
    with pytest.raises(errors.NoDerivativeRuleError, match=r"functools.partial \(of `powf`\)") as info:
        srcgrad.grad(calls_partial)(X)
    assert "0x" not in str(info.value) and "functools.functools" not in str(info.value)
    assert "`powf(<your arguments>, p=3)`" in info.value.advice
    assert info.value.origin.line == _line(calls_partial, "CUBED(x)")


# ---- messages met on first use (the README's programs) -----------------------------------

def loss(w, x):
    h = x @ w
    return np.sum(np.tanh(h) ** 2)


def helper(h, b):
    return np.tanh(h + b)


def loss_with_helper(w, b, x):
    h = x @ w
    return np.sum(helper(h, b) ** 2)


def test_wrong_shape_in_the_forward_sweep_names_the_users_line():
    with pytest.raises(ValueError, match="matmul") as info:  # NumPy's own error, kept
        srcgrad.grad(loss)(np.ones((2, 3)), np.ones((4, 3)))
    notes = info.value.__notes__
    assert notes == [f"srcgrad: in the forward sweep srcgrad generated for {HERE}:{_line(loss, 'h = x @ w')}"
                     "\n    h = x @ w"]


@pytest.mark.parametrize("make", [srcgrad.grad, srcgrad.value_and_grad,
                                  lambda f: srcgrad.grad(f, wrt=(0, 1)), srcgrad.jvp, srcgrad.hvp])
def test_wrong_shape_inside_a_helper_names_the_helpers_line(make):
    w, b, x = np.ones((3, 2)), np.ones(5), np.ones((4, 3))
    extra = (w,) if make in (srcgrad.jvp, srcgrad.hvp) else ()
    with pytest.raises(ValueError, match="broadcast") as info:
        make(loss_with_helper)(w, b, x, *extra)
    where = f"{HERE}:{_line(helper, 'return np.tanh(h + b)')}\n    return np.tanh(h + b)"
    assert any(where in note for note in info.value.__notes__), info.value.__notes__


def test_wrong_shape_in_the_backward_sweep_names_the_users_line():
    w, x = np.ones((3, 2)), np.ones((4, 3))
    with pytest.raises(ValueError) as info:  # a hook giving h's adjoint the wrong shape
        srcgrad.grad(loss, hooks={"h": lambda h_bar: h_bar[:1, :1].repeat(3, 0)})(w, x)
    line = _line(loss, "h = x @ w")
    assert f"srcgrad: in the backward sweep srcgrad generated for {HERE}:{line}" in info.value.__notes__[0]


def test_forgotten_tangent_and_vector_are_named():
    w, x = np.ones((3, 2)), np.ones((4, 3))
    with pytest.raises(TypeError, match=r"^the tangent of w is missing: the jvp of loss takes loss's "
                                        r"arguments \(w, x\), then the tangent of w$"):
        srcgrad.jvp(loss)(w, x)
    with pytest.raises(TypeError, match=r"^the vector of w is missing: hvp\(loss\) takes"):
        srcgrad.hvp(loss)(w, x)
    with pytest.raises(TypeError, match=r"tangents of \(w, x\) as a tuple is missing"):
        srcgrad.jvp(loss, wrt=(0, 1))(w, x)
    with pytest.raises(TypeError, match=r"^the tangent of w is missing: jvp\(grad\(loss\)\)"):
        srcgrad.jvp(srcgrad.grad(loss))(w, x)


def test_a_missing_argument_names_the_function():
    with pytest.raises(TypeError, match=r"^loss\(\) missing a required argument: 'x' \(the grad of loss "
                                        r"takes loss's arguments \(w, x\)\)$"):
        srcgrad.grad(loss)(np.ones((3, 2)))


@pytest.mark.parametrize("fn, spelled, owner", [(np.fft.fft, "np.fft.fft", "NumPy"),
                                                (np.fft.rfft, "np.fft.rfft", "NumPy"),
                                                (math.gcd, "math.gcd", "Python")])
def test_a_library_function_without_a_rule_is_named_as_not_the_users(fn, spelled, owner):
    with pytest.raises(srcgrad.errors.NoSourceError) as info:
        srcgrad.grad(fn)(np.ones(3))
    text = str(info.value)
    assert f"{spelled} is {owner}'s function, not yours, and srcgrad has no derivative rule for it" in text
    assert f"@srcgrad.defadjoint({spelled})" in text
    assert "_pocketfft" not in text


@pytest.mark.parametrize("fn, expected", [(np.sin, np.cos), (np.tanh, lambda x: 1 - np.tanh(x) ** 2),
                                          (np.exp, np.exp)])
def test_a_library_function_with_a_rule_is_differentiated(fn, expected):
    x = np.array([0.3, -1.2])
    np.testing.assert_allclose(srcgrad.elementwise_grad(fn)(x), expected(x), rtol=1e-12)


@srcgrad.custom_adjoint
def tripled_relu(x):
    return np.maximum(x, 0)


@tripled_relu.defadjoint
def tripled_relu_adjoint(ans_bar, ans, x):
    return ans_bar * 3.0  # deliberately wrong: the derivative is 1 where x > 0


def uses_tripled(w, x):
    return np.sum(tripled_relu(x @ w))


def test_check_blames_the_users_own_rule_at_its_line():
    rng = np.random.default_rng(1)
    w, x = rng.normal(size=(3, 2)), rng.normal(size=(4, 3))
    with pytest.raises(srcgrad.errors.GradientCheckError) as info:
        srcgrad.grad(uses_tripled, check=True)(w, x)
    text = str(info.value)
    first = tripled_relu_adjoint.__code__.co_firstlineno
    assert text.startswith(f"{HERE}:{uses_tripled.__code__.co_firstlineno}:1: error: srcgrad's gradient of "
                           "uses_tripled disagrees")
    assert f"the derivative rule you wrote for `tripled_relu` ({HERE}:{first}), used here, disagrees with " \
           "central differences of `tripled_relu` itself" in text
    assert "its adjoint of x for ans_bar=1 is 3.0" in text
    assert "defect in srcgrad" not in text
    assert text.count(repr(info.value.srcgrad_value)) == 1  # each number once


def _writes_through_a_commented_view(x):
    y = x * 2.0
    v = y[1:]  # a view, # with a hash inside
    v *= 3.0
    return np.sum(y)


def test_code_quoted_back_in_advice_leaves_the_users_comment_out():
    with pytest.raises(errors.UnsupportedSyntaxError) as info:
        srcgrad.grad(_writes_through_a_commented_view)(np.ones(3))
    assert "(`y[1:] *= ...`)" in str(info.value)
