"""Lists, tuples and dicts in differentiated code: every gradient right or refused.

Issue 11's container classes: a list or tuple given straight to NumPy (class 1),
lists held in containers and appended to (class 7), names rebound while a loop
iterable or a container element still holds the old value (class 9), and the
crashes on lists grown with append and on dicts iterated.  Each case is checked
against central differences, with and without the optimizer, in float64 and
float32; refusals name the user's file and line.
"""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import numerical_grad

X0 = np.array([0.3, -1.2, 0.7])


def check_gradient(fn, x=X0, *, atol=1e-6):
    """The gradient of ``fn`` at ``x`` matches central differences, optimized or not,
    in float64; in float32 too (within float32's precision, and of its dtype)."""
    expected = numerical_grad(fn, [x], 0)
    for optimize in (True, False):
        got = srcgrad.grad(fn, optimize=optimize)(x.copy())
        np.testing.assert_allclose(got, expected, atol=atol, rtol=1e-6)
        value, _ = srcgrad.value_and_grad(fn, optimize=optimize)(x.copy())
        np.testing.assert_allclose(value, fn(x.copy()), rtol=1e-12)
        got32 = srcgrad.grad(fn, optimize=optimize)(x.astype(np.float32))
        assert got32.dtype == np.float32
        np.testing.assert_allclose(got32, expected, atol=1e-3, rtol=1e-3)


def assert_refused(fn, error, match, x=X0):
    """``fn`` is refused when compiled, with a message at the user's file and line."""
    with pytest.raises(error, match=match) as excinfo:
        srcgrad.grad(fn)(x.copy())
    assert f"{__file__.rsplit('/', 1)[-1]}:" in str(excinfo.value)
    return str(excinfo.value)


# ---- class 1: a list or tuple given straight to NumPy is np.array(it) ----------

def literal_sum(x):
    return np.sum([x[0], 2 * x[1]])


def literal_mean(x):
    return np.sum(np.mean([x, x + 2]))


def literal_mean_axis(x):
    return np.sum(np.mean((x, x ** 2), axis=0) ** 2)


def literal_max(x):
    return np.max([x[0], x[1] * 2])


def literal_prod(x):
    return np.prod([x[0], x[1], x[2]])


def literal_elementwise(x):
    return np.sum(np.exp([x[0], x[1]])) + np.sum(np.maximum([x[0], x[1]], 0.1))


def literal_both_operands(x):
    return np.sum(np.multiply([x[0], x[1]], [x[2], 2.0]))


def literal_dot(x):
    return np.dot([x[0], x[1], x[2]], x)


def literal_norm(x):
    return np.linalg.norm([x[0], x[1]])


def literal_where_branch(x):
    return np.sum(np.where([True, False, True], x, [x[1], x[2], x[0]]))


def literal_nested(x):
    return np.sum([[x[0], x[1]], [x[2], 1.0]])


def array_of_nested(x):
    m = np.array([[x[0], 1.0], [x[1], x[2]]])
    return np.sum(m @ m)


def stack_inline(x):
    return np.sum(np.stack([x, x * 2]) ** 2)


def concatenate_inline(x):
    return np.sum(np.concatenate([x, x ** 2]) ** 2)


def named_list_max(x):
    items = [x[0], x[1] * 2]
    return np.max(items)


def named_tuple_mean_and_item(x):
    pair = (x, x * 2)
    return np.sum(np.mean(pair, axis=0) ** 2) + pair[0][1]


def named_list_twice(x):
    items = [x[0], x[1]]
    return np.sum(items) * items[0]


def literal_in_loop(x):
    s = 0.0
    for i in range(2):
        s = s + np.sum([x[i], x[i + 1] * 3])
    return s


def named_list_in_loop(x):
    s = 0.0
    for i in range(3):
        items = [x[i], x[i] ** 2]
        s = s + np.max(items)
    return s


def _helper(v):
    return np.sum([v[0], v[1] * 3])


def literal_in_helper(x):
    return _helper(x) * x[2]


class _Model:
    def f(self, v):
        return np.prod([v[0], v[1], 2.0])


def literal_in_method(x):
    return _Model().f(x)


@pytest.mark.parametrize("fn", [
    literal_sum, literal_mean, literal_mean_axis, literal_max, literal_prod, literal_elementwise,
    literal_both_operands, literal_dot, literal_norm, literal_where_branch, literal_nested,
    array_of_nested, stack_inline, concatenate_inline, named_list_max, named_tuple_mean_and_item,
    named_list_twice, literal_in_loop, named_list_in_loop, literal_in_helper, literal_in_method,
])
def test_list_given_to_numpy(fn):
    check_gradient(fn)


def test_list_given_to_numpy_is_np_array_in_the_code():
    source = srcgrad.source(srcgrad.grad(literal_sum), X0)
    assert "np.array([" in source


# A display given to a function of yours is that function's list or tuple: the
# callee's adjoint for it is split among the items.
def _pair_product(t):
    return t[0] * t[1] + t[1]


def literal_to_helper(x):
    return np.sum(_pair_product([x, x + 1]))


def tuple_to_helper(x):
    return np.sum(_pair_product((x, x * 3)))


def nested_literal_to_helper(x):
    return np.sum(_pair_product([x, [x[0], x[1], x[2]]]))


def keyword_literal_to_helper(x):
    return np.sum(_pair_product(t=(x, x * 3)))


@pytest.mark.parametrize("fn", [literal_to_helper, tuple_to_helper, nested_literal_to_helper,
                                keyword_literal_to_helper])
def test_list_given_to_a_function_of_yours(fn):
    check_gradient(fn)


@srcgrad.custom_adjoint
def _weighted(pair):
    return pair[0] * 2.0 + pair[1]


@_weighted.defadjoint
def _weighted_adjoint(ans_bar, ans, pair):
    return (ans_bar * 2.0, ans_bar)


def literal_to_custom_rule(x):
    return np.sum(_weighted([x, x ** 2]))


def test_list_given_to_a_custom_rule():
    check_gradient(literal_to_custom_rule)


# ---- lists grown with append, then given to NumPy (crashed: 'ndarray' has no 'pop')

def appended_sum(x):
    parts = []
    for i in range(3):
        parts.append(x[i] ** 2)
    return np.sum(parts)


def appended_mean(x):
    losses = []
    for i in range(3):
        losses.append(np.sum(x * i) ** 2)
    return np.mean(losses) + np.sum(losses)


def appended_stack(x):
    parts = []
    for i in range(3):
        parts.append(x * x[i])
    return np.sum(np.stack(parts) ** 2)


def appended_array_and_sum(x):
    parts = []
    for i in range(3):
        parts.append(x * x[i])
    return np.sum(np.array(parts) ** 2) + np.sum(parts)


def appended_dot(x):
    ys = []
    for i in range(3):
        ys.append(x[i])
    return np.dot(ys, x)


def _appended_helper(v):
    parts = []
    for i in range(3):
        parts.append(v[i] * v[0])
    return np.max(parts)


def appended_in_helper(x):
    return _appended_helper(x * 2.0)


@pytest.mark.parametrize("fn", [appended_sum, appended_mean, appended_stack, appended_array_and_sum,
                                appended_dot, appended_in_helper])
def test_appended_list_given_to_numpy(fn):
    check_gradient(fn)


def test_tuple_argument_given_to_numpy():
    def f(xs):
        return np.sum(np.mean(xs, axis=0) ** 2)

    xs = (X0, X0 * 2.0 + 1.0)
    got = srcgrad.grad(f)(xs)
    for i in range(2):
        expected = numerical_grad(lambda a: f(tuple(a if j == i else xs[j] for j in range(2))), [xs[i]], 0)
        np.testing.assert_allclose(got[i], expected, atol=1e-6)


# ---- class 7: a list held in a container and appended to -----------------------

def list_in_list(x):
    ys = [[]]
    ys[0].append(x * x)
    return np.sum(ys[0][0])


def list_in_dict(x):
    d = {'a': []}
    d['a'].append(x * x)
    return np.sum(d['a'][0])


def lists_in_dict_in_loop(x):
    d = {'a': [], 'b': []}
    for i in range(3):
        d['a'].append(x[i] * x)
        d['b'].append(x[i] ** 2)
    return np.sum(np.stack(d['a'])) + np.sum(d['b']) + d['b'][-1]


def list_in_list_stacked(x):
    ys = [[], []]
    for i in range(3):
        ys[0].append(x[i] * x)
        ys[1].append(np.sin(x[i]))
    return np.sum(np.stack(ys[0]) ** 2) * np.sum(ys[1])


def _collect(v):
    d = {'h': []}
    for i in range(2):
        d['h'].append(v * (i + 1.5))
    return np.sum(d['h'][1] * d['h'][0])


def list_in_dict_in_helper(x):
    return _collect(x ** 2)


class _Collector:
    def run(self, v):
        ys = [[]]
        ys[0].append(np.tanh(v))
        return np.sum(ys[0][0] ** 2)


def list_in_list_in_method(x):
    return _Collector().run(x)


@pytest.mark.parametrize("fn", [list_in_list, list_in_dict, lists_in_dict_in_loop, list_in_list_stacked,
                                list_in_dict_in_helper, list_in_list_in_method])
def test_list_held_in_a_container_and_appended_to(fn):
    check_gradient(fn)


def append_by_key_known_at_run_time(x):
    ys = [[], []]
    for i in range(3):
        ys[i % 2].append(x[i])
    return np.sum(ys[0])


class _Holder:
    pass


_holder = _Holder()
_holder.items = []


def _append_to_untracked(buffer, v):
    buffer.append(v * 2.0)
    return np.sum(v)


def append_to_a_list_of_an_object(x):
    _holder.items.append(x * 2.0)
    return np.sum(x)


def append_in_a_helper(x):
    buffer = []
    _append_to_untracked(buffer, x)
    return np.sum(np.stack(buffer))


def test_append_to_a_list_srcgrad_does_not_follow_is_refused():
    assert_refused(append_by_key_known_at_run_time, srcgrad.UnsupportedSyntaxError, r"append|in place")


def test_a_helper_appending_to_a_list_it_is_given_is_inlined():
    check_gradient(append_in_a_helper)  # (its append is the caller's own)


def test_append_to_a_list_an_object_holds_is_bookkeeping():
    # (a log: the value is appended as it is, with no adjoint; nothing here reads it back)
    _holder.items.clear()
    check_gradient(append_to_a_list_of_an_object)
    assert any(np.array_equal(item, X0 * 2.0) for item in _holder.items)


# ---- items of lists grown with append: read by index, in loops too ---------------

def rnn_reads_last_item(x):
    hs = [x]
    for t in range(3):
        h = np.tanh(hs[-1] * 1.5)
        hs.append(h)
    return np.sum(hs[-1])


def rnn_reads_last_item_then_stacks(x):
    hs = [x]
    for t in range(3):
        hs.append(np.tanh(hs[-1] * 1.5))
    return np.sum(np.stack(hs))


def reads_first_item_in_loop(x):
    hs = [x]
    for t in range(3):
        hs.append(np.tanh(hs[0] * 1.5 + hs[t]))
    return np.sum(np.stack(hs) ** 2)


def pop_and_append_in_loop(x):
    hs = [x, x * 2]
    for t in range(2):
        hs.pop(0)
        hs.append(hs[0] * 2 + x)
    return np.sum(np.stack(hs) * x)


def reads_in_while(x):
    hs = [x]
    k = 0
    while k < 3:
        hs.append(np.sin(hs[k]) * hs[-1])
        k = k + 1
    return np.sum(hs[2] + hs[-1])


def reads_in_branch(x):
    hs = []
    for t in range(4):
        if t % 2 == 0:
            hs.append(x * t)
        else:
            hs.append(np.cos(x) + hs[-1])
    return np.sum(hs[1] * hs[3])


@pytest.mark.parametrize("fn", [rnn_reads_last_item, rnn_reads_last_item_then_stacks,
                                reads_first_item_in_loop, pop_and_append_in_loop, reads_in_while,
                                reads_in_branch])
def test_items_of_an_appended_list(fn):
    check_gradient(fn)


def test_items_of_an_appended_list_pullback_twice():
    value, pullback = srcgrad.vjp(rnn_reads_last_item)(X0)
    first, second = pullback(1.0), pullback(2.0)
    np.testing.assert_allclose(second, 2 * first)
    np.testing.assert_allclose(first, numerical_grad(rnn_reads_last_item, [X0], 0), atol=1e-6)


# ---- class 9: a name rebound in a loop while an iterable or an item holds its old value

def rebinds_iterated_list(x):
    c = [x[0], x[1]]
    for e in c:
        c = x * e
    return np.sum(c)


def rebinds_iterated_array(x):
    c = x * 1.0
    for e in c:
        c = x * e
    return np.sum(c)


def rebinds_iterated_array_from_itself(x):
    c = x * 1.0
    for e in c:
        c = c * e
    return np.sum(c)


def rebinds_item_of_tuple_in_loop(x):
    y = x
    for i in range(2):
        t = (y, 1.0)
        y = t[0] * 2.0
    return np.sum(y * x)


def rebinds_item_of_tuple_made_before(x):
    y = x[0]
    t = (y, 1.0)
    for i in range(2):
        y = t[0] * 2.0 + y
    return y


def rebinds_item_of_list_then_reads_it(x):
    y = x
    lst = [y]
    y = y * 2
    return np.sum(lst[0] * y)


def rebinds_in_while(x):
    y = x[0]
    t = (y, 1.0)
    k = 0
    while k < 3:
        y = t[0] * 2.0 + y * t[1]
        k = k + 1
    return y * t[0]


def rebinds_iterated_in_nested_loops(x):
    c = x * 1.0
    for i in range(2):
        for e in c:
            c = c * e + x
    return np.sum(c)


def rebinds_zipped(x):
    a = x * 2.0
    b = x + 1.0
    for p, q in zip(a, b):
        a = a * q + p
    return np.sum(a)


def rebinds_enumerated(x):
    c = x ** 2
    for i, e in enumerate(c):
        c = c + e * i
    return np.sum(c)


def rebinds_item_of_dict_and_list(x):
    y = x * 1.0
    d = {'a': y}
    lst = [y, 2.0]
    for i in range(3):
        y = y * 1.5 + d['a']
    return np.sum(y * lst[0] + d['a'])


def rebinds_item_of_tuple_made_in_outer_loop(x):
    y = x[0]
    s = 0.0
    for i in range(3):
        t = (y, 2.0)
        for j in range(2):
            y = t[0] * t[1] + y * 0.5
        s = s + y
    return s


def rebinds_iterated_with_break(x):
    c = x * 1.0
    for e in c:
        if e > 0.5:
            break
        c = c * e + 1.0
    return np.sum(c)


def rebinds_appended_item(x):
    y = x * 1.0
    lst = [y]
    for i in range(2):
        lst.append(y * 2)
        y = y + lst[-1]
    return np.sum(y) + np.sum(lst[0])


def _rebinds_in_helper(v):
    c = v * 1.0
    for e in c:
        c = c * e
    return np.sum(c)


def rebinds_in_helper(x):
    return _rebinds_in_helper(x + 0.5)


class _Rebinder:
    def run(self, v):
        y = v[0]
        t = (y, 1.0)
        for i in range(2):
            y = t[0] * 2.0 + y
        return y


def rebinds_in_method(x):
    return _Rebinder().run(x)


@pytest.mark.parametrize("fn", [
    rebinds_iterated_list, rebinds_iterated_array, rebinds_iterated_array_from_itself,
    rebinds_item_of_tuple_in_loop, rebinds_item_of_tuple_made_before, rebinds_item_of_list_then_reads_it,
    rebinds_in_while, rebinds_iterated_in_nested_loops, rebinds_zipped, rebinds_enumerated,
    rebinds_item_of_dict_and_list, rebinds_item_of_tuple_made_in_outer_loop, rebinds_iterated_with_break,
    rebinds_appended_item, rebinds_in_helper, rebinds_in_method,
])
def test_rebound_name_keeps_the_old_value_where_it_was_held(fn):
    check_gradient(fn)


# ---- dicts: iterated, keys(), values(), items(), get() -----------------------------

def iterates_dict(x):
    p = {'a': x, 'b': x * 2}
    s = 0.0
    for k in p:
        s = s + np.sum(p[k] ** 2)
    return s


def iterates_keys(x):
    p = {'a': x, 'b': x * 2}
    s = 0.0
    for k in p.keys():
        s = s + np.sum(p[k] ** 2)
    return s


def iterates_values(x):
    p = {'a': x, 'b': np.sin(x)}
    s = 0.0
    for v in p.values():
        s = s + np.sum(v ** 2)
    return s


def iterates_items(x):
    p = {'a': x, 'bb': x * 2}
    s = 0.0
    for k, v in p.items():
        s = s + np.sum(v ** 3) * len(k)
    return s


def enumerates_dict(x):
    p = {'a': x, 'b': x * 2}
    s = 0.0
    for i, k in enumerate(p):
        s = s + np.sum(p[k]) * (i + 1)
    return s


def gets(x):
    p = {'a': x, 'b': x * 2}
    return np.sum(p.get('a') * p.get('b', 1.0) + p.get('c', 2.0) + p.get('c', x))


def gets_with_default_of_a_dict(x):
    d = {"b": x ** 2}
    return np.sum(d.get("b", x))


def stacks_values(x):
    p = {'a': x, 'b': x * 2}
    return np.sum(np.stack(list(p.values())) ** 2) + np.sum(tuple(p.values())[1])


def _make_dict(v):
    return {'a': v, 'b': v * 2}


def iterates_dict_from_a_call(x):
    d = _make_dict(x)
    s = 0.0
    for k in d:
        s = s + np.sum(d[k] ** 2)
    return s


def values_of_a_dict_from_a_call(x):
    d = _make_dict(x)
    s = 0.0
    for v in d.values():
        s = s + np.sum(np.cos(v))
    return s + np.sum(d.get('a') * d.get('z', x))


def items_of_a_dict_from_a_call(x):
    d = _make_dict(x)
    s = 0.0
    for kv in d.items():
        s = s + np.sum(kv[1] ** 2)
    return s


def _sum_dict(d):
    s = 0.0
    for k, v in d.items():
        s = s + np.sum(v * v)
    return s


def dict_iterated_in_helper(x):
    return _sum_dict({'a': x, 'b': x + 1.0})


class _DictModel:
    def loss(self, v):
        p = {'w': v, 'u': v ** 2}
        return sum_values(p)


def sum_values(p):
    s = 0.0
    for k in p:
        s = s + np.sum(p[k])
    return s


def dict_in_method(x):
    return _DictModel().loss(x)


def dict_in_loop(x):
    s = 0.0
    for i in range(2):
        p = {'a': x * i, 'b': x + i}
        for k, v in p.items():
            s = s + np.sum(v ** 2)
    return s


def iterates_sorted_keys(x):
    p = {'b': x * 2, 'a': x}
    s = 0.0
    for i, k in enumerate(sorted(p)):
        s = s + np.sum(p[k]) * (i + 1)
    return s


@pytest.mark.parametrize("fn", [
    iterates_sorted_keys, iterates_dict, iterates_keys, iterates_values, iterates_items, enumerates_dict,
    gets,
    gets_with_default_of_a_dict, stacks_values, iterates_dict_from_a_call, values_of_a_dict_from_a_call,
    items_of_a_dict_from_a_call, dict_iterated_in_helper, dict_in_method, dict_in_loop,
])
def test_dicts(fn):
    check_gradient(fn)


def test_dict_argument_iterated():
    params = {'a': X0, 'b': X0 * 2.0 + 1.0}

    def loss(p):
        s = 0.0
        for k, v in p.items():
            s = s + np.sum(np.sin(v) * p['a'])
        for k in p:
            s = s + np.sum(p.get(k) ** 2)
        return s

    for optimize in (True, False):
        got = srcgrad.grad(loss, optimize=optimize)(params)
        for key in params:
            expected = numerical_grad(lambda a: loss({**params, key: a}), [params[key]], 0)
            np.testing.assert_allclose(got[key], expected, atol=1e-6)


def gets_with_a_key_known_at_run_time(x):
    p = {'a': x, 'b': x * 2}
    s = 0.0
    for k in ['a', 'b', 'c']:
        s = s + np.sum(p.get(k, x ** 2))
    return s


def test_get_with_a_key_known_at_run_time():
    check_gradient(gets_with_a_key_known_at_run_time)


# ---- lists shared with another name, container or function ------------------------

def list_in_tuple_read_by_item(x):
    xs = [x]
    ys = (xs, x)
    xs.append(x * 2)
    return np.sum(np.stack(ys[0]) ** 2) + np.sum(ys[1])


def list_in_dict_copied_after(x):
    xs = []
    d = {'h': xs}
    for i in range(2):
        xs.append(x * i)
    return np.sum(np.array(d['h']) * x) + np.sum(np.array(list(d.values())) ** 2)


def rows_appended_to_rows(x):
    out = []
    for i in range(3):
        row = []
        for j in range(2):
            row.append(x[i] * j + x[j])
        out.append(row)
    return np.sum(np.array(out) ** 2)


def appended_in_branch(x):
    xs = [x]
    if x[0] > 0:
        xs.append(x * 3)
    return np.sum(xs[-1])


def list_of_lists_grown(x):
    ys = [[x]]
    for i in range(2):
        ys.append([ys[-1][0] * 2])
    return np.sum(ys[-1][0])


def loop_over_a_display(x):
    xs = []
    for v in [x, x * 2]:
        xs.append(v)
    return np.sum(np.stack(xs))


def popped_while_held(x):
    xs = [x, x * 2]
    t = (xs, 1.0)
    xs.pop()
    return np.sum(np.stack(t[0]))


@pytest.mark.parametrize("fn", [list_in_tuple_read_by_item, list_in_dict_copied_after, rows_appended_to_rows,
                                appended_in_branch, list_of_lists_grown, loop_over_a_display,
                                popped_while_held])
def test_lists_shared_and_followed(fn):
    check_gradient(fn)


def appended_after_stored(x):
    xs = [x]
    ys = [xs]
    xs.append(x * 2)
    return np.sum(np.array(ys) ** 2)


def appended_after_appended_to_another(x):
    out = []
    row = []
    out.append(row)
    row.append(x * 2)
    return np.sum(np.array(out) ** 2)


def appended_through_an_alias(x):
    xs = [x * 1.0]
    ys = xs
    for i in range(2):
        xs.append(x)
    return np.sum(np.stack(ys))


def appended_after_passed(x):
    xs = [x * 1.0]
    total = _sum_list_recursively(xs)  # compiled on its own: it could keep the list
    xs.append(x * 3)
    return total + np.sum(np.stack(xs))


def _sum_list_recursively(items, depth=1):
    return np.sum(np.stack(items)) if depth == 0 else _sum_list_recursively(items, depth - 1)


def appended_after_passed_to_an_inlined_helper(x):
    xs = [x * 1.0]
    total = _sum_list(xs)  # inlined: its body reads the list before the append
    xs.append(x * 3)
    return total + np.sum(np.stack(xs))


def _sum_list(items):
    return np.sum(np.stack(items))


def test_list_appended_after_an_inlined_helper_read_it():
    check_gradient(appended_after_passed_to_an_inlined_helper)


def appended_by_a_nested_function(x):
    xs = []

    def add(v):
        xs.append(v * 2)
    add(x)
    return np.sum(np.stack(xs))


@pytest.mark.parametrize("fn, match", [
    (appended_after_stored, "holds"), (appended_after_appended_to_another, "holds"),
    (appended_through_an_alias, "another name"), (appended_after_passed, "passed to a function"),
    (appended_by_a_nested_function, "changes a value in place"),
])
def test_lists_shared_and_changed_are_refused(fn, match):
    assert_refused(fn, srcgrad.UnsupportedSyntaxError, match)


# ---- extend: appends of items known when compiling ---------------------------------

def extends_in_loop(x):
    xs = [x]
    for i in range(2):
        xs.extend([x * i, np.sin(x)])
    return np.sum(np.stack(xs) ** 2) + np.sum(xs[-2])


def extends_with_a_named_tuple(x):
    xs = []
    ys = (x, 2.0 * x)
    xs.extend(ys)
    return np.sum(np.stack(xs) ** 2)


@pytest.mark.parametrize("fn", [extends_in_loop, extends_with_a_named_tuple])
def test_extend(fn):
    check_gradient(fn)


def extends_with_a_list_grown_elsewhere(x):
    xs = []
    ys = []
    ys.append(x)
    xs.extend(ys)
    return np.sum(np.stack(xs))


def test_extend_with_items_known_at_run_time():
    check_gradient(extends_with_a_list_grown_elsewhere)  # (appended one by one, as extend does)


# ---- a differential fuzzer over these constructs -----------------------------------
# Random programs built from the constructs above (lists given to NumPy, lists grown
# and read, dicts iterated, names rebound in loops, helpers given displays), sometimes
# all inside an outer loop; oracle: the function's own value and central differences.

_PIECES = ["x * {c}", "np.sin(x)", "x ** 2", "x[{i}] * x", "np.tanh(x * {c})", "x + {c}"]

_CONSTRUCTS = [
    ["{n} = np.sum([{a}, {b} * 2.0], axis=0)"],
    ["{n} = np.max([{a}[0], {b}[1] * 1.5]) * x"],
    ["L = [{a}]", "for i in range({k}):", "    L.append(np.sin(L[-1]) + {b} * i)",
     "{n} = np.mean(L, axis=0)"],
    ["L = [{a}]", "for i in range({k}):", "    L.append(L[-1] * 0.5 + {b})", "{n} = L[-1] * L[0]"],
    ["d = {{'a': {a}, 'b': {b} * 2.0}}", "acc = x * 0.0", "for k in d:", "    acc = acc + d[k] ** 2",
     "{n} = acc + d.get('a') + d.get('z', {b})"],
    ["d = {{'a': {a}, 'bb': {b} * 2.0}}", "acc = x * 0.0", "for k, w in d.items():",
     "    acc = acc + w * len(k)", "{n} = acc"],
    ["d = {{'a': {a}, 'b': {b}}}", "acc = x * 0.0", "for w in d.values():", "    acc = acc + np.cos(w)",
     "{n} = acc"],
    ["c = [{a}[0], {b}[1], {a}[2]]", "for e in c:", "    c = {b} * e + x", "{n} = c * 1.0"],
    ["c = {a} * 1.0", "for e in c:", "    c = c * e + x", "{n} = c"],
    ["y = {a}", "t = (y, 1.5)", "for i in range(2):", "    y = t[0] * t[1] + y * 0.5", "{n} = y + t[0]"],
    ["ys = [[], []]", "for i in range(3):", "    ys[0].append({a} * i)", "    ys[1].append(np.sum({b}) * i)",
     "{n} = np.stack(ys[0])[-1] + np.sum(ys[1]) + ys[0][1]"],
    ["{n} = np.array([[{a}[0], {b}[1]], [{b}[2], 1.0]]).ravel()[0] * {a}"],
    ["{n} = np.prod(({a}[0], {b}[1], 2.0)) + {a}"],
    ["P = []", "for i in range(3):", "    P.append({a}[i] * {b})",
     "{n} = np.sum(P, axis=0) + np.stack(P).T[0]"],
    ["P = []", "for i in range(3):", "    P.append({a}[i] * {b})",
     "{n} = np.concatenate(P)[:3] + np.dot(P[1], np.array(P))"],
    ["h = {a}", "lst = [h, {b}]", "k = 0", "while k < 2:", "    h = h * lst[0] + lst[1]", "    k = k + 1",
     "{n} = h"],
    ["{n} = _pair_product([{a}, {b}])"],
    ["{n} = np.sum(list(({a}, {b} * 3.0)), axis=0)"],
    ["xs = [{a}, {b}]", "xs.pop(0)", "xs.extend([{a} * 2.0])", "{n} = xs[0] + xs[-1]"],
]


def _container_program(rng):
    """The source of ``f(x)`` (x: a 3-vector) made of random constructs."""
    lines, values = [], ["v0"]
    lines.append("v0 = " + rng.choice(_PIECES).format(c=round(rng.uniform(0.5, 2.0), 2), i=rng.randrange(3)))
    for _ in range(rng.randint(2, 5)):
        n = f"v{len(values)}"
        fill = dict(n=n, a=rng.choice(values), b=rng.choice(values), k=rng.randint(1, 3))
        lines += [line.format(**fill) for line in rng.choice(_CONSTRUCTS)]
        values.append(n)
    if rng.random() < 0.5:
        body = ["tot = x * 0.0", "for rep in range(2):"] + ["    " + line for line in lines]
        body += [f"    tot = tot + {values[-1]}", "    x = x * 0.9 + tot * 0.1", "return np.sum(tot * x)"]
    else:
        body = lines + [f"return np.sum({values[-1]} * x)"]
    return "import numpy as np\nfrom tests.soundness.test_trust_containers import _pair_product\n\n\ndef f(x):\n" + \
        "".join(f"    {line}\n" for line in body)


def check_fuzzed_programs(seed, count, tmp_path):
    import importlib.util
    import random

    rng = random.Random(seed)
    x = np.array([0.3, -0.8, 0.6])
    checked = 0
    for k in range(count):
        source = _container_program(rng)
        path = tmp_path / f"fuzz_{seed}_{k}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(f"fuzz_{seed}_{k}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        with np.errstate(all="ignore"):
            value = module.f(x.copy())
            if not abs(value) < 1e5:
                continue  # central differences lose their digits
            expected = numerical_grad(module.f, [x], 0)
            if not np.allclose(numerical_grad(module.f, [x], 0, eps=1e-7), expected, rtol=1e-6,
                               atol=1e-6 * (1 + np.max(np.abs(expected)))):
                continue  # too steep here for central differences to be an oracle
        for optimize in (True, False):
            got_value, got = srcgrad.value_and_grad(module.f, optimize=optimize)(x.copy())
            assert np.isclose(got_value, value, rtol=1e-9), source
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5 * (1 + np.max(np.abs(expected))),
                                       err_msg=source)
        checked += 1
    assert checked > count // 2


@pytest.mark.parametrize("seed", range(4))
def test_container_fuzz(seed, tmp_path):
    check_fuzzed_programs(seed, 8, tmp_path)


@pytest.mark.slow
def test_container_fuzz_many(tmp_path):
    check_fuzzed_programs(1000, 2000, tmp_path)


# ---- a nested def reads a name assigned again after the def -----------------------

def closure_reads_a_rebound_name(x):
    n = 1.0

    def g():
        return n
    n = 2.0
    return np.sum(x) * g()


def closure_called_before_the_rebinding(x):
    n = 1.5

    def g():
        return n
    y = g()
    n = 2.0
    return np.sum(x) * y * n


def test_closure_reading_a_rebound_name():
    # Python's g reads n when it is called (2.0, not the 1.0 n held at the def): the call
    # passes n as it is then (desugar's lambda lifting).
    g = srcgrad.grad(closure_reads_a_rebound_name)(X0)
    np.testing.assert_allclose(g, np.full_like(X0, 2.0))
    check_gradient(closure_reads_a_rebound_name)


def test_closure_called_before_the_rebinding():
    check_gradient(closure_called_before_the_rebinding)


# ---- a list a function of yours returned, given straight to NumPy ------------------

def _two_rows(v):
    return [v, v * 2 + 1]


def returned_list_max(x):
    return np.sum(np.max(_two_rows(x), axis=0))


def returned_list_min(x):
    return np.min(_two_rows(x))


def returned_list_norm(x):
    return np.linalg.norm(_two_rows(x))


def returned_list_maximum(x):
    return np.sum(np.maximum(_two_rows(x), 0.5))


def returned_list_clip(x):
    return np.sum(np.clip(_two_rows(x), -1, 1))


def returned_list_power(x):
    return np.sum(np.power(_two_rows(x), 2) + np.square(_two_rows(x)))


def returned_list_in_loop(x):
    s = 0.0
    for i in range(2):
        s = s + np.sum(np.maximum(_two_rows(x * i), 0.5))
    return s


@pytest.mark.parametrize("fn", [returned_list_max, returned_list_min, returned_list_norm,
                                returned_list_maximum, returned_list_clip, returned_list_power,
                                returned_list_in_loop])
def test_returned_list_given_to_numpy(fn):
    check_gradient(fn)


class _ListModel:
    def __init__(self):
        self.ws = [np.array([0.3, -1.2, 0.7]), np.array([1.0, 2.0, -0.5])]


def _list_field_max(m, x):
    return np.sum(np.max(m.ws, axis=0) * x)


def _list_field_maximum(m, x):
    return np.sum(np.maximum(m.ws, 0.5)) * np.sum(x)


def _list_field_mean(m, x):
    return np.sum(np.mean(m.ws, axis=0) ** 2 * x)


def _list_field_stack(m, x):
    return np.sum(np.stack(m.ws) ** 2 * x) + np.sum(np.concatenate(m.ws, axis=0) ** 3)


def _list_field_iterated(m, x):
    s = 0.0
    for w in m.ws:
        s = s + np.sum(w * x)
    return s + np.sum(np.exp(m.ws)) + np.sum(np.dot(m.ws, x) ** 2)


@pytest.mark.parametrize("fn", [_list_field_max, _list_field_maximum, _list_field_mean, _list_field_stack,
                                _list_field_iterated])
@pytest.mark.parametrize("optimize", [True, False])
def test_list_field_given_to_numpy(fn, optimize):
    """A list of parameters in an object, given to NumPy (np.mean gave zeros silently)."""
    m, x = _ListModel(), np.array([1.0, -2.0, 0.5])
    got = srcgrad.grad(fn, optimize=optimize)(m, x)
    for k in range(2):
        expected = numerical_grad(lambda w: fn(_with_item(m, k, w), x), [m.ws[k]], 0)
        np.testing.assert_allclose(got.ws[k], expected, atol=1e-6)


def _with_item(m, k, w):
    other = _ListModel()
    other.ws = [w if j == k else v for j, v in enumerate(m.ws)]
    return other


def appends_to_the_iterated_list(x):
    xs = [x]
    for v in xs:
        if len(xs) < 3:
            xs.append(v * 2)
    return np.sum(np.stack(xs))


def appends_while_iterating_a_copy(x):
    xs = [x, x * 2]
    for v in list(xs):
        xs.append(v * 2)
    return np.sum(np.stack(xs) ** 2)


def test_changing_the_iterated_list_is_refused():
    assert_refused(appends_to_the_iterated_list, srcgrad.UnsupportedSyntaxError, "the list the loop iterates over")


def test_changing_a_list_while_iterating_a_copy():
    check_gradient(appends_while_iterating_a_copy)


def closure_reads_a_name_a_loop_updates(x):
    n = 1.0

    def g():
        return n * 2
    s = 0.0
    for i in range(3):
        s = s + np.sum(x) * g()
        n = n + 1.0
    return s


def test_closure_reads_a_name_a_loop_updates():
    """The optimizer dropped `n`'s updates (only the closure reads them): value and gradient wrong."""
    check_gradient(closure_reads_a_name_a_loop_updates)
