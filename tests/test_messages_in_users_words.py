"""Messages in the user's words: refusals name the user's function, file and line (not one of
srcgrad's own names) for third-order derivatives, imports inside a function, hvp over
run-time calls, list methods, partials, and the CLI reports a user error without a
traceback."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from srcgrad import errors
from conftest import numerical_grad


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


def test_third_order_names_the_users_function():
    with pytest.raises(errors.UnsupportedSyntaxError, match=r"the grad of `grad\(grad\(sin_cubed\)\)`") as info:
        srcgrad.grad(srcgrad.grad(srcgrad.grad(sin_cubed)))(0.3)
    assert "second_derivative" not in str(info.value)
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
    an adjoint rule: tests/test_container_operations.py)."""
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
