"""Forward mode against the outside differential fuzzer (``tests/soundness/fuzz_programs.py``):
each random program's ``srcgrad.jvp`` along a random tangent of all four inputs
must equal ⟨gradient, tangent⟩ from central differences, or refuse at the
user's line.  A wrong tangent, a crash or an unlocated refusal fails."""
from __future__ import annotations

from tests.soundness import fuzz_programs as fuzz
import numpy as np
import pytest

import srcgrad


def check_jvp(program, optimize):
    """``"pass"``, ``"refused"``, ``"unreliable"``/``"invalid"`` (no reference), or the failure."""
    module = fuzz.load(program.source(), program.edits)
    rng = np.random.default_rng(program.seed + 10_000)
    args = fuzz._inputs(rng)
    try:
        reference = fuzz._reliable_reference(module.program, args)
    except Exception:  # noqa: BLE001 - the program itself fails
        return "invalid"
    if reference is None:
        return "unreliable"
    value, gradient = reference
    tangent = fuzz._unflat(np.random.default_rng(program.seed).standard_normal(gradient.size))
    np.random.seed(7)
    try:
        got_value, got = srcgrad.jvp(module.program, wrt=(0, 1, 2, 3), optimize=optimize)(
            *fuzz._copy(args), tangent)
    except srcgrad.UserCodeError as exc:
        if exc.origin is None or srcgrad.errors.is_library_file(exc.origin.filename):
            return f"unlocated refusal: {str(exc).splitlines()[0]}"
        return "refused"
    except Exception as exc:  # noqa: BLE001 - the oracle's point
        return f"crash: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    if not np.isclose(float(got_value), value, rtol=1e-9, atol=1e-9):
        return f"wrong value {float(got_value)!r}, f gives {value!r}"
    expected = float(gradient @ fuzz._flat(tangent))
    if not np.isclose(float(got), expected, rtol=1e-4, atol=1e-5):
        return f"wrong tangent {float(got)!r}, differences give {expected!r}"
    return "pass"


@pytest.mark.parametrize("seed", range(200))
def test_fuzzed_program(seed):
    program = fuzz.generate(seed, fuzz.PASSING_TODAY)
    for optimize in (True, False):
        outcome = check_jvp(program, optimize)
        assert outcome in ("pass", "refused", "unreliable", "invalid"), \
            f"seed {seed} [{', '.join(program.features)}] optimize={optimize}: {outcome}\n{program.source()}"
