"""Second derivatives through every derivative rule: ``hvp`` (forward mode over the
gradient code, which calls the rules' adjoint helpers) against central differences of
``grad``, for each expression of the table in tests/rules/rule_table.py.

An expression whose second derivative srcgrad refuses is listed in ``REFUSED``, with
the reason; the refusal must name the user's line and say "second derivative".  A listed
one that starts working fails too, so the list stays true."""
from __future__ import annotations

import linecache

import numpy as np
import pytest

import srcgrad
from tests.rules.rule_table import CASES, linalg, signal, special, stats

# expression -> why forward mode over its gradient code is refused (for now): the runtime
# helper its adjoint calls uses Python that forward mode does not follow yet.
REFUSED: dict = {case.expr: "rt.gaussian_cdf_partials (loops over conditional probabilities, "
                           "SciPy's cdf inside) is not followed by forward mode"
                 for case in CASES if case.expr.startswith("stats.multivariate_normal.") and "cdf(" in case.expr}
REFUSED["np.linalg.multi_dot([x, y, z, np.ones((2, 3), np.float32)])"] = (
    "rt.multi_dot_adjoint (more than three factors: lists of partial products) is not followed by forward mode")


def _first_of_each_expression():
    seen, out = set(), []
    for case in CASES:
        if case.expr not in seen:
            seen.add(case.expr)
            out.append(case)
    return out


def _loss(case, u):
    """``def loss(x, ..., u): return np.sum(u * (expr))``, with its source findable."""
    names = ", ".join(case.names)
    source = f"def loss({names}, u):\n    return np.sum(u * ({case.expr}))\n"
    filename = f"<test_higher_rules: {case.expr}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": "test_higher_rules_generated", "np": np, "math": __import__("math"),
                 "special": special, "signal": signal, "stats": stats, "linalg": linalg, "rt": srcgrad.runtime}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - a test fixture
    return namespace["loss"]


EXPRESSIONS = [c for c in _first_of_each_expression()
               if isinstance(c.evaluate(*c.inputs(np.float64)), (np.ndarray, np.floating, float))
               and np.asarray(c.evaluate(*c.inputs(np.float64))).dtype.kind == "f"]


@pytest.mark.parametrize("case", EXPRESSIONS, ids=[c.id for c in EXPRESSIONS])
def test_hvp_through_the_rule(case):
    xs = case.inputs(np.float64)
    rng = np.random.default_rng(1)
    u = rng.standard_normal(np.shape(case.evaluate(*xs)))
    loss = _loss(case, u)
    n = len(xs)
    wrt = tuple(range(n)) if n > 1 else 0
    vs = tuple(rng.standard_normal(np.shape(x)) for x in xs)
    try:
        hv = srcgrad.hvp(loss, wrt=wrt)(*xs, u, vs if n > 1 else vs[0])
    except srcgrad.errors.UserCodeError as refused:
        assert case.expr in REFUSED, f"refused, and not listed in REFUSED: {refused}"
        assert "second derivative" in str(refused) and str(refused).startswith("<test_higher_rules")
        return
    assert case.expr not in REFUSED, "works now: take it out of REFUSED"
    g = srcgrad.grad(loss, wrt=wrt)
    eps = 1e-5
    plus = g(*[x + eps * v for x, v in zip(xs, vs)], u)
    minus = g(*[x - eps * v for x, v in zip(xs, vs)], u)
    if n == 1:
        hv, plus, minus = (hv,), (plus,), (minus,)
    for h, p, m in zip(hv, plus, minus):
        np.testing.assert_allclose(h, (p - m) / (2 * eps), rtol=1e-4, atol=1e-6)


# ---- decompositions: their adjoints read a tuple's adjoint (rt.item_of, a rule of its own)
def _slogdet(a):
    sign, logabsdet = np.linalg.slogdet(a)
    return np.multiply(logabsdet, np.sum(np.square(a)))


def _eigh(a):
    w, v = np.linalg.eigh(a)
    return np.sum(np.power(w, 3)) + np.sum(np.power(v[:, 0], 4))


def _qr(a):
    q, r = np.linalg.qr(a)
    return np.sum(np.multiply(q, np.arange(3.0))) + np.sum(np.square(r))


def _svd(a):
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return np.sum(np.power(u[:, 0], 3)) + np.sum(np.sin(s)) + np.sum(np.multiply(vh, vh[::-1]))


@pytest.mark.parametrize("fn, shape", [(_slogdet, (3, 3)), (_eigh, (3, 3)), (_qr, (4, 3)), (_qr, (3, 3)),
                                       (_svd, (4, 3))],
                         ids=["slogdet", "eigh", "qr-tall", "qr-square", "svd"])
def test_hvp_through_decompositions(fn, shape):
    r = np.random.default_rng(2)
    a = r.standard_normal(shape)
    a = a @ a.T + 3 * np.eye(3) if fn in (_slogdet, _eigh) else a
    v = r.standard_normal(shape)
    g, eps = srcgrad.grad(fn), 1e-5
    np.testing.assert_allclose(srcgrad.hvp(fn)(a, v), (g(a + eps * v) - g(a - eps * v)) / (2 * eps),
                               rtol=1e-5, atol=1e-6)


# ---- the gallery's DigitsCNN itself (ReLU, max pooling, cross-entropy), in float64
def test_hvp_of_the_gallery_digits_cnn():
    import importlib.util
    import pathlib

    from srcgrad import nn, tree

    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "digits_cnn.py"
    spec = importlib.util.spec_from_file_location("digits_cnn_for_hvp", path)
    gallery = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gallery)
    nn.init.manual_seed(0)
    model = gallery.DigitsCNN(dtype=np.float64)
    r = np.random.default_rng(4)
    x, labels = r.uniform(0, 1, (3, 1, 8, 8)), np.array([1, 7, 3])
    g = srcgrad.grad(gallery.loss)
    flat = tree.flatten(g(model, x, labels))
    v = tree.unflatten(flat[2], [r.standard_normal(np.shape(a)) for a in flat[1]])
    hv = srcgrad.hvp(gallery.loss)(model, x, labels, v)

    def moved(eps):
        leaves, layout = tree.flatten(model)[1:]
        return tree.unflatten(layout, [a + eps * b if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a
                                       for a, b in zip(leaves, tree.flatten(v)[1])])

    eps = 1e-6
    plus, minus = g(moved(eps), x, labels), g(moved(-eps), x, labels)
    for h, p, m in zip(tree.flatten(hv)[1], tree.flatten(plus)[1], tree.flatten(minus)[1]):
        np.testing.assert_allclose(h, (p - m) / (2 * eps), rtol=1e-5, atol=1e-7)
    assert any(np.any(h != 0) for h in tree.flatten(hv)[1])
