"""Custom adjoints given as lambdas, on methods (the receiver as `self`, in reverse and
forward mode), and rules returning too few adjoints refused at their return."""

import numpy as np
import pytest

import srcgrad
from srcgrad import errors
from tests.finite_differences import numerical_grad


HERE = __file__


X = np.array([0.5, 1.0, 2.0])


def _line(fn, text):
    """The line number of ``text`` in this file, at or after ``fn``'s def."""
    lines = open(HERE).read().splitlines()
    start = fn.__code__.co_firstlineno
    return next(i + 1 for i in range(start - 1, len(lines)) if text in lines[i])


# ---- custom adjoints ---------------------------------------------------------------------

@srcgrad.custom_adjoint
def power(x, *, p):
    return x ** p


@power.defadjoint
def power_adjoint(ans_bar, ans, x, *, p):
    return ans_bar * p * x ** (p - 1)  # one value: `p` has no default, so two are due


def sum_power(x, p):
    return np.sum(power(x, p=p))


def test_rule_returning_too_few_adjoints_is_refused_at_its_return():
    with pytest.raises(errors.UserCodeError, match="returns 1 value, but must return one adjoint per "
                       r"parameter without a default value \(2 here\): `x_bar, p_bar`") as info:
        srcgrad.grad(sum_power, wrt=1)(X, 2.5)
    assert info.value.origin.line == _line(power_adjoint, "return ans_bar * p")
    assert info.value.origin.filename == HERE


def _helper_square(x):
    return x * x


@srcgrad.custom_adjoint
def pair(a, b):
    return a * b


@pair.defadjoint
def pair_adjoint(ans_bar, ans, a, b):
    return _helper_square(ans_bar) * 0 + ans_bar * b  # (calls a helper of yours: run, not inlined)


def test_rule_run_as_a_function_returning_too_few_adjoints_is_a_clear_error():
    def f(x):
        return np.sum(pair(x, np.sin(x)))
    with pytest.raises(TypeError, match="`pair_adjoint`, the adjoint rule of `.*pair` returns 1 value"):
        srcgrad.grad(f)(X)


def cube(x):
    return x ** 3


srcgrad.defadjoint(cube)(lambda ans_bar, ans, x: ans_bar * 3 * x ** 2)


def lambda_square(x):
    return x * x


first, second = (srcgrad.defadjoint(lambda_square)(lambda ans_bar, ans, x: ans_bar * 2 * x),
                 lambda ans_bar, ans, x: ans_bar * 99 * x)  # (another lambda on the line: not taken)


def uses_lambda_rules(x):
    return np.sum(cube(x) * x + lambda_square(x) * np.sin(x))


def test_lambda_as_a_rule():
    np.testing.assert_allclose(srcgrad.grad(uses_lambda_rules)(X), numerical_grad(uses_lambda_rules, [X], 0),
                               rtol=1e-6)


def test_lambda_rule_in_a_loop_and_a_helper():
    def helper(x):
        return cube(x) * 2.0

    def f(x):
        total = 0.0
        for i in range(3):
            total = total + np.sum(helper(x) * i)
        return total
    np.testing.assert_allclose(srcgrad.grad(f)(X), numerical_grad(f, [X], 0), rtol=1e-6)


def test_lambda_rule_without_a_tangent_is_refused_by_forward_mode_by_name():
    with pytest.raises(errors.NoDerivativeRuleError, match="no tangent rule for `.*cube`"):
        srcgrad.jvp(uses_lambda_rules)(X, np.ones(3))
    with pytest.raises(errors.UnsupportedSyntaxError, match="cube"):
        srcgrad.hvp(uses_lambda_rules)(X, np.ones(3))


class Model:
    def __init__(self):
        self.w = np.array([0.3, -0.2, 0.9])

    @srcgrad.custom_adjoint
    def act(self, x):
        return np.tanh(x * self.w)

    def forward(self, x):
        return np.sum(self.act(x) ** 2)


@Model.act.defadjoint
def act_adjoint(ans_bar, ans, self, x):
    return None, ans_bar * (1 - ans ** 2) * self.w


MODEL = Model()


def through_method(x):
    return np.sum(MODEL.act(x) * x)


def through_forward(x):
    return MODEL.forward(x)


def through_class(x):
    return np.sum(Model.act(MODEL, x))


@pytest.mark.parametrize("f", [through_method, through_forward, through_class])
def test_custom_adjoint_on_a_method_takes_the_receiver_as_self(f):
    np.testing.assert_allclose(srcgrad.grad(f)(X), numerical_grad(f, [X], 0), rtol=1e-6)


def test_custom_adjoint_on_a_method_in_forward_mode():
    with pytest.raises(errors.NoDerivativeRuleError, match="no tangent rule"):
        srcgrad.jvp(through_forward)(X, np.ones(3))

    class Tanh:
        def __init__(self):
            self.w = np.array([0.3, -0.2, 0.9])

        @srcgrad.custom_adjoint
        def act(self, x):
            return np.tanh(x * self.w)

    @Tanh.act.defadjoint
    def _(ans_bar, ans, self, x):
        return None, ans_bar * (1 - ans ** 2) * self.w

    @Tanh.act.defjvp
    def _(ans, self, x, self_dot=None, x_dot=None):
        return (1 - ans ** 2) * self.w * x_dot

    layer = Tanh()

    def f(x):
        return np.sum(layer.act(x) ** 2)
    v = np.array([1.0, -2.0, 0.5])
    _, tangent = srcgrad.jvp(f)(X, v)
    np.testing.assert_allclose(tangent, numerical_grad(f, [X], 0) @ v, rtol=1e-6)
