"""``srcgrad.show(g, *args)`` prints what runs: the code of ``g`` and, after it, the code of
each function its code calls that is compiled when it runs (a closure made by a factory,
a nested ``def``, a layer picked at run time), each headed by its name and ``file:line``."""
from __future__ import annotations

import random

import numpy as np

import srcgrad


def make_scaled(a):
    def scaled(x):
        return np.sum(a * np.sin(x) * x)
    return scaled


def closure_loss(w, x):
    f = make_scaled(2.0)
    return f(x * w)


def header(fn) -> str:
    code = fn.__code__
    where = f"{code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno}"
    return f"# ---- called when it runs: {fn.__qualname__} ({where}) ----"


def test_show_prints_the_code_of_a_closure_called_at_run_time(capsys):
    w, x = np.ones(3), np.linspace(0.1, 0.3, 3)
    srcgrad.show(srcgrad.grad(closure_loss), w, x)
    printed = capsys.readouterr().out
    caller, callee = printed.split(header(make_scaled(1.0)))
    assert "def closure_loss_grad(w, x" in caller and "dispatch.vjp_call(f, (0,)" in caller
    # The callee's own reverse mode: its forward sweep and, in its pullback, its backward sweep.
    assert callee.lstrip("\n").startswith("# srcgrad: reverse mode of scaled (test_show_callees.py:")
    assert "def scaled_vjp(x):" in callee and "def scaled_pullback(result_bar):" in callee
    assert "np.cos(x)" in callee  # (sin's adjoint: the backward code is shown, not a call of it)
    assert srcgrad.source(srcgrad.grad(closure_loss), w, x) == printed


def make_composed(g):
    def composed(x):
        return g(x) * 2.0  # g: a closure held in this one's cell, its vjp bound at its first call
    return composed


def composed_loss(w, x):
    f = make_composed(make_scaled(2.0))
    return f(x * w) + f(x)


def test_callees_of_callees_are_shown_once_each_in_the_order_they_run(capsys):
    w, x = np.ones(3), np.linspace(0.1, 0.3, 3)
    srcgrad.show(srcgrad.grad(composed_loss), w, x)
    printed = capsys.readouterr().out
    headers = [line for line in printed.splitlines() if line.startswith("# ---- called when it runs:")]
    composed = make_composed(None)
    assert headers == [header(composed)]  # (f is called twice: shown once)
    shown = printed.split(header(composed))[1]
    # `g`, a closure held in composed's cell, is inlined into it: its lines are composed's
    assert "def composed_vjp(x):" in shown and "test_show_callees.py:15  return np.sum(a * np.sin(x) * x)" in shown


def test_show_leaves_the_random_state_and_the_code_without_callees_alone(capsys):
    def noisy(w, x):
        f = make_scaled(np.random.standard_normal())  # a draw: show runs the call once
        return f(x * w) + random.random()
    w, x = np.ones(3), np.ones(3)
    np.random.seed(3)
    random.seed(4)
    before = np.random.standard_normal(), random.random()
    np.random.seed(3)
    random.seed(4)
    srcgrad.show(srcgrad.grad(noisy), w, x)
    assert (np.random.standard_normal(), random.random()) == before
    assert header(make_scaled(1.0)) in capsys.readouterr().out

    def plain(w):  # nothing compiled at run time: the code alone, nothing run
        return np.sum(np.sin(w))
    text = srcgrad.source(srcgrad.grad(plain), w)
    assert "---- called when it runs" not in text
