"""Cases a newcomer's probing found giving silently wrong results or internal
crashes; each is now either right (checked against finite differences) or a
clear error naming the line."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from srcgrad.testing import check_grads

X = np.array([0.3, -1.2, 0.7])


def write_into_list_element(x):
    items = [x, x]
    items[0] = x * 3
    return np.sum(items[0] + items[1])


def write_into_dict_key(x):
    d = {"a": x, "b": x**2}
    d["c"] = d["a"] * d["b"]
    return np.sum(d["c"])


def augmented_list(x):
    items = []
    items += [x * 2]
    return np.sum(items[0])


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


@pytest.mark.parametrize("fn, says", [
    (view_taken_before_write, "`v` is a view of it"),
    (augmented_alias_of_argument, "`s = s + ...`"),
    (add_at_in_place, "y[idx] += x"),
], ids=lambda v: getattr(v, "__name__", None))
def test_silently_wrong_before_now_a_clear_error(fn, says):
    with pytest.raises(srcgrad.UnsupportedSyntaxError) as excinfo:
        srcgrad.grad(fn)(X)
    message = str(excinfo.value)
    assert says in message and "test_found_by_probing.py:" in message


def test_joined_and_grown_sequences_are_differentiated():
    # (refused before; tests/test_sequence_building.py tests the kind)
    np.testing.assert_allclose(srcgrad.grad(write_into_list_element)(X), 4 * np.ones_like(X))
    np.testing.assert_allclose(srcgrad.grad(augmented_list)(X), 2 * np.ones_like(X))
    np.testing.assert_allclose(srcgrad.grad(joins_tuples)(X), 2 * np.ones_like(X))


def test_write_into_a_dict_key_is_differentiated():
    np.testing.assert_allclose(srcgrad.grad(write_into_dict_key)(X), 3 * X ** 2, rtol=1e-12)


def modulo(x):
    return np.sum(x % 1.0 + np.mod(x, 0.5) * x)


def through_float(x):
    return float(np.sum(x)) * np.sum(x) + np.sum(x).item()


def cast(x):
    return np.sum(x.astype(np.float64) * x)


def scalar_augmented(x):
    s = 0.0
    for i in range(3):
        s += x[i] ** 2
    y = x * 2
    y += 1.0  # a new array no other name sees: the same as y = y + 1.0
    return s + np.sum(y)


@pytest.mark.parametrize("fn", [modulo, through_float, cast, scalar_augmented], ids=lambda f: f.__name__)
def test_now_differentiated(fn):
    check_grads(fn, (X,), rtol=1e-5, atol=1e-6)


def loop_intermediate(x):
    for i in range(3):
        h = x * (i + 1)
    return np.sum(h**2)


def test_intermediates_of_a_name_assigned_in_a_loop_is_ambiguous():
    with pytest.raises(srcgrad.UserCodeError, match="more than once"):
        srcgrad.grad(loop_intermediate, intermediates=("h",))(X)


def unknown_array_method(x):
    return np.sum(x.conjugate())


def test_unknown_array_method_names_the_line():
    with pytest.raises(srcgrad.UnsupportedSyntaxError) as excinfo:
        srcgrad.grad(unknown_array_method)(X)
    assert ".conjugate()" in str(excinfo.value) and "test_found_by_probing.py:" in str(excinfo.value)


def test_cli_reports_a_user_error_without_a_traceback(tmp_path, capsys):
    from srcgrad import cli

    (tmp_path / "m.py").write_text("import numpy as np\n\ndef loss(x):\n    return np.sum(x)\n")
    assert cli.main(["show", f"{tmp_path}/m.py:loss", "--wrt", "q"]) == 1
    err = capsys.readouterr().err
    assert "names no parameter" in err and "Traceback" not in err


class Counter(srcgrad.nn.Module):
    def __init__(self):
        self.w = np.ones(3)
        self.calls = 0

    def forward(self, x):
        self.calls += 1  # bookkeeping on the object: runs as written
        return np.sum(self.w * x)


def counter_loss(model, x):
    return model(x) * 2


def stores_a_differentiated_value(model, x):
    model.cache = x * 2
    return np.sum(x)


def test_attribute_bookkeeping_runs_and_differentiated_values_are_stored_as_values():
    model = Counter()
    g = srcgrad.grad(counter_loss)(model, X)
    np.testing.assert_array_equal(g.w, 2 * X)
    assert model.calls == 1
    # Stored and not read back: the value, with no adjoint (tests/test_object_state.py).
    np.testing.assert_array_equal(srcgrad.grad(stores_a_differentiated_value, wrt=1)(model, X), np.ones_like(X))
    np.testing.assert_array_equal(model.cache, 2 * X)


def prints_an_f_string(x):
    y = np.sum(x**2)
    print(f"y = {y:.3f}")
    return y


def test_f_strings_in_print(capsys):
    np.testing.assert_allclose(srcgrad.grad(prints_an_f_string)(X), 2 * X)
    assert "y = " in capsys.readouterr().out


def swaps_a_tuple_in_a_loop(a, b):
    pair = (a, b)
    for _ in range(3):
        pair = (pair[1], pair[0] * 2.0)
    return pair[0] * 3.0 + pair[1]


def stacks_a_tuple_argument(xs):
    return np.sum(np.stack(xs) ** 2) + np.sum(xs[0])


def test_tuple_rebuilt_in_a_loop_is_not_read_as_its_first_contents():
    # Found with *args/**kwargs (spreading reads a tuple's elements the same way):
    # gave (3.0, 1.0), the elements of `pair` before the loop.
    assert srcgrad.grad(swaps_a_tuple_in_a_loop, wrt=(0, 1))(1.0, 10.0) == (4.0, 6.0)


def test_stack_of_a_tuple_argument_gets_its_gradient():
    # Gave zeros: the rule's adjoint (a list) was not matched to the tuple.
    xs = (X, X * 2)
    g = srcgrad.grad(stacks_a_tuple_argument)(xs)
    assert isinstance(g, tuple)
    np.testing.assert_allclose(g[0], 2 * X + 1, rtol=1e-12)
    np.testing.assert_allclose(g[1], 4 * X, rtol=1e-12)


def stacked_by_np_array(x):
    return np.sum(np.array([x[0], x[1] * 2.0]) ** 2) + np.sum(np.array([[x[0], x[2]], [x[1], x[0]]])
                                                             * np.array([[1.0, 2.0], [3.0, 4.0]]))


def cast_to_numpy_floats(x):
    return np.float64(np.sum(x**2)) * 3.0 + np.sum(np.float32(x) * x)


def test_np_array_and_numpy_float_casts_carry_the_gradient():
    """Both gave a zero gradient silently: `np.array` and `np.float64` counted as constructors."""
    check_grads(stacked_by_np_array, (X,))
    np.testing.assert_allclose(srcgrad.grad(stacked_by_np_array)(np.ones(3)),
                               [2.0 + 5.0, 8.0 + 3.0, 2.0], rtol=1e-14)
    # d/dx [3 sum(x^2) + sum(float32(x) x)] = 6x + 2x (the float32 copy's rounding aside)
    np.testing.assert_allclose(srcgrad.grad(cast_to_numpy_floats)(X), 8.0 * X, rtol=1e-6)


def copies_a_list(x):
    xs = [x, 2 * x]
    ys = list(xs)
    return np.sum(ys[0] * ys[1])


def copies_into_a_tuple(x):
    ys = tuple([x, 2 * x])
    return np.sum(ys[0] * ys[1])


def rows_of_an_array(x):
    rows = list(x)
    return rows[0] * rows[1]


def copies_a_dict(x):
    e = dict({"a": x})
    return np.sum(e["a"] ** 2)


@pytest.mark.parametrize("fn", [copies_a_list, copies_into_a_tuple])
def test_container_copies_of_known_items_carry_the_gradient(fn):
    """`list(xs)`, `tuple([...])` of items known when compiling: a new list or tuple of them."""
    check_grads(fn, (X,))


@pytest.mark.parametrize("fn", [rows_of_an_array, copies_a_dict])
def test_container_copies_of_differentiated_values_carry_the_gradient(fn):
    """They gave a zero gradient silently, then were refused; now `list(x)` / `dict(d)` have
    a rule of their own (`rt.sequence_of`, `rt.mapping_of`): each item's adjoint is its own."""
    check_grads(fn, (X,))


def two_outputs(a):
    return a * 2, a[0]


def indexes_a_returned_tuple(x):
    p = two_outputs(x)
    return p[1] * np.sum(p[0])


def last_of_var_positional(*xs):
    return np.sum(xs[-1] * xs[0])


def spreads_into_last_of(x):
    return last_of_var_positional(*(x, x * 3), x)


def test_a_returned_tuple_indexed_and_negative_indices_into_tuples():
    """Each gave a zero or wrong gradient silently: a tuple a call returned, kept
    whole and indexed (its sparse adjoint was read as a sequence); `xs[-1]` into
    `*xs` (the key -1 matched no item)."""
    check_grads(indexes_a_returned_tuple, (X,))
    y = X[::-1].copy()
    np.testing.assert_allclose(srcgrad.grad(last_of_var_positional, wrt=(0, 1))(X, y), (y, X), rtol=1e-14)
    check_grads(spreads_into_last_of, (X,))


def enumerate_with_a_start(x):
    s = 0.0
    for i, v in enumerate(x, start=1):
        s = s + v * i
    return s


def test_enumerate_with_a_start_counts_from_it():
    """Its start was ignored silently, then refused; now `i = _i + start` in the body."""
    check_grads(enumerate_with_a_start, (X,))
    np.testing.assert_allclose(srcgrad.grad(enumerate_with_a_start)(X), np.arange(1, len(X) + 1), rtol=1e-14)


def scale_in_place(a, k):
    a *= k


def calls_a_function_that_scales_in_place(x):
    y = x * 1.0
    scale_in_place(y, 3.0)
    return np.sum(y * x)


def set_key(d, v):
    d["k"] = v


def calls_a_function_that_fills_a_dict(x):
    d = {}
    set_key(d, x * 2)
    return np.sum(d["k"])


def writes_into_an_array_stored_in_a_list(x):
    y = x * 1.0
    ys = [y, x]
    y[0] = 0.0
    return np.sum(np.stack(ys) * x)


def writes_into_an_array_appended_to_a_list(x):
    y = x * 1.0
    ys = []
    ys.append(y)
    y[0] = 0.0
    return np.sum(np.stack(ys) * x)


def first_row(a):
    return a[0]


def writes_into_an_array_a_callee_returned_a_view_of(x):
    y = np.outer(x, x)
    r = first_row(y)
    y[0] = 5.0
    return np.sum(r * x)


def zips_differentiated_values(x):
    pairs = list(zip(x, x * 2))
    return pairs[0][0] * pairs[1][1]


@pytest.mark.parametrize("fn, message", [
    (calls_a_function_that_scales_in_place, "`a` and `y` share memory"),
    (writes_into_an_array_stored_in_a_list, r"stored or passed on at test_found_by_probing.py:\d+: `ys = \[y, x\]`"),
    (writes_into_an_array_appended_to_a_list, r"stored or passed on at .*`ys.append\(y\)`"),
    (writes_into_an_array_a_callee_returned_a_view_of, r"`r` is a view of it .*`return a\[0\]`"),
    (zips_differentiated_values, r"`zip\(\.\.\.\)` is given `x`"),
])
def test_changes_srcgrad_cannot_follow_are_refused(fn, message):
    """Each gave a wrong value or gradient silently: a change made inside another
    function, a write into an array a list or a callee's result also holds, values
    zipped into a list."""
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match=message):
        srcgrad.grad(fn)(X)


def test_a_function_filling_a_dict_it_is_given_is_inlined():
    # (its write is the caller's own: `d["k"] = x * 2` on the caller's `d`)
    np.testing.assert_allclose(srcgrad.grad(calls_a_function_that_fills_a_dict)(X), 2.0 * np.ones_like(X))


def loss_and_aux_from_two_returns(x):
    if x[0] > 0:
        return np.sum(x**2), 1
    return np.sum(x * 2), 2


def test_has_aux_with_a_return_in_each_branch():
    """Each `return loss, aux` keeps its pair (it was refused as not returning a pair)."""
    g, aux = srcgrad.grad(loss_and_aux_from_two_returns, has_aux=True)(X)
    np.testing.assert_allclose(g, 2 * X, rtol=1e-14)
    assert aux == 1
    g, aux = srcgrad.grad(loss_and_aux_from_two_returns, has_aux=True)(-X)
    np.testing.assert_allclose(g, np.full(3, 2.0), rtol=1e-14)
    assert aux == 2


def last_of_a_local_tuple(x):
    ys = (x, x * 3, x * 2)
    a, b = ys[1:]
    return np.sum(ys[-1]) + np.sum(a * b)


def rows_unpacked(m):
    a, b = m
    return np.sum(a * b)


def test_negative_indices_slices_and_rows_unpacked():
    """Each crashed inside the generated code."""
    check_grads(last_of_a_local_tuple, (X,))
    m = np.array([[0.3, 1.2], [0.5, -0.7]])
    np.testing.assert_allclose(srcgrad.grad(rows_unpacked)(m), [m[1], m[0]], rtol=1e-14)


def joins_tuples(x):
    t = (x,) + (x * 2,)
    return np.sum(t[1])


def reads_a_dict_with_get(x):
    d = {"b": x**2}
    return np.sum(d.get("b", x))


def reads_real(x):
    return np.sum((x * 2).real)


def fills(x):
    y = x * 1.0
    y.fill(1.0)
    return np.sum(y)


@pytest.mark.parametrize("fn, message", [
    (fills, r"write it as an assignment"),
])
def test_unsupported_container_and_array_operations_are_named(fn, message):
    """Each crashed inside srcgrad or the generated code (or advised `np.fill`).
    (`d.get("b", x)` was refused here; now it is `d["b"]`: tests/test_trust_containers.py.)"""
    with pytest.raises(srcgrad.errors.UserCodeError, match=message):
        srcgrad.grad(fn)(X)


def two_results(h, w):
    return h * w, h + w


def uses_the_first_result_only(x, w):
    a, _ = two_results(x, w)
    return np.sum(a)


def stacks_with_asarray(x):
    return np.sum(np.asarray([x[0], x[1]]) ** 2)


def set_k(d):
    d["k"] = 2.0


def reads_a_dict_a_callee_changed(x):
    d = {"k": 1.0}
    set_k(d)
    return x * d["k"]


def test_first_result_asarray_of_a_list_and_a_dict_changed_by_a_callee():
    """A crash (`a, _ = f(x)`: the pullback got a 1-tuple) and two silent zeros or
    wrong values (`np.asarray([...])`; `d["k"]` read as its literal though a callee
    changed it)."""
    check_grads(uses_the_first_result_only, (X, X + 1), wrt=(0, 1))
    np.testing.assert_allclose(srcgrad.grad(stacks_with_asarray)(X), [2 * X[0], 2 * X[1], 0.0], rtol=1e-14)
    value, g = srcgrad.value_and_grad(reads_a_dict_a_callee_changed)(1.5)
    assert (value, g) == (3.0, 2.0)


def writes_into_a_new_array_from_a_list(x):
    y = np.array([x[0], x[1]], dtype=np.float64)
    y[0] = 3.0
    return np.sum(y * x[:2]) + np.sum(np.asarray(x, dtype=np.float64) ** 2)


def test_np_array_keywords_and_a_write_into_its_result():
    """`np.array(..., dtype=)` is a new array (writing into it is fine); `np.asarray(x, dtype=)`
    was refused ("does not accept these arguments")."""
    check_grads(writes_into_a_new_array_from_a_list, (X,))


def test_the_real_part_of_a_real_array_is_differentiated():
    """`(x * 2).real` was refused ("array attribute `.real`"): of a real array, the array."""
    np.testing.assert_allclose(srcgrad.grad(reads_real)(X), np.full(np.shape(X), 2.0))
