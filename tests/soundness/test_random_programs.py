"""Property test: random small programs — straight-line arithmetic, branches and
loops over a few scalars and arrays — differentiated by srcgrad agree with
central finite differences.  A failure hypothesis finds becomes a named
regression test below the property."""
from __future__ import annotations

import linecache

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import srcgrad
from tests.finite_differences import numerical_grad

VARIABLES = ("a", "b", "x")  # a, b: floats; x: a vector of 3
UNARY = ("np.sin({})", "np.cos({})", "np.tanh({})", "({}) * ({})", "np.sqrt(1 + ({}) ** 2)")
BINARY = ("{} + {}", "{} - {}", "{} * {}", "{} * 0.5 + {}")

atoms = st.sampled_from(VARIABLES + ("0.7", "1.3"))


@st.composite
def expressions(draw, depth=2):
    if depth == 0 or draw(st.booleans()):
        return draw(atoms)
    if draw(st.booleans()):
        inner = draw(expressions(depth=depth - 1))
        return draw(st.sampled_from(UNARY)).format(inner, inner)
    left, right = draw(expressions(depth=depth - 1)), draw(expressions(depth=depth - 1))
    return draw(st.sampled_from(BINARY)).format(left, right)


@st.composite
def statements(draw, indent="    ", depth=1):
    kind = draw(st.sampled_from(("assign", "assign", "if", "for") if depth else ("assign",)))
    target = draw(st.sampled_from(VARIABLES))
    if kind == "assign":
        return [f"{indent}{target} = {draw(expressions())}"]
    if kind == "if":
        threshold = draw(st.sampled_from(("0.0", "0.5", "-0.5")))
        body = draw(statements(indent + "    ", depth - 1))
        orelse = draw(statements(indent + "    ", depth - 1))
        return [f"{indent}if np.sum({draw(atoms)}) > {threshold}:", *body, f"{indent}else:", *orelse]
    trips = draw(st.integers(1, 3))
    body = draw(statements(indent + "    ", depth - 1))
    return [f"{indent}for i in range({trips}):", *body,
            f"{indent}    {target} = {target} * 0.9"]


@st.composite
def programs(draw):
    lines = ["def program(a, b, x):"]
    for _ in range(draw(st.integers(1, 4))):
        lines += draw(statements())
    lines.append(f"    return np.sum({draw(expressions())}) + np.sum(x * a) + np.sum(b)")
    return "\n".join(lines) + "\n"


_counter = [0]


def compile_program(source):
    """A function whose source srcgrad can read: registered with linecache."""
    _counter[0] += 1
    filename = f"<random program {_counter[0]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"np": np}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - generated test programs
    return namespace["program"]


def _difference(fn, args, index, step, base):
    x = np.array(args[index], dtype=np.float64)
    out = np.zeros_like(x)
    flat, out_flat = x.reshape(-1), out.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + step
        moved = list(args)
        moved[index] = x.copy() if x.ndim else float(x)
        out_flat[i] = (float(fn(*moved)) - base) / step
        flat[i] = old
    return out


def _finite(values):
    return all(np.all(np.isfinite(v)) for v in values)


def check_program(source, a, b, x, reject=assume):
    """``reject(ok)`` discards an example where finite differences are unreliable."""
    fn = compile_program(source)
    args = (a, b, x)
    value = float(fn(*args))
    reject(np.isfinite(value) and abs(value) < 1e6)
    coarse = [numerical_grad(fn, args, i, eps=1e-4) for i in range(3)]
    fine = [numerical_grad(fn, args, i, eps=1e-6) for i in range(3)]
    # A branch flipping inside the finite-difference step shows as these disagreeing;
    # at a kink (both branches meet) the one-sided differences disagree.
    right = [_difference(fn, args, i, 1e-6, value) for i in range(3)]
    left = [_difference(fn, args, i, -1e-6, value) for i in range(3)]
    reject(_finite(coarse + fine + left + right) and all(
        np.allclose(c, f, rtol=1e-3, atol=1e-4) and np.allclose(r, l, rtol=1e-3, atol=1e-4)
        for c, f, r, l in zip(coarse, fine, right, left)))
    for optimize in (True, False):
        # check=True: the safety net runs on every property example too (and must not cry wolf).
        grads = srcgrad.grad(fn, wrt=(0, 1, 2), optimize=optimize, check=True)(*args)
        for g, expected in zip(grads, fine):
            np.testing.assert_allclose(g, expected, rtol=1e-5, atol=1e-6, err_msg=source)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.floats(-1.5, 1.5), st.floats(-1.5, 1.5),
       st.lists(st.floats(-1.5, 1.5), min_size=3, max_size=3))
def test_random_programs_match_finite_differences(source, a, b, x):
    check_program(source, a, b, np.array(x))


# ---- regression tests: programs hypothesis found failing, and edge cases ------
REGRESSIONS = {
    # A scalar name rebound to a vector inside a loop: the carried name changes
    # rank, so rank inference must call it unknown rather than keep the first.
    "rank_changes_in_loop": (
        "def program(a, b, x):\n"
        "    for i in range(2):\n"
        "        a = x * a\n"
        "        a = a * 0.9\n"
        "    return np.sum(a) + np.sum(x * a) + np.sum(b)\n"),
    # `b = np.sin(a)` then `a` carried (rebound) by a loop, a scalar before it and a
    # vector after: b's adjoint must not take the shape of the name `a` ends with.
    "shape_of_a_rebound_name": (
        "def program(a, b, x):\n"
        "    a = a\n"
        "    b = np.sin(a)\n"
        "    for i in range(1):\n"
        "        a = x\n"
        "        a = a * 0.9\n"
        "    return np.sum(a) + np.sum(x * a) + np.sum(b)\n"),
    # The same with the parameter itself carried by the loop.
    "shape_of_a_rebound_parameter": (
        "def program(a, b, x):\n"
        "    b = np.sin(a)\n"
        "    for i in range(1):\n"
        "        a = x\n"
        "        a = a * 0.9\n"
        "    return np.sum(a) + np.sum(x * a) + np.sum(b)\n"),
}


@pytest.mark.parametrize("source", REGRESSIONS.values(), ids=REGRESSIONS.keys())
def test_regressions(source):
    def must_hold(ok):
        assert ok, "finite differences are unreliable at this point"

    check_program(source, 0.3, -0.4, np.array([0.5, -0.2, 0.9]), reject=must_hold)


def test_found_kink_at_a_branch_boundary_uses_the_branch_that_ran():
    """Found by the property test: at a == 0 both branches meet at a kink; the
    gradient is the derivative of the branch that ran (else: a = b), so 0 for a."""
    fn = compile_program("def program(a, b, x):\n    if np.sum(a) > 0.0:\n        a = a\n"
                         "    else:\n        a = b\n    return np.sum(a) + np.sum(x * a) + np.sum(b)\n")
    g_a, g_b, g_x = srcgrad.grad(fn, wrt=(0, 1, 2))(0.0, 0.0, np.zeros(3))
    assert g_a == 0.0 and g_b == 2.0
    np.testing.assert_array_equal(g_x, np.zeros(3))
