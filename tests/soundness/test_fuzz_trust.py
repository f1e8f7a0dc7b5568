"""srcgrad against an outside differential fuzzer (tests/soundness/fuzz_programs.py): random
programs with containers, objects, decorators, globals and closures that change
between calls, NumPy call forms, loops, branches and helpers, checked against
the original function's value and central finite differences.  A refusal
(``UserCodeError`` at the user's line) counts as right; a wrong value or
gradient, an internal crash or a refusal without the user's line fails.

The CI budget runs the features srcgrad gets right or refuses on this branch
(``PASSING_TODAY``); the ``slow`` run, 2,000 programs over every feature, runs
only when asked for (``pytest -m slow tests/soundness/test_fuzz_trust.py`` or
``SRCGRAD_FUZZ_FULL=1``).  ``python tests/soundness/fuzz_programs.py N [features] --show
--shrink`` prints failing programs, shrunk to the snippets that matter."""
from __future__ import annotations

import functools
import os

from tests.soundness import fuzz_programs as fuzz
import numpy as np
import pytest
from tests.finite_differences import numerical_grad

import srcgrad


def _report(failures):
    lines = []
    for program, outcomes in failures:
        lines.append(f"seed {program.seed} [{', '.join(program.features)}]: "
                     + "; ".join(f"optimize={o.optimize}: {o.kind} {o.detail}" for o in outcomes if o.failed))
    return "\n".join(lines)


def test_fuzzer_budget_with_the_features_that_pass_today():
    tally, failures = fuzz.run(60, fuzz.PASSING_TODAY, first_seed=0, log=None)
    assert not failures, _report(failures)
    assert tally.get("pass", 0) >= 60  # most programs are checked, not refused or unreliable
    assert tally.get("invalid", 0) == 0


@srcgrad.custom_adjoint
def bad_tanh(x):
    return np.tanh(x)


@bad_tanh.defadjoint
def _bad_tanh_adjoint(ans_bar, ans, x):
    return ans_bar * (1 - ans ** 2) * 1.5  # deliberately wrong


@srcgrad.custom_adjoint
def crashing_tanh(x):
    return np.tanh(x)


@crashing_tanh.defadjoint
def _crashing_tanh_adjoint(ans_bar, ans, x):
    return ans_bar * x.no_such_attribute


def _one(lines, prelude=None):
    return fuzz.Program(0, [fuzz.Snippet("t", lines, "v9", "vec", prelude or {})], ["1.0"])


def test_fuzzer_oracle_catches_a_wrong_gradient_and_a_crash():
    """The oracle itself: a deliberately wrong rule is a wrong gradient; an internal
    exception a crash; a refusal at the user's line a refusal."""
    assert [o.kind for o in fuzz.check(_one(["v9 = np.tanh(x)"]))] == ["pass", "pass"]
    imports = {"bad": "from tests.soundness.test_fuzz_trust import bad_tanh, crashing_tanh\n"}
    outcomes = fuzz.check(_one(["v9 = bad_tanh(x)"], imports))
    assert [o.kind for o in outcomes] == ["wrong gradient", "wrong gradient"]
    outcomes = fuzz.check(_one(["v9 = crashing_tanh(x)"], imports))
    assert [o.kind for o in outcomes] == ["crash", "crash"] and "AttributeError" in outcomes[0].detail
    refused = _one(["try:", "    v9 = x * 2.0", "except ValueError:", "    v9 = x"])
    assert [o.kind for o in fuzz.check(refused)] == ["refused", "refused"]


def test_a_file_edited_after_import_is_tallied_apart():
    """The deliberate refusal of a file edited after its import is ``stale source``, not ``refused``."""
    edited = fuzz.Program(0, [fuzz.Snippet("edited_source", ["v9 = x * 1.25"], "v9", "vec",
                                           edit=("v9 = ", "v9 = 2.0 + "))], ["1.0"])
    assert [o.kind for o in fuzz.check(edited)] == ["stale source", "stale source"]


def test_shrinking_keeps_the_failing_snippet():
    program = fuzz.generate(5, ("elementwise", "loop"), size=(3, 3))
    marked = fuzz.Program(0, program.snippets + [fuzz.Snippet("t", ["v99 = undefined_name"], "v99", "vec")],
                          program.weights + ["1.0"])
    small = fuzz.shrink(marked, lambda outcomes: outcomes[0].kind == "invalid")
    assert [s.name for s in small.snippets] == ["v99"]


@pytest.mark.parametrize("seed", range(16))
def test_check_true_agrees_with_the_oracle(seed):
    """The safety net against the fuzzer's oracle, over every feature: where the
    oracle finds the value and gradient right, ``check=True`` stays quiet (no false
    alarm); where it finds them wrong, ``check=True`` raises GradientCheckError.
    (Holds whichever classes are fixed: it tests the net, not the gradients.)"""
    program = fuzz.generate(500 + seed, tuple(fuzz.FEATURES), size=(1, 3))
    outcomes = fuzz.check(program)
    first = outcomes[0]  # optimize=True
    if first.kind in ("unreliable", "invalid") or first.detail == "unreliable after the change":
        pytest.skip(f"finite differences unreliable at this point ({first.kind})")
    seen = fuzz.with_check(program)
    expected = {"pass": "quiet", "wrong value": "caught", "wrong gradient": "caught", "refused": "refused",
                "stale source": "refused", "unlocated refusal": "refused", "crash": "crash"}[first.kind]
    assert seen == expected, f"oracle: {first.kind} {first.detail}\n{program.source()}"


# ---- the fuzzer's findings (FUZZ_FINDINGS.md), each a plain function -----------------------
X = np.array([0.3, -1.1, 0.8, 0.5])
Y = np.linspace(-1.0, 1.0, 12).reshape(3, 4)


def list_literal_sum(x):
    return np.sum(np.sum([x, x], axis=0))


def list_literal_prod(x):
    return np.prod([0.7, x[1]])


def r_literal(x):
    return np.sum(np.r_[x[:2], x[2:]] * np.arange(4.0))


def full_like_of_active(x):
    return np.sum(np.full_like(x, np.sum(x)))


def linspace_of_active(x):
    return np.sum(np.linspace(x[0], 2.0 * x[0], 4) ** 2)


def einsum_three(y):
    return np.einsum("i,ij,j->", y[:, 0], y, X)


def einsum_sublist(y):
    return np.sum(np.einsum(y, [0, 1], [1, 0]) * np.arange(12.0).reshape(4, 3))


def _twice(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        return 2.0 * fn(*args)
    return wrapper


@_twice
def decorated(u):
    return np.sin(u)


def uses_decorated(x):
    return np.sum(decorated(x))


def list_in_a_dict(x):
    ys = {"a": []}
    ys["a"].append(x * 2.0)
    return np.sum(ys["a"][0])


def write_through_alias(x):
    c = x * 1.0
    a = c
    c[1] -= a[2]
    return np.sum(a * 1.0)


def random_of_active(x):
    return np.sum(np.random.normal(x, 1.0))


FINDINGS = [list_literal_sum, list_literal_prod, r_literal, full_like_of_active, linspace_of_active, einsum_three,
            einsum_sublist, uses_decorated, list_in_a_dict, write_through_alias, random_of_active]


@pytest.mark.parametrize("optimize", [True, False])
@pytest.mark.parametrize("fn", FINDINGS, ids=lambda f: f.__name__)
def test_findings_are_right_refused_or_caught_by_check(fn, optimize):
    """Each silently wrong class the fuzzer found: right (fixed on some branch), refused
    at the user's line, or else caught by check=True — never silently wrong under check."""
    arg = Y.copy() if fn in (einsum_three, einsum_sublist) else X.copy()
    np.random.seed(1)
    try:
        got = srcgrad.grad(fn, optimize=optimize)(arg.copy())
    except srcgrad.UserCodeError:
        return
    np.random.seed(1)
    expected = numerical_grad(lambda a: (np.random.seed(1), fn(a))[1], (arg.copy(),), 0)
    if np.allclose(got, expected, rtol=1e-5, atol=1e-7):
        return
    np.random.seed(1)
    with pytest.raises(srcgrad.GradientCheckError):
        srcgrad.grad(fn, optimize=optimize, check=True)(arg.copy())


def _asked_for(config) -> bool:
    expression = config.getoption("markexpr") or ""
    return os.environ.get("SRCGRAD_FUZZ_FULL") == "1" or ("slow" in expression and "not slow" not in expression)


@pytest.mark.slow
def test_fuzzer_2000_programs_every_feature(request):
    if not _asked_for(request.config):
        pytest.skip("2,000 programs take about 20 minutes: run with -m slow or SRCGRAD_FUZZ_FULL=1")
    tally, failures = fuzz.run(2000, tuple(fuzz.FEATURES), first_seed=100_000, log=None)
    assert not failures, f"{tally}\n" + _report(failures)
