"""HIPS autograd examples/fixed_points.py: grad and grad(grad) of a square root found by a
fixed-point iteration (autograd.misc.fixed_points), beside those of np.sqrt; runs on import."""
import re

import numpy as np
import pytest
from .conftest import load


@pytest.mark.xfail(strict=True, raises=ImportError, reason=(
    "`from srcgrad.misc.fixed_points import fixed_point`: srcgrad has no fixed_point "
    "(ModuleNotFoundError); past it, the program's grad(np.sqrt)(2.0) is refused too "
    "(NoSourceError: 'np.sqrt is NumPy's function, not yours')"))
def test_fixed_points_printed_derivatives(capsys):
    ours = load("fixed_points")
    printed_ours = capsys.readouterr().out
    theirs = load("fixed_points", "autograd")
    printed_theirs = capsys.readouterr().out
    numbers = lambda text: np.array([float(s) for s in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", text)])
    assert len(numbers(printed_ours)) == len(numbers(printed_theirs)) == 6
    np.testing.assert_allclose(numbers(printed_ours), numbers(printed_theirs), rtol=1e-6)
    np.testing.assert_allclose(ours.grad(ours.sqrt)(3.0), theirs.grad(theirs.sqrt)(3.0), rtol=1e-6)
