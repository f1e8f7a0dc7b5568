"""Golden input -> output pairs for the coalescing pass, and its refusals."""
from __future__ import annotations

import textwrap

import gast
import numpy as np

import srcgrad
from srcgrad import nodes
from srcgrad.transforms import coalesce


def run(source, live_out, **kw):
    stmts = gast.parse(textwrap.dedent(source)).body
    stmts, _ = coalesce.transform(stmts, live_out, **kw)
    return nodes.to_source(nodes.module(stmts)).strip()


def test_branch_merged_adjoint_in_a_loop_is_one_name():
    before = """
    for t in reversed(range(3)):
        s_3_bar = s_bar
        if c:
            s_bar = s_3_bar
            x_bar = x_bar + s_3_bar * t
        else:
            s_bar = s_3_bar
    """
    after = """
    for t in reversed(range(3)):
        if c:
            x_bar = x_bar + s_bar * t
    """
    assert run(before, {"x_bar"}, fixed={"s_bar"}, entry={"s_bar", "x_bar", "c"}) \
        == textwrap.dedent(after).strip()


def test_carried_adjoint_keeps_its_name_until_the_new_value():
    before = """
    for t in reversed(range(3)):
        h_2_bar = h_bar
        h_2_bar = h_2_bar + g
        a, h_bar = pullback(h_2_bar)
    """
    after = """
    for t in reversed(range(3)):
        h_bar = h_bar + g
        a, h_bar = pullback(h_bar)
    """
    assert run(before, {"h_bar"}, entry={"h_bar", "g"}) == textwrap.dedent(after).strip()


def test_names_whose_values_are_both_needed_stay_apart():
    # x_bar gets its new value while x_4_bar's is still to be read (by a user's
    # hook, which may print: the two are not swapped).
    source = """
    for _ in range(n):
        x_4_bar = x_bar
        x_bar = x_4_bar * w
        w_bar = hook(x_4_bar)
    """
    assert run(source, {"x_bar", "w_bar"}, entry={"x_bar", "w_bar", "n", "w", "hook"}) \
        == textwrap.dedent(source).strip()


def test_a_new_value_waits_for_the_last_read_of_the_old_one():
    before = """
    for _ in range(n):
        x_4_bar = x_bar
        if c:
            x_2_bar = x_4_bar
            x_bar = rt.unbroadcast(x_2_bar * w, x)
            w_bar += rt.unbroadcast(x_2_bar * x, w)
    """
    after = """
    for _ in range(n):
        if c:
            w_bar += rt.unbroadcast(x_bar * x, w)
            x_bar = rt.unbroadcast(x_bar * w, x)
    """
    assert run(before, {"x_bar", "w_bar"}, entry={"x_bar", "w_bar", "n", "c", "w", "x", "rt"}) \
        == textwrap.dedent(after).strip()


def test_two_values_from_before_stay_apart():
    source = """
    a = b
    c = a + b
    """
    # `a` has a value of its own before these lines (read below only if it were joined).
    assert run(source, {"c", "a"}, entry={"a", "b"}) == textwrap.dedent(source).strip()


def test_a_name_read_by_a_nested_function_is_left_alone():
    source = """
    a = b
    f = lambda: a
    b = 2
    """
    assert run(source, {"f", "b"}, entry={"b"}) == textwrap.dedent(source).strip()


def rnn(x, w):
    h = np.zeros(2)
    for t in range(3):
        h = np.tanh(x[t] + h @ w)
    return np.sum(h)


def test_loops_in_the_backward_sweep_read_like_loops_a_person_wrote():
    x, w = np.arange(6.0).reshape(3, 2) / 10, np.eye(2) * 0.5
    code = srcgrad.source(srcgrad.grad(rnn, wrt=(0, 1)), x, w)
    # The backward loop hands the carried adjoint to no second name (h_2 itself is
    # saved for tanh's adjoint, so the forward sweep keeps its copy `h = h_2`).
    assert "h_2_bar" not in code
    assert "h_bar = rt.matmul_lhs(_t2_bar, h, w)" in code
    assert code == srcgrad.source(srcgrad.grad(rnn, wrt=(0, 1)), x, w)  # byte-identical
