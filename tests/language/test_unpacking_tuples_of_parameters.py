"""Unpacking tuples of parameters as PyTorch and JAX users write them: `w, b = params[0]`,
`for w, b in params`, over `reversed(...)`, an unpacked part unpacked again; each gradient
checked against central finite differences in float64."""

import numpy as np
import pytest

import srcgrad
from srcgrad import errors, nn


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


# ---- silently wrong: unpacking a tuple read from a list or dict argument ----------------
# `w, b = params[0]` (JAX's layers as a list of (w, b) tuples): the backward sweep builds the
# sparse adjoint `params_bar = {0: (w_bar, b_bar)}`, and the gradient returned is all zeros.
# `p = params[0]; p[0]` and `for p in params: w, b = p` are right.

W3, B3 = np.array([1.0, 2.0, 3.0]), np.array([0.1, 0.2, 0.3])


def unpacks_an_entry_of_a_list(params, x):
    w, b = params[0]
    return np.sum(w * x + b)


def unpacks_the_last_entry(params, x):
    w, b = params[-1]
    return np.sum(w * x + b)


def unpacks_an_entry_through_a_name(params, x):
    layer = params[0]
    w, b = layer
    return np.sum(w * x + b)


def unpacks_an_entry_of_a_dict(params, x):
    w, b = params["layer"]
    return np.sum(w * x + b)


class PairsModel(nn.Module):
    def __init__(self):
        self.params = [(W3.copy(), B3.copy())]

    def forward(self, x):
        w, b = self.params[0]
        return np.sum(w * x + b)


def test_unpacking_a_tuple_read_from_a_model_attribute():
    g = srcgrad.grad(call_model)(PairsModel(), X3)
    np.testing.assert_allclose(g.params[0][0], X3)
    np.testing.assert_allclose(g.params[0][1], np.ones(3))


def call_model(model, x):
    return model(x)


@pytest.mark.parametrize("f, params", [
    (unpacks_an_entry_of_a_list, [(W3, B3)]),
    (unpacks_an_entry_of_a_list, ((W3, B3),)),
    (unpacks_an_entry_of_a_list, [[W3, B3]]),
    (unpacks_the_last_entry, [(W3 * 2, B3), (W3, B3)]),
    (unpacks_an_entry_through_a_name, [(W3, B3)]),
    (unpacks_an_entry_of_a_dict, {"layer": (W3, B3)}),
])
@pytest.mark.parametrize("mode", ["grad", "vjp"])
def test_unpacking_a_tuple_read_from_a_container_argument(f, params, mode):
    if mode == "grad":
        g = srcgrad.grad(f)(params, X3)
    else:
        g = srcgrad.vjp(f)(params, X3)[1](1.0)
    key = "layer" if isinstance(params, dict) else (0 if len(params) == 1 else -1)
    np.testing.assert_allclose(g[key][0], X3)
    np.testing.assert_allclose(g[key][1], np.ones(3))


# ---- refused: JAX's own MLP loop, `for w, b in params` -------------------------------------
# The loop target unpacks each (w, b) tuple; `for p in params: w, b = p` is differentiated,
# but the loop as JAX's tutorial writes it is refused ("unpacking loop targets is supported
# for enumerate, zip and the items() of a dict").

def jax_mlp(params, x):
    for w, b in params[:-1]:
        x = np.tanh(w @ x + b)
    final = params[-1]  # (not unpacked: see test_unpacking_a_tuple_read_from_a_container_argument)
    return np.sum(final[0] @ x + final[1])


def l2_of_pairs(params, x):
    return sum(np.sum(w ** 2) + np.sum(b ** 2) for w, b in params)


def enumerated_pairs(params, x):
    for i, (w, b) in enumerate(params):
        x = np.tanh(w @ x + b) * (i + 1)
    return np.sum(x)


def named_pairs(params, x):
    for name, (w, b) in zip(range(len(params)), params):
        x = np.tanh(w @ x + b)
    return np.sum(x)


@pytest.mark.parametrize("f", [jax_mlp, l2_of_pairs, enumerated_pairs, named_pairs])
def test_loop_unpacking_pairs_of_parameters(f):
    rng = np.random.default_rng(0)
    params = [(rng.normal(size=(3, 3)), rng.normal(size=3)) for _ in range(3)]
    x = rng.normal(size=3)
    g = srcgrad.grad(f)(params, x)
    for i in range(3):
        for j in range(2):
            def of_leaf(leaf, i=i, j=j):
                edited = [list(p) for p in params]
                edited[i][j] = leaf
                return f([tuple(p) for p in edited], x)

            np.testing.assert_allclose(g[i][j], numerical_grad(of_leaf, params[i][j]), rtol=1e-6, atol=1e-8)


# ---- crash: a loop target that unpacks, over `reversed(...)` ----------------------------
# `for w, b in reversed(params)` is compiled as `w = params[_i]` with the unpacking dropped:
# `w` is the whole pair and `b` is unbound: ValueError (broadcasting the pair) or NameError: name
# 'b' is not defined, from the generated code.  Over `enumerate(reversed(...))` (x only):
# TypeError "object of type 'list_reverseiterator' has no len()".  `params[::-1]`,
# `for w, *rest in reversed(params)` and `for p in reversed(params)` are right.

def pairs_in_reverse(params, x):
    h = x
    for w, b in reversed(params):
        h = h * w + b
    return np.sum(h)


def numbered_pairs_in_reverse(params, x):
    h = x
    for i, (w, b) in enumerate(reversed(params)):
        h = h * w + b * (i + 1)
    return np.sum(h)


def zipped_pairs_in_reverse(params, x):
    h = x
    for (w, b), c in zip(reversed(params), reversed([1.0, 2.0])):
        h = h * w + b * c
    return np.sum(h)


def _pairs_in_reverse_inside(params, x):
    h = x
    for w, b in reversed(params):
        h = np.tanh(h * w) + b
    return h


def pairs_in_reverse_in_a_helper(params, x):
    return np.sum(_pairs_in_reverse_inside(params, x) ** 2)


@pytest.mark.parametrize("f", [pairs_in_reverse, numbered_pairs_in_reverse, zipped_pairs_in_reverse,
                               pairs_in_reverse_in_a_helper], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_unpacking_loop_target_over_reversed(f, dtype):
    params = [(2.0, 1.0), (3.0, -1.0)]
    x = X3.astype(dtype)
    g_params, g_x = srcgrad.grad(f, wrt=(0, 1))(params, x)
    assert g_x.dtype == dtype
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g_x, numerical_grad(lambda v: f(params, v), X3), **tol)
    flat = np.array(params).ravel()
    numerical = numerical_grad(lambda p: f([tuple(p[:2]), tuple(p[2:])], X3), flat)
    np.testing.assert_allclose(np.array(g_params).ravel(), numerical, **tol)


def numbered_entries_in_reverse(x):
    t = 0.0
    for i, v in enumerate(reversed(x)):
        t = t + v * (i + 1) ** 2
    return t


def test_enumerate_reversed_array():
    g = srcgrad.grad(numbered_entries_in_reverse)(X3)
    np.testing.assert_allclose(g, [9.0, 4.0, 1.0])


# ---- silently wrong: unpacking a part of an unpacked argument ---------------------------
# `a, b = p; u, v = a` (and JAX's `(w1, b1), (w2, b2) = params`): `a`'s adjoint, gathered
# from `u` and `v`, was put together only after the sweep, too late for `p`: zeros.

W1, B1, W2, B2 = np.array([[0.5, -1.0], [2.0, 0.3]]), np.array([0.1, -0.2]), np.array([[1.5], [-0.7]]), \
    np.array([0.4])


XS = np.array([[0.2, -0.4], [1.0, 0.5], [-0.3, 0.8]])


def unpacked_twice(p):
    a, b = p
    u, v = a
    return np.sum(u * v) + np.sum(b[0] ** 2)


def jax_style_mlp(params, x):
    (w1, b1), (w2, b2) = params
    h = np.tanh(x @ w1 + b1)
    return np.sum((h @ w2 + b2) ** 2)


def three_levels(p):
    ((a, b), c), d = p
    return np.sum(a * b * c) + np.sum(d)


def _mlp_in_a_helper(params, x):
    (w1, b1), (w2, b2) = params
    return np.tanh(x @ w1 + b1) @ w2 + b2


def mlp_through_a_helper(params, x):
    return np.sum(_mlp_in_a_helper(params, x) ** 2)


def unpacked_in_a_loop(params, x):
    h = x
    for layer in params:
        (w, b), scale = layer
        h = np.tanh(h @ w + b) * scale
    return np.sum(h ** 2)


class TupleModel:
    def __init__(self, params):
        self.params = params

    def loss(self, x):
        (w1, b1), (w2, b2) = self.params
        return np.sum((np.tanh(x @ w1 + b1) @ w2 + b2) ** 2)


def method_unpacking_a_field(m, x):
    return m.loss(x)


def _flat(tree):
    if isinstance(tree, np.ndarray):
        return [tree]
    if isinstance(tree, (list, tuple)):
        return [leaf for t in tree for leaf in _flat(t)]
    return _flat(vars(tree)["params"])


def _numerical_leaves(f, tree, *rest, eps=1e-6):
    out = []
    for leaf in _flat(tree):
        g = np.zeros(leaf.shape)
        for i in np.ndindex(leaf.shape):
            old = leaf[i]
            leaf[i] = old + eps
            up = f(tree, *rest)
            leaf[i] = old - eps
            down = f(tree, *rest)
            leaf[i] = old
            g[i] = (up - down) / (2 * eps)
        out.append(g)
    return out


CASES = [
    (unpacked_twice, lambda: ((np.array([1.0, 2.0]), np.array([3.0, 4.0])), (np.array([5.0]),)), ()),
    (jax_style_mlp, lambda: ((W1.copy(), B1.copy()), (W2.copy(), B2.copy())), (XS,)),
    (jax_style_mlp, lambda: [[W1.copy(), B1.copy()], [W2.copy(), B2.copy()]], (XS,)),
    (three_levels, lambda: (((np.array([1.0, 2.0]), np.array([3.0, 4.0])), np.array([0.5, 2.0])),
                            np.array([1.0])), ()),
    (mlp_through_a_helper, lambda: ((W1.copy(), B1.copy()), (W2.copy(), B2.copy())), (XS,)),
    (unpacked_in_a_loop, lambda: [((W1.copy(), B1.copy()), np.array(0.5)), ((W1.T.copy(), B1.copy()),
                                                                             np.array(2.0))], (XS,)),
    (method_unpacking_a_field, lambda: TupleModel(((W1.copy(), B1.copy()), (W2.copy(), B2.copy()))), (XS,)),
]


@pytest.mark.parametrize("f, make, rest", CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_an_unpacked_part_unpacked_again(f, make, rest):
    tree = make()
    g = srcgrad.grad(f)(tree, *rest)
    got = _flat(g)
    for a, b in zip(got, _numerical_leaves(f, tree, *rest)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9)


def test_an_unpacked_part_unpacked_again_in_float32():
    params = ((W1.astype(np.float32), B1.astype(np.float32)), (W2.astype(np.float32), B2.astype(np.float32)))
    g = srcgrad.grad(jax_style_mlp)(params, XS.astype(np.float32))
    assert all(leaf.dtype == np.float32 for leaf in _flat(g))
    expected = _numerical_leaves(jax_style_mlp, ((W1.copy(), B1.copy()), (W2.copy(), B2.copy())), XS)
    for a, b in zip(_flat(g), expected):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)
