"""Python that JAX and PyTorch users write: loop targets that unpack (``for w, b in
layers``), nested functions reading the values being differentiated (lambda lifted by
``transforms.desugar``), comprehensions in a conditional expression, and a dict's
methods.  Gradients against central differences, in loops, helpers, methods, float32,
forward mode too; what cannot be modelled is refused at its line."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from srcgrad.testing import check_grads

rng = np.random.default_rng(3)
X = rng.normal(size=3)
LAYERS = [(rng.normal(size=(3, 3)) * 0.5, rng.normal(size=3)) for _ in range(3)]
SCALES = [0.5, 1.5, -1.0]


def _jvp_matches_grad(f, args):
    """Forward mode along a random direction of ``args[0]`` agrees with reverse mode."""
    v = rng.normal(size=np.shape(args[0]))
    value, tangent = srcgrad.jvp(f)(*args, v)
    np.testing.assert_allclose(value, f(*args), rtol=1e-12)
    np.testing.assert_allclose(tangent, np.sum(srcgrad.grad(f)(*args) * v), rtol=1e-9, atol=1e-12)


# ---- loop targets that unpack ---------------------------------------------------

def mlp(x, layers):
    h = x
    for w, b in layers:
        h = np.tanh(h @ w + b)
    return np.sum(h ** 2)


def enumerated_pairs(x, layers):
    h = x
    for i, (w, b) in enumerate(layers):
        h = np.tanh(h @ w + b) * (i + 1)
    return np.sum(h)


def zipped_pairs(x, layers, scales):
    h = x
    for (w, b), s in zip(layers, scales):
        h = np.sin(h @ w) * s + b
    return np.sum(h)


def literal_pairs(x, layers):
    s = 0.0
    for name, c in [("a", 1.0), ("bb", 2.0)]:
        s = s + c * len(name) * np.sum(np.tanh(x * c))
    return s


def starred_rows(x, layers):
    s = 0.0
    for w, *rest in layers:
        s = s + np.sum(x @ w) * np.sum(rest[0])
    return s


def nested_assignment(x, layers):
    (w, b), (v, c) = layers[0], layers[1]
    return np.sum(np.tanh(x @ w + b) @ v + c)


def unpack_an_item(x, layers):
    p = layers[0]
    w, b = p  # (its adjoint comes back as one tuple: it was silently dropped)
    return np.sum(np.tanh(x @ w + b))


def _stack(x, layers):
    for w, b in layers:
        x = np.tanh(x @ w + b)
    return x


def through_a_helper(x, layers):
    return np.sum(_stack(x, layers) ** 2) + np.sum(_stack(x * 2.0, layers))


def items_known_at_run_time(x, layers):
    d = {f"layer{i}": w for i, (w, b) in enumerate(layers)}
    s = 0.0
    for k, w in d.items():
        s = s + len(k) * np.sum(np.tanh(x @ w))
    return s


UNPACKING = [mlp, enumerated_pairs, literal_pairs, starred_rows, nested_assignment, unpack_an_item,
             through_a_helper, items_known_at_run_time]


@pytest.mark.parametrize("f", UNPACKING, ids=lambda f: f.__name__)
def test_unpacking_loop_targets(f):
    check_grads(f, (X, LAYERS), wrt=(0, 1))
    _jvp_matches_grad(f, (X, LAYERS))


def test_unpacking_inside_zip():
    check_grads(zipped_pairs, (X, LAYERS, SCALES), wrt=(0, 1, 2))


def test_unpacking_in_float32():
    x32 = X.astype(np.float32)
    layers32 = [(w.astype(np.float32), b.astype(np.float32)) for w, b in LAYERS]
    g = srcgrad.grad(mlp, wrt=(0, 1))(x32, layers32)
    assert g[0].dtype == np.float32 and all(w.dtype == np.float32 for w, _ in g[1])
    np.testing.assert_allclose(g[0], srcgrad.grad(mlp)(X, LAYERS), rtol=1e-3, atol=1e-4)


class Net:
    def __init__(self, layers):
        self.layers = layers

    def loss(self, x):
        h = x
        for w, b in self.layers:
            h = np.tanh(h @ w + b)
        return np.sum(h)


def test_unpacking_in_a_method():
    net = Net(LAYERS)
    check_grads(net.loss, (X,), wrt=0)
    g = srcgrad.grad(Net.loss, wrt=0)(net, X)
    expected = srcgrad.grad(lambda x, layers: np.sum(_stack(x, layers)), wrt=1)(X, LAYERS)
    for (gw, gb), (ew, eb) in zip(g.layers, expected):
        np.testing.assert_allclose(gw, ew, rtol=1e-12)
        np.testing.assert_allclose(gb, eb, rtol=1e-12)


def test_unpacking_the_wrong_number_of_values_raises_as_python_does():
    triples = [(w, b, b) for w, b in LAYERS]
    with pytest.raises(ValueError, match="expected 2"):
        srcgrad.grad(mlp)(X, triples)


def sizes_unpacked(m):
    rows, cols = m.shape
    return np.sum(m * rows) / cols


def test_unpacking_a_shape_checks_only_what_ranks_leave_open():
    """`rows, cols = m.shape` of a matrix has two sizes: no length check in the code; of a
    vector or a cube, Python's ValueError, as the function itself raises."""
    m = np.arange(6.0).reshape(2, 3)
    g = srcgrad.grad(sizes_unpacked)
    np.testing.assert_allclose(g(m), np.full((2, 3), 2 / 3))
    assert "wrong number of values" not in srcgrad.source(g)
    for bad in (np.ones(3), np.ones((2, 2, 2))):
        with pytest.raises(ValueError):
            sizes_unpacked(bad)
        with pytest.raises(ValueError, match="unpack"):
            g(bad)


# ---- nested functions reading the values being differentiated ------------------

def closure(x):
    def g(v):
        return np.sin(v) * x
    return g(x).sum() + g(2 * x).sum()


def closure_rebound_between_calls(x):
    s = x

    def g(v):
        return np.sin(v) * s
    a = g(x)
    s = np.cos(x) * 2.0  # Python's g reads s when it is called: this one from here on
    b = g(x)
    return np.sum(a * b)


def closure_in_a_loop(x):
    h = x

    def g(v):
        return np.tanh(v * h)
    y = 0.0
    for _ in range(3):
        h = h * 1.5 + 0.1
        y = y + np.sum(g(x))
    return y


def closure_defined_in_a_loop(x):
    y = 0.0
    for k in range(3):
        c = x * (k + 1)

        def g(v):
            return np.sum(np.exp(v * c))
        y = y + g(0.1 * x)
    return y


def lambda_reading(x):
    act = lambda v: np.tanh(v * x)  # noqa: E731
    return np.sum(act(x) + act(act(x)))


def closure_calling_closure(x):
    w = x * 2.0

    def inner(v):
        return v * w

    def outer(v):
        return np.sin(inner(v)) * x
    return np.sum(outer(x) * outer(w))


def _with_a_closure(x):
    def sq(v):
        return v * x
    return np.sum(sq(x) ** 2)


def closure_in_a_helper(x):
    return _with_a_closure(x) + _with_a_closure(np.cos(x))


CLOSURES = [closure, closure_rebound_between_calls, closure_in_a_loop, closure_defined_in_a_loop, lambda_reading,
            closure_calling_closure, closure_in_a_helper]


@pytest.mark.parametrize("f", CLOSURES, ids=lambda f: f.__name__)
def test_closures_reading_differentiated_values(f):
    check_grads(f, (X,), wrt=0)
    _jvp_matches_grad(f, (X,))


@pytest.mark.parametrize("f", [closure, closure_rebound_between_calls], ids=lambda f: f.__name__)
def test_closures_in_float32(f):
    g = srcgrad.grad(f)(X.astype(np.float32))
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, srcgrad.grad(f)(X), rtol=1e-3, atol=1e-4)


class Scaled:
    def __init__(self, w):
        self.w = w

    def loss(self, x):
        w = self.w

        def layer(v):
            return np.tanh(v @ w)
        return np.sum(layer(layer(x)))


class Reading:
    def __init__(self, w):
        self.w = w

    def loss(self, x):
        def layer(v):
            return np.tanh(v @ self.w)  # reads `self` itself: passed first, never as `self=`
        return np.sum(layer(x) + layer(2 * x))


def test_closure_reading_self_in_a_method():
    w = LAYERS[0][0]
    g = srcgrad.grad(Reading.loss, wrt=0)(Reading(w), X)
    check_grads(lambda w: Reading(w).loss(X), (w,), wrt=0)
    np.testing.assert_allclose(g.w, srcgrad.grad(lambda w: Reading(w).loss(X))(w), rtol=1e-12)
    assert np.abs(g.w).max() > 0.1


def test_closure_in_a_method():
    model = Scaled(LAYERS[0][0])
    check_grads(model.loss, (X,), wrt=0)
    g = srcgrad.grad(Scaled.loss, wrt=0)(model, X)
    check_grads(lambda w: Scaled(w).loss(X), (LAYERS[0][0],), wrt=0)
    np.testing.assert_allclose(g.w, srcgrad.grad(lambda w: Scaled(w).loss(X))(LAYERS[0][0]), rtol=1e-12)


def closure_returned(x):
    def g(v):
        return v * x
    h = g
    return np.sum(h(x))


def closure_assigning_nonlocal(x):
    s = x

    def g(v):
        nonlocal s
        s = s * v
        return s
    return np.sum(g(x))


@pytest.mark.parametrize("f, words", [
    (closure_returned, "is used other than by calling it"),
    (closure_assigning_nonlocal, "`nonlocal`"),
], ids=lambda v: getattr(v, "__name__", ""))
def test_closures_that_cannot_be_modelled_are_refused_at_the_line(f, words):
    with pytest.raises(srcgrad.UnsupportedSyntaxError) as info:
        srcgrad.grad(f)(X)
    assert words in str(info.value) and "test_unpacking_and_closures.py" in str(info.value)


# ---- a comprehension in a conditional expression -------------------------------

def axes_or_all(x, axis=None):
    n = x.ndim
    ax = tuple(range(n)) if axis is None else tuple(a % n for a in axis)
    return np.sum(np.sum(x ** 2, axis=ax))


def branch_of_comprehensions(x, layers):
    y = 0.0
    for k in range(2):
        hs = [np.tanh(x @ w) for w, _ in layers] if k == 0 else [x * b for _, b in layers]
        y = y + np.sum(np.stack(hs) ** 2)
    return y


def test_comprehension_in_a_conditional_expression():
    m = rng.normal(size=(2, 3))
    check_grads(axes_or_all, (m,), wrt=0)
    check_grads(axes_or_all, (m, (-1,)), wrt=0)
    check_grads(branch_of_comprehensions, (X, LAYERS), wrt=(0, 1))
    _jvp_matches_grad(branch_of_comprehensions, (X, LAYERS))


# ---- a dict given to two helpers, its defaults, and keys known at run time --------

def _get(d, key):
    return d.get(key) * 2.0


def _values(d):
    total = 0.0
    for v in d.values():
        total = total + np.sum(v ** 2)
    return total


def dict_to_two_helpers(w):
    d = {"a": w, "b": w * 3.0}
    return np.sum(_get(d, "b") ** 2) + _values(d)


def get_with_a_default(w):
    d = {"b": w * 3.0}
    return np.sum(d.get("a", np.ones(3)) * w) + np.sum(d.get("b", w) ** 2)


def values_keys_known_at_run_time(w, names):
    d = {}
    for k in names:
        d[k] = w * len(k)
    s = 0.0
    for v in d.values():
        s = s + np.sum(np.sin(v))
    for k in d.keys():
        s = s + np.sum(d[k] ** 2)
    return s


def test_dict_methods():
    for f in (dict_to_two_helpers, get_with_a_default):
        check_grads(f, (X,), wrt=0)
        _jvp_matches_grad(f, (X,))
    check_grads(values_keys_known_at_run_time, (X, ["a", "bb"]), wrt=0)
    _jvp_matches_grad(values_keys_known_at_run_time, (X, ["a", "bb"]))


# ---- a closure made in another function, called by the differentiated one: inlined, its
# cells' data read live, the functions they hold guarded (rebound: compiled again)

def _made(scale, act):
    def shaped(x):
        return act(x) * scale

    def set_scale(s):
        nonlocal scale
        scale = s

    def set_act(a):
        nonlocal act
        act = a
    return shaped, set_scale, set_act


def test_a_closure_callee_reads_its_cells_as_they_are():
    shaped, set_scale, set_act = _made(np.array([1.0, 2.0]), np.tanh)

    def loss(x):
        return np.sum(shaped(x) ** 2)
    g, x = srcgrad.grad(loss), np.array([0.3, -0.7])
    np.testing.assert_allclose(g(x), 2 * np.tanh(x) * np.array([1.0, 4.0]) / np.cosh(x) ** 2, rtol=1e-12)
    assert "dispatch" not in srcgrad.source(g, x) and "_vjp" not in srcgrad.source(g, x)  # (inlined)
    set_scale(np.array([3.0, 1.0]))
    np.testing.assert_allclose(g(x), 2 * np.tanh(x) * np.array([9.0, 1.0]) / np.cosh(x) ** 2, rtol=1e-12)
    set_act(np.sin)
    np.testing.assert_allclose(g(x), 2 * np.sin(x) * np.array([9.0, 1.0]) * np.cos(x), rtol=1e-12)
    set_scale(2.0)  # (a number now: the code is specialised on the kind, and compiled again)
    np.testing.assert_allclose(g(x), 8 * np.sin(x) * np.cos(x), rtol=1e-12)
    np.testing.assert_allclose(srcgrad.hessian(loss)(x), np.diag(8 * np.cos(2 * x)), rtol=1e-12, atol=1e-14)


def test_a_closure_callee_changed_during_the_call_is_refused():
    shaped, _, set_act = _made(np.array([1.0, 2.0]), np.tanh)

    def loss(x):
        a = shaped(x)
        set_act(np.sin)
        return np.sum(a ** 2) + np.sum(shaped(x))
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="changed, while the differentiated code ran"):
        srcgrad.grad(loss)(np.array([0.3, -0.7]))


def _two_closures(a, b):
    first = lambda x: np.tanh(x) * a  # noqa: E731
    second = lambda x: np.sin(x) * b  # noqa: E731
    return lambda x: np.sum(first(x) * second(x))


def test_two_closures_of_one_maker_keep_their_own_cells():
    f = _two_closures(np.array([1.0, 2.0]), np.array([3.0, -1.0]))
    x = np.array([0.4, -0.9])
    check_grads(f, (x,))
    g = _two_closures(0.5, 2.0)  # the same code, other cells
    check_grads(g, (x,))
    np.testing.assert_allclose(srcgrad.grad(g)(x), np.sin(x) / np.cosh(x) ** 2 + np.tanh(x) * np.cos(x),
                               rtol=1e-12)


def test_second_and_third_derivatives_through_closures():
    """negative_binomial_maxlike.py's fit in small: rprime = lambda r: grad(loglike)(r, p(r)),
    loglike and p closures over the data."""
    def fit(x):
        loglike = lambda r, p: np.sum(np.log(r + x) * p - r * np.log1p(p) + x * np.log(p))  # noqa: E731
        p = lambda r: np.sum(x) / np.sum(r + x)  # noqa: E731
        return lambda r: srcgrad.grad(loglike)(r, p(r))
    rprime = fit(np.array([1.0, 4.0, 7.0, 2.0, 12.0, 0.0, 3.0]))
    first, eps = srcgrad.grad(rprime), 1e-5
    second = srcgrad.grad(first)
    for r in (0.8, 2.0):
        np.testing.assert_allclose(first(r), (rprime(r + eps) - rprime(r - eps)) / (2 * eps), rtol=1e-7)
        np.testing.assert_allclose(second(r), (first(r + eps) - first(r - eps)) / (2 * eps), rtol=1e-6)
