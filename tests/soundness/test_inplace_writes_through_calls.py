"""In-place writes through calls: functions that may return their argument, NumPy
functions that write into an argument wherever their call appears, helpers that write
through ``out=`` or a loop variable, and ``has_aux`` arrays written in place.  Each is
right or refused at the user's line, with ``optimize`` on and off.
"""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import numerical_grad as _numerical_grad

X = np.array([0.3, -1.2, 0.7, 0.45])
M = np.array([[1.0, 2.0], [3.0, 4.0]])
OPT = pytest.mark.parametrize("optimize", [True, False], ids=["opt", "noopt"])


def assert_refused(fn, says, x=X, optimize=True):
    with pytest.raises(srcgrad.UnsupportedSyntaxError) as excinfo:
        srcgrad.grad(fn, optimize=optimize)(x.copy())
    message = str(excinfo.value)
    assert "test_inplace_writes_through_calls.py:" in message, message
    assert any(s in message for s in ([says] if isinstance(says, str) else says)), message
    return message


# A helper that changes its argument is inlined: its change is refused where it is made, as
# one the caller made would be (or, called at run time, at the call).
_CHANGED_IN_A_HELPER = ("changes its arguments in place", "share memory", "may share memory",
                        "changes `y` in place", "does not accept these arguments", "`.__setitem__()`")


def assert_right(fn, x=X, optimize=True):
    value, grad = srcgrad.value_and_grad(fn, optimize=optimize)(x.copy())
    assert np.allclose(value, fn(x.copy()))
    expected = _numerical_grad(lambda z: fn(np.array(z).copy()), [x.astype(np.float64)], 0)
    assert np.allclose(grad, expected, rtol=1e-5, atol=1e-7), (grad, expected)


# ---- A1-A3, A18: calls that may return their argument (or a view of it) ------------

def astype_no_copy(x):
    y = x + 0
    z = y.astype(np.float64, copy=False)
    y[0] = 0.0
    return np.sum(z * x)


def astype_function_no_copy(x):
    y = x + 0
    z = np.astype(y, np.float64, copy=False)
    y[0] = 0.0
    return np.sum(z * x)


def array_no_copy(x):
    y = x + 0
    z = np.array(y, copy=False)
    y[0] = 0.0
    return np.sum(z)


def array_copy_if_needed(x):
    y = x + 0
    z = np.array(y, copy=None)
    y[0] = 0.0
    return np.sum(z)


def asarray_then_write(x):
    y = x + 0
    z = np.asarray(y)
    y[0] = 0.0
    return np.sum(z * x)


def sliding_window(x):
    y = x + 0
    z = np.lib.stride_tricks.sliding_window_view(y, 2)
    y[0] = 0.0
    return np.sum(z)


def stop_gradient_alias(x):
    y = x * 1.0
    z = srcgrad.stop_gradient(y)
    y[0] = 100.0
    return np.sum(z * x)


@srcgrad.custom_adjoint
def straight_through(x):
    return x


@straight_through.defadjoint
def _straight_through_adjoint(ans_bar, ans, x):
    return ans_bar


def custom_identity_alias(x):
    y = x * 1.0
    z = straight_through(y)
    y[0] = 100.0
    return np.sum(z * x)


def alias_in_loop(x):
    y = x + 0
    total = 0.0
    for i in range(2):
        z = np.array(y, copy=False)
        y[i] = 0.0
        total = total + np.sum(z * x)
    return total


def write_into_no_copy_of_argument(x):
    z = x.astype(np.float64, copy=False)
    z[0] = 0.0
    return np.sum(z)


@OPT
@pytest.mark.parametrize("fn", [astype_no_copy, astype_function_no_copy, array_no_copy, array_copy_if_needed,
                                stop_gradient_alias, custom_identity_alias, alias_in_loop,
                                write_into_no_copy_of_argument])
def test_a_call_that_may_return_its_argument_is_an_alias(fn, optimize):
    assert_refused(fn, "cannot write into", optimize=optimize)


# A view NumPy always makes (`np.asarray` of an array, a sliding window) read after a write into
# its base is made again there from the base (transforms/aliases.py): right, as written.
@OPT
@pytest.mark.parametrize("fn", [asarray_then_write, sliding_window])
def test_a_view_read_after_a_write_into_its_base_is_right(fn, optimize):
    assert_right(fn, optimize=optimize)


def array_copy(x):
    y = x + 0
    z = np.array(y)            # copy=True (the default): a new array
    w = y.astype(np.float64)   # likewise (copy=True: even to its own dtype)
    y[0] = 0.0
    return np.sum(z * x) + np.sum(w)


@OPT
def test_copies_stay_copies(optimize):
    assert_right(array_copy, optimize=optimize)


# ---- A4, A5: NumPy functions that write into an argument, wherever they are called --

def fill_diagonal_assigned(x):
    y = x * 1.0
    _ = np.fill_diagonal(y, 0.0)
    return np.sum(y * x)


def fill_diagonal_printed(x):
    y = x * 1.0
    print(np.fill_diagonal(y, 0.0))
    return np.sum(y * x)


def fill_diagonal_in_test(x):
    y = x * 1.0
    if np.fill_diagonal(y, 0.0) is None:
        pass
    return np.sum(y * x)


def fill_diagonal_in_tuple(x):
    y = x * 1.0
    t = (1.0, np.fill_diagonal(y, 0.0))
    return np.sum(y * x) * t[0]


def copyto_assigned(x):
    y = x * 1.0
    _ = np.copyto(y, x ** 2)
    return np.sum(y * x)


def add_at_assigned(x):
    y = x * 1.0
    _u = np.add.at(y, [0], 1.0)
    return np.sum(y * x)


def putmask_assigned(x):
    y = x * 1.0
    _ = np.putmask(y, y > 2, 0.0)
    return np.sum(y * x)


def place_assigned(x):
    y = x * 1.0
    _ = np.place(y, y > 0, [0.0])
    return np.sum(y * x)


def permuted_out(x):
    rng = np.random.default_rng(0)
    y = x * 1.0
    _ = rng.permuted(y, axis=1, out=y)
    return np.sum(y * x)


def generator_shuffle(x):
    y = x * 1.0
    np.random.default_rng(0).shuffle(y)
    return np.sum(y * x)


def generator_shuffle_named(x):
    y = x * 1.0
    rng = np.random.default_rng(0)
    _ = rng.shuffle(y)
    return np.sum(y * x)


def random_shuffle_assigned(x):
    y = x * 1.0
    _ = np.random.shuffle(y)
    return np.sum(y * x)


def fill_diagonal_in_loop(x):
    y = x * 1.0
    for _i in range(2):
        _ = np.fill_diagonal(y, 0.0)
        y = y * x
    return np.sum(y)


def fill_diagonal_after_read(x):
    y = x * 1.0
    z = np.sum(y * x)          # its adjoint reads y
    _ = np.fill_diagonal(y, 0.0)
    return z


@OPT
@pytest.mark.parametrize("fn", [fill_diagonal_assigned, fill_diagonal_printed, fill_diagonal_in_test,
                                fill_diagonal_in_tuple, copyto_assigned, add_at_assigned, putmask_assigned,
                                place_assigned, permuted_out, generator_shuffle, generator_shuffle_named,
                                random_shuffle_assigned, fill_diagonal_in_loop, fill_diagonal_after_read])
def test_a_numpy_function_writing_into_an_argument_is_refused(fn, optimize):
    assert_refused(fn, ("in place", "no derivative rule for the array method"), x=M, optimize=optimize)


def copyto_a_constant(x):
    c = np.zeros((2, 2))
    _ = np.copyto(c, x * 2)
    return np.sum(c * x)


def add_at_a_constant(x):
    c = np.zeros((2, 2))
    _ = np.add.at(c, 0, x[1])
    return np.sum(c * x)


def put_into_a_constant_in_loop(x):
    c = np.zeros(4)
    for i in range(2):
        np.put(c, [i], x[i])
    return np.sum(c)


@OPT
@pytest.mark.parametrize("fn", [copyto_a_constant, add_at_a_constant, put_into_a_constant_in_loop])
def test_a_differentiated_value_written_into_another_array_is_refused(fn, optimize):
    assert_refused(fn, "into an array in place", x=M, optimize=optimize)


def fill_diagonal_of_a_constant(x):
    c = np.ones((2, 2))
    _ = np.fill_diagonal(c, 0.0)
    return np.sum(c * x)


@OPT
def test_writing_into_a_constant_before_it_is_used_is_right(optimize):
    assert_right(fill_diagonal_of_a_constant, x=M, optimize=optimize)


# ---- A17: helpers that write into a parameter --------------------------------------

def negate_out(a):
    np.negative(a, out=a)


def negate_positional_out(a):
    np.negative(a, a)


def zero_through_loop(a):
    for r in [a]:
        r[0] = 0.0


def zero_through_enumerate(a, b):
    for _i, r in enumerate((b, a)):
        r[0] = 0.0


def zero_through_list(a):
    box = [a]
    box[0][0] = 0.0


def copyto_helper(a, b):
    _ = np.copyto(a, b ** 2)


def fill_helper(a):
    t = (np.fill_diagonal(a, 0.0), 1)
    return t


def setitem_dunder(a):
    a.__setitem__(0, 0.0)


def add_at_helper(a):
    np.add.at(a, [0], 1.0)


def through_out_helper(x):
    y = x * 1.0
    negate_out(y)
    return np.sum(y * x)


def through_positional_out_helper(x):
    y = x * 1.0
    negate_positional_out(y)
    return np.sum(y * x)


def through_loop_helper(x):
    y = x * 1.0
    zero_through_loop(y)
    return np.sum(y * x)


def through_enumerate_helper(x):
    y = x * 1.0
    zero_through_enumerate(y, x * 2.0)
    return np.sum(y * x)


def through_list_helper(x):
    y = x * 1.0
    zero_through_list(y)
    return np.sum(y * x)


def through_copyto_helper(x):
    y = x * 1.0
    copyto_helper(y, x)
    return np.sum(y * x)


def through_fill_helper(x):
    y = x * 1.0
    fill_helper(y)
    return np.sum(y * x)


def through_dunder_helper(x):
    y = x * 1.0
    setitem_dunder(y)
    return np.sum(y * x)


def through_add_at_helper_in_loop(x):
    y = x * 1.0
    for _i in range(2):
        add_at_helper(y)
    return np.sum(y * x)


@OPT
@pytest.mark.parametrize("fn", [through_out_helper, through_positional_out_helper, through_loop_helper,
                                through_enumerate_helper, through_list_helper, through_copyto_helper,
                                through_fill_helper, through_dunder_helper])
def test_a_helper_writing_into_a_parameter_is_refused(fn, optimize):
    assert_refused(fn, _CHANGED_IN_A_HELPER, x=M, optimize=optimize)


def test_a_helper_adding_at_into_its_parameter():
    """An inlined helper's `np.add.at(a, ...)` is a write into the caller's array, followed."""
    from srcgrad.testing import check_grads

    check_grads(through_add_at_helper_in_loop, (M,))


class Model:
    def __init__(self):
        self.scale = 2.0

    def negate(self, a):
        np.negative(a, out=a)

    def loss(self, x):
        y = x * self.scale
        self.negate(y)
        return np.sum(y * x)


@OPT
def test_a_method_writing_into_a_parameter_through_out_is_refused(optimize):
    m = Model()
    with pytest.raises(srcgrad.UnsupportedSyntaxError) as excinfo:
        srcgrad.grad(_method_user, wrt=1, optimize=optimize)(m, X.copy())
    assert "test_inplace_writes_through_calls.py:" in str(excinfo.value)
    assert any(s in str(excinfo.value) for s in _CHANGED_IN_A_HELPER)


def _method_user(m, x):
    y = x * 1.0
    m.negate(y)
    return np.sum(y * x)


def reads_loop_rows(a):
    total = 0.0
    for r in [a]:
        total = total + np.sum(r * 2.0)
    return total


def through_reading_helper(x):
    y = x * 1.0
    return reads_loop_rows(y) + np.sum(y * x)


@OPT
def test_a_helper_that_only_reads_is_differentiated(optimize):
    assert_right(through_reading_helper, optimize=optimize)


# ---- A10: has_aux and value_and_grad return what the function returned -------------

def aux_written(x):
    y = x * 2.0
    y[0] = 10.0
    return np.sum(y ** 2), y


def aux_view_written(x):
    y = x * 2.0
    y[0] = 10.0
    return np.sum(y ** 2), (y[:2], {"t": y.T})


def aux_masked(x):
    h = x * 2.0
    h[h > 3] = 0.0
    return np.sum(h * x), h


def aux_written_in_loop(x):
    y = x * 2.0
    for i in range(3):
        y[i] = y[i] ** 2
        y[(i + 1) % 3] = y[i] * x[i]
    return np.sum(y), y


@OPT
@pytest.mark.parametrize("fn", [aux_written, aux_view_written, aux_masked, aux_written_in_loop])
def test_aux_is_what_the_function_returned(fn, optimize):
    x = np.array([1.0, 2.0, 3.0])
    value, aux = fn(x.copy())
    grad, got = srcgrad.grad(fn, has_aux=True, optimize=optimize)(x.copy())
    (value2, got2), grad2 = srcgrad.value_and_grad(fn, has_aux=True, optimize=optimize)(x.copy())
    expected = _numerical_grad(lambda z: fn(np.array(z).copy())[0], [x], 0)
    assert np.allclose(grad, expected) and np.allclose(grad2, expected), (grad, expected)
    assert np.allclose(value2, value)
    for out in (got, got2):
        assert repr(out) == repr(aux), (out, aux)


def outputs_written(x):
    y = x * 2.0
    y[0] = 10.0
    return y


@OPT
def test_vjp_value_is_what_the_function_returned(optimize):
    x = np.array([1.0, 2.0, 3.0])
    value, pullback = srcgrad.vjp(outputs_written, optimize=optimize)(x.copy())
    assert np.allclose(value, [10.0, 4.0, 6.0])
    assert np.allclose(pullback(np.ones(3)), [0.0, 2.0, 2.0])
    assert np.allclose(value, [10.0, 4.0, 6.0])


# ---- helpers writing through what another function gave back ------------------------

def _identity(a):
    return a


def _first(a, b):
    return a if a is not None else b


def zero_through_identity(a):
    b = _identity(a)
    b[0] = 0.0


def zero_through_custom(a):
    b = straight_through(a)
    b[0] = 0.0


def zero_through_nested_identity(a):
    b = _first(_identity(a), None)
    b[0] = 0.0


def zero_through_stop_gradient(a):
    b = srcgrad.stop_gradient(a)
    b[0] = 0.0


def through_identity_helper(x):
    y = x * 1.0
    zero_through_identity(y)
    return np.sum(y * x)


def through_custom_helper(x):
    y = x * 1.0
    zero_through_custom(y)
    return np.sum(y * x)


def through_nested_identity_helper(x):
    y = x * 1.0
    zero_through_nested_identity(y)
    return np.sum(y * x)


def through_stop_gradient_helper(x):
    y = x * 1.0
    zero_through_stop_gradient(y)
    return np.sum(y * x)


@OPT
def test_a_helper_writing_into_what_an_inlined_identity_gave_back_is_right(optimize):
    assert_right(through_identity_helper, optimize=optimize)  # (`b = a` once inlined: one array)


@OPT
@pytest.mark.parametrize("fn", [through_custom_helper, through_nested_identity_helper,
                                through_stop_gradient_helper])
def test_a_helper_writing_into_what_a_call_gave_back_is_refused(fn, optimize):
    assert_refused(fn, _CHANGED_IN_A_HELPER, optimize=optimize)


def _new_array(a):
    return np.exp(a) * 1.0


def zero_a_new_array(a):
    b = _new_array(a)
    b[0] = 0.0
    return b


def test_a_helper_writing_into_a_new_array_changes_no_parameter():
    from srcgrad.analysis import mutation
    assert mutation._mutated_parameters(zero_a_new_array) == set()
    assert mutation._mutated_parameters(zero_through_identity) == {"a"}
    assert mutation._mutated_parameters(negate_positional_out) == {"a"}


# ---- np.add.at: a write in place of a with the values added, repeated indices each adding ----

_REPEATED = np.array([0, 2, 2, 1, 0])


def _scattered(w, v):
    acc = np.zeros(3)
    np.add.at(acc, _REPEATED, v * w[0])
    return np.sum(acc ** 2) + acc[2] * w[1]


def _added_in_place(w, v):
    y = w * 2.0
    np.add.at(y, [0, 0, 1], v[:3])
    return np.sum(np.tanh(y))


def _added_in_a_loop(w, v):
    y = np.zeros(3)
    for k in range(2):
        np.add.at(y, _REPEATED[k:k + 3], v[k:k + 3] * w[k])
    return np.sum(np.sin(y))


@pytest.mark.parametrize("fn", [_scattered, _added_in_place, _added_in_a_loop])
def test_add_at_with_repeated_indices(fn):
    from srcgrad.testing import check_grads

    rng = np.random.default_rng(0)
    w, v = rng.standard_normal(3), rng.standard_normal(5)
    check_grads(fn, (w, v), wrt=(0, 1))
    H, grad, e = srcgrad.hessian(fn, wrt=0)(w, v), srcgrad.grad(fn, wrt=0), 1e-6
    np.testing.assert_allclose(H, np.stack([(grad(w + e * u, v) - grad(w - e * u, v)) / (2 * e) for u in np.eye(3)]),
                               rtol=1e-5, atol=1e-8)
    g32 = srcgrad.grad(fn, wrt=1)(w.astype(np.float32), v.astype(np.float32))
    assert g32.dtype == np.float32


def _adds_at_into_a_view(w, v):
    y = w * 2.0
    view = y[1:]
    np.add.at(view, [0, 0], v[:2])  # refused: `view` shares memory with `y`
    return np.sum(y)


def test_add_at_into_a_view_is_refused():
    with pytest.raises(srcgrad.UnsupportedSyntaxError):
        srcgrad.grad(_adds_at_into_a_view)(np.ones(3), np.ones(5))
