"""Defects found by a fifth outside tester (closures, dicts, ``with``, SciPy rules, globals,
masks, unused results, second derivatives and training scripts, each gradient checked
against central finite differences in float64).  Each asserts the right behaviour: the
right value, or a refusal located at the user's line; those not fixed yet are strict
xfails, so that the fix flips them."""
import numpy as np
import pytest
from scipy import special

import srcgrad
from srcgrad import errors

X3 = np.array([0.5, -1.0, 2.0])
V3 = np.array([1.0, 2.0, -1.0])


def numerical_grad(f, x, eps=1e-6):
    """Central differences; each call gets a fresh array (some of these functions write into it)."""
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[idx] = eps
        g[idx] = (f(x + step) - f(x - step)) / (2 * eps)
    return g


def numerical_hvp(f, x, v, eps=1e-5):
    """Central differences of srcgrad's gradient (itself checked against differences above)."""
    g = srcgrad.grad(f)
    return (g(x + eps * v) - g(x - eps * v)) / (2 * eps)


def right_or_refused(f, x):
    """The gradient matches central differences, or compilation refuses at a line of this file."""
    try:
        g = srcgrad.grad(f)(x.copy())
    except errors.UserCodeError as e:
        assert "test_found_by_breaker5.py" in str(e), str(e)
        return
    np.testing.assert_allclose(g, numerical_grad(f, x), rtol=1e-6, atol=1e-8)


# ---- silently wrong: `d[k] op= v` on a dict entry that another name also holds ---------
# For an array, `d["a"] += v` is `d["a"].__iadd__(v)`: it changes the array in place, so every
# other name holding it (`h`, another key, the argument itself) sees the change.  srcgrad
# differentiates it as `d["a"] = d["a"] + v`: the other names keep the old value, and the
# gradient is wrong with no error (half the right one in the first case).  The same write on
# a name (`y = x; y += ...`) is refused ("may share memory with another name").

def dict_entry_added_to_in_place(x):
    h = x * 1.0
    d = {"a": h}
    d["a"] += x  # h is now 2x
    return np.sum(h * x)


def two_keys_holding_one_array(x):
    h = x * 1.0
    d = {k: h for k in ["a", "b"]}
    d["a"] *= x
    return np.sum(d["b"] * x)


def entry_read_before_the_write(x):
    d = {"a": x * 1.0}
    e = d["a"]
    d["a"] -= 0.5 * x ** 2
    return np.sum(e * x)


def every_key_added_to(x):
    h = x * 1.0
    d = {"a": h}
    for k in d:
        d[k] += x
    return np.sum(h * x)


def entry_holding_the_argument(x):
    d = {"a": x}
    d["a"] += 1.0  # changes the caller's x: refused for a name (`y = x; y += 1.0`)
    return np.sum(x * x)


@pytest.mark.parametrize("f", [dict_entry_added_to_in_place, two_keys_holding_one_array,
                               entry_read_before_the_write, every_key_added_to, entry_holding_the_argument],
                         ids=lambda f: f.__name__)
def test_augmented_assignment_into_a_dict_entry_another_name_holds(f):
    right_or_refused(f, X3)


# ---- crash: an expression statement whose value is unused -----------------------------
# `np.sin(x)` or `x * 2` alone on a line (left from debugging, or a call made for nothing) stops
# compilation with AttributeError: 'Expr' object has no attribute 'targets' (optimize.py).
# `_helper(x)`, `x[0]` and `print(x)` alone are fine; `x > 0` alone is refused as "a call whose
# result is not used ... if it changes its argument in place".

def unused_call(x):
    np.sin(x)
    return np.sum(x ** 2)


def unused_product(x):
    x * 2
    return np.sum(x ** 2)


def unused_call_in_a_branch(x):
    if np.sum(x) > 0:
        np.exp(x)
    return np.sum(x ** 2)


def unused_comparison(x):
    x > 0
    return np.sum(x ** 2)


@pytest.mark.xfail(strict=True, reason="an unused expression statement crashes in optimize.py "
                                       "(AttributeError: 'Expr' object has no attribute 'targets')")
@pytest.mark.parametrize("f", [unused_call, unused_product, unused_call_in_a_branch],
                         ids=lambda f: f.__name__)
def test_an_unused_expression_statement(f):
    np.testing.assert_allclose(srcgrad.grad(f)(X3), 2 * X3)


@pytest.mark.xfail(strict=True, reason="`x > 0` alone is refused as a call that may change `x`")
def test_an_unused_comparison_is_differentiated():
    np.testing.assert_allclose(srcgrad.grad(unused_comparison)(X3), 2 * X3)


# ---- crash: scipy.special.polygamma given an array or a float order ---------------------
# The rule computes `math.factorial(n + 1)`: TypeError for an integer array `n` (NumPy's
# broadcasting is what polygamma itself does) or a float `n` (SciPy accepts 1.0).

def polygamma_of_orders(x):
    return np.sum(special.polygamma(np.array([0, 1, 2]), x))


def polygamma_float_order(x):
    return np.sum(special.polygamma(1.0, x))


@pytest.mark.xfail(strict=True, reason="polygamma's rule calls math.factorial on an array or float "
                                       "order: TypeError from the generated code")
@pytest.mark.parametrize("f, n", [(polygamma_of_orders, np.array([0, 1, 2])), (polygamma_float_order, 1)],
                         ids=["array_order", "float_order"])
def test_polygamma_with_an_array_or_float_order(f, n):
    x = np.array([0.7, 1.5, 3.0])
    np.testing.assert_allclose(srcgrad.grad(f)(x), special.polygamma(n + 1, x), rtol=1e-10)


# ---- refused: ordinary code ----------------------------------------------------------

def fancy_index_read(x):
    return np.sum(x[[0, 1]] * x[:2])  # x0^2 + x1^2


@pytest.mark.xfail(strict=True, reason="second derivative through an integer-array index read "
                                       "refused (np.add.at in its adjoint), blamed on `np.sum`")
def test_hvp_through_an_integer_array_index():
    np.testing.assert_allclose(srcgrad.hvp(fancy_index_read)(X3, V3), [2.0, 4.0, 0.0])
    np.testing.assert_allclose(srcgrad.hessian(fancy_index_read)(X3), np.diag([2.0, 2.0, 0.0]))


def closure_reading_x(x):
    s = x * 2
    def g(v):
        return np.sin(v * s)
    return np.sum(g(x))


@pytest.mark.xfail(strict=True, reason="hvp/hessian of a function with a nested def reading a "
                                       "differentiated value refused (forward mode over a pullback)")
def test_hvp_through_a_closure():
    expected = (4 * np.cos(2 * X3 ** 2) - 16 * X3 ** 2 * np.sin(2 * X3 ** 2)) * V3
    np.testing.assert_allclose(srcgrad.hvp(closure_reading_x)(X3, V3), expected, rtol=1e-10)


def slice_added_to_in_place(x):
    y = x * 1.0
    y[1:] += np.sin(x[:2])
    return np.sum(y ** 2)


@pytest.mark.xfail(strict=True, reason="hvp through `y[1:] += np.sin(...)` refused (its gradient "
                                       "code writes into a view)")
def test_hvp_through_a_slice_added_to_in_place():
    np.testing.assert_allclose(srcgrad.hvp(slice_added_to_in_place)(X3, V3),
                               numerical_hvp(slice_added_to_in_place, X3, V3), rtol=1e-6, atol=1e-8)


def running_sum_from_an_element(x):
    s = x[0]
    for i in range(3):
        s += x[i]  # s is a NumPy scalar: a new value each time
    return s


@pytest.mark.xfail(strict=True, reason="`s = x[0]; s += x[i]` refused: `s` taken to share memory "
                                       "with `x` (x is 1-D, so x[0] is a scalar)")
def test_running_sum_started_from_an_element():
    np.testing.assert_allclose(srcgrad.grad(running_sum_from_an_element)(X3), [2.0, 1.0, 1.0])


def default_argument_capture(x):
    def g(v, s=x):
        return np.sin(v) * s
    return np.sum(g(x)) + np.sum(g(x, 2.0))


@pytest.mark.xfail(strict=True, reason="a default argument reading x refused as a nested function "
                                       "'used other than by calling it'")
def test_a_default_argument_reading_a_differentiated_value():
    expected = np.cos(X3) * X3 + np.sin(X3) + 2 * np.cos(X3)
    np.testing.assert_allclose(srcgrad.grad(default_argument_capture)(X3), expected, rtol=1e-12)


def closure_called_by_one_with_a_local_of_the_same_name(x):
    y = x * 2
    def g(v):
        return v * y
    def h(v):
        y = v * 10  # h's own y; g still reads the outer one
        return g(v) + y
    return np.sum(h(x))  # sum(2 x^2 + 10 x)


@pytest.mark.xfail(strict=True, reason="refused as `h` reading `g` 'used other than by calling it' "
                                       "when h has a local named like g's free variable")
def test_a_closure_called_from_a_closure_with_a_shadowing_local():
    np.testing.assert_allclose(srcgrad.grad(closure_called_by_one_with_a_local_of_the_same_name)(X3),
                               4 * X3 + 10, rtol=1e-12)


def boolean_mask_combined_in_place(x):
    m = x > -1
    m &= x < 1
    m |= x > 1.1
    return np.sum(np.where(m, x * 3, x ** 2))


@pytest.mark.xfail(strict=True, reason="`m |= ...` on a boolean mask refused: `m` 'may share memory' "
                                       "with itself, made by the `m &= ...` before it")
def test_a_boolean_mask_combined_in_place():
    x = np.array([0.1, -1.7, 0.3, 1.2, 1.05])
    np.testing.assert_allclose(srcgrad.grad(boolean_mask_combined_in_place)(x), [3.0, -3.4, 3.0, 3.0, 2.1])


# ---- crash: a loop target that unpacks, over `reversed(...)` ----------------------------
# `for w, b in reversed(params)` is compiled as `w = params[_i]` with the unpacking dropped:
# `w` is the whole pair and `b` is unbound: ValueError (broadcasting the pair) or NameError: name
# 'b' is not defined, from the generated code.  Over `enumerate(reversed(...))` (x only):
# TypeError "object of type 'list_reverseiterator' has no len()".  `params[::-1]`,
# `for w, *rest in reversed(params)` and `for p in reversed(params)` are right.

def pairs_in_reverse(params, x):
    h = x
    for w, b in reversed(params):
        h = h * w + b
    return np.sum(h)


def numbered_pairs_in_reverse(params, x):
    h = x
    for i, (w, b) in enumerate(reversed(params)):
        h = h * w + b * (i + 1)
    return np.sum(h)


@pytest.mark.xfail(strict=True, reason="`for w, b in reversed(...)` drops the unpacking: ValueError, NameError "
                                       "or TypeError from the generated code")
@pytest.mark.parametrize("f", [pairs_in_reverse, numbered_pairs_in_reverse], ids=lambda f: f.__name__)
def test_unpacking_loop_target_over_reversed(f):
    params = [(2.0, 1.0), (3.0, -1.0)]
    try:
        g_x = srcgrad.grad(f, wrt=1)(params, X3)
    except errors.UserCodeError as e:
        assert "test_found_by_breaker5.py" in str(e), str(e)
        return
    np.testing.assert_allclose(g_x, np.full(3, 6.0))


# ---- refused: second derivatives of a loop over a list or a dict entry ----------------
# hvp, hessian and grad(grad(f)) refuse "forward mode over the gradient code of f, which calls a
# function known only when it runs through its compiled vjp" for a loop over a list holding the
# values being differentiated, and for a dict entry rewritten in a loop; the same without the
# loop (`xs[0] * xs[1]`, `d["x"] = d["x"] * ...` once) is differentiated.

def loop_over_a_list_of_values(x):
    t = 0.0
    for u in [x, x * 2]:
        t = t + np.sum(u * u)  # 5 sum(x^2)
    return t


def dict_entry_rewritten_in_a_loop(x):
    d = {"x": x}
    for _ in range(2):
        d["x"] = d["x"] * np.cos(d["x"])
    return np.sum(d["x"])


@pytest.mark.xfail(strict=True, reason="forward mode over the gradient code does not follow the "
                                       "pullback of a list loop or a dict entry written in a loop")
@pytest.mark.parametrize("f", [loop_over_a_list_of_values, dict_entry_rewritten_in_a_loop],
                         ids=lambda f: f.__name__)
def test_second_derivative_of_a_loop_over_a_list_or_dict(f):
    np.testing.assert_allclose(srcgrad.hvp(f)(X3, V3), numerical_hvp(f, X3, V3), rtol=1e-6, atol=1e-8)
    hessian = np.stack([numerical_hvp(f, X3, e) for e in np.eye(3)], axis=1)
    np.testing.assert_allclose(srcgrad.hessian(f)(X3), hessian, rtol=1e-6, atol=1e-8)


# ---- refused: a nested function defined differently in two branches ------------------

def closure_defined_in_both_branches(x):
    if np.sum(x) > 0:
        s = x * 2
        def g(v):
            return v * s
    else:
        def g(v):
            return v * 3.0
    return np.sum(g(x))


@pytest.mark.xfail(strict=True, reason="a nested def in each branch of an `if` refused as 'used other "
                                       "than by calling it'")
def test_a_nested_function_defined_in_both_branches():
    np.testing.assert_allclose(srcgrad.grad(closure_defined_in_both_branches)(X3), 4 * X3)
    np.testing.assert_allclose(srcgrad.grad(closure_defined_in_both_branches)(-X3), np.full(3, 3.0))
