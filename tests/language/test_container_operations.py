"""Python's containers as values, each operation with an adjoint of its own:
``sorted`` (the permutation's inverse applied to the adjoint; ties in Python's stable
order), ``d[k] += v`` on an entry holding a number (rebound, as Python does), and the
list and dict methods that reorder, copy or remove entries."""
import numpy as np
import pytest

import srcgrad
from tests.finite_differences import numerical_grad

X = np.array([[0.5, -1.0, 0.25], [1.5, 0.3, -0.7], [-0.2, 0.8, 1.1], [0.9, -0.4, 0.6]])


def sorted_generator(w):
    s = sorted(np.sum(x * w) for x in X)
    return s[0] * 2 + s[-1] + s[1] * s[2]


def sorted_array(w):
    return sorted(X @ w)[-1] * 3 + sorted(X @ w)[0]


def sorted_reverse(w):
    s = sorted([np.sum(w), np.sum(w ** 2), float(w[0])], reverse=True)
    return s[0] * 3 + s[1] * 2 + s[2]


def sorted_by_key(w):
    xs = [w, w ** 2, np.sin(w)]
    s = sorted(xs, key=lambda v: np.sum(v))
    return np.sum(s[0] * 3 + s[1] * 2 + s[2])


def sorted_ties(w):
    s = sorted([np.sum(w), np.sum(w), np.sum(w * 0.5)])  # equal items keep their order
    return s[0] * 3 + s[1] * 2 + s[2] * 5


def sorted_in_loop(w):
    total = 0.0
    for k in range(1, 3):
        s = sorted([np.sum(w * x) for x in X[:k + 1]])
        total = total + s[0] * k
    return total


def _smallest_two(vs):
    s = sorted(vs)
    return s[0] + 2 * s[1]


def sorted_in_helper(w):
    return _smallest_two([np.sum(x * w) for x in X])


class Ranker:
    def __init__(self, scale):
        self.scale = scale

    def __call__(self, w):
        s = sorted([np.sum(x * w) * self.scale for x in X], reverse=True)
        return s[0] - s[-1]


def sorted_as_method(w):
    return Ranker(1.5)(w)


def dict_entry_accumulated(w):
    stats = {"loss": 0.0, "n": 0}
    for i in range(3):
        stats["loss"] += np.sum(np.sin(w * i))
        stats["n"] += 1
    return stats["loss"] / stats["n"]


def dict_entry_accumulated_once(w):
    stats = {"loss": 0.0}
    stats["loss"] += np.sum(w ** 2)
    return stats["loss"] * 2


CASES = [sorted_generator, sorted_array, sorted_reverse, sorted_by_key, sorted_ties, sorted_in_loop,
         sorted_in_helper, sorted_as_method, dict_entry_accumulated, dict_entry_accumulated_once]


@pytest.mark.parametrize("optimize", [True, False])
@pytest.mark.parametrize("f", CASES, ids=[f.__name__ for f in CASES])
def test_gradient_matches_finite_differences(f, optimize):
    w = np.array([0.3, -0.7, 1.1])
    got = srcgrad.grad(f, optimize=optimize)(w)
    np.testing.assert_allclose(got, numerical_grad(f, (w,), 0), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("f", [sorted_generator, sorted_by_key, sorted_as_method, dict_entry_accumulated])
def test_float32_stays_float32(f):
    w = np.array([0.3, -0.7, 1.1], dtype=np.float32)
    got = srcgrad.grad(f)(w)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, numerical_grad(f, (w.astype(np.float64),), 0), rtol=2e-3, atol=1e-4)


@pytest.mark.parametrize("f", [sorted_generator, sorted_reverse, sorted_by_key, sorted_ties])
def test_forward_mode(f):
    w, v = np.array([0.3, -0.7, 1.1]), np.array([1.0, 0.5, -0.2])
    _, tangent = srcgrad.jvp(f)(w, v)
    np.testing.assert_allclose(tangent, numerical_grad(f, (w,), 0) @ v, rtol=1e-6, atol=1e-8)


def sorted_items(p):
    total = 0.0
    for i, (k, v) in enumerate(sorted(p.items())):
        total = total + (i + 1) * np.sum(v ** 2)
    return total


def test_sorted_items_of_a_dict_argument():
    p = {"b": np.array([0.3, -0.7]), "a": np.array([1.1]), "c": np.array([0.5, 0.2, -0.1])}
    got = srcgrad.grad(sorted_items)(p)
    for k in p:
        def f(v, k=k):
            return sorted_items({**p, k: v})
        np.testing.assert_allclose(got[k], numerical_grad(f, (p[k],), 0), rtol=1e-6)


def entry_holding_an_array(w):
    acc = np.zeros(3)
    stats = {"acc": acc, "n": 0}
    for i in range(2):
        stats["n"] += 1
        stats["acc"] += w * i  # (NumPy adds into `acc` itself)
    return np.sum(stats["acc"]) + np.sum(acc * w)


def test_an_entry_holding_an_array_is_refused():
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match=r"in place") as raised:
        srcgrad.grad(entry_holding_an_array)(np.ones(3))
    assert "test_container_operations.py:" in str(raised.value) and 'stats["acc"] += w * i' in str(raised.value)


# ---- writing into a list or dict another name may hold: refused, with advice that works

KEYS = ["a", "b"]
CONST = {"a": np.ones(3)}


def write_into_list_argument(w, buf):
    buf[0] = w * 2
    return np.sum(buf[0] ** 2) + np.sum(buf[1])


def write_into_list_argument_copied(w, buf):
    buf = list(buf)
    buf[0] = w * 2
    return np.sum(buf[0] ** 2) + np.sum(buf[1])


def write_into_dict_argument(w, d):
    d["h"] = np.tanh(w * d["x"])
    return np.sum(d["h"] * d["x"])


def write_into_dict_argument_copied(w, d):
    d = dict(d)
    d["h"] = np.tanh(w * d["x"])
    return np.sum(d["h"] * d["x"])


def write_into_fromkeys(w):
    d = dict.fromkeys(KEYS)
    d["a"] = w ** 2
    return np.sum(d["a"])


def write_into_fromkeys_copied(w):
    d = dict.fromkeys(KEYS)
    d = dict(d)
    d["a"] = w ** 2
    return np.sum(d["a"])


def write_into_a_copy_method(w):
    d = CONST.copy()
    d["b"] = w * d["a"]
    return np.sum(d["b"] ** 2)


def write_into_a_copy_method_copied(w):
    d = CONST.copy()
    d = dict(d)
    d["b"] = w * d["a"]
    return np.sum(d["b"] ** 2)


ADVISED = [
    (write_into_list_argument, write_into_list_argument_copied, "`buf = list(buf)`"),
    (write_into_dict_argument, write_into_dict_argument_copied, "`d = dict(d)`"),
    (write_into_a_copy_method, write_into_a_copy_method_copied, "`d = dict(d)` for a dict"),
]


def fromkeys_accumulated(w):
    d = dict.fromkeys(KEYS, 0.0)
    for k in KEYS:
        d[k] += np.sum(w ** 2) * len(k)
    d["a"] = d["a"] * 2
    return d["a"] + d["b"]


def fromkeys_of_a_value(w):
    d = dict.fromkeys(["a", "b", "a"], w * 2)
    d["b"] = d["b"] * 3
    return np.sum(d["a"] * d["b"])


@pytest.mark.parametrize("f", [write_into_fromkeys, write_into_fromkeys_copied, fromkeys_accumulated,
                               fromkeys_of_a_value])
def test_dict_fromkeys_is_a_new_dict(f):
    """`dict.fromkeys(KEYS)` was refused as maybe shared; its value's adjoint is the sum of
    its entries' (`rt.fromkeys`)."""
    w, v = np.array([0.3, -0.7, 1.1]), np.array([1.0, 0.5, -0.2])
    np.testing.assert_allclose(srcgrad.grad(f)(w), numerical_grad(f, (w,), 0), rtol=1e-6, atol=1e-8)
    _, tangent = srcgrad.jvp(f)(w, v)
    np.testing.assert_allclose(tangent, numerical_grad(f, (w,), 0) @ v, rtol=1e-6, atol=1e-8)


def _arguments(f):
    w = np.array([0.3, -0.7, 1.1])
    if "list_argument" in f.__name__:
        return (w, [None, np.array([0.5, 1.5])])
    if "dict_argument" in f.__name__:
        return (w, {"x": np.array([0.2, -0.4, 0.9])})
    return (w,)


@pytest.mark.parametrize("refused, advised, advice", ADVISED, ids=[a[0].__name__ for a in ADVISED])
def test_the_advice_for_a_list_or_dict_compiles_and_is_right(refused, advised, advice):
    args = _arguments(refused)
    with pytest.raises(srcgrad.UnsupportedSyntaxError) as raised:
        srcgrad.grad(refused)(*args)
    assert advice in str(raised.value) and "np.copy" not in str(raised.value).split(advice)[0].split("help:")[-1]
    got = srcgrad.grad(advised)(*args)
    np.testing.assert_allclose(got, numerical_grad(advised, args, 0), rtol=1e-6, atol=1e-8)


def test_the_copy_of_a_dict_argument_passes_the_adjoint_to_its_entries():
    w, d = _arguments(write_into_dict_argument)
    got = srcgrad.grad(write_into_dict_argument_copied, wrt=1)(w, d)

    def by_x(x):
        return write_into_dict_argument_copied(w, {"x": x})
    np.testing.assert_allclose(got["x"], numerical_grad(by_x, (d["x"],), 0), rtol=1e-6)


def pieces_rescaled(w):
    parts = np.split(w * 2, 3)
    parts = list(parts)
    parts[1] = parts[1] * 5
    return np.sum(np.concatenate(parts) ** 2) + np.sum(tuple(np.split(w, 3))[2])


def rows_as_list(w):
    rows = list(np.outer(w, w))
    return np.sum(rows[0] * rows[2])


@pytest.mark.parametrize("optimize", [True, False])
@pytest.mark.parametrize("f", [pieces_rescaled, rows_as_list])
def test_list_and_tuple_of_a_value_known_when_it_runs(f, optimize):
    w = np.array([0.3, -0.7, 1.1])
    np.testing.assert_allclose(srcgrad.grad(f, optimize=optimize)(w), numerical_grad(f, (w,), 0), rtol=1e-6)


# ---- a list's own methods that reorder it, and np.split's list ----------------------------

def reversed_in_place(w):
    xs = [w, w * 2, np.sin(w)]
    xs.reverse()
    return np.sum(xs[0] * 5 + xs[2] * xs[1])


def inserted_at_literal(w):
    xs = [w, w ** 2, np.sin(w)]
    xs.extend([w * 3])
    xs.insert(0, np.cos(w))
    xs.insert(-1, w * 0.5)
    ys = xs[::-1]
    return sum(np.sum(y * (i + 1)) for i, y in enumerate(ys))


def sorted_in_place_by_key(w):
    xs = [w * 2, w, np.sin(w)]
    xs.sort(key=lambda v: float(np.sum(v)), reverse=True)
    return np.sum(xs[0] * 3 + xs[1] * xs[2])


def reordered_in_loop(w):
    xs = []
    for i in range(4):
        xs.append(w * (i + 1))
        xs.reverse()
        xs.insert(1, np.sin(w) * i)
    xs.sort(key=lambda v: float(v[0]), reverse=True)
    return sum(np.sum(x * (j + 1)) for j, x in enumerate(xs))


def _reverse_and_read(vals):
    vals = list(vals)
    vals.reverse()
    return vals[0] * vals[-1]


def reordered_in_helper(w):
    return np.sum(_reverse_and_read([w, np.cos(w), w ** 3]))


class Stack:
    def __init__(self, k):
        self.k = k

    def top(self, w):
        parts = np.split(w * self.k, 3)
        parts.reverse()
        parts.insert(1, w[:1] * 7)
        return np.sum(parts[0] * 3 + parts[1] + parts[3] * 2)


def reordered_as_method(w):
    return Stack(2.0).top(w)


def split_list_written(w):
    parts = np.split(w, 3)
    parts[0] = parts[0] * 2
    return np.sum(np.concatenate(parts) ** 2) + np.sum(w[:1] * parts[0])


REORDERED = [reversed_in_place, inserted_at_literal, sorted_in_place_by_key, reordered_in_loop, reordered_in_helper,
             reordered_as_method, split_list_written]


@pytest.mark.parametrize("optimize", [True, False])
@pytest.mark.parametrize("f", REORDERED, ids=[f.__name__ for f in REORDERED])
def test_reordered_lists(f, optimize):
    w = np.array([0.3, -0.7, 1.1])
    np.testing.assert_allclose(srcgrad.grad(f, optimize=optimize)(w), numerical_grad(f, (w,), 0),
                               rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("f", [reversed_in_place, sorted_in_place_by_key, reordered_in_loop, reordered_as_method])
def test_reordered_lists_float32_and_forward_mode(f):
    w, v = np.array([0.3, -0.7, 1.1]), np.array([1.0, 0.5, -0.2])
    got = srcgrad.grad(f)(w.astype(np.float32))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, numerical_grad(f, (w,), 0), rtol=2e-3, atol=1e-4)
    _, tangent = srcgrad.jvp(f)(w, v)
    np.testing.assert_allclose(tangent, numerical_grad(f, (w,), 0) @ v, rtol=1e-6, atol=1e-8)


def test_inserted_at_an_index_known_when_it_runs():
    def f(w, k):
        xs = [w, w * 2, w * 3]
        for _ in range(2):
            xs.insert(k, w ** 2)
        return np.sum(xs[0] * 5 + xs[2] + xs[1] * xs[3] * 2 + xs[4])
    w = np.array([0.3, -0.7, 1.1])
    for k in (1, -1, 10, -10):
        np.testing.assert_allclose(srcgrad.grad(f)(w, k), numerical_grad(f, (w, k), 0), rtol=1e-6)


def reversed_under_another_name(w):
    xs = [w, w * 2]
    ys = xs
    xs.reverse()
    return np.sum(ys[0])


def reversed_inside_another_list(w):
    xs = [w, w * 2]
    outer = [xs]
    xs.reverse()
    return np.sum(outer[0][0])


@pytest.mark.parametrize("f", [reversed_under_another_name, reversed_inside_another_list])
def test_reordering_a_list_another_name_holds_is_refused(f):
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="another name may refer to the same list") as raised:
        srcgrad.grad(f)(np.ones(3))
    assert "xs.reverse()" in str(raised.value)


def item_of_split_changed_in_place(w):
    x = w * 1
    parts = np.split(x, 3)
    parts[0] *= 2  # (NumPy changes `x` too: the item is a view of it)
    return np.sum(x) + np.sum(parts[0])


def test_an_item_of_a_split_changed_in_place_is_refused_when_it_runs():
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="changes the array it holds in place"):
        srcgrad.grad(item_of_split_changed_in_place)(np.ones(6))


# ---- a dict's entries removed or merged: d.pop(k), del d[k], {**p, 'k': v}, dict(p) --------

def popped_literal(w):
    d = {"a": w, "b": w ** 2}
    b = d.pop("b")
    return np.sum(b) + sum(np.sum(v) for v in d.values())


def popped_in_loop(w):
    d = {"a": w, "b": w ** 2}
    for k in ["x", "y"]:
        d[k] = np.sin(w) * len(k)
        v = d.pop("a", w * 0)
        d["a"] = v * 2 + d[k]
    del d["b"]
    return sum(np.sum(v ** 2) for v in d.values())


def merged_locally(w):
    d = {"a": w, "b": w ** 2}
    q = {"z": w * 5, **d, "a": np.sin(w)}
    return np.sum(q["a"] * q["b"]) + np.sum(q["z"])


def _without(d, key):
    d = dict(d)
    del d[key]
    return d


def deleted_in_helper(w):
    d = _without({"a": w, "b": w ** 2, "c": np.cos(w)}, "b")
    return sum(np.sum(v * 2) ** 2 for v in d.values())


class Params:
    def __init__(self, scale):
        self.scale = scale

    def loss(self, w):
        d = {"w": w * self.scale, "u": w ** 2}
        extra = {**d, "v": d.pop("u") * 3}
        return sum(np.sum(v ** 2) for v in extra.values())


def merged_as_method(w):
    return Params(0.5).loss(w)


DICT_CASES = [popped_literal, popped_in_loop, merged_locally, deleted_in_helper, merged_as_method]


@pytest.mark.parametrize("optimize", [True, False])
@pytest.mark.parametrize("f", DICT_CASES, ids=[f.__name__ for f in DICT_CASES])
def test_dict_entries_removed_or_merged(f, optimize):
    w = np.array([0.3, -0.7, 1.1])
    np.testing.assert_allclose(srcgrad.grad(f, optimize=optimize)(w), numerical_grad(f, (w,), 0),
                               rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("f", DICT_CASES, ids=[f.__name__ for f in DICT_CASES])
def test_dict_entries_removed_or_merged_float32_and_forward(f):
    w, v = np.array([0.3, -0.7, 1.1]), np.array([1.0, 0.5, -0.2])
    got = srcgrad.grad(f)(w.astype(np.float32))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, numerical_grad(f, (w,), 0), rtol=2e-3, atol=1e-4)
    _, tangent = srcgrad.jvp(f)(w, v)
    np.testing.assert_allclose(tangent, numerical_grad(f, (w,), 0) @ v, rtol=1e-6, atol=1e-8)


def copied_and_deleted(p):
    p = dict(p)
    p["W"] = p["W"] * 2
    del p["junk"]
    return sum(np.sum(v ** 2) for v in p.values())


def merged_argument(p):
    q = {**p, "extra": p["W"] * 3}
    return sum(np.sum(v ** 2) for k, v in q.items() if k != "b")


def popped_by_a_key_given(p, key="b"):
    q = dict(p)
    v = q.pop(key)
    r = {**q, "v": v}
    return np.sum(r["v"] * 3) + sum(np.sum(u ** 2) for u in r.values())


@pytest.mark.parametrize("f", [copied_and_deleted, merged_argument, popped_by_a_key_given])
def test_a_dict_argument_copied_merged_or_popped(f):
    p = {"W": np.array([0.3, -0.7, 1.1]), "b": np.array([0.5, 2.0]), "junk": np.array([1.5])}
    got = srcgrad.grad(f)(p)
    for k in p:
        def by(x, k=k):
            return f({**p, k: x})
        np.testing.assert_allclose(got[k], numerical_grad(by, (p[k],), 0), rtol=1e-6, atol=1e-8)


def popped_under_another_name(w):
    d = {"a": w, "b": w ** 2}
    e = d
    d.pop("b")
    return np.sum(e["a"])


def popped_as_advised(w):
    d = {"a": w, "b": w ** 2}
    e = d
    v = d["b"]
    d = {key: x for key, x in d.items() if key != "b"}
    return np.sum(e["a"]) + np.sum(v * e["b"])


def test_popping_a_dict_another_name_holds_is_refused_with_advice_that_works():
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="another name may refer to the same dict") as raised:
        srcgrad.grad(popped_under_another_name)(np.ones(3))
    assert "if key != k}" in str(raised.value)
    w = np.array([0.3, -0.7, 1.1])
    np.testing.assert_allclose(srcgrad.grad(popped_as_advised)(w), numerical_grad(popped_as_advised, (w,), 0),
                               rtol=1e-6)


# ---- enumerate with a start ---------------------------------------------------------------

def enumerated_from(w, start=2):
    total = 0.0
    for i, x in enumerate([w, w ** 2, np.sin(w)], start):
        total = total + np.sum(x) * i
    for i, x in enumerate(w, start=-2):
        total = total + x * i * i
    return total + sum(np.sum(y * i) for i, y in enumerate([w, 2 * w], start=3))


@pytest.mark.parametrize("optimize", [True, False])
def test_enumerate_with_a_start(optimize):
    w, v = np.array([0.3, -0.7, 1.1]), np.array([1.0, 0.5, -0.2])
    np.testing.assert_allclose(srcgrad.grad(enumerated_from, optimize=optimize)(w),
                               numerical_grad(enumerated_from, (w,), 0), rtol=1e-6)
    _, tangent = srcgrad.jvp(enumerated_from)(w, v)
    np.testing.assert_allclose(tangent, numerical_grad(enumerated_from, (w,), 0) @ v, rtol=1e-6)


# ---- .copy() of a list or dict; an appended item overwritten ----------------------------

def copied_list_argument(ps):
    qs = ps.copy()
    qs[1] = np.tanh(qs[1])
    return np.sum(qs[0] * qs[1])


def copied_dict_argument(ps):
    q = ps.copy()
    q["a"] = q["a"] * 3
    return np.sum(q["a"] * q["b"])


@pytest.mark.parametrize("f, ps", [
    (copied_list_argument, [np.array([0.3, -0.7]), np.array([1.1, 0.4])]),
    (copied_dict_argument, {"a": np.array([0.3, -0.7]), "b": np.array([1.1, 0.4])}),
])
def test_copy_method_of_a_list_or_dict_argument(f, ps):
    got = srcgrad.grad(f)(ps)
    for k in (range(len(ps)) if isinstance(ps, list) else ps):
        def by(x, k=k):
            qs = list(ps) if isinstance(ps, list) else dict(ps)
            qs[k] = x
            return f(qs)
        np.testing.assert_allclose(got[k], numerical_grad(by, (ps[k],), 0), rtol=1e-6, atol=1e-8)


def appended_then_overwritten(w):
    outs = []
    outs.append(w)
    outs.append(w)
    outs[1] = w ** 2
    return np.sum(outs[1] * outs[0])


def test_an_appended_item_overwritten():
    """Crashed in the backward sweep (None added to an adjoint)."""
    w = np.array([0.3, -0.7, 1.1])
    np.testing.assert_allclose(srcgrad.grad(appended_then_overwritten)(w),
                               numerical_grad(appended_then_overwritten, (w,), 0), rtol=1e-6)


def stacked_states(w, xs=X):
    hs = [np.zeros(3) for _ in range(2)]
    ys = []
    for x in xs:
        inp = x
        for layer in range(2):
            hs[layer] = np.tanh(inp * w + hs[layer] * 0.5)
            inp = hs[layer]
        ys.append(np.sum(inp))
    return sum(ys) + np.sum(hs[0] * hs[1])


class Stacked:
    def __init__(self, scale):
        self.scale = scale

    def forward(self, w, xs):
        hs = [np.zeros(3) for _ in range(2)]
        ys = []
        for x in xs:
            inp = x
            for layer, k in enumerate([self.scale, 1.0]):
                hs[layer] = np.tanh(inp * w * k + hs[layer])
                inp = hs[layer]
            ys.append(inp)
        return np.sum(np.stack(ys) ** 2)


def stacked_as_method(w):
    return Stacked(0.5).forward(w, X)


@pytest.mark.parametrize("f", [stacked_states, stacked_as_method])
def test_states_written_into_a_list_made_by_a_comprehension(f):
    """The pullback ended by writing again into items the backward sweep had popped
    (IndexError): `rt.redo` skips those."""
    w = np.array([0.3, -0.7, 1.1])
    np.testing.assert_allclose(srcgrad.grad(f)(w), numerical_grad(f, (w,), 0), rtol=1e-6, atol=1e-8)
    value, pullback = srcgrad.vjp(f)(w)
    np.testing.assert_allclose(pullback(1.0), pullback(1.0))


# ---- d[k] += v where the entry holds an array ----------------------------------------------

def entry_made_then_accumulated(w):
    acc = {}
    for k, v in {"a": w, "b": w ** 2}.items():
        acc[k] = acc.get(k, 0) + v * 2
        acc[k] += v
    return sum(np.sum(v ** 2) for v in acc.values())


def test_an_entry_just_made_is_accumulated_into():
    w = np.array([0.3, -0.7, 1.1])
    np.testing.assert_allclose(srcgrad.grad(entry_made_then_accumulated)(w),
                               numerical_grad(entry_made_then_accumulated, (w,), 0), rtol=1e-6)


def entry_read_out_then_accumulated(w):
    d = {}
    d["a"] = w * 2
    y = d["a"]
    d["a"] += w  # (NumPy changes `y` too)
    return np.sum(y * w)


def test_an_entry_read_out_before_it_is_accumulated_into_is_refused():
    """This gave 4w where Python's is 6w, silently: the entry's array was taken for one no
    other name held, though `y` held it."""
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="in place"):
        srcgrad.grad(entry_read_out_then_accumulated)(np.array([0.3, -0.7, 1.1]))


def item_read_by_index_then_accumulated(w, i=0):
    xs = [w * 2, w]
    y = xs[i]
    xs[0] += w  # (NumPy changes `y` too)
    return np.sum(y * w)


def item_read_in_loop_then_accumulated(w):
    xs = [w * 2, w]
    for i in range(1):
        y = xs[i]
    xs[0] += w
    return np.sum(y * w)


def list_copied_then_accumulated(w):
    xs = [w * 2, w]
    ys = list(xs)
    xs[0] += w  # (`ys[0]` is the same array)
    return np.sum(ys[0] * w)


@pytest.mark.parametrize("f", [item_read_by_index_then_accumulated, item_read_in_loop_then_accumulated,
                               list_copied_then_accumulated])
def test_an_item_held_elsewhere_accumulated_into_is_refused(f):
    """Each gave 4w where Python's is 6w, silently."""
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="in place"):
        srcgrad.grad(f)(np.array([0.3, -0.7, 1.1]))


def as_python_list(w):
    xs = w.tolist()
    xs[0] = xs[0] * 3
    rows = np.outer(w, w).tolist()
    return sum(v ** 2 for v in xs) + sum(r[0] * r[1] for r in rows) + np.sum(w).tolist() \
        + np.sum((w * 1.5).tolist()) + np.sum(np.array(np.outer(w, w).tolist()) ** 2)


def test_tolist():
    """`x.tolist()` had no rule: the lists' adjoints go back as an array of `x`'s shape."""
    w, v = np.array([0.3, -0.7, 1.1]), np.array([1.0, 0.5, -0.2])
    np.testing.assert_allclose(srcgrad.grad(as_python_list)(w), numerical_grad(as_python_list, (w,), 0), rtol=1e-6)
    assert srcgrad.grad(as_python_list)(w.astype(np.float32)).dtype == np.float32
    _, tangent = srcgrad.jvp(as_python_list)(w, v)
    np.testing.assert_allclose(tangent, numerical_grad(as_python_list, (w,), 0) @ v, rtol=1e-6)


def sorted_keys_of_a_dict_of_values(w, keys=("b", "a", "c")):
    d = {k: w * (i + 1) for i, k in enumerate(keys)}
    total = 0.0
    for j, k in enumerate(sorted(d)):
        total = total + np.sum(d[k]) * (j + 1)
    return total


def test_sorted_keys_of_a_dict_of_values():
    w = np.array([0.3, -0.7, 1.1])
    np.testing.assert_allclose(srcgrad.grad(sorted_keys_of_a_dict_of_values)(w),
                               numerical_grad(sorted_keys_of_a_dict_of_values, (w,), 0), rtol=1e-6)


CONSTANTS = {"a": np.array([1.0, 2.0, 3.0]), "b": np.array([0.5, 0.5, 0.5])}


def merged_with_a_constant_dict(w):
    q = dict(CONSTANTS)
    r = {**q, "c": w * 2}
    return sum(np.sum(v * w) for v in r.values())


def test_forward_mode_of_a_merge_with_a_constant_dict():
    """The merge's tangent took the constant dict's values for their tangents (a "linear"
    tangent with two differentiable arguments), silently wrong."""
    w, v = np.array([0.3, -0.7, 1.1]), np.array([1.0, 0.5, -0.2])
    _, tangent = srcgrad.jvp(merged_with_a_constant_dict)(w, v)
    np.testing.assert_allclose(tangent, numerical_grad(merged_with_a_constant_dict, (w,), 0) @ v, rtol=1e-6)


# ---- `*` in list and tuple displays: [*x], (*a, *b), [*xs, y] -------------------------------
# (the displays and copies they join: `[a, *xs, b]` is `[a] + list(xs) + [b]`)

def rows_of_an_array_spread(w):
    xs = [*w]  # (a 1-d array: its items, as list(w))
    rows = [*np.outer(w, X[0])]
    return xs[0] * xs[2] + np.sin(xs[1]) + np.sum(rows[0] * rows[2])


def tuples_spread_and_joined(w):
    a = [w, 2.0 * w]
    b = (np.sin(w),)
    t = (*a, *b)
    first, *rest = (*t, w ** 2)
    return np.sum(t[0] * t[1] + t[2]) + np.sum(first * rest[-1])


def a_list_spread_with_an_item(w):
    xs = [w, w * w]
    return np.sum(np.stack([*xs, np.cos(w)]) ** 2) + np.sum(np.stack([np.tanh(w), *X[:2]]) * w)


def a_list_grown_by_appends_spread(w):
    hs = []
    for x in X[:3]:
        hs.append(np.tanh(x * w))
    ys = [w, *hs, *map(np.sin, hs)]
    return np.sum(np.stack(ys) * np.arange(1.0, 8.0)[:, None])


def spread_in_a_loop(w):
    hs = [w]
    for k in range(3):
        hs = [*hs, hs[-1] * np.sin(w) + k]
    t = ()
    for x in X[:2]:
        t = (*t, x * w)
    return np.sum(np.stack(hs)) + np.sum(np.stack(t) ** 2)


def _with_a_bias(first, *rest):
    return [*rest, first]


def spread_in_a_helper(w):
    ys = _with_a_bias(w, np.sin(w), X[0] * w)
    return np.sum(ys[0] * ys[2] + ys[1])


class Spread:
    def __init__(self, w):
        self.w = w

    def loss(self, xs):
        return np.sum(np.stack([*xs, self.w]) ** 3) + sum([*self.w])


SPREAD = [rows_of_an_array_spread, tuples_spread_and_joined, a_list_spread_with_an_item,
          a_list_grown_by_appends_spread, spread_in_a_loop, spread_in_a_helper]


@pytest.mark.parametrize("optimize", [True, False])
@pytest.mark.parametrize("f", SPREAD, ids=[f.__name__ for f in SPREAD])
def test_spread_in_displays(f, optimize):
    w = np.array([0.3, -0.7, 1.1])
    np.testing.assert_allclose(srcgrad.grad(f, optimize=optimize)(w), numerical_grad(f, (w,), 0),
                               rtol=1e-6, atol=1e-8)


def test_spread_in_displays_in_a_method():
    w = np.array([0.3, -0.7, 1.1])
    got = srcgrad.grad(lambda m, xs: m.loss(xs))(Spread(w), X)
    np.testing.assert_allclose(got.w, numerical_grad(lambda w: Spread(w).loss(X), (w,), 0), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("f", SPREAD, ids=[f.__name__ for f in SPREAD])
def test_spread_in_displays_float32_and_forward_mode(f):
    w, v = np.array([0.3, -0.7, 1.1]), np.array([1.0, 0.5, -0.2])
    got = srcgrad.grad(f)(w.astype(np.float32))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, numerical_grad(f, (w,), 0), rtol=2e-3, atol=1e-4)
    _, tangent = srcgrad.jvp(f)(w, v)
    np.testing.assert_allclose(tangent, numerical_grad(f, (w,), 0) @ v, rtol=1e-6, atol=1e-8)


def test_spread_of_a_tuple_argument():
    def f(params, x):
        t = (*params, x)
        return np.sum(t[0] * t[1] * t[2])
    w = np.array([0.3, -0.7, 1.1])
    got = srcgrad.grad(f)([w, 2.0 * w], X[0])
    np.testing.assert_allclose(got[0], 2.0 * w * X[0])
    np.testing.assert_allclose(got[1], w * X[0])


def test_a_copy_of_a_list_grown_by_appends_joined():
    # (`list(hs) + [w]`: the copy was not known as a list, and the join was refused)
    def f(w):
        hs = [np.sin(x * w) for x in X]
        return np.sum(np.stack(list(hs) + [w]) * w)
    w = np.array([0.3, -0.7, 1.1])
    np.testing.assert_allclose(srcgrad.grad(f)(w), numerical_grad(f, (w,), 0), rtol=1e-6, atol=1e-8)


def test_spread_where_list_is_not_the_builtin_is_refused():
    def f(w):
        list = None  # noqa: A001, F841
        return np.sum([*w])
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="list and tuple displays"):
        srcgrad.grad(f)(np.array([0.3, -0.7, 1.1]))


# ---- dict(pairs): dict(zip(keys, values)), dict(enumerate(xs)), dict(pairs, k=v) ------------
# (`dict(zip(...))` is `dict` of the list of its tuples, as `sorted(zip(...))` is; a keyword
# is an entry merged after them, `{**dict(pairs), "k": v}`)

def dict_of_zipped_keys_and_values(w):
    keys = ["a", "b"]
    d = dict(zip(keys, [w, np.sin(w)]))
    e = dict(zip(("p", "q", "r"), (w, 2.0 * w, X[0] * w)))
    return np.sum(d["a"] * d["b"]) + np.sum(e["p"] * e["q"] + e["r"])


def dict_of_zipped_rows_of_an_array(w):
    d = dict(zip(["x", "y"], X[:2] * w))
    return np.sum(d["x"] * d["y"])


def dict_of_zipped_appended_values(w):
    values = []
    for x in X[:3]:
        values.append(np.tanh(x * w))
    d = dict(zip("abc", values))
    total = 0.0
    for i, (k, v) in enumerate(d.items()):
        total = total + np.sum(v) * (i + 1.0)
    return total + np.sum(d["b"] ** 2)


def dict_of_enumerated_items(w):
    d = dict(enumerate([w, np.sin(w), np.cos(w)]))
    e = dict(enumerate(X @ w, start=1))
    return np.sum(d[0] * d[2] + d[1]) + e[1] * e[4]


def dict_of_pairs_with_keywords(w):
    d = dict(zip(["a", "b"], [w, np.sin(w)]), c=X[0] * w, a=w ** 2)  # (a keyword wins)
    return np.sum(d["a"] * d["b"] + d["c"])


def dict_of_pairs_then_written(w):
    d = dict(zip([0, 1], [w, w ** 2]))
    d[0] = d[0] * 3.0
    return np.sum(d[0] + d[1])


def dict_of_zipped_displays(w):
    # (a display of its entries, keys known when compiling; a repeated key keeps its first place
    # and its last value, as Python's)
    d = dict(zip(["a", "b", "a"], [w, np.sin(w), w ** 2]))
    e = dict([("x", w), ("y", 2.0 * w)])
    return np.sum(d["a"] * d["b"]) + np.sum(e["x"] * e["y"]) + len(d) * list(d)[1].count("b")


def _named(w, keys):
    return dict(zip(keys, [w, w * w]))


def dict_of_pairs_in_a_helper_and_a_loop(w):
    total = 0.0
    for k in range(2):
        d = _named(w * (k + 1.0), ("u", "v"))
        total = total + np.sum(d["u"] * 2.0 + d["v"])
    return total


class Named:
    def __init__(self, w):
        self.w = w

    def loss(self, names):
        d = dict(zip(names, [self.w, np.tanh(self.w)]))
        return np.sum(d[names[0]] * d[names[1]])


DICTS_OF_PAIRS = [dict_of_zipped_keys_and_values, dict_of_zipped_rows_of_an_array, dict_of_zipped_appended_values,
                  dict_of_enumerated_items, dict_of_pairs_with_keywords, dict_of_pairs_then_written,
                  dict_of_pairs_in_a_helper_and_a_loop, dict_of_zipped_displays]


@pytest.mark.parametrize("optimize", [True, False])
@pytest.mark.parametrize("f", DICTS_OF_PAIRS, ids=[f.__name__ for f in DICTS_OF_PAIRS])
def test_dict_of_pairs(f, optimize):
    w = np.array([0.3, -0.7, 1.1])
    np.testing.assert_allclose(srcgrad.grad(f, optimize=optimize)(w), numerical_grad(f, (w,), 0),
                               rtol=1e-6, atol=1e-8)


def test_dict_of_pairs_in_a_method():
    w = np.array([0.3, -0.7, 1.1])
    got = srcgrad.grad(lambda m, names: m.loss(names))(Named(w), ["s", "t"])
    np.testing.assert_allclose(got.w, numerical_grad(lambda w: Named(w).loss(["s", "t"]), (w,), 0), rtol=1e-6)


@pytest.mark.parametrize("f", DICTS_OF_PAIRS, ids=[f.__name__ for f in DICTS_OF_PAIRS])
def test_dict_of_pairs_float32_and_forward_mode(f):
    w, v = np.array([0.3, -0.7, 1.1]), np.array([1.0, 0.5, -0.2])
    got = srcgrad.grad(f)(w.astype(np.float32))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, numerical_grad(f, (w,), 0), rtol=2e-3, atol=1e-4)
    _, tangent = srcgrad.jvp(f)(w, v)
    np.testing.assert_allclose(tangent, numerical_grad(f, (w,), 0) @ v, rtol=1e-6, atol=1e-8)


def test_dict_of_zipped_displays_is_a_display_of_its_entries():
    w, v = np.array([0.3, -0.7, 1.1]), np.array([1.0, 0.5, -0.2])
    value, _ = srcgrad.value_and_grad(dict_of_zipped_displays)(w)
    assert value == dict_of_zipped_displays(w)
    code = srcgrad.source(srcgrad.grad(dict_of_zipped_displays), w)
    assert "d = {'a': " in code
    assert not any("dict(" in line for line in code.splitlines() if not line.lstrip().startswith("#"))
    eps = 1e-5  # (keys known when compiling: forward over reverse follows it)
    expected = (srcgrad.grad(dict_of_zipped_displays)(w + eps * v) - srcgrad.grad(dict_of_zipped_displays)(w - eps * v))
    np.testing.assert_allclose(srcgrad.hvp(dict_of_zipped_displays)(w, v), expected / (2 * eps), rtol=1e-5, atol=1e-7)


def test_dict_of_a_dict_argument_with_keywords():
    def f(p, w):
        d = dict(p, c=w * 2.0)
        return np.sum(d["a"] * d["c"]) + np.sum(d["b"])
    got = srcgrad.grad(f)({"a": X[0], "b": X[1]}, np.array([0.3, -0.7, 1.1]))
    np.testing.assert_allclose(got["a"], [0.6, -1.4, 2.2])
    np.testing.assert_allclose(got["b"], np.ones(3))
