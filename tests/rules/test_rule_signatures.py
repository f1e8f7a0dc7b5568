"""A rule of the user's is bound to its primal's arguments by position, so its parameters
must be named as the primal's: ``(ans_bar, ans, x)`` for an adjoint of ``f(x)``,
``(ans, x, x_dot=None)`` for a tangent.  A rule named otherwise would run with its
arguments in the wrong slots and give another function's gradient, silently: it is
refused where it is registered, at its ``def``, with the signature to write."""
import inspect

import numpy as np
import pytest

import srcgrad
from srcgrad.errors import NoDerivativeRuleError
from tests.finite_differences import numerical_grad


def _line_of(fn_name):
    source, first = inspect.getsourcelines(inspect.getmodule(_line_of))
    return next(first + i for i, line in enumerate(source) if f"def {fn_name}(" in line)


def test_reversed_parameters_are_refused_at_the_rules_def():
    @srcgrad.custom_adjoint
    def softplus(x):
        return np.log1p(np.exp(x))

    with pytest.raises(NoDerivativeRuleError) as raised:
        @softplus.defadjoint
        def softplus_adjoint(x, ans, ans_bar):  # the wrong order: x would receive ans_bar
            return ans_bar / (1 + np.exp(-x))

    message = str(raised.value)
    assert f"test_rule_signatures.py:{_line_of('softplus_adjoint')}:" in message
    assert "(ans_bar, ans, x)" in message and "def softplus_adjoint(ans_bar, ans, x):" in message


@pytest.mark.parametrize("names", ["g, ans, b, a", "g, ans, a", "g, a, b, ans", "g, ans, a, b, c"])
def test_parameters_out_of_order_or_missing_are_refused(names):
    def product(a, b):
        return a * b

    namespace = {}
    exec(f"def product_adjoint({names}):\n    return g, g\n", namespace)  # noqa: S102 - a rule of each shape
    with pytest.raises(NoDerivativeRuleError, match=r"\(ans_bar, ans, a, b\)"):
        srcgrad.custom_adjoint(product).defadjoint(namespace["product_adjoint"])


def test_rules_named_as_their_primal_run_whatever_the_first_two_are_called():
    @srcgrad.custom_adjoint
    def weighted(a, b, scale=2.0):
        return scale * a * b

    @weighted.defadjoint
    def weighted_adjoint(g, out, a, b, scale=2.0):
        return g * scale * b, g * scale * a

    def loss(a, b):
        return np.sum(weighted(a, b) ** 2)

    a, b = np.array([0.3, -1.2, 0.7]), np.array([1.1, 0.4, -0.5])
    got = srcgrad.grad(loss, wrt=(0, 1))(a, b)
    for index in (0, 1):
        np.testing.assert_allclose(got[index], numerical_grad(loss, (a, b), index), rtol=1e-6)


def test_a_methods_rule_takes_self_where_the_method_does():
    class Scale:
        def __init__(self, k):
            self.k = k

        def __call__(self, x):
            return self.k * x

    with pytest.raises(NoDerivativeRuleError, match=r"\(ans_bar, ans, self, x\)"):
        srcgrad.custom_adjoint(Scale.__call__).defadjoint(lambda ans_bar, ans, x: ans_bar)


def test_a_tangent_rule_is_checked_by_name_too():
    @srcgrad.custom_adjoint
    def cube(x):
        return x ** 3

    @cube.defadjoint
    def cube_adjoint(ans_bar, ans, x):
        return ans_bar * 3 * x ** 2

    with pytest.raises(NoDerivativeRuleError, match=r"\(ans, x, x_dot=None\)"):
        @cube.defjvp
        def cube_tangent(x, ans, x_dot=None):
            return 3 * x ** 2 * x_dot

    with pytest.raises(NoDerivativeRuleError, match=r"\(ans, x, x_dot=None\)"):
        @cube.defjvp
        def cube_tangent_misnamed(ans, x, y_dot=None):
            return 3 * x ** 2 * y_dot

    @cube.defjvp
    def cube_tangent_right(out, x_dot=None, x=None):  # (bound by name after the first)
        return 3 * x ** 2 * x_dot

    def f(x):
        return np.sum(np.sin(cube(x)))

    x = np.array([0.2, -0.7, 1.1])
    value, tangent = srcgrad.jvp(f)(x, np.ones(3))
    np.testing.assert_allclose(tangent, numerical_grad(f, (x,), 0).sum(), rtol=1e-6)


def test_library_functions_keep_their_own_rule_names():
    # NumPy's and SciPy's signatures are not those the rules use (ufuncs take `out=`...):
    # registering a rule for one is not checked by name.
    from srcgrad.rules import registry

    def np_like(a, b):
        return a + b

    np_like.__module__ = "numpy.fake"
    registry.defadjoint(np_like)(lambda ans_bar, ans, x1, x2: (ans_bar, ans_bar))


def test_a_rule_given_again_replaces_the_one_compiled_code_inlined():
    @srcgrad.custom_adjoint
    def square(x):
        return x * x

    @square.defadjoint
    def square_adjoint_wrong(ans_bar, ans, x):
        return ans_bar * 3 * x

    def f(x):
        return np.sum(square(x))

    x = np.array([1.0, 2.0])
    g = srcgrad.grad(f)
    np.testing.assert_allclose(g(x), [3.0, 6.0])  # (the rule as given, wrong on purpose)

    @square.defadjoint
    def square_adjoint(ans_bar, ans, x):
        return ans_bar * 2 * x

    np.testing.assert_allclose(g(x), [2.0, 4.0])  # the same gradient function, compiled again
    np.testing.assert_allclose(srcgrad.grad(f)(x), [2.0, 4.0])  # a new one
