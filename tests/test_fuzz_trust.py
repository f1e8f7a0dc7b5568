"""srcgrad against an outside differential fuzzer (tests/fuzz_programs.py): random
programs with containers, objects, decorators, globals and closures that change
between calls, NumPy call forms, loops, branches and helpers, checked against
the original function's value and central finite differences.  A refusal
(``UserCodeError`` at the user's line) counts as right; a wrong value or
gradient, an internal crash or a refusal without the user's line fails.

The CI budget runs the features srcgrad gets right or refuses on this branch
(``PASSING_TODAY``); the ``slow`` run, 2,000 programs over every feature, runs
only when asked for (``pytest -m slow tests/test_fuzz_trust.py`` or
``SRCGRAD_FUZZ_FULL=1``).  ``python tests/fuzz_programs.py N [features] --show
--shrink`` prints failing programs, shrunk to the snippets that matter."""
from __future__ import annotations

import os

import numpy as np
import pytest

import fuzz_programs as fuzz
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
    imports = {"bad": "from test_fuzz_trust import bad_tanh, crashing_tanh\n"}
    outcomes = fuzz.check(_one(["v9 = bad_tanh(x)"], imports))
    assert [o.kind for o in outcomes] == ["wrong gradient", "wrong gradient"]
    outcomes = fuzz.check(_one(["v9 = crashing_tanh(x)"], imports))
    assert [o.kind for o in outcomes] == ["crash", "crash"] and "AttributeError" in outcomes[0].detail
    refused = _one(["try:", "    v9 = x * 2.0", "except ValueError:", "    v9 = x"])
    assert [o.kind for o in fuzz.check(refused)] == ["refused", "refused"]


def test_shrinking_keeps_the_failing_snippet():
    program = fuzz.generate(5, ("elementwise", "loop"), size=(3, 3))
    marked = fuzz.Program(0, program.snippets + [fuzz.Snippet("t", ["v99 = undefined_name"], "v99", "vec")],
                          program.weights + ["1.0"])
    small = fuzz.shrink(marked, lambda outcomes: outcomes[0].kind == "invalid")
    assert [s.name for s in small.snippets] == ["v99"]


def _asked_for(config) -> bool:
    expression = config.getoption("markexpr") or ""
    return os.environ.get("SRCGRAD_FUZZ_FULL") == "1" or ("slow" in expression and "not slow" not in expression)


@pytest.mark.slow
def test_fuzzer_2000_programs_every_feature(request):
    if not _asked_for(request.config):
        pytest.skip("2,000 programs take about 20 minutes: run with -m slow or SRCGRAD_FUZZ_FULL=1")
    tally, failures = fuzz.run(2000, tuple(fuzz.FEATURES), first_seed=100_000, log=None)
    assert not failures, f"{tally}\n" + _report(failures)
