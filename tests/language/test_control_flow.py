"""Control flow: branches and loops, each checked against central finite differences.

Each test function's name says which construct it covers.
"""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import numerical_grad


def branch_on_reduction(x, s):
    y = x * 2
    if np.sum(y) > 0:
        y = y * s
    else:
        y = np.sin(y)
    return np.sum(y)


def branch_elif(x):
    t = np.sum(x)
    if t > 1:
        y = x**2
    elif t > -1:
        y = np.exp(x)
    else:
        y = -x
    return np.sum(y)


def branch_spelled_positive(x):
    y = x
    if np.max(x) > 0:
        y = np.tanh(x) * 3
    else:
        y = x * x
    return np.sum(y)


def branch_spelled_negative(x):
    y = x
    if np.max(x) <= 0:
        y = x * x
    else:
        y = np.tanh(x) * 3
    return np.sum(y)


def branch_without_else(x):
    y = x * 1.5
    if np.sum(x) > 0:
        y = y + np.cos(x)
    return np.sum(y * y)


def branch_with_empty_adjoint(x):
    y = x * 2
    n = 0
    if np.sum(x) > 0:
        n = n + 1
    return np.sum(y) * 3


def conditional_expression(x):
    y = x if np.sum(x) > 0 else -x
    return np.sum(y * y * y)


def bool_operators(x, w):
    y = x * w
    if np.sum(x) > 0 and not np.max(x) > 10 or np.min(x) < -10:
        y = y * w
    return np.sum(y)


def for_range_len(x):
    s = 0.0
    for i in range(len(x)):
        s = s + x[i] * x[i] * (i + 1)
    return s


def for_range_shape_bound(x):
    s = np.zeros(x.shape[1])
    for i in range(1, x.shape[0]):
        s = s + x[i] * x[i - 1]
    return np.sum(s)


def nested_inner_bound_depends_on_outer(x):
    total = 0.0
    for i in range(len(x)):
        for j in range(i):
            total = total + x[i] * x[j]
    return total


def for_over_rows(x):
    s = 0.0
    for row in x:
        s = s + np.sum(row**2)
    return s


def for_over_arange(x):
    s = 0.0
    for i in np.arange(1, len(x)):
        s = s + x[i] / i
    return s


def for_zip(x, y):
    s = 0.0
    for a, b in zip(x, y):
        s = s + np.sum(a * b)
    return s


def for_enumerate(x):
    s = 0.0
    for i, row in enumerate(x):
        s = s + np.sum(row) * i
    return s


def for_reversed(x):
    h = 0.0
    for row in reversed(x):
        h = np.tanh(h + row)
    return np.sum(h)


def for_reversed_range(x):
    h = x[0]
    for i in reversed(range(1, len(x))):
        h = h * x[i] + np.sin(h)
    return np.sum(h)


def tanh_recurrence(x, w):
    h = x
    for i in range(3):
        h = np.tanh(h @ w)
    return np.sum(h)


def small_rnn(xs, wx, wh, b):
    h = np.zeros((xs.shape[1], wh.shape[0]))
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ wx + h @ wh + b)
    return np.sum(h**2)


def while_data_dependent(x):
    n = 0
    while np.sum(x * x) < 50 and n < 20:
        x = x * 1.5 + 0.1
        n = n + 1
    return np.sum(x)


def while_counter(x):
    i = 0
    while i < 5:
        x = x - 0.1 * np.sin(x) * x
        i = i + 1
    return np.sum(x)


def carried_slice_of_input(x):
    y = x[0:2]
    for i in range(3):
        y = y * x[i + 1: i + 3]
    return np.sum(y)


def branch_inside_loop(x):
    s = 0.0
    for i in range(len(x)):
        if x[i] > 0:
            s = s + x[i] ** 2
        else:
            s = s - np.sin(x[i])
    return s


def loop_inside_branch(x):
    y = x
    if np.sum(x) > 0:
        for i in range(3):
            y = np.cos(y) * x
    return np.sum(y)


def first_defined_inside_loop(x):
    for i in range(3):
        z = x * (i + 1)
    return np.sum(z * z)


def reads_previous_iteration(x):
    s = 0.0
    prev = x * 0
    for i in range(3):
        s = s + np.sum(prev * x)
        prev = np.sin(x) + i
    return s


def for_break(x):
    s = 0.0
    for i in range(len(x)):
        if s > 1.0:
            break
        s = s + x[i] ** 2
    return s


def for_continue(x):
    s = 0.0
    for i in range(len(x)):
        if x[i] < 0:
            continue
        s = s + np.sin(x[i])
    return s


def return_anywhere(x):
    if np.sum(x) > 10:
        return np.sum(x**2)
    y = x * 3
    for i in range(3):
        if np.sum(y) > 5:
            return np.sum(y * x)
        y = y * 2
    return np.sum(y)


def while_break(x):
    while np.sum(x) < 100:
        x = x * 1.5
        if np.max(x) > 20:
            break
    return np.sum(x)


def nested_break_leaves_inner_loop_only(x):
    s = 0.0
    for i in range(3):
        for j in range(len(x)):
            if j > i:
                break
            s = s + x[j] * (i + 1)
    return s


def index_read_after_break(x):
    """Search, then use the index: after `break` the index stays where the loop stopped."""
    for j in range(len(x)):
        if x[j] > 0.5:
            break
    return x[j] * 2.0 + j


def targets_read_after_break(x):
    for i, v in enumerate(x):
        if v > 0.5:
            break
    return v * x[i] + i


def index_kept_when_the_loop_is_empty(x):
    j = 1
    for j in range(len(x) - len(x)):
        if x[j] > 0:
            break
    return x[j] * 3.0


def item_read_after_the_loop(x):
    """`v` after the loop is the last item: only that item gets its adjoint."""
    s = 0.0
    for v in x:
        s = s + v**2
    return s + v


def items_read_after_enumerate_and_zip(x, y):
    for i, v in enumerate(x):
        s = v * x[i]
    for a, b in zip(x, y):
        s = s + a * b
    return s


def list_item_read_after_the_loop(x):
    for w in [x, x * 2, x * 3]:
        pass
    return np.sum(w)


def item_kept_when_the_loop_is_empty(x):
    v = x[0]
    for v in x[:len(x) - len(x)]:
        pass
    return v * 3.0


def conditional_expression_reading_its_target(x):
    s = x[0]
    for i in range(len(x)):
        s = s * x[i] if x[i] > 0 else s + x[i]
    return s


def and_or_as_values(x, y):
    a = np.sum(x) or np.sum(y)
    b = (np.sum(x) > 0 and np.sum(y)) + np.sum(x)
    return a * b


def and_short_circuits(x):
    i = len(x)
    if i < len(x) and x[i] > 0:  # x[i] would raise: it must not run
        return np.sum(x)
    return np.sum(x * 2)


def assigned_on_one_path_only(x):
    if x[0] > 0:
        z = x * 2
    if x[0] > 0:
        return np.sum(z)
    return np.sum(x)


def assigned_in_one_iteration_only(x):
    for i in range(3):
        if i == 1:
            keep = x * i
    return np.sum(keep**2)


def bound_in_an_inner_loop_read_in_the_outer(m):
    s = 0.0
    for i in range(2):
        for j in range(2):
            t = m[i, j] * 1.0
        s = s + np.sin(t)
    return s


def read_before_assigned_later_in_the_body(x):
    s = 0.0
    for i in range(3):
        if i > 0:
            s = s + w * x[i]
        w = x[i] ** 2
    return s


def carried_tuple_unpacked_in_the_loop(x):
    t = (x, x * 2)
    for i in range(2):
        a, b = t
        t = (b, a * 3)
    return np.sum(t[0])


def nested_and_or_in_a_loop(x, y):
    s = np.sum(x)
    for i in range(2):
        s = (s > 0 and s) or np.sum(y)
        s = s + ((s and np.sum(y)) or 1.0)
    return s


def for_else(x):
    s = 0.0
    for i in range(len(x)):
        if x[i] > 2:
            break
        s = s + x[i] ** 2
    else:
        s = s * 10  # only when no element was over 2
    return s


def for_else_without_break(x):
    for i in range(3):
        x = np.sin(x) * 2
    else:  # noqa: PLW0120 - the construct under test
        x = x * x  # always runs
    return np.sum(x)


def while_else(x):
    s = 1.0
    i = 0
    while i < len(x):
        s = s * np.sin(x[i])
        if s < 0:
            break
        i = i + 1
    else:
        s = s + np.sum(x)
    return s


def for_else_continues_outer_loop(x):
    total = 0.0
    for i in range(3):
        for j in range(len(x)):
            if x[j] * (i + 1) > 2.5:
                total = total + x[j] * i
                break
        else:
            continue  # nothing found: skip the scaling below
        total = total * 1.5
    return total


def for_else_after_return(x):
    for i in range(len(x)):
        if x[i] > 2:
            return np.sum(x) * x[i]
    else:  # noqa: PLW0120 - the construct under test
        y = x * 3
    return np.sum(y * y)


def carried_through_nested_loops(x):
    y = np.tanh(x)  # its adjoint reads y: the nested loops must give back this value
    for i in range(2):
        for j in range(3):
            y = y * 1.1 + np.sin(y)
    return np.sum(y)


def return_inside_nested_loop(x):
    y = x * 1.0
    for i in range(3):
        for j in range(len(x)):
            y = y * 1.1
            if np.sum(y) > 4:
                return np.sum(y * x) + i
    return np.sum(y)


def carried_reslice_of_input(x):
    h = x[1:]
    for i in range(3):
        h = h[1:] * 2
    return np.sum(h * h)


def nested_arange_inner_bound(x):
    total = 0.0
    n = len(x)
    for i in range(n):
        for j in np.arange(i, n):
            total = total + x[i] * np.sin(x[j])
    return total


rng = np.random.default_rng(1)
VEC = rng.standard_normal(5)
MAT = rng.standard_normal((4, 3))

CASES = [
    (branch_on_reduction, (np.array([1.0, 2.0]), 3.0), (0, 1)),
    (branch_on_reduction, (np.array([-1.0, -2.0]), 3.0), (0, 1)),
    (branch_elif, (np.array([1.0, 0.5]),), (0,)),
    (branch_elif, (np.array([0.2, -0.5]),), (0,)),
    (branch_elif, (np.array([-1.0, -0.5]),), (0,)),
    (branch_without_else, (VEC,), (0,)),
    (branch_without_else, (-np.abs(VEC),), (0,)),
    (branch_with_empty_adjoint, (VEC,), (0,)),
    (conditional_expression, (np.array([1.0, -0.5]),), (0,)),
    (conditional_expression, (np.array([-1.0, 0.5]),), (0,)),
    (bool_operators, (VEC, VEC + 1), (0, 1)),
    (for_range_len, (VEC,), (0,)),
    (for_range_shape_bound, (MAT,), (0,)),
    (nested_inner_bound_depends_on_outer, (VEC,), (0,)),
    (for_over_rows, (MAT,), (0,)),
    (for_over_arange, (VEC,), (0,)),
    (for_zip, (MAT, MAT + 1), (0, 1)),
    (for_enumerate, (MAT,), (0,)),
    (for_reversed, (MAT * 0.3,), (0,)),
    (for_reversed_range, (MAT * 0.3,), (0,)),
    (tanh_recurrence, (MAT * 0.3, np.eye(3) * 0.5 + 0.1), (0, 1)),
    (small_rnn, (rng.standard_normal((4, 2, 3)), rng.standard_normal((3, 5)) * 0.5,
                 rng.standard_normal((5, 5)) * 0.5, rng.standard_normal(5)), (0, 1, 2, 3)),
    (while_data_dependent, (np.array([0.5, 1.0]),), (0,)),
    (while_counter, (VEC,), (0,)),
    (carried_slice_of_input, (VEC + 2,), (0,)),
    (branch_inside_loop, (VEC,), (0,)),
    (loop_inside_branch, (np.abs(VEC),), (0,)),
    (loop_inside_branch, (-np.abs(VEC),), (0,)),
    (first_defined_inside_loop, (VEC,), (0,)),
    (reads_previous_iteration, (VEC,), (0,)),
    (for_break, (np.array([0.5, 0.8, 0.7, 0.2]),), (0,)),
    (for_continue, (np.array([0.5, -0.8, 0.7, 0.2]),), (0,)),
    (return_anywhere, (np.array([0.1, 0.2]),), (0,)),
    (return_anywhere, (np.array([5.0, 6.0]),), (0,)),
    (return_anywhere, (np.array([0.5, 0.6]),), (0,)),
    (while_break, (np.array([1.0, 2.0]),), (0,)),
    (nested_break_leaves_inner_loop_only, (VEC,), (0,)),
    (carried_through_nested_loops, (VEC,), (0,)),
    (return_inside_nested_loop, (np.array([0.3, 0.7, 1.1, 0.2, 0.9, 1.3]),), (0,)),  # returns
    (return_inside_nested_loop, (np.array([0.03, 0.07, 0.11]),), (0,)),  # does not
    (carried_reslice_of_input, (VEC,), (0,)),
    (nested_arange_inner_bound, (VEC,), (0,)),
    (index_read_after_break, (np.array([0.3, 0.7, 0.9]),), (0,)),  # breaks at 1
    (index_read_after_break, (np.array([0.3, 0.2, 0.1]),), (0,)),  # runs to the end
    (targets_read_after_break, (np.array([0.3, 0.7, 0.9]),), (0,)),
    (targets_read_after_break, (np.array([0.3, 0.2, 0.1]),), (0,)),
    (index_kept_when_the_loop_is_empty, (VEC,), (0,)),
    (item_read_after_the_loop, (VEC,), (0,)),
    (items_read_after_enumerate_and_zip, (VEC, VEC + 1), (0, 1)),
    (list_item_read_after_the_loop, (VEC,), (0,)),
    (item_kept_when_the_loop_is_empty, (VEC,), (0,)),
    (conditional_expression_reading_its_target, (VEC,), (0,)),
    (conditional_expression_reading_its_target, (-VEC,), (0,)),
    (and_or_as_values, (VEC, VEC + 1), (0, 1)),
    (and_or_as_values, (VEC * 0, VEC + 1), (1,)),
    (and_short_circuits, (VEC,), (0,)),
    (assigned_on_one_path_only, (VEC,), (0,)),
    (assigned_on_one_path_only, (-VEC,), (0,)),  # `z` never assigned: its adjoint is 0.0
    (assigned_in_one_iteration_only, (VEC,), (0,)),
    (bound_in_an_inner_loop_read_in_the_outer, (MAT[:2, :2],), (0,)),
    (read_before_assigned_later_in_the_body, (VEC,), (0,)),
    (carried_tuple_unpacked_in_the_loop, (VEC,), (0,)),
    (nested_and_or_in_a_loop, (np.abs(VEC), VEC), (0, 1)),
    (for_else, (np.array([1.0, 1.5, 0.5]),), (0,)),  # no break: the else block runs
    (for_else, (np.array([1.0, 2.5, 0.5]),), (0,)),  # break: it does not
    (for_else_without_break, (VEC,), (0,)),
    (while_else, (np.array([1.0, 1.5, 0.5]),), (0,)),
    (while_else, (np.array([1.0, 4.0, 0.5]),), (0,)),
    (for_else_continues_outer_loop, (np.array([1.0, 1.5, 0.5]),), (0,)),
    (for_else_continues_outer_loop, (np.array([0.5, 0.6, 0.7]),), (0,)),
    (for_else_after_return, (np.array([1.0, 1.5, 0.5]),), (0,)),
    (for_else_after_return, (np.array([1.0, 2.5, 0.5]),), (0,)),
]


@pytest.mark.parametrize("optimize", [True, False], ids=["opt", "noopt"])
@pytest.mark.parametrize("fn, args, wrt", CASES, ids=[c[0].__name__ for c in CASES])
def test_matches_finite_differences(fn, args, wrt, optimize):
    grads = srcgrad.grad(fn, wrt=wrt, optimize=optimize)(*args)
    for i, g in zip(wrt, grads):
        expected = numerical_grad(fn, args, i)
        np.testing.assert_allclose(g, expected, rtol=1e-6, atol=1e-6, err_msg=f"argument {i}")


@pytest.mark.parametrize("fn, args, wrt", CASES[:12:3] + CASES[19:23], ids=lambda v: getattr(v, "__name__", ""))
def test_vjp_pullback_matches_grad(fn, args, wrt):
    value, pullback = srcgrad.vjp(fn, wrt=wrt)(*args)
    assert value == pytest.approx(fn(*args))
    for got, expected in zip(pullback(1.0), srcgrad.grad(fn, wrt=wrt)(*args)):
        np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_both_spellings_of_a_branch_agree():
    for x in (VEC, -np.abs(VEC)):
        a = srcgrad.grad(branch_spelled_positive)(x)
        b = srcgrad.grad(branch_spelled_negative)(x)
        np.testing.assert_array_equal(a, b)


def test_loop_saves_only_what_the_adjoint_reads():
    """`h @ w` reads the entry `h`; tanh's adjoint reads its output: both saved, nothing else."""
    code = srcgrad.source(srcgrad.grad(tanh_recurrence, wrt=(0, 1)), MAT, np.eye(3))
    assert "loop1_stack.append((h, h_2))" in code
    assert "h, h_2 = loop1_stack.pop()" in code
    assert "for i in reversed(range(3)):" in code
    assert "w_bar = np.zeros(w.shape, w.dtype)" in code  # accumulated across iterations


def test_while_records_its_trip_count():
    code = srcgrad.source(srcgrad.grad(while_counter), VEC)
    assert "loop1_trips = loop1_trips + 1" in code
    assert "for _ in range(loop1_trips):" in code
    assert "loop1_trips: how many times the loop" in code


def branch_in_loop(x, w):
    for i in range(3):
        if np.sum(x) > 1.0:
            x = x * w
        else:
            x = x + w
    return np.sum(x)


def test_a_branch_decision_saved_per_iteration_has_a_plain_name():
    x, w = np.array([0.2, 0.3]), np.array([1.5, 2.0])  # sum 0.5, then 2.0, 3.25: both branches
    g = srcgrad.grad(branch_in_loop, wrt=(0, 1))
    code = srcgrad.source(g, x, w)
    assert "if1_taken = _t1 > 1.0" in code
    assert "loop1_stack.append((if1_taken, x))" in code
    assert "if1_taken: whether the `if` at test_control_flow.py:" in code
    for i, got in enumerate(g(x, w)):
        np.testing.assert_allclose(got, numerical_grad(branch_in_loop, (x, w), i), rtol=1e-7)


def test_carried_value_from_before_the_loop_is_restored():
    """The adjoint of code before a loop sees the values from before the loop."""
    def f(x):
        h = np.tanh(x)
        for i in range(3):
            h = h * 2
        return np.sum(h)

    g = srcgrad.grad(f)(VEC)
    np.testing.assert_allclose(g, 8 * (1 - np.tanh(VEC) ** 2), rtol=1e-12)


@pytest.mark.parametrize("fn, args", [(c[0], c[1]) for c in CASES if c[0] in (
    for_break, for_continue, return_anywhere, while_break, nested_break_leaves_inner_loop_only,
    for_else, while_else, for_else_continues_outer_loop, for_else_after_return,
    return_inside_nested_loop, index_read_after_break, targets_read_after_break,
    index_kept_when_the_loop_is_empty, item_read_after_the_loop, item_kept_when_the_loop_is_empty,
    conditional_expression_reading_its_target, and_or_as_values, and_short_circuits)])
def test_early_exits_compute_the_same_value(fn, args):
    value, _ = srcgrad.value_and_grad(fn)(*args)
    assert value == pytest.approx(fn(*args), rel=1e-14)


def test_a_pullback_with_loops_can_be_called_twice():
    value, pullback = srcgrad.vjp(tanh_recurrence, wrt=(0, 1))(MAT * 0.3, np.eye(3) * 0.5 + 0.1)
    first = pullback(1.0)
    second = pullback(1.0)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    doubled = pullback(2.0)
    np.testing.assert_allclose(doubled[1], 2 * first[1], rtol=1e-12)


def test_a_pullback_of_a_loop_that_ran_no_iterations():
    def f(x, n):
        h = x
        for i in range(n):
            h = np.tanh(h) * 2
        return h

    value, pullback = srcgrad.vjp(f)(VEC, 0)
    np.testing.assert_array_equal(pullback(np.ones(5)), np.ones(5))
    np.testing.assert_array_equal(pullback(np.ones(5)), np.ones(5))


def _padded(x, mode):
    if mode == "same":
        y = x * 2.0
    elif mode == "valid":
        y = x * 3.0
    return y  # (another mode: `y` was never assigned)


def _unbound_after_an_empty_loop(x):
    for _ in range(0):
        z = x * 2.0
    return np.sum(z)


def _unbound_after_a_branch(x, mode):
    return np.sum(_padded(x, mode))


@pytest.mark.parametrize("f, args", [(_unbound_after_an_empty_loop, ()), (_unbound_after_a_branch, ("bogus",))])
def test_a_name_never_assigned_on_the_path_taken_raises_as_python_does(f, args):
    for transform in (srcgrad.grad, srcgrad.value_and_grad):
        with pytest.raises(UnboundLocalError, match="cannot access local variable"):
            transform(f)(np.ones(2), *args)
    np.testing.assert_allclose(srcgrad.grad(_unbound_after_a_branch)(np.ones(2), "valid"), [3.0, 3.0])


# ---- a name a loop binds, bound again by a later loop ------------------------------------
# (Each iteration's adjoint of a name the body binds starts afresh: the later loop's own
# adjoint of the name, zeros after its backward sweep, is not carried into this loop's
# iterations, which once added every iteration's part into every other's.)

_WIDTHS = (3, 5, 2)
_RNG = np.random.default_rng(7)
_LAYERS = [(0.5 * _RNG.standard_normal((m, n)), 0.1 * _RNG.standard_normal(n))
           for m, n in zip(_WIDTHS[:-1], _WIDTHS[1:])]


def _index_loop_then_weight_decay(params, x):
    h = x
    for i in range(len(params)):
        W, b = params[i]
        h = np.tanh(h @ W + b)
    reg = 0.0
    for W, b in params:  # layers of different widths: b of another shape each time, unread
        reg = reg + np.sum(W ** 2)
    return np.sum(h ** 2) + 1e-2 * reg


def _loop_then_rebinding_loop(bs, x):
    h = x
    for i in range(len(bs)):
        b = bs[i]
        h = np.sin(h + b)
    for b in bs:  # binds b, never reads it
        pass
    return np.sum(h)


def _loop_then_while_rebinding(bs, x):
    h = x
    for i in range(len(bs)):
        b = bs[i]
        h = np.sin(h * b)
    k = 0
    while k < 2:
        b = bs[k]
        k += 1
    return np.sum(h)


def _loop_then_items_loop(d, x):
    h = x
    for key in sorted(d):
        w = d[key]
        h = np.tanh(h * w)
    for key, w in d.items():
        pass
    return np.sum(h)


def _helper_loop(params, x):
    for i in range(len(params)):
        W, b = params[i]
        x = np.tanh(x @ W + b)
    for W, b in params:
        x = x + 0.0 * np.sum(W)
    return x


def _helper_then_weight_decay(params, x):
    return np.sum(_helper_loop(params, x) ** 2)


class _RebindingNet:
    def __init__(self, params):
        self.params = params

    def loss(self, x):
        return _index_loop_then_weight_decay(self.params, x)


@pytest.mark.parametrize("fn", [_index_loop_then_weight_decay, _helper_then_weight_decay])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_loop_name_bound_again_by_a_later_loop(fn, dtype):
    params = [(W.astype(dtype), b.astype(dtype)) for W, b in _LAYERS]
    x = np.linspace(-1, 1, 2 * _WIDTHS[0]).reshape(2, _WIDTHS[0]).astype(dtype)
    got = srcgrad.grad(fn)(params, x)
    for k, (W, b) in enumerate(params):
        for j, leaf in enumerate((W, b)):
            def along(v, k=k, j=j):
                changed = [list(p) for p in _LAYERS]
                changed[k][j] = v
                return fn([tuple(p) for p in changed], x.astype(np.float64))
            np.testing.assert_allclose(got[k][j], numerical_grad(along, (_LAYERS[k][j],), 0),
                                       rtol=2e-3 if dtype == np.float32 else 1e-6, atol=1e-5)
            assert got[k][j].dtype == dtype


@pytest.mark.parametrize("fn", [_loop_then_rebinding_loop, _loop_then_while_rebinding])
def test_a_loop_name_bound_again_by_a_later_loop_that_never_reads_it(fn):
    bs = [np.array([0.1, 0.2]), np.array([0.3, -0.4]), np.array([-0.2, 0.7])]
    x = np.array([0.5, 1.0])
    got = srcgrad.grad(fn)(bs, x)
    for k in range(len(bs)):
        def along(v, k=k):
            return fn(bs[:k] + [v] + bs[k + 1:], x)
        np.testing.assert_allclose(got[k], numerical_grad(along, (bs[k],), 0), rtol=1e-6, atol=1e-9)


def test_a_loop_name_bound_again_by_a_later_items_loop():
    d = {"a": np.array([0.3, -0.2]), "b": np.array([1.1, 0.4])}
    x = np.array([0.5, -1.0])
    got = srcgrad.grad(_loop_then_items_loop)(d, x)
    for key in d:
        def along(v, key=key):
            return _loop_then_items_loop({**d, key: v}, x)
        np.testing.assert_allclose(got[key], numerical_grad(along, (d[key],), 0), rtol=1e-6, atol=1e-9)


def test_a_loop_name_bound_again_by_a_later_loop_in_a_method():
    net = _RebindingNet([(W.copy(), b.copy()) for W, b in _LAYERS])
    x = np.linspace(-1, 1, 2 * _WIDTHS[0]).reshape(2, _WIDTHS[0])
    got = srcgrad.grad(_RebindingNet.loss)(net, x)
    want = srcgrad.grad(_index_loop_then_weight_decay)(net.params, x)
    for (gW, gb), (wW, wb) in zip(got.params, want):
        np.testing.assert_allclose(gW, wW, rtol=1e-12)
        np.testing.assert_allclose(gb, wb, rtol=1e-12)


def _counted_down_after_a_branch(x):
    n = 3
    if x[0] > 0:
        n = 2
    n -= 1  # (a number on both paths: rebound, not changed in place)
    return np.sum(x) * n


def test_a_number_set_on_both_paths_then_decremented():
    for x in (np.array([0.3, 0.5]), np.array([-0.3, 0.5])):
        g = srcgrad.grad(_counted_down_after_a_branch)(x)
        np.testing.assert_allclose(g, np.full(2, 1.0 if x[0] > 0 else 2.0))
