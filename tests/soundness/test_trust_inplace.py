"""In-place writes into arrays, aliases and views: right or refused at the user's line.

Each kind of case (issue 11, class 8) is tested with variants — in a loop, in a
called helper, in a method, in float32 — with ``optimize`` on and off; then a
differential fuzzer (``inplace_programs.py``) checks random programs mixing
them against the function's own value and central differences.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

from tests.soundness import inplace_programs
import srcgrad
from tests.finite_differences import numerical_grad as _numerical_grad


def numerical_grad(fn, x):
    return _numerical_grad(lambda z: fn(np.array(z)), [x], 0)

X = np.array([0.3, -1.2, 0.7, 0.45])
OPT = pytest.mark.parametrize("optimize", [True, False], ids=["opt", "noopt"])


def _assert_right(fn, x=X, optimize=True, rtol=1e-5, atol=1e-7):
    value, grad = srcgrad.value_and_grad(fn, optimize=optimize)(x.copy())
    assert np.allclose(value, fn(x.copy()), rtol=1e-12, atol=1e-12)
    expected = numerical_grad(lambda z: fn(z.copy()), x.astype(np.float64))
    assert np.allclose(grad, expected, rtol=rtol, atol=atol), (grad, expected)
    return grad


def _assert_refused(fn, says, x=X, optimize=True):
    with pytest.raises(srcgrad.UnsupportedSyntaxError) as excinfo:
        srcgrad.grad(fn, optimize=optimize)(x.copy())
    message = str(excinfo.value)
    assert "test_trust_inplace.py:" in message, message
    assert says in message, message
    return message


# ---- a. a write seen through another name (alias, view, container, call) ----------

def alias_then_write_original(x):
    c = x * 1.0
    a = c
    c[1] -= a[2]
    return np.sum(a * x)


def alias_then_write_alias(x):
    c = x * 1.0
    a = c
    a[1] = x[0] * 3.0
    return np.sum(c * x)


def alias_through_tuple(x):
    c = x * 1.0
    a = (c, 1.0)[0]
    c[1] = x[2] * 2.0
    return np.sum(a * x)


def alias_through_list(x):
    c = x * 1.0
    a = [c, x][0]
    c[1] = x[2] * 2.0
    return np.sum(a * x)


def ident(y):
    return y


def alias_through_call(x):
    c = x * 1.0
    a = ident(c)
    c[1] = x[2] * 2.0
    return np.sum(a * x)


def view_by_transpose(x):
    c = x * 1.0
    v = c.T
    c[0] = 5.0
    return np.sum(v * x)


def view_by_reshape(x):
    c = x * 1.0
    v = c.reshape(2, 2)
    c[3] = x[0] ** 2
    return np.sum(v * x.reshape(2, 2))


def view_of_view(x):
    c = x * 1.0
    v = c.reshape(2, 2).T
    c[2] = x[0] ** 2
    return np.sum(v * x.reshape(2, 2))


def column_view(x):
    m = np.outer(x, x)
    v = m[:, 2]
    m[1, 2] = x[0]
    return np.sum(v * x)


def view_carried_by_a_loop(x):
    c = x * 1.0
    v = x[0:2]
    for i in range(3):
        c[i] = c[i] * x[3]    # in the second iteration, `v` is a view of `c`
        loss = np.sum(v * x[:2])
        v = c[0:2]
    return loss


def alias_in_a_method_helper(x):
    return Model().alias(x)


class Model:
    def alias(self, x):
        c = x * 2.0
        a = c
        c[0] = x[1]
        return np.sum(a * x)


# A name copied from the array (`a = c`, a helper's parameter, `ident(c)` inlined) is read as
# the array itself, and a view of known arguments (`c.T`, `c[:, 2]`) read after a write into
# its base is made again there (transforms/aliases.py): right, as written.
@OPT
@pytest.mark.parametrize("fn", [alias_then_write_original, alias_then_write_alias, alias_through_call,
                                view_by_transpose, column_view, alias_in_a_method_helper],
                         ids=lambda f: f.__name__)
def test_a_write_seen_through_a_known_alias_or_view_is_right(fn, optimize):
    _assert_right(fn, optimize=optimize)


# What the compiler cannot follow by name (an alias through a container, a view bound again in
# a loop, a reshape, which copies where its base's layout asks for it) is still refused.
@OPT
@pytest.mark.parametrize("fn, says", [
    (alias_through_tuple, "cannot write into `c`"),
    (alias_through_list, "cannot write into `c`"),
    (view_by_reshape, "`v` is a view of it"),
    (view_of_view, "`v` is a view of it"),
    (view_carried_by_a_loop, "`v` is a view of it"),
], ids=lambda v: getattr(v, "__name__", None))
def test_a_write_seen_through_another_name_is_refused(fn, says, optimize):
    message = _assert_refused(fn, says, optimize=optimize)
    assert "made at test_trust_inplace.py:" in message or "stored or passed on" in message \
        or "alias" in fn.__name__


def alias_not_read_after_the_write(x):
    c = x * 1.0
    a = c
    s = np.sum(a * x)      # read before the write: sees the old values, as srcgrad assumes
    c[1] = x[2] * 2.0
    return s + np.sum(c * c)


def element_read_before_write(x):
    c = x * 1.0
    s = c[0]               # a number, not a view
    c[0] = x[1] * 3.0
    return s * np.sum(c * x)


def view_taken_after_the_write(x):
    c = x * 1.0
    c[0] = x[1] * 3.0
    v = c[0:2]
    return np.sum(v * x[:2])


def view_rebound_in_each_iteration(x):
    c = x * 1.0
    loss = 0.0
    for i in range(3):
        c[i + 1] = c[i] * x[3]
        v = c[0:2]
        loss = loss + np.sum(v * x[:2])
    return loss


def write_from_a_view_of_itself(x):
    c = x * 1.0
    c[1:] = c[:-1]
    return np.sum(c * x)


@OPT
@pytest.mark.parametrize("fn", [alias_not_read_after_the_write, element_read_before_write,
                                view_taken_after_the_write, view_rebound_in_each_iteration,
                                write_from_a_view_of_itself], ids=lambda f: f.__name__)
def test_a_write_no_other_name_sees_is_right(fn, optimize):
    _assert_right(fn, optimize=optimize)


def augmented_under_a_view(x):
    c = x * 1.0
    v = c[0:2]
    c += x[3]            # NumPy adds in place: `v` sees it
    return np.sum(v * x[:2])


def augmented_under_a_transpose_in_a_loop(x):
    c = x * 1.0
    v = c.T
    for i in range(2):
        c *= x[3]
    return np.sum(v * x)


def augmented_in_a_helper(x):
    return Model().scale_under_view(x)


def _scale_under_view(self, x):
    c = np.outer(x, x)
    row = c[1]
    c -= x[0]
    return np.sum(row * x)


Model.scale_under_view = _scale_under_view


@OPT
@pytest.mark.parametrize("fn", [augmented_under_a_view, augmented_in_a_helper], ids=lambda f: f.__name__)
def test_an_augmented_assignment_under_a_view_read_after_it_is_right(fn, optimize):
    _assert_right(fn, optimize=optimize)  # (the view is made again from `c` as it is then)


@OPT
@pytest.mark.parametrize("fn", [augmented_under_a_transpose_in_a_loop], ids=lambda f: f.__name__)
def test_an_augmented_assignment_under_a_view_is_refused(fn, optimize):
    _assert_refused(fn, "changes the array `c` in place", optimize=optimize)


def augmented_with_the_view_read_before(x):
    c = x * 1.0
    v = c[0:2]
    s = np.sum(v * x[:2])
    c += x[3]
    return s + np.sum(c * x)


def augmented_in_a_loop(x):
    c = x * 1.0
    for i in range(3):
        c *= x[i]
    return np.sum(c)


@OPT
@pytest.mark.parametrize("fn", [augmented_with_the_view_read_before, augmented_in_a_loop],
                         ids=lambda f: f.__name__)
def test_an_augmented_assignment_no_other_name_sees_is_right(fn, optimize):
    _assert_right(fn, optimize=optimize)


# ---- b. `c[i] = s` with a name on the right, in a loop: s's adjoint accumulates -------

def same_value_written_in_a_loop(x):
    c = np.zeros(4)
    s = x[0] * 1.0
    for i in range(4):
        c[i] = s
    return np.sum(c * x)


def carried_value_written_in_a_loop(x):
    c = np.zeros(4)
    s = x[0] * 1.0
    for i in range(4):
        c[i] = s
        s = s * x[1]
    return np.sum(c * x)


def argument_written_in_a_loop(x):
    c = np.zeros((3, 4))
    for i in range(3):
        c[i] = x
    return np.sum(c * c)


def argument_added_in_a_while_loop(x):
    c = np.zeros(4)
    k = 0
    while k < 3:
        c[k] += x[3]
        k = k + 1
    return np.sum(c * x)


def value_written_in_a_branch_in_a_loop(x):
    c = np.zeros(4)
    s = x[2] * 2.0
    for i in range(4):
        if x[i] > 0:
            c[i] = s
    return np.sum(c * x)


def value_written_in_nested_loops(x):
    c = np.zeros((2, 4))
    s = x[1] * 1.0
    for i in range(2):
        for j in range(4):
            c[i, j] = s
    return np.sum(c * x)


def appended_in_a_loop(x):
    s = x[0] * 2.0
    parts = []
    for i in range(3):
        parts.append(s)
    return parts[0] * parts[1] + parts[2] * x[1]


def fill(x, s):
    c = np.zeros(4)
    for i in range(4):
        c[i] = s
    return c


def written_in_a_helper_loop(x):
    return np.sum(fill(x, x[2] * 1.0) * x)


class Filler:
    def fill(self, x):
        c = np.zeros(4)
        s = x[0] * 1.0
        for i in range(4):
            c[i] = s
        return np.sum(c * x)


def written_in_a_method_loop(x):
    return Filler().fill(x)


@OPT
@pytest.mark.parametrize("fn", [same_value_written_in_a_loop, carried_value_written_in_a_loop,
                                argument_written_in_a_loop, argument_added_in_a_while_loop,
                                value_written_in_a_branch_in_a_loop, value_written_in_nested_loops,
                                written_in_a_helper_loop, written_in_a_method_loop],
                         ids=lambda f: f.__name__)
def test_a_name_written_in_each_iteration_accumulates(fn, optimize):
    _assert_right(fn, optimize=optimize)


@OPT
def test_a_name_written_in_each_iteration_accumulates_in_float32(optimize):
    x32 = X.astype(np.float32)
    value, grad = srcgrad.value_and_grad(same_value_written_in_a_loop, optimize=optimize)(x32.copy())
    expected = numerical_grad(same_value_written_in_a_loop, X)
    assert grad.dtype == np.float32
    assert np.allclose(grad, expected, rtol=1e-4, atol=1e-5)


def test_appended_in_a_loop_accumulates():
    try:
        _assert_right(appended_in_a_loop)
    except srcgrad.UnsupportedSyntaxError as error:  # reading items of an appended list: refused
        assert "test_trust_inplace.py:" in str(error)


# ---- values written into an integer array are truncated: no derivative ------------

def written_into_an_integer_array(x):
    c = np.zeros(4, dtype=int)
    c[0] = x[0] * 2.5
    return np.sum(c * x)


def written_into_an_arange_in_a_loop(x):
    c = np.arange(4)
    s = x[1] * 3.0
    for i in range(4):
        c[i] = s * x[i]
    return np.sum(c * x)


def written_into_a_boolean_array(x):
    c = np.zeros(4, dtype=bool)
    c[1:3] = x[1:3]
    return np.sum(c * x)


@OPT
@pytest.mark.parametrize("fn", [written_into_an_integer_array, written_into_an_arange_in_a_loop,
                                written_into_a_boolean_array], ids=lambda f: f.__name__)
def test_a_value_written_into_an_integer_array_has_no_derivative(fn, optimize):
    _assert_right(fn, optimize=optimize)


# ---- c. the right-hand side is the target itself or a view of it ------------------

def reversed_into_itself(x):
    c = x * 1.0
    c[::-1] = c
    return np.sum(c * x)


def permuted_into_itself(x):
    c = x * 1.0
    c[np.array([1, 0, 3, 2])] = c
    return np.sum(c * x)


def shifted_into_itself(x):
    c = x * x[0]
    c[1:] = c[:-1]
    return np.sum(c * x)


def scaled_into_itself(x):
    c = x * 1.0
    c[:] = c * x[1]
    return np.sum(c * x)


def reversed_into_itself_in_a_loop(x):
    c = x * 1.0
    for i in range(3):
        c[::-1] = c
        c[i] = c[i] * x[i]
    return np.sum(c * x)


def rows_swapped(x):
    m = np.outer(x, x[:2])
    m[[0, 1]] = m[[1, 0]]
    m[2] = m[3]
    return np.sum(m * np.arange(8.0).reshape(4, 2))


@OPT
@pytest.mark.parametrize("fn", [reversed_into_itself, permuted_into_itself, shifted_into_itself,
                                scaled_into_itself, reversed_into_itself_in_a_loop, rows_swapped],
                         ids=lambda f: f.__name__)
def test_a_write_from_the_target_itself(fn, optimize):
    _assert_right(fn, optimize=optimize)


# ---- d. saves of views the backward sweep reads after a write ----------------------

def view_read_by_the_loss_before_a_write(x):
    c = x * 1.0
    s = np.sum(c[0:2] * x[:2])
    c[0] = 5.0
    return s + np.sum(c * x)


def transpose_read_before_a_write_in_a_loop(x):
    m = np.outer(x[:2], x[2:])
    s = 0.0
    for i in range(2):
        s = s + np.sum(m.T * x[:2])
        m[i] = m[i] * x[3]
    return s + np.sum(m)


def column_read_before_a_write_in_a_loop(x):
    v = np.outer(x, x[:3])
    s = 0.0
    for i in range(3):
        s = s + np.sum(v[:, 2] * x)
        v[i, 2] = x[i] * s
    return s


def slice_read_in_each_iteration_before_a_write(x):
    c = x * 1.0
    s = 0.0
    for i in range(3):
        s = s + np.sum(c[0:2] * x[:2])
        c[i] = x[3] * s
    return s


def transposed_row_read_in_each_iteration_before_a_write(x):
    # The optimizer dropped the backward sweep's restore of `c` (nothing read `c` by
    # that name), so the saved view `c.T[1]` showed the last iteration's rows.
    c = np.outer(x, x)
    s = 0.0
    for i in range(3):
        s = s + np.sum(c.T[1] * x)
        c[i] = x * s
    return s


def column_read_in_each_iteration_before_a_write(x):
    v = np.outer(x, x)
    s = 0.0
    for i in range(2):
        s = s + np.sum(v[:, 2] * x)
        v[2, i] = s
    return s + np.sum(v)


def alias_read_before_a_write_in_a_helper(x):
    return np.sum(_alias_read_before_write(x) * x)


def _alias_read_before_write(x):
    c = x * 1.0
    a = c
    s = np.sum(a * x)
    c[1] = x[2] * 2.0
    return s * c


@OPT
@pytest.mark.parametrize("fn", [view_read_by_the_loss_before_a_write,
                                transpose_read_before_a_write_in_a_loop,
                                column_read_before_a_write_in_a_loop,
                                slice_read_in_each_iteration_before_a_write,
                                transposed_row_read_in_each_iteration_before_a_write,
                                column_read_in_each_iteration_before_a_write,
                                alias_read_before_a_write_in_a_helper], ids=lambda f: f.__name__)
def test_a_view_read_before_a_write(fn, optimize):
    _assert_right(fn, optimize=optimize)


@OPT
@pytest.mark.parametrize("fn", [alias_not_read_after_the_write, reversed_into_itself_in_a_loop,
                                same_value_written_in_a_loop,
                                transposed_row_read_in_each_iteration_before_a_write],
                         ids=lambda f: f.__name__)
def test_a_pullback_called_again_finds_the_writes_done(fn, optimize):
    """The backward sweep puts overwritten elements back; a second call of the same
    pullback (a Jacobian's rows) must start from the arrays as the forward left them."""
    value, pullback = srcgrad.vjp(fn, optimize=optimize)(X.copy())
    expected = numerical_grad(fn, X)
    first, second, third = pullback(1.0), pullback(2.0), pullback(1.0)
    assert np.allclose(value, fn(X.copy()))
    assert np.allclose(first, expected, rtol=1e-5, atol=1e-7)
    assert np.allclose(second, 2 * expected, rtol=1e-5, atol=1e-7)
    assert np.allclose(third, expected, rtol=1e-5, atol=1e-7)


# ---- e. a callee that changes its argument, whether or not its result is used -------

def write_first(y):
    y[0] = y[1] * 2.0
    return np.sum(y)


def write_through_a_view(y):
    z = y.reshape(2, 2)
    z[0, 0] = 1.0
    return 0.0


def write_into_own_copy(y):
    y = np.copy(y)
    y[0] = y[1] * 2.0
    return y


def result_assigned(x):
    y = x * 1.0
    h = write_first(y)
    return np.sum(y * x)


def result_used(x):
    y = x * 1.0
    h = write_first(y)
    return np.sum(y * x) + h


def changed_through_a_view(x):
    y = x * 1.0
    h = write_through_a_view(y)
    return np.sum(y * x)


def called_in_a_loop(x):
    y = x * 1.0
    for i in range(2):
        h = write_first(y)
    return np.sum(y * x)


class Writer:
    def write(self, y):
        y[1] = 0.0
        return 1.0


def method_result_assigned(x):
    y = x * 1.0
    h = Writer().write(y)
    return np.sum(y * x)


@OPT
@pytest.mark.parametrize("fn", [result_assigned, result_used, called_in_a_loop], ids=lambda f: f.__name__)
def test_a_callee_that_changes_its_argument_is_inlined_and_right(fn, optimize):
    # (inlined, its write is the caller's own: `y[0] = ...` on the caller's `y`)
    _assert_right(fn, optimize=optimize)


@OPT
def test_a_callee_that_changes_its_argument_through_a_view_is_refused(optimize):
    message = _assert_refused(changed_through_a_view, "share memory", optimize=optimize)
    assert "np.copy" in message


@OPT
def test_a_callee_that_writes_into_its_own_copy_is_right(optimize):
    _assert_right(lambda x: np.sum(write_into_own_copy(x * 1.0) * x), optimize=optimize)


@OPT
def test_a_method_that_changes_its_argument_is_right_or_refused(optimize):
    try:
        _assert_right(method_result_assigned, optimize=optimize)
    except srcgrad.UnsupportedSyntaxError as error:
        assert "test_trust_inplace.py:" in str(error)


def scratch_changed_under_a_view_the_backward_reads(x):
    c = np.arange(4.0)
    m = c.reshape(2, 2).T
    loss = np.sum(m * x.reshape(2, 2))   # its adjoint reads `m`, a view of `c`
    h = write_first(c)                   # not differentiated, but changes `c`, so `m`
    return loss


def scratch_changed_by_numpy_under_a_view(x):
    c = np.arange(4.0)
    m = c.reshape(2, 2).T
    loss = np.sum(m * x.reshape(2, 2))
    np.copyto(c, 5.0)
    return loss


def scratch_changed_in_a_loop(x):
    c = np.arange(4.0)
    loss = 0.0
    for i in range(2):
        loss = loss + np.sum(c * x)
        h = write_first(c)
    return loss


def scratch_shuffled_after_a_differentiated_read(x):
    c = np.arange(4.0)
    loss = np.sum(c * x)
    np.random.shuffle(c)
    return loss


@OPT
@pytest.mark.parametrize("fn", [scratch_changed_by_numpy_under_a_view, scratch_shuffled_after_a_differentiated_read],
                         ids=lambda f: f.__name__)
def test_a_change_to_an_array_the_backward_sweep_reads_is_refused(fn, optimize):
    _assert_refused(fn, "read by the backward sweep", optimize=optimize)


@OPT
@pytest.mark.parametrize("fn", [scratch_changed_under_a_view_the_backward_reads, scratch_changed_in_a_loop],
                         ids=lambda f: f.__name__)
def test_a_helper_changing_an_array_the_backward_sweep_reads_is_inlined_and_right(fn, optimize):
    # (the helper's write is the caller's own: the values it overwrites are saved)
    _assert_right(fn, optimize=optimize)


def scratch_changed_after_its_last_differentiated_read(x):
    c = np.arange(4.0)
    loss = np.sum(x * 2.0)
    h = write_first(c)                   # nothing before reads `c` for an adjoint
    return loss + h * np.sum(x)


@OPT
def test_a_change_to_a_scratch_array_no_adjoint_reads_is_right(optimize):
    _assert_right(scratch_changed_after_its_last_differentiated_read, optimize=optimize)


def argument_written_in_a_later_iteration(x):
    c = x * 1.0
    for i in range(2):
        c[0] = x[1] * 2.0    # in the second iteration `c` is `x`, the caller's array
        c = x
    return np.sum(c)


@OPT
def test_a_write_into_what_may_be_an_argument_is_refused(optimize):
    message = _assert_refused(argument_written_in_a_later_iteration, "cannot write into `c`",
                              optimize=optimize)
    assert "`c = x`" in message


def merged_new_arrays_written(x):
    if x[0] > 0:
        c = x * 2.0
    else:
        c = x * 3.0
    c[0] = x[1] ** 2
    return np.sum(c * x)


def loop_result_written_after_the_loop(x):
    for i in range(3):
        d = x * x[i]
    d[1] = x[0]
    return np.sum(d * x)


def carried_array_written_after_the_loop(x):
    c = np.zeros(4)
    for i in range(3):
        c = c * x
        c[i] = x[i] ** 2
    c[3] = x[0]
    return np.sum(c * x)


@OPT
@pytest.mark.parametrize("fn", [merged_new_arrays_written, loop_result_written_after_the_loop,
                                carried_array_written_after_the_loop], ids=lambda f: f.__name__)
def test_a_write_into_a_new_array_a_branch_or_loop_gives_is_right(fn, optimize):
    _assert_right(fn, optimize=optimize)


def merged_with_an_argument_written(x):
    if x[0] > 0:
        c = x * 2.0
    else:
        c = x
    c[0] = x[1] ** 2
    return np.sum(c)


@OPT
def test_a_write_into_what_a_branch_made_an_argument_is_refused(optimize):
    _assert_refused(merged_with_an_argument_written, "cannot write into `c`", optimize=optimize)


# ---- every kind again: through a helper, and in float32 ---------------------------

RIGHT = [alias_not_read_after_the_write, element_read_before_write, view_rebound_in_each_iteration,
         write_from_a_view_of_itself, same_value_written_in_a_loop, carried_value_written_in_a_loop,
         argument_written_in_a_loop, value_written_in_nested_loops, reversed_into_itself,
         permuted_into_itself, shifted_into_itself, reversed_into_itself_in_a_loop, rows_swapped,
         transposed_row_read_in_each_iteration_before_a_write, column_read_in_each_iteration_before_a_write,
         written_into_an_integer_array, merged_new_arrays_written, augmented_in_a_loop,
         alias_then_write_original, alias_then_write_alias, view_by_transpose, column_view,
         augmented_under_a_view]
REFUSED = [view_of_view, view_carried_by_a_loop, changed_through_a_view, argument_written_in_a_later_iteration]


def _through_helper(fn):
    def calls_it(x):
        return fn(x * 1.0) * 2.0
    return calls_it


@OPT
@pytest.mark.parametrize("fn", RIGHT, ids=lambda f: f.__name__)
def test_each_right_kind_through_a_helper(fn, optimize):
    _assert_right(_through_helper(fn), optimize=optimize)


@pytest.mark.parametrize("fn", RIGHT, ids=lambda f: f.__name__)
def test_each_right_kind_in_float32(fn):
    value, grad = srcgrad.value_and_grad(fn)(X.astype(np.float32))
    assert np.allclose(value, fn(X.astype(np.float32)), rtol=1e-5, atol=1e-6)
    assert np.allclose(grad, numerical_grad(fn, X), rtol=2e-3, atol=1e-4)


@OPT
@pytest.mark.parametrize("fn", REFUSED, ids=lambda f: f.__name__)
def test_each_refused_kind_through_a_helper(fn, optimize):
    with pytest.raises(srcgrad.UnsupportedSyntaxError) as excinfo:
        srcgrad.grad(_through_helper(fn), optimize=optimize)(X.copy())
    assert f"test_trust_inplace.py:{fn.__code__.co_firstlineno}" not in str(excinfo.value)  # (its body)
    assert "test_trust_inplace.py:" in str(excinfo.value)


@pytest.mark.parametrize("fn", REFUSED, ids=lambda f: f.__name__)
def test_each_refused_kind_in_float32(fn):
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="test_trust_inplace.py:"):
        srcgrad.grad(fn)(X.astype(np.float32))


def _scaled(y):
    z = np.copy(y)
    z[2] *= y[3]
    return z


def integer_array_written_and_passed_to_a_helper(x):
    c = np.arange(4)
    c[0] = x[0]          # truncated: no derivative; but `c` is differentiated from here on
    return np.sum(_scaled(c) * x)


@pytest.mark.xfail(reason="the adjoint of an integer array is made with np.zeros_like, so it is an "
                   "integer array too, and `y_bar += z_bar` in the helper's pullback raises a casting "
                   "error (rules' zeros should have a floating dtype)", strict=True)
def test_an_integer_array_written_and_passed_to_a_helper():
    _assert_right(integer_array_written_and_passed_to_a_helper)


# ---- the fuzzer ---------------------------------------------------------------------

def _fuzz(count, seed, x=X):
    """Random programs of ``inplace_programs``: each is right or refused at its own
    line, the same way with ``optimize`` on and off.  One in four is a method, one in
    four runs in float32.  Returns the outcomes."""
    rng = random.Random(seed)
    outcomes = {"right": 0, "refused": 0}
    for k in range(count):
        source = inplace_programs.Program(rng).source()
        fn, filename = inplace_programs.load(source, method=k % 4 == 1)
        single = k % 4 == 2
        try:
            with np.errstate(all="raise"):
                value = fn(x.astype(np.float32) if single else x.copy())
                expected = numerical_grad(lambda z: fn(z.copy()), x)
        except (FloatingPointError, IndexError, ValueError, TypeError):
            continue  # the program itself fails (`c *= x` on integers)
        results = []
        for optimize in (True, False):
            try:
                got, grad = srcgrad.value_and_grad(fn, optimize=optimize)(
                    x.astype(np.float32) if single else x.copy())
            except srcgrad.errors.UserCodeError as error:
                assert filename in str(error), f"{source}\n{error}"
                results.append("refused")
                continue
            rtol, atol = (1e-4, 1e-5) if single else (1e-9, 1e-12)
            assert np.allclose(got, value, rtol=rtol, atol=atol), f"{source}\nvalue {got} vs {value}"
            rtol, atol = (2e-3, 1e-3) if single else (1e-4, 1e-6)
            assert np.allclose(grad, expected, rtol=rtol, atol=atol), \
                f"{source}\noptimize={optimize}: {grad} vs {expected}"
            if optimize and not single:  # a pullback called twice finds the writes done
                _, pullback = srcgrad.vjp(fn)(x.copy())
                assert np.allclose(pullback(1.0), expected, rtol=rtol, atol=atol), source
                assert np.allclose(pullback(1.0), expected, rtol=rtol, atol=atol), source
            results.append("right")
        assert results[0] == results[1], f"{source}\n{results}"
        outcomes[results[0]] += 1
    return outcomes


def test_random_programs_with_writes_aliases_and_views():
    outcomes = _fuzz(40, seed=11)
    assert outcomes["right"] >= 10, outcomes


@pytest.mark.slow
def test_random_programs_with_writes_aliases_and_views_many(request):
    if "slow" not in (request.config.getoption("markexpr") or "") \
            or "not slow" in request.config.getoption("markexpr"):
        pytest.skip("2,000 programs (minutes): run with `pytest -m slow`")
    outcomes = _fuzz(2000, seed=2026)
    assert outcomes["right"] >= 500, outcomes
