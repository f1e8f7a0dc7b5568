"""resugar (transforms/resugar.py): the forward sweep as a person would write it.

Golden input→output pairs of the pass on its own (statements on one line of the
input share a source line, its ``group``), the cases it must leave alone, the
forward sweeps of small functions before and after, and gradients (first and
second order) of programs that exercise each rule against central differences.
"""
from __future__ import annotations

import builtins
import re
import textwrap

import gast
import numpy as np
import pytest

import srcgrad
from srcgrad import anno, api, nodes
from srcgrad.transforms import resugar
from tests.finite_differences import numerical_grad


def sugar(code, backward="", kept=(), effects=(), one_group=False):
    """``code`` (a forward sweep) resugared: the statements on one line of it come from one
    source line (``one_group``: all of them); ``effects``: the names bound by statements that
    may run the user's code (an object's ``__mul__``: kind ``call``)."""
    forward, back = nodes.parse(textwrap.dedent(code)).body, nodes.parse(textwrap.dedent(backward)).body
    for stmt in nodes.statements(forward + back):
        anno.set(stmt, "group", anno.Origin("m.py", 1 if one_group else stmt.lineno, 0, ""))
        if set(nodes.assigned_names(stmt)) & set(effects):
            anno.set(stmt, "kind", "call")
    for node in nodes.walk(nodes.module(forward)):
        if isinstance(node, gast.Name) and node.id in ("len", "ValueError"):
            anno.set(node, "resolved", getattr(builtins, node.id))
    forward, _ = resugar.transform(forward, back, kept)
    return nodes.to_source(nodes.module(forward)).strip()


def same(code):
    return textwrap.dedent(code).strip()


# ---- 1. a temporary read once, folded into its read ---------------------------------

def test_arithmetic_is_one_expression():
    assert sugar("""
        _t40 = 2 * ph; _t41 = h + _t40; _t42 = _t41 - kh; _t43 = _t42 // sh; oh = _t43 + 1
    """) == "oh = (h + 2 * ph - kh) // sh + 1"


def test_arithmetic_moves_past_computations_into_a_call_and_an_if():
    assert sugar("""
        _t21 = c * kh; _t22 = _t21 * kw; _t23 = n * oh; _t24 = _t23 * ow; cols = w.reshape((_t22, _t24))
        _t9 = p > 0; _t10 = 2 * p
        if _t9: pass
    """, kept={"_t10"}, one_group=True) == same("""
        cols = w.reshape((c * kh * kw, n * oh * ow))
        _t10 = 2 * p
        if p > 0:
            pass""")


def test_an_attribute_read_only_into_the_next_statement():
    # `_t1 = m.k` right before its read, before any call there: folded; with `z = a + b`
    # (not a temporary) between, left.
    assert sugar("_t1 = m.k; y = f(a, _t1)") == "y = f(a, m.k)"
    assert sugar("_t1 = m.k; z = a + b; y = _t1 * 2") == same("""
        _t1 = m.k
        z = a + b
        y = _t1 * 2""")


@pytest.mark.parametrize("code", [
    "_t1 = a + b; c[0] = 1.0; y = _t1 * 2",  # an in-place write between (c may be a)
    "_t1 = a + b; c += 1.0; y = _t1 * 2",
    "_t1 = a + b; np.add.at(c, 0, 1.0); y = _t1 * 2",
    "_t1 = a + b; z = g(c); y = _t1 * z",  # a call between
    "_t1 = a + b; a = 3.0; y = _t1 * 2",  # a name it reads bound again between
    "_t1 = a + b; y = _t1 * _t1",  # read twice
    "_t1 = a + b; y = g(c) + _t1",  # a call that runs before the read
    "_t1 = a // b; y = c or _t1",  # an operand that may not run
    "_t1 = a // b; y = _t1 if c else d",
    "_t1 = g(a); y = _t1 + 1",  # a call itself
])
def test_what_is_not_folded(code):
    assert sugar(code) == same(code.replace("; ", "\n"))


def test_another_source_line_is_left():
    assert sugar("_t1 = a + b\ny = _t1 * 2") == "_t1 = a + b\ny = _t1 * 2"


@pytest.mark.parametrize("code", [
    "_t1 = a + b\nif c:\n    y = _t1 * 2",  # another block
    "_t1 = a + b\nfor i in range(3):\n    y = _t1 * i",
    "_t1 = n + 1\nfor i in range(_t1):\n    y = i",  # a loop's header
    "_t1 = n > 1\nwhile _t1:\n    n = n - 1",
])
def test_another_block_and_a_loop_header_are_left(code):
    assert sugar(code, one_group=True) == code


def test_what_the_backward_sweep_and_the_returned_values_read_is_left():
    assert sugar("_t1 = a + b; y = _t1 * 2", backward="a_bar = y_bar * _t1") == "_t1 = a + b\ny = _t1 * 2"
    # (its adjoint named: the temporary stays beside it)
    assert sugar("_t1 = a * b; y = _t1 + 1", backward="_t1_bar = y_bar") == "_t1 = a * b\ny = _t1 + 1"
    assert sugar("_t1 = a + b; y = _t1 * 2", kept={"_t1"}) == "_t1 = a + b\ny = _t1 * 2"
    assert sugar("_t1 = a + b; loop1_stack.append(_t1)") == "_t1 = a + b\nloop1_stack.append(_t1)"


def test_inside_a_loop_within_its_own_block():
    assert sugar("""
        for i in range(3):
            _t1 = 2 * i; _t2 = i + _t1; s = s + _t2
    """, one_group=True) == same("""
        for i in range(3):
            s = s + (i + 2 * i)""")


def test_a_users_operator_is_a_call():
    # `u * v` of objects whose class's `__mul__` runs (kind `call`): it stays, nothing moves past it
    assert sugar("_t1 = a + b; _t2 = u * v; y = _t1 * _t2", effects={"_t2"}) == same("""
        _t1 = a + b
        _t2 = u * v
        y = _t1 * _t2""")
    assert sugar("_t1 = a + b; _t2 = u * v; y = _t1 * _t2") == "y = (a + b) * (u * v)"


# ---- 2. `a, b = t` -------------------------------------------------------------------

UNPACK = """
    _t5 = conv.kernel_size
    _t6 = len(_t5)
    _t7 = _t6 != 2
    if _t7:
        _t8 = ValueError('wrong number of values to unpack (expected 2) (at layers.py:76)')
        raise _t8
    kh = _t5[0]
    kw = _t5[1]
"""


def test_unpacking_with_its_length_check():
    assert sugar(UNPACK, one_group=True) == "kh, kw = conv.kernel_size"
    assert sugar(UNPACK.replace("kw = _t5[1]", ""), one_group=True) == "kh, _ = conv.kernel_size"
    # the sequence read by the backward sweep too: unpacked, still bound
    assert sugar(UNPACK, backward="a = _t5", one_group=True) == "_t5 = conv.kernel_size\nkh, kw = _t5"


@pytest.mark.parametrize("change", [
    ("kw = _t5[1]", "_ = 3"),  # `_` the function's own: an item nothing reads has no name to take
    ("kh = _t5[0]\n    kw = _t5[1]", "kh = _t5[2]"),  # no item of it read next
    ("kh = _t5[0]", "_t5 = _t5[0]"),  # `t = t[0]; b = t[1]` is not `t, b = t`
    ("raise _t8", "raise _t8\n        y = 1"),
])
def test_what_is_not_an_unpacking(change):
    code = UNPACK.replace(*change)
    assert sugar(code, one_group=True).startswith("_t5 = conv.kernel_size\n_t6 = len(_t5)")
    # the check's flag read elsewhere
    assert sugar(UNPACK, backward="a = _t7", one_group=True).startswith("_t5 = conv.kernel_size\n_t6 = len(_t5)")
    assert sugar(UNPACK).startswith("_t5 = conv.kernel_size\n_t6 = len(_t5)")  # from other source lines


# ---- 3. `a or b`, `a and b` -----------------------------------------------------------

OR = """
    _t49 = 2 * ph; _t50 = h + _t49; _t51 = oh * kh; _t53 = _t50 != _t51
    if _t53: pass
    else:
        _t54 = 2 * pw; _t55 = w + _t54; _t56 = ow * kw; _t53 = _t55 != _t56
    if _t53: x = x[:2]
"""


def test_or_as_written():
    assert sugar(OR, one_group=True) == same("""
        if h + 2 * ph != oh * kh or w + 2 * pw != ow * kw:
            x = x[:2]""")
    # read by the backward sweep: one name, computed as written
    assert sugar(OR, backward="if _t53: x_bar = x_bar", one_group=True) == same("""
        _t53 = h + 2 * ph != oh * kh or w + 2 * pw != ow * kw
        if _t53:
            x = x[:2]""")


def test_and_and_chains_as_written():
    assert sugar("""
        _t1 = a > 0
        if _t1:
            _t2 = b + 1; _t1 = _t2 > c
        y = _t1
    """, one_group=True) == "y = a > 0 and b + 1 > c"
    assert sugar("""
        _t2 = h + 1; _t4 = _t2 > n
        if _t4: pass
        else:
            _t5 = h + 2; _t4 = _t5 > n
            if _t4: pass
            else:
                _t8 = h * 3; _t4 = _t8 > n
        y = _t4
    """, one_group=True) == "y = h + 1 > n or h + 2 > n or h * 3 > n"
    assert sugar("if c:\n    y = c\nelse:\n    y = x * 2.0", one_group=True) == "y = c or x * 2.0"
    assert sugar("if c:\n    y = x * 2.0\nelse:\n    y = c", one_group=True) == "y = c and x * 2.0"


@pytest.mark.parametrize("code", [
    "t = a > 0\nif t:\n    pass\nelse:\n    t = g(b)",  # a call in the second operand
    "t = a > 0\nif t:\n    pass\nelse:\n    u = b + 1\n    t = u > c\nz = u",  # more than its value
    "t = a\nif t:\n    pass\nelse:\n    t = t * 2",  # `b` reads `t`
    "if c:\n    y = c\nelse:\n    y = y * 2.0",
])
def test_what_is_not_an_or(code):
    assert sugar(code, one_group=True) == code


# ---- the sweeps, before and after ----------------------------------------------------

class Pair:
    def __init__(self):
        self.pair = (2.0, 3.0)


def pool_size(x, n):
    h = x.shape[0]
    m = (h + 2 * n - 1) // 2 + 1
    if h + 2 * n != 3 * n or h * 2 != n + 1:
        x = x * 2.0
    return np.sum(x[:m] ** 2)


def unpacked(x, p):
    a, b = p.pair
    return np.sum(x * a + b)


def forward_sweep(f, *args, **options):
    """The forward sweep of ``grad(f)``'s code, without the line numbers of this file."""
    text = srcgrad.source(srcgrad.grad(f, **options), *args)
    sweep = text.split("# ---- forward sweep ----\n")[1].split("    # ---- backward sweep ----")[0]
    return re.sub(r"test_resugar\.py:\d+", "test_resugar.py", sweep)


POOL_SIZE_BEFORE = """\
    # test_resugar.py  h = x.shape[0]
    _t1 = x.shape
    h = _t1[0]
    # test_resugar.py  m = (h + 2 * n - 1) // 2 + 1
    _t2 = 2 * n
    _t3 = h + _t2
    _t4 = _t3 - 1
    _t5 = _t4 // 2
    m = _t5 + 1
    # test_resugar.py  if h + 2 * n != 3 * n or h * 2 != n + 1:
    _t6 = 2 * n
    _t7 = h + _t6
    _t8 = 3 * n
    _t10 = _t7 != _t8
    if _t10:
        pass
    else:
        _t11 = h * 2
        _t12 = n + 1
        _t10 = _t11 != _t12
    if _t10:
        # test_resugar.py  x = x * 2.0
        x_3 = x * 2.0
    else:
        x_3 = x
    # test_resugar.py  return np.sum(x[:m] ** 2)
    _t14 = x_3[:m]
"""
POOL_SIZE_AFTER = """\
    # test_resugar.py  h = x.shape[0]
    h = x.shape[0]
    # test_resugar.py  m = (h + 2 * n - 1) // 2 + 1
    m = (h + 2 * n - 1) // 2 + 1
    # test_resugar.py  if h + 2 * n != 3 * n or h * 2 != n + 1:
    _t10 = h + 2 * n != 3 * n or h * 2 != n + 1
    if _t10:
        # test_resugar.py  x = x * 2.0
        x_3 = x * 2.0
    else:
        x_3 = x
    # test_resugar.py  return np.sum(x[:m] ** 2)
    _t14 = x_3[:m]
"""
UNPACKED_BEFORE = """\
    # test_resugar.py  a, b = p.pair
    _t1 = p.pair
    _t2 = len(_t1)
    _t3 = _t2 != 2
    if _t3:
        _t4 = ValueError('wrong number of values to unpack (expected 2) (at test_resugar.py)')
        raise _t4
    a = _t1[0]
    b = _t1[1]
    # test_resugar.py  return np.sum(x * a + b)
    _t5 = x * a
    _t6 = _t5 + b
"""
UNPACKED_AFTER = """\
    # test_resugar.py  a, b = p.pair
    a, b = p.pair
    # test_resugar.py  return np.sum(x * a + b)
    _t5 = x * a
    _t6 = _t5 + b
"""


def test_forward_sweeps_before_and_after(monkeypatch):
    # (`_t10` is the backward sweep's test too; `_t5`, `_t6`, `_t14` have adjoints there)
    x = np.arange(4.0)
    monkeypatch.setattr(api, "PROGRAMS", {})
    assert forward_sweep(pool_size, x, 2) == POOL_SIZE_AFTER
    assert forward_sweep(unpacked, x, Pair()) == UNPACKED_AFTER
    monkeypatch.setattr(api, "PROGRAMS", {})
    monkeypatch.setattr(resugar, "transform", lambda forward, backward, kept: (forward, backward))
    assert forward_sweep(pool_size, x, 2) == POOL_SIZE_BEFORE
    assert forward_sweep(unpacked, x, Pair()) == UNPACKED_BEFORE


def test_optimize_false_keeps_the_normalized_form():
    text = forward_sweep(unpacked, np.arange(4.0), Pair(), optimize=False)
    assert "len(" in text and "raise" in text


# ---- gradients still right ---------------------------------------------------------------

def either(x, n):
    h = x.shape[0]
    k = (h + 2 * n - 1) // 2 + 1
    y = x * 2.0 if h + 2 * n != 3 * n or h * 2 != n + 1 else x * 3.0
    return np.sum(y[:k] ** 2) + np.sum(np.sin(x))


def unpack_and_or(x, p):
    a, b = p.pair
    s = np.sum(np.tanh(x * a) * b)
    c = a * 2.0 > 5.0 or b - 0.5 > a
    d = a * 2.0 > 3.0 and b - 1.0 > 1.5
    return s * s if c and d else s


@pytest.mark.parametrize("f, args", [(either, (np.array([0.3, -0.5, 0.7, 1.1]), 2)),
                                     (pool_size, (np.array([0.3, -0.5, 0.7, 1.1]), 2)),
                                     (unpacked, (np.array([0.3, -0.5, 0.7]), Pair())),
                                     (unpack_and_or, (np.array([0.3, -0.5, 0.7]), Pair()))])
def test_gradients(f, args):
    for mode in (srcgrad.grad, lambda f: (lambda *a: srcgrad.value_and_grad(f)(*a)[1])):
        np.testing.assert_allclose(mode(f)(*args), numerical_grad(f, args, 0), rtol=1e-6, atol=1e-7)
    tangent = np.array([1.0, -2.0, 0.5, 0.25])[:args[0].size]
    _, jvp = srcgrad.jvp(f)(*args, tangent)
    np.testing.assert_allclose(jvp, numerical_grad(f, args, 0) @ tangent, rtol=1e-6, atol=1e-7)


def test_second_order_over_resugared_code():
    x, p = np.array([0.3, -0.5, 0.7]), Pair()
    hessian = srcgrad.hessian(unpack_and_or)(x, p)
    numeric = np.stack([numerical_grad(lambda v: srcgrad.grad(unpack_and_or)(v, p)[i], [x], 0)
                        for i in range(x.size)])
    np.testing.assert_allclose(hessian, numeric, rtol=1e-5, atol=1e-6)
    g = srcgrad.grad(lambda v, q: srcgrad.grad(unpack_and_or)(v, q)[0])(x, p)
    np.testing.assert_allclose(g, numeric[0], rtol=1e-5, atol=1e-6)
