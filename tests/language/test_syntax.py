"""Python's conveniences (comprehensions, generators, walrus, chained assignment),
lowered by ``transforms.desugar``: gradients against central finite differences,
in loops, helpers and methods, in float32; what is not lowered is refused at its line."""
from __future__ import annotations

import gast
import numpy as np
import pytest

import srcgrad
from srcgrad import nodes
from srcgrad.testing import check_grads
from srcgrad.transforms import desugar, parse

rng = np.random.default_rng(0)
X = rng.normal(size=3)
WS = [rng.normal(size=(3, 3)) for _ in range(3)]


def list_comp(x, ws):
    hs = [np.tanh(x @ w) for w in ws]
    return np.sum(np.stack(hs))


def list_comp_if(x, ws):
    hs = [np.sin(w) * x for w in ws if np.sum(w) > -100.0]
    return np.sum(np.stack(hs) ** 2)


def sum_generator(x, ws):
    return sum(np.sum((w @ x) ** 2) for w in ws)


def sum_generator_start(x, ws):
    return sum((np.sum(w * x) for w in ws), np.sum(x))


def nested(x, ws):
    m = [[np.sum(w * v) for v in ws] for w in ws]
    return sum(sum(e for e in row) for row in m) * np.sum(x)


def two_generators(x, ws):
    return sum(np.sum(a @ b @ x) for a in ws for b in ws if a is not b)


def enumerated(x, ws):
    return sum(np.sum(w @ x) * (i + 1) for i, w in enumerate(ws))


def zipped(x, ws):
    return sum(np.sum(w * v) for w, v in zip(ws, [x, x * 2, x * 3]))


def in_loop(x, ws):
    s = 0.0
    for k in range(2):
        s = s + sum(np.sum(np.tanh(w @ x) * k) for w in ws)
    return s


def helper(x, ws):
    return sum_generator(x, ws) * 2


def dict_of_inactive(x, ws):
    scale = {i: float(i + 1) for i in range(len(ws))}
    return sum(np.sum(w @ x) * scale[i] for i, w in enumerate(ws))


def walrus(x, ws):
    if (n := np.sum(x ** 2)) > 0.0:
        y = n * 3
    else:
        y = n
    return y + sum(np.sum(t) for w in ws if np.sum(t := w * x) > -100.0)


def chained(x, ws):
    a = b = x * 2
    c = d = e = a * b
    return np.sum(c * d * e)


class Layer:
    def __init__(self, w):
        self.w = w

    def __call__(self, x):
        return np.tanh(x @ self.w)


class Model:
    def __init__(self, ws):
        self.layers = [Layer(w) for w in ws]

    def loss(self, x):
        return sum(np.sum(h) for h in [layer(x) for layer in self.layers])


def nested_flat(x, ws):
    m = [np.sum(w * v) for v in [np.tanh(u @ x) for u in ws] for w in ws]
    return sum(e for e in m)


CASES = [list_comp, list_comp_if, sum_generator, sum_generator_start, nested_flat, two_generators, enumerated,
         zipped, in_loop, helper, dict_of_inactive, walrus, chained]


@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("wrt", [0, 1])
def test_gradients(f, wrt):
    check_grads(f, (X, WS), wrt=wrt, rtol=1e-5)


def test_nested_list_of_lists():
    check_grads(nested, (X, WS), wrt=(0, 1))
    check_grads(nested, (X.astype(np.float32), [w.astype(np.float32) for w in WS]), wrt=(0, 1), rtol=1e-2,
                atol=1e-2)


def index_from_the_end_at_run_time(xs, x):
    k = len(xs) - 3  # -1 here: a key of xs's own items is xs's last
    return np.sum(xs[k] * x) + np.sum(xs[1])


@pytest.mark.parametrize("kind", [tuple, list])
def test_index_counted_from_the_end_known_at_run_time(kind):
    xs = kind([X, X * 2])
    g = srcgrad.grad(index_from_the_end_at_run_time)(xs, X)
    np.testing.assert_allclose(g[1], X + 1.0)  # (was silently 1.0: the adjoint went to key -1)
    np.testing.assert_allclose(g[0], 0.0)
    check_grads(index_from_the_end_at_run_time, (xs, X), wrt=(0, 1))


@pytest.mark.parametrize("f", [list_comp, sum_generator, nested_flat, chained, walrus], ids=lambda f: f.__name__)
def test_float32_stays_float32(f):
    x, ws = X.astype(np.float32), [w.astype(np.float32) for w in WS]
    g = srcgrad.grad(f, wrt=(0, 1))(x, ws)
    assert g[0].dtype == np.float32 and all(w.dtype == np.float32 for w in g[1])
    g64 = srcgrad.grad(f, wrt=(0, 1))(X, WS)
    np.testing.assert_allclose(g[0], g64[0], rtol=1e-3, atol=1e-4)


def test_method_over_layers():
    model = Model(WS)
    g = srcgrad.grad(Model.loss, wrt=1)(model, X)
    check_grads(lambda x: Model.loss(model, x), (X,), wrt=0)
    expected = srcgrad.grad(lambda x: sum(np.sum(np.tanh(x @ w)) for w in WS))(X)
    np.testing.assert_allclose(g, expected, rtol=1e-12)


def scoping(x, ws):
    w = 2.0
    t = [w * x for w in ws]  # Python 3: this `w` is the comprehension's own
    i = 10
    u = [np.sum(x) * i for i in range(3)]
    return np.sum(t[0]) * w + u[2] * i


def test_comprehension_variables_neither_leak_nor_clash():
    assert scoping(X, WS) == pytest.approx(np.sum(2.0 * 0 + WS[0] * X) * 2.0 + np.sum(X) * 2 * 10)
    check_grads(scoping, (X, WS), wrt=(0, 1))


def shadowed(xs):
    return sum(np.sum(x) * len(x) for x in [[x * k for k in range(3)] for x in xs])


def test_nested_comprehension_rebinding_its_outer_variable():
    xs = [X, X * 2]
    check_grads(shadowed, (xs,), wrt=0)


def test_desugared_source():
    def f(x, ws):
        hs = [layer(x) for layer in ws if layer is not None]
        return sum(np.sum(h) for h in hs)
    fdef = parse.transform(f)
    desugar.transform(fdef, f)
    assert nodes.to_source(gast.Module(body=fdef.body, type_ignores=[])).strip() == (
        "hs = []\n"
        "for layer in ws:\n"
        "    if layer is not None:\n"
        "        hs.append(layer(x))\n"
        "_total = 0\n"
        "for h in hs:\n"
        "    _total = _total + np.sum(h)\n"
        "return _total")


def test_calls_before_a_comprehension_keep_their_order():
    def f(x, ws):
        return np.sum(logged(x)) + sum(np.sum(logged(w) @ x) for w in ws)
    CALLS.clear()
    srcgrad.grad(f)(X, WS)
    assert CALLS == [(3,), (3, 3), (3, 3), (3, 3)]


CALLS = []


def logged(v):
    CALLS.append(v.shape)
    return v


def generator_to_stack(x, ws):
    return np.sum(np.stack(np.tanh(w @ x) for w in ws))


def conditional_comprehension(x, ws):
    return np.sum(x) if len(ws) == 0 else sum(np.sum(w @ x) for w in ws)


def test_comprehension_in_a_conditional_expression():
    check_grads(conditional_comprehension, (X, WS), wrt=(0, 1))
    check_grads(conditional_comprehension, (X, []), wrt=0)


def comprehension_after_and(x, ws):
    hs = len(ws) > 0 and [w @ x for w in ws]
    return np.sum(np.stack(hs))


def comprehension_in_while(x, ws):
    k = 0
    while k < len([w for w in ws]):
        k += 1
    return np.sum(x) * k


@pytest.mark.parametrize("f, words", [
    (generator_to_stack, "pass a list comprehension"),
    (comprehension_after_and, "evaluated on some paths only"),
    (comprehension_in_while, "compute it into a name before the loop"),
], ids=lambda v: getattr(v, "__name__", ""))
def test_refused_at_the_line(f, words):
    with pytest.raises(srcgrad.UnsupportedSyntaxError) as info:
        srcgrad.grad(f)(X, WS)
    assert words in str(info.value) and "test_syntax.py" in str(info.value)


def dict_comprehension(p):
    q = {k: v * 2 for k, v in p.items()}
    return np.sum(q["a"] * q["b"])


def test_dict_comprehension_of_differentiated_values():
    check_grads(dict_comprehension, ({"a": X, "b": X * 3},), wrt=0)


# ---- starred unpacking: `first, *rest = xs` ----------------------------------------------
def starred(x, ws):
    first, *rest = ws
    return np.sum(np.tanh(first @ x)) + sum(np.sum((w @ x) ** 2) for w in rest)


def starred_middle(x, ws):
    a, *mid, c = [x * 2.0, np.sin(x), x ** 2, np.tanh(ws[0] @ x)]
    return np.sum(a * c) + np.sum(np.stack(mid) ** 2)


def starred_in_loop(x, ws):
    total = 0.0
    for w in ws:
        head, *tail = [w @ x, np.sin(w @ x), x]
        total = total + np.sum(head * tail[0]) + np.sum(tail[1])
    return total


def _split_first(ws):
    first, *rest = ws
    return first, rest


def starred_through_helper(x, ws):
    first, rest = _split_first(ws)
    return np.sum(first @ x) * sum(np.sum(w * x) for w in rest)


class Unpacking:
    def __init__(self, ws):
        self.ws = ws

    def loss(self, x):
        *front, last = self.ws
        return np.sum(np.tanh(last @ x)) + sum(np.sum(w @ x) for w in front)


STARRED = [starred, starred_middle, starred_in_loop, starred_through_helper]


@pytest.mark.parametrize("f", STARRED, ids=lambda f: f.__name__)
@pytest.mark.parametrize("wrt", [0, 1])
def test_starred_unpacking(f, wrt):
    check_grads(f, (X, WS), wrt=wrt, rtol=1e-5)


@pytest.mark.parametrize("f", STARRED, ids=lambda f: f.__name__)
def test_starred_unpacking_float32(f):
    x, ws = X.astype(np.float32), [w.astype(np.float32) for w in WS]
    g = srcgrad.grad(f, wrt=(0, 1))(x, ws)
    assert g[0].dtype == np.float32 and all(w.dtype == np.float32 for w in g[1])
    np.testing.assert_allclose(g[0], srcgrad.grad(f)(X, WS), rtol=1e-3, atol=1e-4)


def test_starred_unpacking_in_a_method():
    model = Unpacking(WS)
    check_grads(model.loss, (X,), wrt=0)
    g = srcgrad.grad(Unpacking.loss, wrt=0)(model, X)
    eps = 1e-6
    bumped = [w.copy() for w in WS]
    bumped[-1][0, 1] += eps
    lower = [w.copy() for w in WS]
    lower[-1][0, 1] -= eps
    fd = (Unpacking(bumped).loss(X) - Unpacking(lower).loss(X)) / (2 * eps)
    np.testing.assert_allclose(g.ws[-1][0, 1], fd, rtol=1e-6)


def test_starred_target_missing_is_an_error_not_a_value():
    def short(x, ws):
        a, *b, c = ws
        return np.sum(a * x) + np.sum(c * x)
    with pytest.raises(ValueError, match="values to unpack"):  # as Python
        srcgrad.grad(short)(X, [X])


# ---- assert, raise, with, lambda: run in the forward sweep / lowered to a nested def ------
class Timer:
    def __init__(self):
        self.entered = self.left = 0

    def __enter__(self):
        self.entered += 1
        return self

    def __exit__(self, *exc):
        self.left += 1
        return False


TIMER = Timer()


def checked(x, ws):
    assert x.shape == (3,), f"x has shape {x.shape}"
    h = x
    for w in ws:
        assert np.all(np.isfinite(h)), "not finite"
        if np.sum(h ** 2) > 1e6:
            raise ValueError(f"diverged: {np.sum(h)}")
        h = np.tanh(h @ w)
    return np.sum(h)


def managed(x, ws):
    with np.errstate(divide="ignore"), TIMER as t:
        y = np.log(x * x) * (t.entered > 0)
    for w in ws:
        with TIMER:
            y = np.tanh(y @ w)
    return np.sum(y ** 2)


def lambdas(x, ws):
    act = lambda v: np.maximum(v, 0.0) + np.tanh(v)  # noqa: E731
    h = act(x @ ws[0])
    for w in ws[1:]:
        h = act(h @ w)
    return np.sum(h ** 2)


def through_helper(x, ws):
    return checked(x, ws) + managed(x, ws) * lambdas(x, ws)


class Checked:
    def __init__(self, ws):
        self.ws = ws

    def loss(self, x):
        assert len(self.ws) > 0
        with TIMER:
            act = lambda v: np.tanh(v)  # noqa: E731
            return_value = sum(np.sum(act(w @ x)) for w in self.ws)
        return return_value


def sum_start_keyword(x, ws):
    return sum((np.sum(w @ x) for w in ws), start=np.sum(x ** 2))


FORWARD_ONLY = [checked, managed, lambdas, through_helper, sum_start_keyword]


@pytest.mark.parametrize("f", FORWARD_ONLY, ids=lambda f: f.__name__)
@pytest.mark.parametrize("wrt", [0, 1])
def test_forward_only_statements(f, wrt):
    check_grads(f, (X, WS), wrt=wrt, rtol=1e-5)


@pytest.mark.parametrize("f", FORWARD_ONLY, ids=lambda f: f.__name__)
def test_forward_only_statements_float32(f):
    x, ws = X.astype(np.float32), [w.astype(np.float32) for w in WS]
    g = srcgrad.grad(f, wrt=(0, 1))(x, ws)
    assert g[0].dtype == np.float32 and all(w.dtype == np.float32 for w in g[1])
    np.testing.assert_allclose(g[0], srcgrad.grad(f)(X, WS), rtol=1e-3, atol=1e-4)


def test_forward_only_statements_in_a_method():
    model = Checked(WS)
    check_grads(model.loss, (X,), wrt=0)
    g = srcgrad.grad(Checked.loss, wrt=1)(model, X)
    np.testing.assert_allclose(g, srcgrad.grad(lambda x: sum(np.sum(np.tanh(w @ x)) for w in WS))(X), rtol=1e-12)


def test_assert_and_raise_run_in_the_forward_sweep():
    with pytest.raises(AssertionError, match=r"x has shape \(4,\)"):
        srcgrad.grad(checked)(np.ones(4), [np.eye(4)])
    with pytest.raises(ValueError, match="diverged"):
        srcgrad.grad(checked)(X * 1e4, [np.eye(3)])
    value, _ = srcgrad.value_and_grad(checked)(X, WS)
    assert value == pytest.approx(checked(X, WS))


def test_with_enters_and_leaves_once_per_run():
    TIMER.entered = TIMER.left = 0
    srcgrad.grad(managed)(X, WS)
    assert TIMER.entered == TIMER.left == 1 + len(WS)
    # The block's own setting held in the forward sweep (the backward one runs outside it), and was undone.
    with np.errstate(divide="raise", invalid="ignore"):
        srcgrad.grad(managed)(np.array([0.0, 1.0, 2.0]), WS)
        with pytest.raises(FloatingPointError):
            np.log(np.zeros(1))


class Holding:
    def __init__(self, v):
        self.v = v

    def __enter__(self):
        return self.v

    def __exit__(self, *exc):
        return False


def manager_given_active(x, ws):
    with Holding(x * 2) as v:
        y = np.sum(v)
    return y


def lambda_capturing_ws(x, ws):
    lin = lambda v: v @ ws[0]  # noqa: E731
    return np.sum(lin(x))


def test_lambda_capturing_a_differentiated_value():
    check_grads(lambda_capturing_ws, (X, WS), wrt=(0, 1))


def lambda_as_argument(x, ws):
    # (A lambda is made by a statement of its own, a nested function, where Python makes it:
    # tests/language/test_lambda_arguments.py.  A default computed from a value being differentiated is
    # held by the function object, which srcgrad does not follow.)
    return np.sum(_apply(lambda w, s=np.sum(x): w * s, ws[0]) @ x)


def _apply(f, w):
    return f(w)


def leaving_a_with_block(x, ws):
    with TIMER:
        if np.sum(x) > 0:
            return np.sum(x)  # (early, from inside the block: refused)
        y = np.sum(x ** 2)
    return y


@pytest.mark.parametrize("f, words", [
    (manager_given_active, "context manager is given, or gives, a value being differentiated"),
    (lambda_as_argument, "this lambda reads `x`"),
    (leaving_a_with_block, "cannot leave a `with` block early"),
], ids=lambda v: getattr(v, "__name__", ""))
def test_forward_only_statements_refused_at_the_line(f, words):
    with pytest.raises(srcgrad.UnsupportedSyntaxError) as info:
        srcgrad.grad(f, wrt=(0, 1))(X, WS)
    assert words in str(info.value) and "test_syntax.py" in str(info.value)


# ---- `return` as the last statement of a `with` block: evaluated inside, returned after `__exit__` ----
def returning_from_a_with_block(x, ws):
    with np.errstate(divide="ignore"), TIMER:
        return np.sum(np.tanh(np.log(x * x) @ ws[0]))


def _causal_mask(n):
    with np.errstate(divide="ignore"):  # (log 0 = -inf: the example's own mask)
        return np.log(np.tril(np.ones((n, n))))


class CachedMask(srcgrad.nn.Module):
    """The word-language-model Transformer's way: a mask made by a method under
    `np.errstate`, cached on the model at the first call."""

    def __init__(self):
        self.lin, self.mask = srcgrad.nn.Linear(3, 3), None

    def causal_mask(self, n):
        with np.errstate(divide="ignore"):
            return np.log(np.tril(np.ones((n, n))))

    def forward(self, x):
        if self.mask is None:
            self.mask = self.causal_mask(len(x))
        scores = self.lin(x) @ x.T + self.mask + _causal_mask(len(x))
        return np.sum(np.exp(np.maximum(scores, -30.0)) ** 2)


def _cached_mask_loss(model, x):
    return model(x)


@pytest.mark.parametrize("mode", ["grad", "value_and_grad", "jvp"])
def test_return_at_the_end_of_a_with_block(mode):
    TIMER.entered = TIMER.left = 0
    x = np.array([0.5, 0.0, 2.0])  # (log 0 in the block, which ignores it)
    with np.errstate(divide="raise", invalid="ignore"):  # (outside it, a division by zero raises)
        if mode == "jvp":
            srcgrad.jvp(returning_from_a_with_block, wrt=1)(x, WS, [np.ones((3, 3))])
        else:
            getattr(srcgrad, mode)(returning_from_a_with_block, wrt=1)(x, WS)
        with pytest.raises(FloatingPointError):
            np.log(np.zeros(1))  # (the block's setting was undone)
    assert TIMER.entered == TIMER.left == 1
    check_grads(returning_from_a_with_block, (X, WS), wrt=(0, 1))


def test_a_mask_made_under_errstate_and_cached_on_the_model():
    model, x = CachedMask(), np.random.default_rng(0).standard_normal((4, 3))
    first = srcgrad.grad(_cached_mask_loss)(model, x)  # (makes the mask: stored with no adjoint)
    assert np.isneginf(model.mask[0, 1]) and model.mask[1, 0] == 0.0 and first.mask is None
    check_grads(_cached_mask_loss, (model, x), wrt=(0, 1))  # (then a field like any other)


# ---- an exception raised inside a `with` block reaches __exit__ (with rt.managed(m): ...) -----------
def raising_inside_errstate(x, ws):
    h = x
    for w in ws:
        with np.errstate(all="ignore"):
            z = h @ w
            if np.max(np.abs(z)) > 100.0:
                raise ValueError("too large")
            h = np.tanh(z)
    return np.sum(h ** 2)


def calls_a_raising_helper(x, ws):
    return raising_inside_errstate(x * 2.0, ws) + np.sum(x)


@pytest.mark.parametrize("f", [raising_inside_errstate, calls_a_raising_helper], ids=lambda f: f.__name__)
@pytest.mark.parametrize("mode", ["grad", "value_and_grad", "vjp", "jvp"])
def test_an_exception_in_a_with_block_reaches_exit(f, mode):
    big = [np.eye(3) * 1e3, np.eye(3)]
    before = np.geterr()
    make = getattr(srcgrad, mode)
    run = (lambda x, ws: make(f)(x, ws, np.ones(3))) if mode == "jvp" else make(f)
    with pytest.raises(ValueError, match="too large"):
        run(np.ones(3), big)
    assert np.geterr() == before  # the errstate of the block was undone
    check_grads(f, (X, WS), wrt=(0, 1))
    g32 = srcgrad.grad(f)(X.astype(np.float32), [w.astype(np.float32) for w in WS])
    assert g32.dtype == np.float32


class Suppressing:
    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        return True


def suppressing(x, ws):
    y = np.sum(x)
    with Suppressing():
        y = np.sum(x @ ws[0])
        if y > -1e9:
            raise ValueError("skipped")
        y = y * 3.0
    return y


def test_a_manager_that_suppresses_an_exception_is_refused():
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match=r"test_syntax.py:\d+ suppressed ValueError"):
        srcgrad.grad(suppressing)(X, WS)
    TIMER.entered = TIMER.left = 0
    srcgrad.grad(managed)(X, WS)  # (one that does not suppress runs as before)
    assert TIMER.entered == TIMER.left == 1 + len(WS)


def test_with_blocks_are_with_statements_in_the_generated_code():
    text = srcgrad.source(srcgrad.grad(managed), X, WS)
    assert "    with rt.managed(_t1, where='test_syntax.py:" in text
    assert "rt.enter" not in text and "rt.leave" not in text


# ---- dicts of differentiated values built in the function: d[k] = v, comprehensions, reads --------
def dict_written(x, ws):
    d = {}
    d["a"] = x @ ws[0]
    d["b"] = np.sin(x)
    d["a"] = d["a"] * 2.0  # overwritten: the first value's adjoint is only through this one
    d["b"] += x
    return np.sum(d["a"] * d.get("b")) + np.sum(d.get("c", x) ** 2)


def dict_in_a_loop(x, ws):
    d = {}
    for i, w in enumerate(ws):
        d[i] = np.tanh(w @ x)
        if i > 0:
            d[i] = d[i] * d[i - 1]
    return sum(np.sum(v ** 2) for v in d.values()) + np.sum(d[len(ws) - 1])


def dict_comprehension_read_back(x, ws):
    d = {f"w{i}": w @ x for i, w in enumerate(ws)}
    s = sum(np.sum(v * v) for v in d.values())
    for k in d:
        s = s + np.sum(np.cos(d[k]))
    return s


def _make_dict(x, ws):
    return {"h": np.tanh(ws[0] @ x), "y": {k: x * k for k in (1.0, 2.0)}}


def dict_from_a_helper(x, ws):
    d = _make_dict(x, ws)
    d["h"] = d["h"] + d["y"][2.0]
    return np.sum(d["h"] ** 2)


def dict_written_in_a_branch(x, ws):
    d = {"a": x}
    if np.sum(x) > 0:
        d["a"] = d["a"] * 3.0
    else:
        d["b"] = x
    return sum(np.sum(v) for v in d.values())


class DictModel:
    def __init__(self, ws):
        self.ws = ws

    def loss(self, x):
        acts = {}
        for i, w in enumerate(self.ws):
            acts[i] = np.tanh(w @ x)
        return sum(np.sum(a) for a in acts.values())


DICTS = [dict_written, dict_in_a_loop, dict_comprehension_read_back, dict_from_a_helper, dict_written_in_a_branch]


@pytest.mark.parametrize("f", DICTS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("wrt", [0, 1])
def test_dicts_of_differentiated_values(f, wrt):
    check_grads(f, (X, WS), wrt=wrt, rtol=1e-5)
    check_grads(f, (-X, WS), wrt=wrt, rtol=1e-5)  # (the other branch)


@pytest.mark.parametrize("f", DICTS, ids=lambda f: f.__name__)
def test_dicts_float32(f):
    x, ws = X.astype(np.float32), [w.astype(np.float32) for w in WS]
    g = srcgrad.grad(f, wrt=(0, 1))(x, ws)
    assert g[0].dtype == np.float32 and all(w.dtype == np.float32 for w in g[1])
    np.testing.assert_allclose(g[0], srcgrad.grad(f)(X, WS), rtol=1e-3, atol=1e-4)


def test_dict_in_a_method():
    model = DictModel(WS)
    check_grads(model.loss, (X,), wrt=0)
    g = srcgrad.grad(DictModel.loss, wrt=0)(model, X)
    expected = srcgrad.grad(lambda ws: sum(np.sum(np.tanh(w @ X)) for w in ws))(WS)
    for a, b in zip(g.ws, expected):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def dict_shared(x, ws):
    d = {"a": x}
    e = d
    d["a"] = x * 2.0
    return np.sum(e["a"])


def test_writing_into_a_shared_dict_is_refused_at_the_line():
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="cannot write into the dict `d` here") as info:
        srcgrad.grad(dict_shared)(X, WS)
    assert "test_syntax.py" in str(info.value)


def items_of_a_dict_with_keys_known_at_run_time(x, ws):
    d = {f"w{i}": w @ x for i, w in enumerate(ws)}
    return sum(np.sum(v) * len(k) for k, v in d.items())


def test_items_of_a_dict_with_keys_known_at_run_time():
    # (known keys, `{'a': ..}` or a dict passed in, are iterated as a zip; see test_structures.py)
    check_grads(items_of_a_dict_with_keys_known_at_run_time, (X, WS), wrt=(0, 1))


def returns_a_dict(x, ws):
    d = {}
    d["loss"] = np.sum(np.tanh(ws[0] @ x) ** 2)
    d["h"] = x * 2.0
    return d


def test_a_returned_dict():
    with pytest.raises(srcgrad.errors.NonScalarOutputError, match="returned a dict"):
        srcgrad.grad(returns_a_dict)(X, WS)  # (was silently zeros: np.ndim of a dict is 0)
    value, pullback = srcgrad.vjp(returns_a_dict)(X, WS)
    assert set(value) == {"loss", "h"}
    g = pullback({"loss": 1.0, "h": np.ones(3)})
    expected = srcgrad.grad(lambda x: np.sum(np.tanh(WS[0] @ x) ** 2) + np.sum(x * 2.0))(X)
    np.testing.assert_allclose(g, expected, rtol=1e-12)
    (loss, aux), g = srcgrad.value_and_grad(lambda x, ws: (returns_a_dict(x, ws)["loss"], returns_a_dict(x, ws)),
                                            has_aux=True)(X, WS)
    assert aux["loss"] == pytest.approx(loss)
