"""Compile time grows linearly with the function's length: counted, not timed.

Every pass finds what it needs by walking nodes (``nodes.walk`` and the name
helpers built on it), so the number of nodes walked while compiling measures
the compiler's work without a clock: twice the statements must walk about
twice the nodes.  A pass that walks the whole function once per loop, per
branch or per statement (a quadratic one) walks four times as many.  The
functions are ``benchmarks/compile_time.py``'s (its timings are in
docs/benchmarks.md).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import srcgrad
from srcgrad import nodes

# benchmarks/ is not part of the installed package: import it from the checkout.
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import compile_time  # noqa: E402


def _nodes_walked(fn, monkeypatch) -> int:
    """Nodes the compiler walks to compile ``srcgrad.grad(fn, wrt=1)``."""
    walked = [0]
    walk, children_first = nodes.walk, nodes._children_first

    def counting_walk(node):
        for found in walk(node):
            walked[0] += 1
            yield found

    def counting_children_first(node):
        found = children_first(node)
        walked[0] += len(found)
        return found

    with monkeypatch.context() as patch:
        patch.setattr(nodes, "walk", counting_walk)
        patch.setattr(nodes, "_children_first", counting_children_first)
        srcgrad.grad(fn, wrt=1)(*compile_time.arguments())
    return walked[0]


@pytest.mark.parametrize("shape", compile_time.SHAPES)
def test_twice_the_statements_walk_about_twice_the_nodes(shape, monkeypatch):
    small, large = (compile_time.function(n, shape, "_walked") for n in (150, 300))
    ratio = _nodes_walked(large, monkeypatch) / _nodes_walked(small, monkeypatch)
    statements = large.statements / small.statements
    # (measured: 1.02x the growth in statements for straight-line code, 1.00x for loops
    # and branches; a pass walking the whole function once per loop made that 1.19x)
    assert ratio <= 1.08 * statements, (ratio, statements)


def loop_in_a_loop(x):
    tot = x * 0.0
    for rep in range(2):
        acc = x * 0.0
        for w in (x, x):
            acc = acc + np.cos(w)
        c = acc * 1.0
        tot = tot + c
        x = x * 0.9 + tot * 0.1
    return np.sum(tot * x)


def test_a_value_an_enclosing_loop_saves_as_a_shape_is_not_saved_by_the_inner_loop():
    # The inner loop's backward sweep reads `acc` only for its shape, which the outer
    # loop's stack keeps (`np.shape(acc)`): the inner stack holds no `acc` per iteration.
    x = np.array([0.3, -0.2, 0.5])
    code = srcgrad.source(srcgrad.grad(loop_in_a_loop), x)
    assert "loop2_stack.append((_t3, w_2))" in code and "np.shape(acc)" in code
    eps, fd = 1e-6, np.zeros(3)
    for i in range(3):
        step = np.eye(3)[i] * eps
        fd[i] = (loop_in_a_loop(x + step) - loop_in_a_loop(x - step)) / (2 * eps)
    np.testing.assert_allclose(srcgrad.grad(loop_in_a_loop)(x), fd, rtol=1e-6, atol=1e-9)
