"""Every derivative rule, checked two ways from one table of per-primitive rows.

* **Directly**, without the compiler: the rule function is called on arrays and
  passes the dot-product test ⟨u, J v⟩ (central differences) = ⟨Jᵀu, v⟩ (the
  rule), and keeps float32 float32.
* **Through the compiler**: ``srcgrad.vjp`` of the same expression, written as
  a user would, against central finite differences in float64, with the
  optimizer on and off, and float32 in → float32 out.

The rows, one per primitive, are ``rule_table.py``'s: adding a rule means adding a
row there.

Conventions at non-smooth points have exact-value tests in
``test_rules_conventions.py``; import spellings, non-differentiable calls and
random draws are in ``test_rules_calls.py``.
"""
from __future__ import annotations

import ast
import functools

import numpy as np
import pytest
from tests.finite_differences import numerical_grad
from tests.rules.rule_table import (CASES, INPUTS, ROWS, assert_close, astype, difference, inner, like, signal,
                                    user_function)

import srcgrad
from srcgrad import runtime as rt
from srcgrad.rules import registry

# Compiler bugs outside the rules (expression -> reason): the compiled test is an
# expected failure, with the optimizer on and off; the rule itself is still checked.


def _compiled_params():
    params = []
    for case in CASES:
        for optimize in (True, False):
            params.append(pytest.param(case, optimize,
                                       id=f"{case.id}|{'opt' if optimize else 'noopt'}"))
    return params


# ---- the rule functions, without the compiler -------------------------------


class _Index:
    """``_I[1:, None]`` → ``(slice(1, None), None)``: an index as the rule receives it."""

    def __getitem__(self, index):
        return index


def _collect(*args, **kwargs):
    return args, kwargs


def rule_arguments(expr: str) -> str:
    """The primitive's arguments in ``expr``, as source, in the rule's calling form.

    ``np.sum(x, axis=1)`` → ``x, axis=1``; ``x * y`` → ``x, y``;
    ``x[1:, None]`` → ``x, _I[1:, None]``; ``x.reshape(4, 3)`` → ``x, (4, 3)``.
    """
    node = ast.parse(expr, mode="eval").body
    src = functools.partial(ast.get_source_segment, expr)
    if isinstance(node, ast.BinOp):
        return f"{src(node.left)}, {src(node.right)}"
    if isinstance(node, ast.UnaryOp):
        return src(node.operand)
    if isinstance(node, ast.Subscript):
        return f"{src(node.value)}, _I[{src(node.slice)}]"
    if isinstance(node, ast.Attribute):  # x.T
        return src(node.value)
    assert isinstance(node, ast.Call), expr
    args = [src(a) for a in node.args]
    if isinstance(node.func, ast.Name) and node.func.id in ("max", "min") and len(args) > 1:
        args = [f"({', '.join(args)})"]  # the compiler's spelling: one rule for both forms
    keywords = [f"{k.arg}={src(k.value)}" for k in node.keywords]
    func = node.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in INPUTS:
        if func.attr in ("reshape", "transpose") and len(args) > 1:  # x.reshape(4, 3)
            args = [f"({', '.join(args)})"]
        args = [func.value.id] + args
    return ", ".join(args + keywords)


def _items(arg, adjoint):
    """(input, its adjoint) pairs: a list argument's items (nested lists too) get slices."""
    if not isinstance(arg, (list, tuple)):
        return [(arg, adjoint)]
    return [pair for a, g in zip(arg, adjoint) for pair in _items(a, g)]


def rule_adjoints(case, ans_bar, ans, values):
    """Call the primitive's rule function on ``values``; one adjoint per input (0 if none).

    The rule returns one adjoint per differentiable parameter; each goes to
    the input bound to that parameter (summed where an input appears twice,
    as in ``np.concatenate((x, y, x))``).
    """
    rule = registry.lookup(case.primitive)
    env = dict(zip(case.names, values), _I=_Index(), _collect=_collect)
    args, kwargs = eval(f"_collect({rule_arguments(case.expr)})", {"np": np}, env)
    bound = rule.signature.bind(*args, **kwargs)
    out = rule.adjoint(ans_bar, ans, *args, **kwargs)
    outs = out if len(rule.diff_params) > 1 else (out,)
    assert len(outs) == len(rule.diff_params)
    bars = [None] * len(values)
    for param, adjoint in zip(rule.diff_params, outs):
        if adjoint is None:
            continue
        arg = bound.arguments.get(param)
        for arg_i, adjoint_i in _items(arg, adjoint):
            for i, value in enumerate(values):
                if arg_i is value:
                    assert np.shape(adjoint_i) == np.shape(value), (param, np.shape(adjoint_i))
                    bars[i] = adjoint_i if bars[i] is None else bars[i] + adjoint_i
    return bars


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rule_function(case):
    """⟨u, J v⟩ by central differences equals ⟨Jᵀu, v⟩ from the rule; float32 stays float32."""
    xs = case.inputs(np.float64)
    ans = case.evaluate(*xs)
    rng = np.random.default_rng(1)
    u = like(ans, rng)
    vs = [np.asarray(rng.standard_normal(np.shape(x))) for x in xs]
    bars = rule_adjoints(case, u, ans, xs)
    eps = 1e-6
    plus = case.evaluate(*[x + eps * v for x, v in zip(xs, vs)])
    minus = case.evaluate(*[x - eps * v for x, v in zip(xs, vs)])
    u_jv = inner(u, difference(plus, minus)) / (2 * eps)
    jtu_v = sum(np.sum(b * v) for b, v in zip(bars, vs) if b is not None)
    assert u_jv == pytest.approx(jtu_v, rel=1e-6, abs=1e-8)

    xs32 = [x.astype(np.float32) for x in xs]
    bars32 = rule_adjoints(case, astype(u, np.float32), case.evaluate(*xs32), xs32)
    for name, bar in zip(case.names, bars32):
        if bar is not None and case.float32:
            assert np.asarray(bar).dtype == np.float32, f"{name}: float32 in, {np.asarray(bar).dtype} out"


# ---- through the compiler -----------------------------------------------------


@functools.cache
def compiled_vjp(expr: str, names: tuple, optimize: bool):
    return srcgrad.vjp(user_function(expr, names), wrt=tuple(range(len(names))), optimize=optimize)


@pytest.mark.parametrize("case, optimize", _compiled_params())
def test_compiled(case, optimize):
    """``srcgrad.vjp`` of the expression against central differences in float64; then
    float32 in → float32 out, from the generated code itself (not only the API's cast)."""
    f = user_function(case.expr, case.names)
    gf = compiled_vjp(case.expr, case.names, optimize)
    xs = case.inputs(np.float64, scalar=float)
    try:
        value, pullback = gf(*xs)
    except srcgrad.SrcgradError as exc:  # the compiler's own message says it all
        pytest.fail(f"{type(exc).__name__}: {exc}", pytrace=False)
    assert_close(value, f(*xs), rtol=1e-15)
    u = like(value, np.random.default_rng(2))
    grads = pullback(u)
    for i, (name, g) in enumerate(zip(case.names, grads)):
        expected = numerical_grad(lambda *a: inner(u, f(*a)), xs, i)
        assert np.shape(g) == np.shape(xs[i]), name
        np.testing.assert_allclose(g, expected, rtol=1e-6, atol=1e-7, err_msg=name)

    xs32 = case.inputs(np.float32, scalar=np.float32)
    u32 = astype(u, np.float32)
    raw = gf.compiled(xs32)(*xs32)[1](u32)
    grads32 = gf(*xs32)[1](u32)
    for name, r, g32, g, x in zip(case.names, raw, grads32, grads, xs32):
        assert np.asarray(r).dtype == np.float32 or not case.float32, f"{name}: generated code gave {r.dtype}"
        assert g32.dtype == np.float32 and np.shape(g32) == np.shape(x), name
        np.testing.assert_allclose(g32, g, rtol=1e-4, atol=1e-4, err_msg=name)


def test_every_rule_has_a_row():
    """Adding a rule to ``srcgrad.rules`` without a row here fails this test."""
    tested = {registry.lookup(row.primitive).adjoint for row in ROWS}
    rules = {rule.adjoint for _, rule in registry._RULES.values()
             if rule.adjoint is not None and rule.adjoint.__module__.startswith("srcgrad.rules.")}
    rules.discard(registry.lookup(getattr).adjoint)  # a structure's field: tests/language/test_structures.py
    for transfer in (srcgrad.to_device, srcgrad.to_host):  # tests/passes/test_cupy_backend.py
        rules.discard(registry.lookup(transfer).adjoint)
    rules.discard(registry.lookup(srcgrad.runtime.iterated).adjoint)  # soundness/test_trust_containers.py
    for joined in (srcgrad.runtime.concatenated, srcgrad.runtime.repeated,
                   srcgrad.runtime.as_tuple):  # test_sequence_building, test_found_by_probing
        rules.discard(registry.lookup(joined).adjoint)
    for joined in (srcgrad.runtime.read_back, srcgrad.runtime.entry_read_back):  # language/test_object_state.py
        rules.discard(registry.lookup(joined).adjoint)
    # list(xs), dict(d), xs.reverse(), xs.insert(i, v), d.pop(k), {**a, **b} (written so by the
    # compiler): tests/language/test_container_operations.py.
    for joined in (srcgrad.runtime.sequence_of, srcgrad.runtime.mapping_of, srcgrad.runtime.reversed_list,
                   srcgrad.runtime.inserted, srcgrad.runtime.without_key, srcgrad.runtime.merged,
                   srcgrad.runtime.fromkeys, srcgrad.runtime.tolist):
        rules.discard(registry.lookup(joined).adjoint)
    for joined in (srcgrad.misc.flatten,):  # tests/api/test_autograd_style_api.py
        rules.discard(registry.lookup(joined).adjoint)
    if signal is not None:  # autograd's generalised convolution: tests/rules/test_generalised_convolve.py
        rules.discard(registry.lookup(srcgrad.scipy.signal.convolve).adjoint)
    # Random draws (each evaluation draws anew): tests/soundness/test_trust_rules.py, with seeds;
    # np.r_[...] / np.c_[...] (written rt.index_concat by the compiler): there too.
    rules -= {rule.adjoint for _, rule in registry._RULES.values() if rule.impure}
    rules.discard(registry.lookup(srcgrad.runtime.index_concat).adjoint)
    # d[k] = v on a dict made here (written rt.with_item by the compiler): tests/language/test_syntax.py.
    rules.discard(registry.lookup(srcgrad.runtime.with_item).adjoint)
    # The rules of the helpers generated adjoint code calls: tests/modes/test_higher.py (dot-product test).
    rules -= {rule.adjoint for _, rule in registry._RULES.values()
              if rule.adjoint is not None and rule.adjoint.__module__ == "srcgrad.rules.adjoints"}
    missing = sorted(f"{fn.__module__}.{fn.__name__}" for fn in rules - tested)
    assert not missing, f"rules with no row in ROWS: {missing}"


def test_matmul_of_a_stack_by_a_matrix_is_one_product_per_adjoint():
    """``x @ W`` for x (T, B, k): W's adjoint is the stacked rows' product (not a (T, k, n)
    stack of products summed after), the same values."""
    rng = np.random.default_rng(3)
    for dtype in (np.float64, np.float32):
        x, w = rng.standard_normal((4, 3, 5)).astype(dtype), rng.standard_normal((5, 6)).astype(dtype)
        g = rng.standard_normal((4, 3, 6)).astype(dtype)
        got = rt.matmul_rhs(g, x, w)
        assert got.shape == w.shape and got.dtype == dtype
        np.testing.assert_allclose(got, np.einsum("tbk,tbn->kn", x, g), rtol=1e-5 if dtype == np.float32 else 1e-12)
        np.testing.assert_allclose(srcgrad.grad(lambda x, w: np.sum((x @ w) * g), wrt=1)(x, w), got, rtol=1e-5)


@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_take_of_integer_indices_has_a_known_rank_and_accumulates_repeats(axis):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((4, 3))
    idx = np.array([[0, 2], [2, 1]])

    def f(a):
        return np.sum(np.take(a, idx, axis=axis) ** 2 @ np.ones(np.take(a, idx, axis=axis).shape[-1]))
    got = srcgrad.grad(f)(a)
    from srcgrad.testing import check_grads
    check_grads(f, (a,))
    assert "dispatch." not in srcgrad.source(srcgrad.grad(f), a)  # (the rank is known: plain NumPy)
    assert got.shape == a.shape
