"""Second derivatives through every derivative rule: ``hvp`` (forward mode over the
gradient code, which calls the rules' adjoint helpers) against central differences of
``grad``, for each expression of tests/test_rules.py's table.

An expression whose second derivative srcgrad refuses is listed in ``REFUSED``, with
the reason; the refusal must name the user's line and say "second derivative".  A listed
one that starts working fails too, so the list stays true."""
from __future__ import annotations

import linecache

import numpy as np
import pytest

import srcgrad
from test_rules import CASES

# expression -> why forward mode over its gradient code is refused (for now): the runtime
# helper its adjoint calls uses Python that forward mode does not follow yet.
REFUSED = {
    **dict.fromkeys(['np.prod(x)', 'np.prod(x, 1)', 'np.prod(x, axis=None)', 'np.prod(x, axis=0)', 'np.prod(x, axis=-1)', 'np.prod(x, axis=1, keepdims=True)', 'np.prod(x, axis=(0, -1))', 'np.prod(x, axis=(0, 2), keepdims=True)', 'np.prod(x, keepdims=True)', 'x.prod()', 'x.prod(1)', 'x.prod(axis=1)', 'x.prod(axis=(0, -1), keepdims=True)'],
                    '`tuple(...)` is given a value, which is being differentiated: srcgrad does not follow valu'),
    **dict.fromkeys(['max(x, y)', 'max(x, y, 0.5)', 'max([x, y, x])', 'max((x, 1.5))', 'max(x)', 'min(x, y)', 'min([x, -0.5, y])', 'min(x)', 'np.tensordot(x, y, axes=1)', 'np.tensordot(x, y)', 'np.tensordot(x, y, axes=0)', 'np.tensordot(x, y, axes=(1, 0))', 'np.tensordot(x, y, axes=([1], [0]))', 'np.tensordot(x, y, axes=([0, 2], [2, 0]))', "np.einsum('ij,k->ik', x, y)", "np.einsum('...ij,...jk->...ik', x, y)", "np.einsum('i...->...', x)", "np.einsum('...i,i', x, y)", "np.einsum('ii,i->', x, y)", "np.einsum('ii->i', x)", "np.einsum('ii', x)", "np.einsum('iij->j', x)", "np.einsum('ij->ji', x)", "np.einsum('ji', x)", "np.einsum('ijk,ikl,k->il', x, y, z, optimize='greedy')"],
                    'a generator expression is supported as the argument of `sum`, `max`, `min`, `list`, `tuple'),
    **dict.fromkeys(['np.kron(x, y)'],
                    'unpack one target per zipped sequence'),
    **dict.fromkeys(['np.linalg.norm(x, axis=1)', 'np.linalg.norm(x, axis=-1, keepdims=True)', "np.linalg.norm(x, 'fro')", 'np.linalg.norm(x, ord=1)', 'np.linalg.norm(x, ord=np.inf)', 'np.linalg.norm(x, ord=2, axis=0)', 'np.linalg.norm(x, axis=(0, 1))', 'np.linalg.norm(x, ord=2)', 'np.linalg.norm(x, ord=-2)', "np.linalg.norm(x, 'nuc')", 'np.linalg.norm(x, ord=-1)', 'np.linalg.norm(x, ord=-np.inf)', 'np.linalg.norm(x, ord=3)', 'np.linalg.norm(x, ord=0.5)', 'np.linalg.norm(x, ord=-3, axis=1)', 'np.linalg.norm(x, ord=0)', 'np.linalg.norm(x, ord=2, axis=(1, 2))', "np.linalg.norm(x, ord='nuc', axis=(2, 0), keepdims=True)", 'np.linalg.norm(x, ord=1, axis=(0, 2))', 'np.linalg.norm(x, ord=np.inf, axis=(-1, 0))', 'np.linalg.norm(x, ord=-2, axis=(0, 1))'],
                    '`tuple(...)` is given a value, which is being differentiated: srcgrad does not follow valu'),
    **dict.fromkeys(['np.trace(x)'],
                    'srcgrad cannot tell how many values `_t3` holds when it compiles this call, so it cannot b'),
    **dict.fromkeys(['np.diag(x)', 'np.diag(x, 1)', 'np.diag(x, k=-1)'],
                    'cannot write into `bar`: it may share memory with another array '),
    **dict.fromkeys(['np.linalg.svd(x, compute_uv=False)', "np.linalg.qr(x, mode='r')"],
                    'srcgrad has no derivative rule for the array method `.get()`'),
}


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
    namespace = {"__name__": "test_higher_rules_generated", "np": np, "math": __import__("math")}
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
