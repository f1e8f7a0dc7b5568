"""Aliasing: two names for one array, or a view of it, read after the array changed in place.

``transforms/aliases.py`` reads a name copied from an array (``a = v``, a helper's
parameter once inlined) as the name that holds the array's value now, and makes a
view NumPy always makes (``v[0:2]``, ``v.T``, ``v[:, 2]``) again where it is read
after a write into its base.  Each kind of case is checked against central
differences, with ``optimize`` on and off: in a loop, in a helper, in a method, in
float32, read twice.  Where the compiler cannot tell which array a name holds (an
alias through a container, a write through a view, a name bound again in a loop, a
reshape that may copy) the write is refused, at the user's line.
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import numerical_grad

X = np.array([0.3, -1.2, 0.7, 0.45])
M = np.array([[0.3, -1.2, 0.7, 0.45], [1.1, 0.2, -0.4, 0.9], [-0.6, 0.8, 0.5, -1.3]])
OPT = pytest.mark.parametrize("optimize", [True, False], ids=["opt", "noopt"])


def check_gradient(fn, x, optimize=True, dtype=np.float64, rtol=1e-5, atol=1e-7):
    """Asserts ``fn``'s value and gradient at ``x`` (cast to ``dtype``) against the function
    itself and central differences (in float64)."""
    value, grad = srcgrad.value_and_grad(fn, optimize=optimize)(x.astype(dtype))
    assert np.allclose(value, fn(x.astype(dtype)), rtol=1e-5 if dtype == np.float32 else 1e-12)
    expected = numerical_grad(lambda z: fn(np.array(z, dtype=np.float64)), [x.astype(np.float64)], 0)
    if dtype == np.float32:
        rtol, atol = 2e-3, 1e-4
        assert grad.dtype == np.float32
    assert np.allclose(grad, expected, rtol=rtol, atol=atol), (grad, expected)


def assert_refused(fn, x, marker="# refused here", optimize=True):
    """Asserts that ``fn`` is refused at the line of its source that carries ``marker``."""
    lines, first = inspect.getsourcelines(fn)
    line = first + next(i for i, text in enumerate(lines) if marker in text)
    with pytest.raises(srcgrad.UserCodeError) as excinfo:
        srcgrad.grad(fn, optimize=optimize)(x.copy())
    assert f"test_aliasing.py:{line}:" in str(excinfo.value), str(excinfo.value)


# ---- a name copied from the array ------------------------------------------------------

def alias_then_write(x):
    v = x * 1.0
    a = v
    v[1] -= a[2]
    v = a * 1.0
    return np.sum(v * v)


def write_through_the_alias(x):
    v = x * 2.0
    a = v
    a[0] = x[1] ** 2
    return np.sum(v * x)


def alias_read_twice(x):
    v = np.sin(x)
    a = v
    v[3] = v[0] * x[2]
    return np.sum(a * x) * np.sum(a)


def alias_of_an_alias(x):
    v = x * 1.5
    a = v
    b = a
    b[2] = np.cos(x[0])
    return np.sum(v * a * b)


def alias_then_write_in_a_loop(x):
    v = x * 1.0
    a = v
    for i in range(3):
        v[i] -= a[i + 1] * 0.5
    return np.sum(a * a)


def alias_then_augmented(x):
    v = x * 1.0
    a = v
    v *= x[1]
    return np.sum(a * x)


def alias_augmented_in_a_branch(x):
    v = x * 1.0
    a = v
    if x[0] > 0:
        v[0] = 2.0 * v[1]
    else:
        v += 1.0
    return np.sum(a * a)


def scale_in_place(u):
    u *= 2.0
    return u


def helper_result_and_argument(x):
    h = x * 1.0
    v = scale_in_place(h) + h
    return np.sum(v * x)


def helper_for_its_effect(x):
    h = np.tanh(x)
    scale_in_place(h)
    return np.sum(h * h)


def zero_first(u):
    u[0] = 0.0


def helper_writing_by_index(x):
    y = x * 3.0
    zero_first(y)
    return np.sum(y * x)


def both_names_augmented(x):
    v = x * 1.0
    a = v
    v += 1.0
    a += x * 2.0  # (the array `v` holds: `v` reads it after)
    return np.sum(v * x)


def alias_of_an_alias_augmented_in_a_branch(x):
    v = x * 1.0
    a = v
    b = a
    if x[0] > 0:
        b *= 2.0
    return np.sum(v * x) + np.sum(a)


def alias_made_in_each_iteration(x):
    v = x * 1.0
    for i in range(2):
        a = v
        v[i] = a[i + 1] * x[i]
    return np.sum(a * x)


class Model:
    def __init__(self, w):
        self.w = w

    def alias_write(self, x):
        v = x * self.w
        a = v
        v[1] = a[0] * a[2]
        return np.sum(a * x)


def as_a_method(x):
    return Model(0.7).alias_write(x)


@OPT
@pytest.mark.parametrize("fn", [alias_then_write, write_through_the_alias, alias_read_twice, alias_of_an_alias,
                                alias_then_write_in_a_loop, alias_then_augmented, alias_augmented_in_a_branch,
                                helper_result_and_argument, helper_for_its_effect, helper_writing_by_index,
                                both_names_augmented, alias_of_an_alias_augmented_in_a_branch,
                                alias_made_in_each_iteration, as_a_method], ids=lambda f: f.__name__)
def test_a_name_copied_from_the_array_is_the_array(fn, optimize):
    check_gradient(fn, X, optimize=optimize)
    check_gradient(fn, -X[::-1].copy(), optimize=optimize)  # (the other branch)


@pytest.mark.parametrize("fn", [alias_then_write, alias_read_twice, helper_result_and_argument, as_a_method],
                         ids=lambda f: f.__name__)
def test_in_float32(fn):
    check_gradient(fn, X, dtype=np.float32)


def test_the_generated_code_reads_the_array_by_its_own_name():
    text = srcgrad.source(srcgrad.grad(alias_then_write), X)
    code = [line for line in text.splitlines() if not line.strip().startswith("#")]
    assert "    v_2 = v * 1.0" in code and not any("a[" in line for line in code), text


# ---- a view read after a write into its base ---------------------------------------------

def view_of_a_slice(m):
    v = m * 1.0
    w = v[0:2]
    v[0] = v[1] * 2.0
    v = v + np.sum(w) * 0.1
    return np.sum(v * v)


def view_of_a_transpose(m):
    v = m * 1.0
    w = v.T
    v[0] = v[1] * 2.0
    return np.sum(w * m.T) + np.sum(v)


def view_of_a_column(m):
    v = np.tanh(m)
    w = v[:, 2]
    v[1] = v[0] * m[2]
    return np.sum(w * w)


def view_of_a_view(m):
    v = m * 1.0
    w = v[1:].T
    v[2, 1] = m[0, 0] ** 2
    return np.sum(w * m[1:].T)


def view_after_an_augmented_base(m):
    v = m * 1.0
    w = v[1]
    v += m[0]
    return np.sum(w * m[2])


def view_read_in_a_loop(m):
    v = m * 1.0
    w = v[0:2, 1:3]
    total = 0.0
    for i in range(3):
        v[i % 2, 1] = v[2, i] * 1.5
        total = total + np.sum(w * w)
    return total


def view_read_twice(m):
    v = m ** 2
    w = v.T
    v[1, 1] = m[0, 3]
    return np.sum(w[1]) * np.sum(w * m.T)


def views_by_functions(m):
    v = m * 1.0
    w = np.swapaxes(v, 0, 1)
    d = np.diagonal(v)
    v[0, 0] = m[1, 1] ** 3
    return np.sum(w[0] * m[:, 0]) + np.sum(d * m[0, :3])


def view_written_after_a_write_into_its_base(m):
    v = m * 1.0
    r = v[1]
    v[1, 2] = 0.0
    r[0] = m[0, 0] * 2.0  # (into `v[1]` made again: `v` is not read after)
    return np.sum(r * m[2])


def view_with_an_index_bound_again(m):
    v = m * 1.0
    i = 1
    w = v[i:]
    i = 2
    v[2] = m[0] * 2.0
    return np.sum(w * m[i - 1:])


def test_the_generated_code_makes_the_view_again_after_the_write():
    text = srcgrad.source(srcgrad.grad(view_of_a_slice), M)
    code = [line.strip() for line in text.split("# ---- backward sweep")[0].splitlines()
            if not line.strip().startswith("#")]
    assert code.index("w_2 = v[0:2]") > code.index("v[0] = _t2"), text


@OPT
@pytest.mark.parametrize("fn", [view_of_a_slice, view_of_a_transpose, view_of_a_column, view_of_a_view,
                                view_after_an_augmented_base, view_read_in_a_loop, view_read_twice,
                                views_by_functions, view_written_after_a_write_into_its_base,
                                view_with_an_index_bound_again],
                         ids=lambda f: f.__name__)
def test_a_view_read_after_a_write_into_its_base_is_made_again(fn, optimize):
    check_gradient(fn, M, optimize=optimize)


@pytest.mark.parametrize("fn", [view_of_a_transpose, view_of_a_column], ids=lambda f: f.__name__)
def test_views_in_float32(fn):
    check_gradient(fn, M, dtype=np.float32)


def test_forward_mode_and_a_pullback_called_twice():
    tangent = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
    value, derivative = srcgrad.jvp(view_of_a_transpose)(M.copy(), tangent)
    grad = srcgrad.grad(view_of_a_transpose)(M.copy())
    assert value == pytest.approx(view_of_a_transpose(M.copy()))
    assert derivative == pytest.approx(np.sum(grad * tangent))
    _, pullback = srcgrad.vjp(alias_then_write)(X.copy())
    first = pullback(1.0)
    assert np.allclose(pullback(1.0), first)  # (the writes are redone)
    assert np.allclose(first, srcgrad.grad(alias_then_write)(X.copy()))


# ---- what the compiler cannot decide stays refused, at the user's line ----------------------

def alias_through_a_tuple(x):
    v = x * 1.0
    a = (v, 1.0)[0]
    v[1] = x[2] * 2.0  # refused here
    return np.sum(a * x)


def write_through_a_view(x):
    v = x * 1.0
    w = v[0:2]
    w[0] = x[3] * 2.0  # refused here
    return np.sum(v * x)


def alias_augmented_in_a_loop(x):
    h = x * 1.0
    u = h
    s = 0.0
    for i in range(3):
        u *= 1.5  # refused here
        s = s + np.sum(h)
    return s


def alias_augmented_through_a_copy_in_a_loop(x):
    v = x * 1.0
    s = 0.0
    for i in range(3):
        t = v
        t += x[i]  # refused here
        s = s + np.sum(v * x)  # (`v` changed too; in the next iteration `t = v` reads it again)
    return s


def view_by_a_reshape(x):
    v = x * 1.0
    w = v.reshape(2, 2)  # (a view here; a copy of a base laid out otherwise)
    v[3] = x[0] ** 2  # refused here
    return np.sum(w * x.reshape(2, 2))


def view_bound_again_in_a_loop(x):
    v = x * 1.0
    w = x[0:2]
    loss = 0.0
    for i in range(3):
        v[i] = v[i] * x[3]  # refused here
        loss = loss + np.sum(w * x[:2])
        w = v[0:2]
    return loss


def alias_of_the_argument(x):
    a = x
    a[0] = 1.0  # refused here
    return np.sum(x)


@OPT
@pytest.mark.parametrize("fn", [alias_through_a_tuple, write_through_a_view, alias_augmented_in_a_loop,
                                alias_augmented_through_a_copy_in_a_loop, view_by_a_reshape, view_bound_again_in_a_loop, alias_of_the_argument],
                         ids=lambda f: f.__name__)
def test_what_cannot_be_decided_is_refused_at_the_users_line(fn, optimize):
    assert_refused(fn, X, optimize=optimize)


def copy_by_an_index_array(x):
    v = x * 1.0
    idx = np.array([0, 2])
    w = v[idx]  # a copy: it keeps the old elements
    v[0] = x[1] * 3.0
    return np.sum(w * x[:2]) + np.sum(v)


@OPT
def test_a_copy_by_an_index_array_is_not_made_again(optimize):
    """``v[idx]`` copies: made again after the write it would see the new element.  Right
    or refused, never the new element."""
    try:
        check_gradient(copy_by_an_index_array, X, optimize=optimize)
    except srcgrad.UserCodeError as exc:
        assert "test_aliasing.py:" in str(exc)


# ---- an array made in a loop's body and written there: each iteration's is new ------------

def states_written_then_appended(x):
    h = x
    hs = []
    for _ in range(3):
        h = np.tanh(h * x)
        h[0] = h[0] * 2.0  # `hs` holds the arrays of earlier iterations, not this one
        hs.append(h)
    return np.sum(np.stack(hs) ** 2)


def double_buffered(x):
    alpha = x * 1.0
    for _ in range(3):
        new = np.empty(3)
        new[0] = alpha[1] * x[0]  # `alpha` is the array the iteration before made
        new[1] = alpha[2] * x[1]
        new[2] = alpha[0] * x[2]
        alpha = new
    return np.sum(alpha ** 2)


class _Recurrence:
    def step(self, h, x):
        out = np.tanh(h * x)
        out[-1] = out[-1] + 1.0
        return out

    def run(self, x):
        h, hs = x, []
        for _ in range(2):
            h = self.step(h, x)
            hs.append(h)
        return np.sum(hs[0] * hs[1])


def written_in_a_method_in_a_loop(x):
    return _Recurrence().run(x)


def given_the_array_before_the_write(x):
    hs = []
    for t in range(2):
        h = np.tanh(x * (t + 1.0))
        a = h
        hs.append(a)
        h[0] = h[0] * 2.0  # refused here: `hs` holds this very array
    return np.sum(np.stack(hs))


@OPT
@pytest.mark.parametrize("fn", [states_written_then_appended, double_buffered, written_in_a_method_in_a_loop],
                         ids=lambda f: f.__name__)
def test_an_array_made_in_each_iteration_is_its_own(fn, optimize):
    check_gradient(fn, X, optimize=optimize)
    check_gradient(fn, X, optimize=optimize, dtype=np.float32, rtol=2e-3, atol=1e-4)


@OPT
def test_an_array_given_to_a_list_before_the_write_is_still_refused(optimize):
    assert_refused(given_the_array_before_the_write, X, optimize=optimize)
