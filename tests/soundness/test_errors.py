"""Bad input gets an error that names the user's file and line, shows it with a
caret, and says what to do instead — never a crash inside the compiler."""
from __future__ import annotations

import math
import traceback

import numpy as np
import pytest

import srcgrad

HERE = __file__.rsplit("/", 1)[-1]


def _line_of(fn, text):
    import inspect

    lines, first = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if text in line:
            return first + i
    raise AssertionError(text)


def no_rule(x):
    return np.sum(np.i0(x))


def calls_c_function(x):
    return np.sum(np.float_power(x, 0.7))  # (np.power has a rule: rules/elementwise.py)


def calls_helper_with_a_try(x):
    return np.sum(helper_with_a_try(x))


def helper_with_a_try(x):
    try:
        y = x * 2
    except ValueError:
        y = x
    return y


def attribute_assignment(x):
    y = x * 1
    y.flags.writeable = False
    return np.sum(y)


def non_scalar(x):
    return x * 2


def takes_int(x, n):
    return np.sum(x) * n


def _message(excinfo):
    return str(excinfo.value)


@pytest.mark.parametrize("fn, kind, marker, advice", [
    (no_rule, srcgrad.NoDerivativeRuleError, "np.i0(x)", "@srcgrad.defadjoint(i0)"),
    (calls_c_function, srcgrad.NoDerivativeRuleError, "np.float_power(x, 0.7)", "@srcgrad.defadjoint(float_power)"),
    (calls_helper_with_a_try, srcgrad.UnsupportedSyntaxError, "    try:", "error handling"),
    (attribute_assignment, srcgrad.UnsupportedSyntaxError, "y.flags.writeable = False", "y[i] = ..."),
    (non_scalar, srcgrad.NonScalarOutputError, "return x * 2", "srcgrad.vjp"),
], ids=lambda v: getattr(v, "__name__", None))
def test_error_names_file_line_caret_and_advice(fn, kind, marker, advice):
    with pytest.raises(kind) as excinfo:
        srcgrad.grad(fn)(np.ones(3) if fn is not calls_c_function else 0.5)
    message = _message(excinfo)
    located = helper_with_a_try if fn is calls_helper_with_a_try else fn
    line = _line_of(located, marker)
    first, shown, caret = message.splitlines()[:3]
    assert first.startswith(f"{__file__}:{line}:")
    assert shown.strip() == marker.strip() or marker in shown
    # The caret sits under the offending construct.
    col = caret.index("^")
    assert shown[col:].startswith(marker.split("(")[0].split(" ")[0][:2])
    assert advice in message


def test_caret_points_at_the_call_without_a_rule():
    with pytest.raises(srcgrad.NoDerivativeRuleError) as excinfo:
        srcgrad.grad(no_rule)(np.ones(3))
    _, shown, caret = _message(excinfo).splitlines()[:3]
    assert shown[caret.index("^"):].startswith("np.i0(x)")


def test_wrt_naming_no_parameter():
    with pytest.raises(srcgrad.WrtError) as excinfo:
        srcgrad.grad(takes_int, wrt="m")
    message = _message(excinfo)
    assert f"{__file__}:{_line_of(takes_int, 'def takes_int')}:" in message
    assert "names no parameter" in message and "(x, n)" in message


@pytest.mark.parametrize("wrt", [5, -1, 1.5, ()])
def test_wrt_out_of_range_or_wrong_type(wrt):
    with pytest.raises(srcgrad.WrtError):
        srcgrad.grad(takes_int, wrt=wrt)


@pytest.mark.parametrize("n", [2, np.array([1, 2, 3]), True])
def test_integer_argument_in_wrt(n):
    with pytest.raises(srcgrad.WrtError) as excinfo:
        srcgrad.grad(takes_int, wrt=1)(np.ones(3), n)
    assert "integer" in _message(excinfo) and "float" in _message(excinfo)


def test_no_source_exec_and_builtin():
    namespace = {}
    exec("def f(x):\n    return x * 2\n", namespace)
    with pytest.raises(srcgrad.NoSourceError) as excinfo:
        srcgrad.grad(namespace["f"])(1.0)
    assert "def" in _message(excinfo)
    with pytest.raises(srcgrad.NoSourceError):  # (np.sin, math.sin: their rules, test_library_functions.py)
        srcgrad.grad(np.fft.fft)(np.ones(3))
    with pytest.raises(srcgrad.NoSourceError):
        srcgrad.grad(math.gcd)(1.0)


def test_non_scalar_output_of_unknown_rank_is_checked_at_run_time():
    def f(x):
        return x * 2

    with pytest.raises(srcgrad.NonScalarOutputError) as excinfo:
        srcgrad.grad(f)([1.0, 2.0])  # a list: rank unknown at compile time
    assert "srcgrad.vjp" in _message(excinfo)


def shape_mismatch(w, x):
    h = x @ w
    return np.sum(h)


def test_tracebacks_show_generated_lines():
    """Generated code is in linecache: a failure inside it shows its source line."""
    with pytest.raises(ValueError) as excinfo:
        srcgrad.grad(shape_mismatch)(np.ones((3, 2)), np.ones((4, 5)))
    frames = [f for f in traceback.extract_tb(excinfo.tb) if f.filename.startswith("<srcgrad")]
    assert frames and frames[-1].line == "h = x @ w"


def test_errors_are_srcgrad_errors_and_builtin_kinds():
    assert issubclass(srcgrad.WrtError, ValueError)
    assert issubclass(srcgrad.NonScalarOutputError, ValueError)
    assert issubclass(srcgrad.NoSourceError, TypeError)
    for kind in (srcgrad.UnsupportedSyntaxError, srcgrad.NoDerivativeRuleError):
        assert issubclass(kind, srcgrad.SrcgradError)
