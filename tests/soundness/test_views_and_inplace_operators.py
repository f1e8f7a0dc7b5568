"""Views and in-place operators: `op=` on a view, a dict entry another name holds, a running
sum started from an element, boolean masks combined in place, integer-array indices that
copy, a view taken before a write.  Each is right (checked against finite differences) or
refused at the user's line."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from srcgrad import errors
from srcgrad.testing import check_grads


# central differences, float64
def numerical_grad(f, x, eps=1e-6):
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[idx] = eps
        g[idx] = (f(x + step) - f(x - step)) / (2 * eps)
    return g


X3 = np.array([0.5, -1.0, 2.0])


def assert_right_or_refused(f, x):
    """The gradient matches central differences, or compilation refuses at a line of this file."""
    try:
        g = srcgrad.grad(f)(x.copy())
    except errors.UserCodeError as e:
        assert "test_views_and_inplace_operators.py" in str(e), str(e)
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
    assert_right_or_refused(f, X3)


def running_sum_from_an_element(x):
    s = x[0]
    for i in range(3):
        s += x[i]  # s is a NumPy scalar: a new value each time
    return s


def running_sum_from_the_last_element(x):
    s = x[-1]
    for i in range(2):
        s *= x[i]
    return s


def running_sum_from_a_matrix_entry(m):
    s = m[0, 1]
    for i in range(2):
        s += m[i, i] ** 2
    return s


def running_sum_from_each_element(x):
    t = 0.0
    for i in range(3):
        s = x[i]
        s += x[0] * x[i]
        t = t + s
    return t


@pytest.mark.parametrize("f, x", [(running_sum_from_an_element, X3), (running_sum_from_the_last_element, X3),
                                  (running_sum_from_a_matrix_entry, np.arange(4.0).reshape(2, 2) + 0.5),
                                  (running_sum_from_each_element, X3)], ids=lambda v: getattr(v, "__name__", ""))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_running_sum_started_from_an_element(f, x, dtype):
    g = srcgrad.grad(f)(x.astype(dtype))
    assert g.dtype == dtype
    np.testing.assert_allclose(g, numerical_grad(f, x), rtol=1e-5 if dtype == np.float32 else 1e-7)


def running_sum_from_a_row(m):
    s = m[0]  # a view of m: `s += ...` changes m
    s += m[1]
    return np.sum(m * m)


def test_a_row_added_to_in_place_is_still_refused():
    with pytest.raises(errors.UserCodeError, match="may share memory"):
        srcgrad.grad(running_sum_from_a_row)(np.ones((2, 2)))


def boolean_mask_combined_in_place(x):
    m = x > -1
    m &= x < 1
    m |= x > 1.1
    return np.sum(np.where(m, x * 3, x ** 2))


def boolean_mask_combined_in_a_loop(x):
    m = x > -1
    for b in [1.0, 1.5]:
        m &= x < b
        m |= x > b + 0.1
    return np.sum(np.where(m, x * 3, x ** 2))


def test_a_boolean_mask_combined_in_place():
    x = np.array([0.1, -1.7, 0.3, 1.2, 1.05])
    np.testing.assert_allclose(srcgrad.grad(boolean_mask_combined_in_place)(x), [3.0, -3.4, 3.0, 3.0, 2.1])
    np.testing.assert_allclose(srcgrad.grad(boolean_mask_combined_in_a_loop)(x),
                               numerical_grad(boolean_mask_combined_in_a_loop, x), rtol=1e-6)


def mask_added_to_after_an_alias(x):
    m = x > 0
    k = m
    m &= x < 1  # changes k too
    return np.sum(np.where(k, x, 0.0))


def test_a_mask_changed_in_place_after_an_alias_is_refused_with_its_operator():
    with pytest.raises(errors.UserCodeError, match="`m &= ...`"):
        srcgrad.grad(mask_added_to_after_an_alias)(X3)


X4 = np.array([0.5, -1.0, 2.0, 1.5])


# ---- silently wrong: `v = a[1:]; v *= 2` dropped ---------------------------------------
# A basic-slice view of a local array, then an augmented assignment on the view: NumPy
# changes `a` through it; srcgrad took the view for a NumPy scalar (a slice index compared
# equal to an unknown rank: None == None) and compiled `v = v * 2`, a new array, so the
# write into `a` was lost from the value and the gradient.  Now refused, as `v = a[0]` was.

def slice_then_multiplied(x):
    a = x * 1.0
    v = a[1:]
    v *= 2
    return np.sum(a ** 2)


def slice_then_added_a_differentiated_value(x):
    a = x * 1.0
    v = a[::2]
    v += x[:2]
    return np.sum(a ** 2)


def buffer_filled_through_views(x):
    out = np.zeros(4)
    o = out[0:2]
    o += x[:2]
    o = out[2:4]
    o += x[2:] ** 2
    return np.sum(out * np.arange(4))


def column_of_a_matrix(x):
    m = x.reshape(2, 2) * 1.0
    col = m[:, 0]
    col *= 3
    return np.sum(m ** 2)


def new_axis_view(x):
    a = x * 1.0
    v = a[None]
    v **= 2
    return np.sum(a)


def ellipsis_view(x):
    a = x * 1.0
    v = a[..., 1:]
    v -= 1.0
    return np.sum(a ** 2)


def view_of_a_view(x):
    a = x * 1.0
    v = a[1:]
    w = v[1:]
    w /= 2.0
    return np.sum(a ** 2)


def _tail(a):
    return a[1:]


def view_from_a_helper(x):
    a = x * 1.0
    v = _tail(a)
    v *= 2
    return np.sum(a ** 2)


def view_in_a_loop(x):
    a = x * 1.0
    for i in range(2):
        v = a[i:]
        v *= 2
    return np.sum(a ** 2)


def view_in_a_branch(x):
    a = x * 1.0
    if x[0] > 0:
        v = a[1:]
        v *= 2
    return np.sum(a ** 2)


class Scaler:
    def __init__(self):
        self.w = np.array([0.5, 2.0, -1.0, 1.5])

    def loss(self, x):
        a = x * self.w
        v = a[2:]
        v *= 2
        return np.sum(a ** 2)


def method_call(x):
    return Scaler().loss(x)


VIEWS = [slice_then_multiplied, slice_then_added_a_differentiated_value, new_axis_view, ellipsis_view,
         view_of_a_view, view_from_a_helper, view_in_a_loop, view_in_a_branch]


@pytest.mark.parametrize("f", VIEWS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_in_place_operator_on_a_view_is_assert_right_or_refused(f, dtype):
    x = X3.astype(dtype)
    try:
        g = srcgrad.grad(f)(x)
    except errors.UserCodeError as e:
        assert "test_views_and_inplace_operators.py" in str(e) and "share memory" in str(e), str(e)
        return
    np.testing.assert_allclose(g, numerical_grad(f, X3), rtol=1e-4 if dtype == np.float32 else 1e-7)


@pytest.mark.parametrize("f", [buffer_filled_through_views, column_of_a_matrix, method_call],
                         ids=lambda f: f.__name__)
def test_in_place_operator_on_a_view_of_four(f):
    with pytest.raises(errors.UserCodeError, match="share memory"):
        srcgrad.grad(f)(X4)


def test_the_refusal_says_how_to_write_into_the_viewed_array():
    with pytest.raises(errors.UserCodeError, match=r"`a\[1:\] \*= \.\.\.`"):
        srcgrad.grad(slice_then_multiplied)(X3)


def written_by_index(x):  # what the advice says: the same values, differentiated
    a = x * 1.0
    a[1:] *= 2
    return np.sum(a ** 2)


def test_written_by_index_instead():
    np.testing.assert_allclose(srcgrad.grad(written_by_index)(X3), [2 * 0.5, 8 * -1.0, 8 * 2.0])
    np.testing.assert_allclose(srcgrad.grad(written_by_index)(X3), numerical_grad(slice_then_multiplied, X3),
                               rtol=1e-7)


def element_of_a_parameter_added_to(x):  # x[0] of a rank-1 argument: a NumPy scalar, a new value
    s = x[0]
    s += x[1] * x[2]
    return s


def test_an_element_is_still_a_new_value():
    np.testing.assert_allclose(srcgrad.grad(element_of_a_parameter_added_to)(X3), [1.0, 2.0, -1.0])


# ---- refused, now right: an integer-array index is a copy -------------------------------

def copy_by_a_list_index_then_multiplied(x):
    a = x * 1.0
    v = a[[0, 2]]
    v *= 2  # v is a new array: a unchanged
    return np.sum(a ** 2) + np.sum(v ** 3)


def column_copy_then_added(x):
    m = np.reshape(x, (2, 2)) * 1.0
    c = m[:, [1, 0]]
    c += 1.0
    return np.sum(m * c)


@pytest.mark.parametrize("f, x", [(copy_by_a_list_index_then_multiplied, X3), (column_copy_then_added, X4)],
                         ids=lambda v: getattr(v, "__name__", ""))
def test_an_integer_array_index_copies(f, x):
    np.testing.assert_allclose(srcgrad.grad(f)(x), numerical_grad(f, x), rtol=1e-7)


X = np.array([0.3, -1.2, 0.7])


def view_taken_before_write(x):
    y = np.outer(x, x)
    v = y[0]
    y[0] = 5.0
    return np.sum(v * x)


def augmented_alias_of_argument(x):
    s = x
    s += 1.0
    return np.sum(s * x)


def add_at_in_place(x):
    y = np.zeros(3)
    np.add.at(y, np.array([0, 0, 2]), x)
    return np.sum(y**2)


def test_add_at_in_place_is_followed():  # (once silently wrong, then refused: now differentiated)
    check_grads(add_at_in_place, (X,))


@pytest.mark.parametrize("fn, says", [
    (augmented_alias_of_argument, "`s = s + ...`"),
], ids=lambda v: getattr(v, "__name__", None))
def test_silently_wrong_before_now_a_clear_error(fn, says):
    with pytest.raises(srcgrad.UnsupportedSyntaxError) as excinfo:
        srcgrad.grad(fn)(X)
    message = str(excinfo.value)
    assert says in message and "test_views_and_inplace_operators.py:" in message


def test_a_view_taken_before_a_write_is_made_again_after_it():
    check_grads(view_taken_before_write, (X,))  # (`v = y[0]` read after `y[0] = 5.0`: zero)
