"""Higher order by composition: ``hvp``/``hessian`` (forward mode over the gradient's
generated code), ``grad(grad(f))``, ``jacfwd``/``jacrev``.  Each value against central
differences of srcgrad's own gradient (itself checked elsewhere), on the kinds of code
a gradient's code holds: loops, branches, helpers, methods, shared layers, the
runtime helpers of broadcasting, reductions, indexing and reshapes, float32."""
from __future__ import annotations

import numpy as np
import pytest
from tests.modes.higher_cases import (CASES, IDS, W1, W2, X, Y, _leaves, _model_cases, _moved, gradient_difference,
                                      helpers, loop_branch, rng, two_layer)

import srcgrad
from srcgrad import errors, tree
from srcgrad import runtime as rt
from srcgrad.rules import registry


@pytest.mark.parametrize("f, args, wrt", CASES, ids=IDS)
def test_hvp_matches_differences_of_the_gradient(f, args, wrt):
    v = np.random.default_rng(1).standard_normal(np.shape(args[wrt]))
    for optimize in (True, False):
        hv = srcgrad.hvp(f, wrt=wrt, optimize=optimize)(*args, v)
        assert hv.shape == np.shape(args[wrt]) and hv.dtype == np.float64
        np.testing.assert_allclose(hv, gradient_difference(f, args, wrt, v), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("f, args, wrt", CASES, ids=IDS)
def test_hvp_is_reverse_over_forward(f, args, wrt):
    """The same product the other way round: the vjp of forward mode's generated code,
    its tangent output pulled back (``∇_x <∇f(x), v>``)."""
    v = np.random.default_rng(2).standard_normal(np.shape(args[wrt]))
    forward = srcgrad.jvp(f, wrt=wrt)
    code = forward.compiled(args).function
    _, pullback = srcgrad.vjp(code, wrt=wrt)(*args, v)
    np.testing.assert_allclose(srcgrad.hvp(f, wrt=wrt)(*args, v), pullback((0.0, 1.0)), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("f, args, wrt", CASES, ids=IDS)
def test_hessian_is_symmetric_and_matches_differences(f, args, wrt):
    H = srcgrad.hessian(f, wrt=wrt)(*args)
    shape = np.shape(args[wrt])
    assert H.shape == shape + shape
    n = int(np.prod(shape))
    M = H.reshape(n, n)
    np.testing.assert_allclose(M, M.T, rtol=1e-9, atol=1e-10)
    for k in range(n):  # column k: the difference of the gradient along e_k
        e = np.zeros(n)
        e[k] = 1
        np.testing.assert_allclose(M[:, k], gradient_difference(f, args, wrt, e.reshape(shape)).ravel(),
                                   rtol=1e-5, atol=1e-6)


def test_hessian_blocks_with_respect_to_several_parameters():
    args = (W1, W2, X, Y)
    blocks = srcgrad.hessian(two_layer, wrt=(0, 1))(*args)
    assert [[b.shape for b in row] for row in blocks] == [[(4, 3, 4, 3), (4, 3, 3, 2)],
                                                           [(3, 2, 4, 3), (3, 2, 3, 2)]]
    np.testing.assert_allclose(blocks[0][1], np.moveaxis(blocks[1][0], (0, 1), (2, 3)), atol=1e-10)
    v = rng.standard_normal((3, 2))
    np.testing.assert_allclose(np.tensordot(blocks[0][1], v, 2), _mixed_difference(args, v), rtol=1e-5, atol=1e-7)
    hv = srcgrad.hvp(two_layer, wrt=(0, 1))(*args, (np.zeros_like(W1), v))
    np.testing.assert_allclose(hv[0], np.tensordot(blocks[0][1], v, 2), atol=1e-10)
    np.testing.assert_allclose(hv[1], np.tensordot(blocks[1][1], v, 2), atol=1e-10)


def _mixed_difference(args, v, eps=1e-6):
    """``∂/∂w2 ∇_w1 f · v`` by central differences of the gradient in w1 along w2's ``v``."""
    g = srcgrad.grad(two_layer, wrt=0)
    w1, w2, x, y = args
    return (g(w1, w2 + eps * v, x, y) - g(w1, w2 - eps * v, x, y)) / (2 * eps)


def test_float32_stays_float32():
    x, b = (a.astype(np.float32) for a in (rng.standard_normal((3, 4)), rng.standard_normal(4)))
    v = rng.standard_normal((3, 4)).astype(np.float32)
    hv = srcgrad.hvp(helpers)(x, b, v)
    assert hv.dtype == np.float32
    expected = srcgrad.hvp(helpers)(x.astype(np.float64), b.astype(np.float64), v.astype(np.float64))
    np.testing.assert_allclose(hv, expected, rtol=2e-3, atol=2e-3)
    assert srcgrad.hessian(helpers)(x, b).dtype == np.float32


def scalar(a, b):
    return np.sin(a) * b ** 2 + a ** 3 * b


def test_grad_of_grad_for_scalar_functions():
    a, b = 0.3, 2.0
    # exact: f_aa = -sin(a) b^2 + 6 a b, f_ab = 2 cos(a) b + 3 a^2
    assert srcgrad.grad(srcgrad.grad(scalar))(a, b) == pytest.approx(-np.sin(a) * b ** 2 + 6 * a * b, rel=1e-12)
    assert srcgrad.grad(srcgrad.grad(scalar), wrt=1)(a, b) == pytest.approx(2 * np.cos(a) * b + 3 * a ** 2,
                                                                            rel=1e-12)
    assert srcgrad.grad(srcgrad.grad(scalar, wrt=1), wrt=1)(a, b) == pytest.approx(2 * np.sin(a), rel=1e-12)
    assert isinstance(srcgrad.grad(srcgrad.grad(scalar))(a, b), float)


def test_grad_of_grad_with_respect_to_an_array():
    """``∇_x (∂f/∂a)`` for a scalar ``a`` and an array ``x``."""
    def f(a, x):
        return np.sum(np.tanh(a * x) ** 2)
    x = rng.standard_normal(4)
    eps = 1e-6
    g = srcgrad.grad(f)
    expected = np.array([(g(0.7, x + eps * e) - g(0.7, x - eps * e)) / (2 * eps) for e in np.eye(4)])
    np.testing.assert_allclose(srcgrad.grad(srcgrad.grad(f), wrt=1)(0.7, x), expected, rtol=1e-6)


def test_jvp_of_grad_gives_the_gradient_and_the_hessian_product():
    v = rng.standard_normal((4, 3))
    value, tangent = srcgrad.jvp(srcgrad.grad(two_layer))(W1, W2, X, Y, v)
    np.testing.assert_allclose(value, srcgrad.grad(two_layer)(W1, W2, X, Y))
    np.testing.assert_allclose(tangent, srcgrad.hvp(two_layer)(W1, W2, X, Y, v))


def outputs(x, w):
    h = np.tanh(x @ w)
    return h * np.sum(x) + np.exp(w[0])


@pytest.mark.parametrize("wrt", [0, 1, (0, 1)])
def test_jacfwd_equals_jacrev_and_differences(wrt):
    x, w = rng.standard_normal(3), rng.standard_normal((3, 4))
    forward, reverse = srcgrad.jacfwd(outputs, wrt=wrt)(x, w), srcgrad.jacrev(outputs, wrt=wrt)(x, w)
    for jf, jr, i in zip(*(j if isinstance(wrt, tuple) else (j,) for j in (forward, reverse)),
                         wrt if isinstance(wrt, tuple) else (wrt,)):
        arg = (x, w)[i]
        assert jf.shape == (4,) + arg.shape
        np.testing.assert_allclose(jf, jr, rtol=1e-12, atol=1e-14)
        eps = 1e-6
        for k in range(arg.size):
            e = np.zeros(arg.size)
            e[k] = 1
            e = e.reshape(arg.shape)
            moved = [(x, w)[j] + (eps * e if j == i else 0) for j in range(2)]
            back = [(x, w)[j] - (eps * e if j == i else 0) for j in range(2)]
            column = (outputs(*moved) - outputs(*back)) / (2 * eps)
            np.testing.assert_allclose(jf.reshape(4, -1)[:, k], column, rtol=1e-6, atol=1e-8)
    assert srcgrad.jacobian is srcgrad.jacrev


def pair(x):
    return np.sin(x), np.sum(x ** 2)


def test_jacobians_of_a_function_returning_a_tuple():
    x = rng.standard_normal(3)
    forward, reverse = srcgrad.jacfwd(pair)(x), srcgrad.jacrev(pair)(x)
    np.testing.assert_allclose(forward[0], np.diag(np.cos(x)), atol=1e-15)
    np.testing.assert_allclose(forward[1], 2 * x)
    for a, b in zip(forward, reverse):
        np.testing.assert_allclose(a, b, atol=1e-15)


# ---- refused -----------------------------------------------------------------
def applies(x, act):
    return np.sum(act(x) ** 2)


def test_hvp_through_a_function_known_only_when_it_runs_is_refused():
    with pytest.raises(errors.UnsupportedSyntaxError, match="pullback closure"):
        srcgrad.hvp(applies)(rng.standard_normal(3), _act, rng.standard_normal(3))


def _act(h):
    return np.tanh(h)


def test_grad_of_a_gradient_with_an_array_output_is_refused():
    with pytest.raises(errors.NonScalarOutputError, match="hessian"):
        srcgrad.grad(srcgrad.grad(two_layer))(W1, W2, X, Y)


def test_third_and_fourth_derivatives_by_nesting_grad():
    a, b = 0.7, -1.3
    grad = srcgrad.grad
    # d/da of sin(a) b^2 + a^3 b, three and four times; and a mixed one (d/db d/da d/da)
    np.testing.assert_allclose(grad(grad(grad(scalar)))(a, b), -np.cos(a) * b ** 2 + 6 * b, rtol=1e-12)
    np.testing.assert_allclose(grad(grad(grad(grad(scalar))))(a, b), np.sin(a) * b ** 2, rtol=1e-12)
    np.testing.assert_allclose(grad(grad(grad(scalar)), wrt=1)(a, b), -2 * np.sin(a) * b + 6 * a, rtol=1e-12)
    np.testing.assert_allclose(grad(grad(grad(scalar), wrt=1), wrt=1)(a, b), 2 * np.cos(a), rtol=1e-12)


@pytest.mark.parametrize("jacobian", [srcgrad.jacfwd, srcgrad.jacrev])
@pytest.mark.parametrize("f, args, wrt", [(two_layer, (W1, W2, X, Y), 1), (loop_branch, CASES[2][1], 0),
                                          (loop_branch, CASES[3][1], "x")])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_jacobian_of_a_gradient_is_the_hessian(jacobian, f, args, wrt, dtype):
    """``jacfwd(grad(f))`` was refused ("not a third time", though it is a second derivative)."""
    args = tuple(a.astype(dtype) for a in args)
    h = jacobian(srcgrad.grad(f, wrt=wrt), wrt=wrt)(*args)
    index = wrt if isinstance(wrt, int) else 0
    x, gradient, eps = args[index].astype(np.float64), srcgrad.grad(f, wrt=wrt), 1e-6
    wide = tuple(a.astype(np.float64) for a in args)
    columns = []
    for e in np.eye(x.size):
        def at(v):
            return gradient(*wide[:index], x + v * e.reshape(x.shape), *wide[index + 1:])
        columns.append((at(eps) - at(-eps)) / (2 * eps))
    expected = np.moveaxis(np.array(columns).reshape(x.shape + x.shape), tuple(range(x.ndim)),
                           tuple(range(x.ndim, 2 * x.ndim)))
    assert h.dtype == dtype and h.shape == x.shape + x.shape
    tol = 1e-5 if dtype == np.float64 else 2e-3
    np.testing.assert_allclose(h, expected, rtol=tol, atol=tol / 10 if dtype == np.float64 else tol)


def test_the_jacobian_of_a_gradient_in_other_parameters_is_refused_saying_so():
    with pytest.raises(errors.UnsupportedSyntaxError, match="only with respect to the same parameters"):
        srcgrad.jacfwd(srcgrad.grad(two_layer, wrt=0), wrt=1)(W1, W2, X, Y)
    with pytest.raises(errors.UnsupportedSyntaxError, match="differentiates a plain srcgrad.grad"):
        srcgrad.jacfwd(srcgrad.grad(two_layer, has_aux=False, intermediates=("h",)))


# ---- the helpers' rules (srcgrad/rules/adjoints.py), without the compiler ----------
_I = np.index_exp
HELPERS = [  # (helper, arguments, the position of each linear argument)
    (rt.unbroadcast, lambda r: (r.standard_normal((3, 4)), r.standard_normal((1, 4))), (0,)),
    (rt.unbroadcast, lambda r: (r.standard_normal((2, 3, 4)), r.standard_normal(4)), (0,)),
    (rt.broadcast_reduced, lambda r: (r.standard_normal(3), r.standard_normal((3, 4)), 1), (0,)),
    (rt.broadcast_reduced, lambda r: (r.standard_normal((1, 4)), r.standard_normal((3, 4)), 0, True), (0,)),
    (rt.fill_like, lambda r: (r.standard_normal((3, 4)), r.standard_normal()), (1,)),
    (rt.reshape_back, lambda r: (r.standard_normal(12), r.standard_normal((3, 4)), "F"), (0,)),
    (rt.getitem_adjoint, lambda r: (r.standard_normal(3), r.standard_normal((3, 4)), _I[:, 1]), (0,)),
    (rt.getitem_adjoint, lambda r: (r.standard_normal(3), r.standard_normal(5), ([0, 2, 0],)), (0,)),
    (rt.gather_adjoint, lambda r: (r.standard_normal((2, 5)), r.standard_normal((3, 2)),
                                   np.array([[0, -1, 5, 5, 2], [1, 1, -1, 3, 0]])), (0,)),
    (rt.gathered, lambda r: (r.standard_normal((3, 2)), np.array([[0, -1, 5, 5, 2], [1, 1, -1, 3, 0]])), (0,)),
    (rt.max_adjoint, lambda r: (lambda x: (r.standard_normal(3), np.max(x, axis=1), x, 1))(
        r.standard_normal((3, 4))), (0,)),
    (rt.max_adjoint, lambda r: (lambda x: (r.standard_normal((1, 4)), np.max(x, 0, keepdims=True), x, 0, True))(
        r.standard_normal((3, 4))), (0,)),
    (rt.matmul_lhs, lambda r: (r.standard_normal((3, 2)), r.standard_normal((3, 4)), r.standard_normal((4, 2))),
     (0, 2)),
    (rt.matmul_lhs, lambda r: (r.standard_normal(2), r.standard_normal(4), r.standard_normal((4, 2))), (0, 2)),
    (rt.matmul_lhs, lambda r: (r.standard_normal(3), r.standard_normal((3, 4)), r.standard_normal(4)), (0, 2)),
    (rt.matmul_rhs, lambda r: (r.standard_normal((3, 2)), r.standard_normal((3, 4)), r.standard_normal((4, 2))),
     (0, 1)),
    (rt.matmul_rhs, lambda r: (r.standard_normal(2), r.standard_normal(4), r.standard_normal((4, 2))), (0, 1)),
    (rt.matmul_rhs, lambda r: (r.standard_normal((2, 3, 2)), r.standard_normal((2, 3, 4)),
                               r.standard_normal((4, 2))), (0, 1)),
    (rt.add, lambda r: (r.standard_normal((3, 4)), r.standard_normal((3, 4))), (0, 1)),
    # `y[k] = v` where `y`'s kind is known when the code runs (a defaultdict, `[0.0] * n`)
    (rt.written_entry, lambda r: (r.standard_normal((3, 4)), np.zeros((3, 4)), 1, r.standard_normal(4)), (0,)),
    (rt.written_entry, lambda r: (r.standard_normal((3, 4)), np.zeros((3, 4)), ([0, 2, 0],),
                                  r.standard_normal((3, 4))), (0,)),
    (rt.written_entry, lambda r: ({"a": r.standard_normal(3), "b": r.standard_normal(3)}, {"a": 0.0, "b": 0.0},
                                  "a", r.standard_normal(3)), (0,)),
    (rt.written_entry, lambda r: ([r.standard_normal(2), r.standard_normal(2), r.standard_normal(2)], [0.0] * 3,
                                  -1, r.standard_normal(2)), (0,)),
    (rt.overwritten_adjoint, lambda r: (r.standard_normal((3, 4)), np.zeros((3, 4)), _I[1:, 2]), (0,)),
    (rt.overwritten_adjoint, lambda r: ({"a": r.standard_normal(3), "b": r.standard_normal(3)},
                                        {"a": 0.0, "b": 0.0}, "a"), (0,)),
    (rt.overwritten_adjoint, lambda r: ([r.standard_normal(2), r.standard_normal(2)], [0.0] * 2, 0), (0,)),
    (rt.cast_adjoint, lambda r: (r.standard_normal((3, 4)), np.zeros((3, 4))), (0,)),
    (rt.cast_adjoint, lambda r: (r.standard_normal((3, 4)), np.zeros((3, 4), int)), (0,)),
    (rt.dtype_adjoint, lambda r: (r.standard_normal(3), None), (0,)),
    (rt.unbroadcast_to, lambda r: (r.standard_normal((5, 3, 4)), (3, 1)), (0,)),
    (rt.window_adjoint, lambda r: (r.standard_normal((4, 2)), r.standard_normal(5), 2), (0,)),
    (rt.window_adjoint, lambda r: (r.standard_normal((2, 3, 3, 2, 3)), r.standard_normal((2, 4, 5)), (2, 3),
                                   (1, 2)), (0,)),
    (rt.written_adjoint, lambda r: (r.standard_normal((3, 4)), _I[1:, 2], r.standard_normal(2)), (0,)),
    (rt.written_adjoint, lambda r: (r.standard_normal(5), ([0, 2, 0],), r.standard_normal(3)), (0,)),
    (rt.written_adjoint, lambda r: (r.standard_normal((3, 4)), _I[:, 1], r.standard_normal(())), (0,)),
    (rt.sort_adjoint, lambda r: (r.standard_normal((3, 4)), r.standard_normal((3, 4)), 1), (0,)),
    (rt.sort_adjoint, lambda r: (r.standard_normal(12), r.standard_normal((3, 4)), None), (0,)),
    (rt.diag_adjoint, lambda r: (r.standard_normal((4, 4)), r.standard_normal(3), 1), (0,)),
    (rt.diag_adjoint, lambda r: (r.standard_normal(3), r.standard_normal((3, 5)), -0), (0,)),
    (rt.diag_adjoint, lambda r: (r.standard_normal(2), r.standard_normal((3, 3)), -1), (0,)),
    (rt.items_extremum_adjoint, lambda r: (lambda xs: (r.standard_normal(), max(xs), xs))(
        [float(a) for a in r.standard_normal(3)]), (0,)),
    (rt.items_extremum_adjoint, lambda r: (lambda x: (r.standard_normal(4), np.max(x, axis=0), x))(
        r.standard_normal((3, 4))), (0,)),
    (rt.item_of, lambda r: ((r.standard_normal(3), r.standard_normal((2, 2))), 1), (0,)),
    (rt.item_of, lambda r: ({0: r.standard_normal(3)}, 0), (0,)),
    # forward-mode code's helpers (a third derivative is forward mode over such code)
    (rt.broadcast_tangent, lambda r: (r.standard_normal(3), r.standard_normal((2, 3))), (0,)),
    (rt.cast_tangent, lambda r: (r.standard_normal((2, 3)), r.standard_normal((2, 3))), (0,)),
    (rt.cast_tangent, lambda r: (r.standard_normal(3), np.arange(3)), (0,)),
    # a list's adjoint, one per item (popped by the appends that grew it)
    (rt.as_items, lambda r: (r.standard_normal((3, 2)), [r.standard_normal(2) for _ in range(3)]), (0,)),
    (rt.as_items, lambda r: ([r.standard_normal(2) for _ in range(3)],) * 2, (0,)),
    (rt.as_items, lambda r: ({1: r.standard_normal(2)}, [r.standard_normal(2) for _ in range(3)]), (0,)),
    (rt.items_adjoint, lambda r: (r.standard_normal((3, 2)), [r.standard_normal(2) for _ in range(3)]), (0,)),
    (rt.items_adjoint, lambda r: (r.standard_normal((3, 2)), r.standard_normal((3, 2))), (0,)),
    (rt.add_each, lambda r: ([r.standard_normal(2) for _ in range(3)], r.standard_normal((3, 2))), (0, 1)),
    (rt.add_each, lambda r: ({2: r.standard_normal(2)}, [r.standard_normal(2) for _ in range(3)]), (0, 1)),
    (rt.add_items, lambda r: ([r.standard_normal(2) for _ in range(3)], r.standard_normal((3, 2)),
                              [np.ones(2)] * 3), (0, 1)),
    (rt.add_items, lambda r: (r.standard_normal((3, 2)), r.standard_normal(2), np.ones((3, 2))), (0, 1)),
]


def _zeros(x):
    if isinstance(x, dict):
        return {k: _zeros(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_zeros(v) for v in x)
    return np.zeros_like(x)


def _inner(a, b) -> float:
    """``<a, b>`` of arrays, or of lists / tuples / dicts of them (None: zero)."""
    if a is None or b is None:
        return 0.0
    if isinstance(a, dict) or isinstance(b, dict):
        a, b = [x if isinstance(x, dict) else dict(enumerate(x)) for x in (a, b)]
        return sum(_inner(a[k], b.get(k)) for k in a)
    if isinstance(a, (list, tuple)):
        return sum(_inner(x, y) for x, y in zip(a, b))
    return float(np.sum(a * b))


def _like(x, r):
    if isinstance(x, dict):
        return {k: _like(v, r) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_like(v, r) for v in x)
    return r.standard_normal(np.shape(x))


EINSUMS = [("ij,k->ik", [(2, 3), (4,)]), ("ii->i", [(3, 3)]), ("...i,i", [(2, 3), (3,)]),
           ("ijk,ikl,k->il", [(2, 3, 4), (2, 4, 2), (4,)]), ("ij,j->ij", [(1, 3), (3,)])]


@pytest.mark.parametrize("subscripts, shapes", EINSUMS, ids=[e[0] for e in EINSUMS])
def test_einsum_adjoints_rules_pass_the_dot_product_test(subscripts, shapes):
    """``rt.einsum_adjoints`` is multilinear in ``ans_bar`` and the operands (operand k's adjoint
    reads operand k's shape only): its transpose, and its tangent, against the exact change."""
    r = np.random.default_rng(5)
    ops = [r.standard_normal(s) for s in shapes]
    g = r.standard_normal(np.shape(np.einsum(subscripts, *ops)))
    rule = registry.lookup(rt.einsum_adjoints)
    ans = rt.einsum_adjoints(subscripts, g, ops)
    u = _like(ans, r)
    g_bar, ops_bar = rule.adjoint(u, ans, subscripts, g, ops)
    dg = r.standard_normal(g.shape)
    np.testing.assert_allclose(_inner(u, rt.einsum_adjoints(subscripts, dg, ops)), _inner(g_bar, dg),
                               rtol=1e-12)
    for j in range(len(ops)):
        dv = r.standard_normal(ops[j].shape)
        moved = [dv if i == j else o for i, o in enumerate(ops)]
        # operand j's own adjoint reads its shape only: the change in the others
        change = [None if k == j else a for k, a in enumerate(rt.einsum_adjoints(subscripts, g, moved))]
        np.testing.assert_allclose(_inner(u, change), _inner(ops_bar[j], dv), rtol=1e-12)
        tangent = rule.tangent(ans, subscripts, g, ops, operands_dot=[dv if i == j else None for i in range(len(ops))])
        for k in range(len(ops)):
            np.testing.assert_allclose(tangent[k], 0 if k == j else change[k], atol=1e-12)


@pytest.mark.parametrize("helper, make, linear", HELPERS, ids=[f"{h.__name__}-{i}" for i, (h, _, _) in
                                                                enumerate(HELPERS)])
def test_helper_rules_pass_the_dot_product_test(helper, make, linear):
    """``<u, ∂helper · v>`` (exact: the helper is linear in each linear argument) against
    ``<adjoint(u), v>`` from the rule, for each linear argument."""
    r = np.random.default_rng(3)
    args = make(r)
    rule = registry.lookup(helper)
    ans = helper(*args)
    u = _like(ans, r)
    bound = rule.signature.bind(*args)
    bound.apply_defaults()
    adjoints = rule.adjoint(u, ans, *bound.arguments.values())
    adjoints = adjoints if isinstance(adjoints, tuple) else (adjoints,)
    assert len(adjoints) == len(linear)
    for position, adjoint in zip(linear, adjoints):
        v = _like(args[position], r)
        moved, zeroed = list(args), list(args)
        moved[position], zeroed[position] = v, _zeros(v)
        # (minus the value at zero: `rt.add` is linear in its two addends together)
        changed = helper(*moved)
        at_zero = helper(*zeroed)
        np.testing.assert_allclose(_inner(u, changed) - _inner(u, at_zero), _inner(adjoint, v), rtol=1e-12)


# ---- gradient code that accumulates (rt.add), restores a slice write, adds windows' adjoints
# (rt.window_adjoint), casts (rt.cast_adjoint): the helpers' tangent rules (rules/adjoints.py)

def _helper_with_early_return(z, w, k):
    if k > 3:
        return z * k
    return np.tanh(z @ w)


def _calls_it_in_a_loop(w, x):
    for i in range(2):
        x = _helper_with_early_return(x, w, 2.0 + 2.0 * i)
    return np.sum(x)


def _padded(x):
    padded = np.zeros((x.shape[0] + 2,))
    padded[1:-1] = x
    return np.sum(np.sin(padded) * np.arange(padded.size))


def _sliding_max(x):
    return np.sum(np.max(np.lib.stride_tricks.sliding_window_view(x, 2), axis=1) ** 2)


def _product(x):
    return np.prod(x) ** 2  # (forward mode follows rt.prod_adjoint's source)


@pytest.mark.parametrize("fn, shapes", [(_calls_it_in_a_loop, [(3, 3), (2, 3)]), (_padded, [(4,)]),
                                        (_sliding_max, [(5,)]), (_product, [(4,)])])
def test_hessian_of_gradient_code_that_calls_runtime_helpers(fn, shapes):
    r = np.random.default_rng(0)
    args = [r.standard_normal(s) for s in shapes]
    v = r.standard_normal(shapes[0])
    np.testing.assert_allclose(srcgrad.hvp(fn)(*args, v), gradient_difference(fn, args, 0, v), rtol=1e-5,
                               atol=1e-7)
    H = srcgrad.hessian(fn)(*args).reshape(args[0].size, args[0].size)
    np.testing.assert_allclose(H, H.T, atol=1e-10)


# ---- gradient code that pops the adjoint of a list grown by append (rt.as_items): gmm.py's
# `cluster_lls.append(...)` read whole by np.vstack

def _grown_rows(w, x):
    rows = []
    for i in range(w.shape[0]):
        rows.append(np.tanh(w[i] * x))
    return rows


def _read_by_vstack(w, x):
    return np.sum(np.vstack(_grown_rows(w, x)) ** 3)


def _read_by_hstack(w, x):
    return np.sum(np.hstack(_grown_rows(w, x)) * np.arange(2 * w.shape[0]))


def _read_by_concatenate_and_stack(w, x):
    rows = _grown_rows(w, x)
    return np.sum(np.concatenate(rows) ** 3) + np.sum(np.stack(rows, axis=1) ** 4)


def _read_by_array_and_sum(w, x):
    rows = _grown_rows(w, x)
    return np.sum(np.array(rows) ** 3) + np.sum(sum(rows) ** 2)


def _read_twice(w, x):  # (the list's own name: its adjoints accumulated item by item, rt.add_each)
    rows = []
    for i in range(w.shape[0]):
        rows.append(np.tanh(w[i] * x))
    return np.sum(np.vstack(rows) ** 3) + np.sum(np.concatenate(rows) * np.sum(np.stack(rows) ** 2))


def _read_by_logsumexp(w, x):  # (gmm.py's log likelihood, in small)
    lls = []
    for i in range(3):
        lls.append(w[i] - (x - w[3 + i]) ** 2)
    stacked = np.vstack(lls)
    m = np.max(stacked, axis=0)
    return np.sum(m + np.log(np.sum(np.exp(stacked - m), axis=0)))


@pytest.mark.parametrize("fn", [_read_by_vstack, _read_by_hstack, _read_by_concatenate_and_stack,
                                _read_by_array_and_sum, _read_twice, _read_by_logsumexp])
def test_hvp_of_code_that_grows_a_list(fn):
    r = np.random.default_rng(3)
    args = (r.standard_normal(6 if fn is _read_by_logsumexp else 3), r.standard_normal(2))
    v = r.standard_normal(args[0].shape)
    np.testing.assert_allclose(srcgrad.hvp(fn)(*args, v), gradient_difference(fn, args, 0, v), rtol=1e-5,
                               atol=1e-7)
    H = srcgrad.hessian(fn)(*args)
    np.testing.assert_allclose(H, H.T, atol=1e-10)
    np.testing.assert_allclose(H @ v, srcgrad.hvp(fn)(*args, v), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", range(4), ids=["dynamic-net", "cnn-overlapping-max", "cnn-tiled-max", "cnn-avg"])
def test_hvp_with_respect_to_a_model(case):
    f, model, x, y = _model_cases(np.float64)[case]
    g = srcgrad.grad(f)
    v = tree.unflatten(tree.flatten(g(model, x, y))[2], [np.random.default_rng(1).standard_normal(np.shape(a))
                                                        for a in _leaves(g(model, x, y))])
    hv = srcgrad.hvp(f)(model, x, y, v)
    eps = 1e-6
    plus, minus = g(_moved(model, v, eps), x, y), g(_moved(model, v, -eps), x, y)
    for h, p, m in zip(_leaves(hv), _leaves(plus), _leaves(minus)):
        np.testing.assert_allclose(h, (p - m) / (2 * eps), rtol=1e-5, atol=1e-7)
    # float32: the same product, in float32
    f, model32, x32, y32 = _model_cases(np.float32)[case]
    v32 = tree.unflatten(tree.flatten(v)[2], [a.astype(np.float32) for a in _leaves(v)])
    hv32 = srcgrad.hvp(f)(model32, x32, y32, v32)
    for h32, h in zip(_leaves(hv32), _leaves(srcgrad.hvp(f)(_as64(model32), x32.astype(np.float64), y32, v))):
        assert h32.dtype == np.float32
        np.testing.assert_allclose(h32, h, rtol=1e-2, atol=1e-3 * max(1.0, np.max(np.abs(h))))


def _as64(model):
    return tree.unflatten(tree.flatten(model)[2], [a.astype(np.float64) if isinstance(a, np.ndarray)
                                                   and a.dtype.kind == "f" else a for a in _leaves(model)])


# ---- what forward mode over gradient code cannot follow yet: refused at the user's line ----
# (found by an outside tester: these raised errors naming srcgrad's own files)

def _first_half(x):
    return np.sum(np.split(x, 2)[0] ** 3)  # (rt.split_adjoint: a list of unknown length)


def _overwritten(x):
    y = np.tanh(x)
    # The write overwrites elements whose view `y[1:3]` the backward sweep reads after it puts
    # them back (`y[1:3] = y_overwritten`): the view is made again there (transforms/aliases.py),
    # so forward mode over that code follows it (it was refused).
    y[1:3] = y[1:3] ** 2
    return np.sum(np.exp(y))


def test_forward_mode_over_gradient_code_that_puts_overwritten_elements_back():
    x = np.random.default_rng(0).standard_normal(4)
    gradient, eps = srcgrad.grad(_overwritten), 1e-5
    for v in (np.ones_like(x), np.array([0.3, -1.0, 2.0, 0.5])):
        expected = (gradient(x + eps * v) - gradient(x - eps * v)) / (2 * eps)
        np.testing.assert_allclose(srcgrad.hvp(_overwritten)(x, v), expected, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("fn", [_first_half])
def test_what_forward_mode_cannot_follow_in_gradient_code_is_refused_at_the_users_line(fn):
    x = np.random.default_rng(0).standard_normal(4)
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError) as refused:
        srcgrad.hvp(fn)(x, np.ones_like(x))
    message = str(refused.value)
    assert message.splitlines()[0].split(":")[0].endswith("test_higher.py") and "second derivative" in message
    assert srcgrad.grad(fn)(x).shape == x.shape  # the first derivative stays right


# ---- a rule of the user's that runs as a function (its adjoint calls a helper of theirs):
# second order through it by a rule of the adjoint itself (fixed_point's, srcgrad.misc)

def _three_g_x_squared(g, x):  # (a helper: the rule is not inlined, it runs as a function)
    return 3.0 * g * x ** 2


@srcgrad.custom_adjoint
def _cube(x):
    return x ** 3


@_cube.defadjoint
def _cube_adjoint(ans_bar, ans, x):
    return _three_g_x_squared(ans_bar, x)


@_cube.defjvp
def _cube_tangent(ans, x, x_dot=None):
    return 3.0 * x ** 2 * x_dot


@srcgrad.custom_adjoint
def _square(x):
    return x ** 2


@_square.defadjoint
def _square_adjoint(ans_bar, ans, x):
    return _three_g_x_squared(ans_bar, x) / (1.5 * x)


def _adjoint_tangent(x_bar, ans_bar, ans, x, ans_bar_dot=None, x_dot=None):
    """d(3 g x^2) = 3 g' x^2 + 6 g x x'."""
    out = 0.0 if ans_bar_dot is None else 3.0 * ans_bar_dot * x ** 2
    return out if x_dot is None else out + 6.0 * ans_bar * x * x_dot


@srcgrad.defadjoint(_cube_adjoint, diff=("ans_bar", "x"), zero=("ans",), tangent=_adjoint_tangent)
def _cube_adjoint_transposed(u, x_bar, ans_bar, ans, x):
    return _three_g_x_squared(u, x), 6.0 * u * ans_bar * x


def _sum_of_cubes(x):
    return np.sum(np.sin(_cube(x)))


def _sin_of_cube(s):
    return np.sin(_cube(s))


def _sum_of_squares(x):
    return np.sum(np.sin(_square(x)))


def test_second_order_through_a_rule_whose_adjoint_has_a_rule():
    x = np.array([0.3, -0.8, 1.1])
    exact = np.diag(6 * x * np.cos(x ** 3) - 9 * x ** 4 * np.sin(x ** 3))
    np.testing.assert_allclose(srcgrad.hessian(_sum_of_cubes)(x), exact, rtol=1e-12, atol=1e-14)
    for s in (0.7, -1.2):
        np.testing.assert_allclose(srcgrad.grad(srcgrad.grad(_sin_of_cube))(s),
                                   6 * s * np.cos(s ** 3) - 9 * s ** 4 * np.sin(s ** 3), rtol=1e-12)
    v = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(srcgrad.hvp(_sum_of_cubes)(x, v), exact @ v, rtol=1e-12)


def test_second_order_through_a_rule_run_as_a_function_without_one_is_refused():
    with pytest.raises(errors.UnsupportedSyntaxError, match="_square"):
        srcgrad.hessian(_sum_of_squares)(np.array([0.3, -0.8]))


# ---- third derivatives: forward mode over the gradient code of a function that calls a
# gradient function (srcgrad.grad(f) there: its pullback H u is called by name,
# dispatch.gradient_pullback, whose tangent is forward mode over f's hvp code)

def _tanh_by_exp(x):
    return (1.0 - np.exp(-2 * x)) / (1.0 + np.exp(-(2 * x)))


def _logistic(x):
    return 1 / (1 + np.exp(-x))


def _third_tanh(t):
    return -2 * (1 - t ** 2) ** 2 + 4 * t ** 2 * (1 - t ** 2)


@pytest.mark.parametrize("f, exact", [
    (_tanh_by_exp, lambda x: _third_tanh(np.tanh(x))),
    (np.sin, lambda x: -np.cos(x)),
    (np.exp, np.exp),
    (_logistic, lambda x: (lambda s: s * (1 - s) * (1 - 6 * s + 6 * s ** 2))(1 / (1 + np.exp(-x)))),
])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_third_derivative_of_elementwise_functions(f, exact, dtype):
    x = np.linspace(-2, 2, 9).astype(dtype)
    third = srcgrad.elementwise_grad(srcgrad.elementwise_grad(srcgrad.elementwise_grad(f)))(x)
    assert third.dtype == dtype and third.shape == x.shape
    np.testing.assert_allclose(third, exact(x.astype(np.float64)), rtol=2e-4 if dtype == np.float32 else 1e-10,
                               atol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("f, exact", [
    (_tanh_by_exp, lambda x: (lambda t: 8 * t * (1 - t ** 2) * (2 - 3 * t ** 2))(np.tanh(x))),
    (np.sin, np.sin),
    (np.exp, np.exp),
    (_logistic, lambda x: (lambda s: s * (1 - s) * (1 - 14 * s + 36 * s ** 2 - 24 * s ** 3))(1 / (1 + np.exp(-x)))),
])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fourth_derivative_of_elementwise_functions(f, exact, dtype):
    egrad = srcgrad.elementwise_grad
    x = np.linspace(-2, 2, 9).astype(dtype)
    fourth = egrad(egrad(egrad(egrad(f))))(x)
    assert fourth.dtype == dtype and fourth.shape == x.shape
    np.testing.assert_allclose(fourth, exact(x.astype(np.float64)), rtol=1e-3 if dtype == np.float32 else 1e-9,
                               atol=1e-4 if dtype == np.float32 else 1e-11)


def test_fourth_derivative_through_gradients_called_in_helpers():
    def third(x):  # a helper of the user's calling a gradient function of a gradient function
        return srcgrad.grad(srcgrad.grad(_slope))(x)

    for x in (0.7, -1.3):
        exact = -12 * np.sin(x) - 8 * x * np.cos(x) + x ** 2 * np.sin(x)
        np.testing.assert_allclose(srcgrad.grad(srcgrad.grad(srcgrad.grad(srcgrad.grad(_sin_x_squared))))(x),
                                   exact, rtol=1e-10)
        np.testing.assert_allclose(srcgrad.grad(third)(x), exact, rtol=1e-10)


def _twice_through_a_branch(x):
    y = x
    for _ in range(2):
        if y > 0:
            y = y * np.tanh(y)
    return y


def test_fourth_derivative_through_a_loop_and_a_branch():
    """Forward mode over forward-mode code that dispatched a call when it ran (the fourth
    level meets the third's jvp of a program it could not inline): ``dispatch.jvp_call_tangent``."""
    grad = srcgrad.grad
    third = grad(grad(grad(_twice_through_a_branch)))
    fourth = grad(third)
    for x in (0.3, 0.8, 1.5, -0.4):
        e = 1e-4
        np.testing.assert_allclose(fourth(x), (third(x + e) - third(x - e)) / (2 * e), rtol=1e-5, atol=1e-8)
    try:
        import autograd
        import autograd.numpy as anp
    except ImportError:
        return

    def by_autograd(x):
        y = x
        for _ in range(2):
            if y > 0:
                y = y * anp.tanh(y)
        return y
    theirs = autograd.grad(autograd.grad(autograd.grad(autograd.grad(by_autograd))))
    for x in (0.3, 0.8, 1.5):
        np.testing.assert_allclose(fourth(x), theirs(x), rtol=1e-10)


def test_fifth_derivative_by_nesting_is_refused_not_wrong():
    egrad = srcgrad.elementwise_grad
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="a fifth by nesting"):
        egrad(egrad(egrad(egrad(egrad(np.sin)))))(np.linspace(-1, 1, 3))


def _sin_x_squared(x):
    return np.sin(x) * x ** 2


_slope_of = srcgrad.grad(_sin_x_squared)


def _slope(x):  # a gradient function called by a function of the user's
    return _slope_of(x)


def _summed_sin_x_squared(x):
    return np.sum(np.sin(x) * x ** 2)


_slopes_of = srcgrad.grad(_summed_sin_x_squared)


def _summed_slopes(x):  # (its rank known when compiling: a free name's, the parameter's)
    return np.sum(_slopes_of(x) ** 2)


def test_third_derivative_through_a_gradient_called_in_the_function():
    for x in (0.7, -1.3):
        exact = -np.cos(x) * x ** 2 - 6 * x * np.sin(x) + 6 * np.cos(x)
        np.testing.assert_allclose(srcgrad.grad(srcgrad.grad(_slope))(x), exact, rtol=1e-12)
    x, v = np.array([0.7, -0.3, 1.2]), np.array([1.0, 0.5, -0.2])
    np.testing.assert_allclose(srcgrad.hvp(_summed_slopes)(x, v), gradient_difference(_summed_slopes, (x,), 0, v),
                               rtol=1e-6)
    H = srcgrad.hessian(_summed_slopes)(x)
    np.testing.assert_allclose(H, H.T, rtol=1e-12, atol=1e-12)


_DATA = np.array([1.0, 4.0, 7.0, 2.0, 12.0, 0.0, 3.0])


def _loglike(r, p):
    return np.sum(np.log(r + _DATA) * p - r * np.log1p(p) + _DATA * np.log(p))


def _p_of(r):
    return np.sum(_DATA) / np.sum(r + _DATA)


def _r_prime(r):  # negative_binomial_maxlike.py's rprime, its helpers at module level
    return srcgrad.grad(_loglike)(r, _p_of(r))


def test_third_derivative_through_a_gradient_made_in_the_function():
    g = srcgrad.grad(_r_prime)
    eps = 1e-5
    for r in (0.8, 2.0):
        np.testing.assert_allclose(g(r), (_r_prime(r + eps) - _r_prime(r - eps)) / (2 * eps), rtol=1e-7)
        np.testing.assert_allclose(srcgrad.grad(g)(r), (g(r + eps) - g(r - eps)) / (2 * eps), rtol=1e-6)




def _gathered_cubes(x):
    return np.sum(x[[0, 2, 2]] ** 3) + np.sum(x[x > 0] ** 2)


def test_hessian_through_fancy_indexing_and_a_mask():
    """A fancy index's adjoint scatters with repeats (``rt.getitem_adjoint``, linear in the
    cotangent): forward mode over the gradient code follows it (the template's own
    ``np.add.at`` write was refused)."""
    for dtype in (np.float64, np.float32):
        x = np.array([0.5, -0.3, 0.8], dtype=dtype)
        H = srcgrad.hessian(_gathered_cubes)(x)
        assert H.dtype == dtype
        want = np.diag([6 * 0.5 + 2, 0.0, 2 * 6 * 0.8 + 2])
        np.testing.assert_allclose(H, want, rtol=1e-5 if dtype == np.float32 else 1e-12)
    v = np.array([1.0, 2.0, -1.0])
    np.testing.assert_allclose(srcgrad.hvp(_gathered_cubes)(np.array([0.5, -0.3, 0.8]), v),
                               np.diag([5.0, 0.0, 11.6]) @ v, rtol=1e-12)
