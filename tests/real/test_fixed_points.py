"""HIPS autograd examples/fixed_points.py: grad and grad(grad) of a square root found by a
fixed-point iteration (autograd.misc.fixed_points), beside those of np.sqrt; runs on import."""
import linecache
import re

import numpy as np

from .conftest import PROGRAMS, load

SECOND = "print(grad(grad(sqrt))(2.0))\n"


def _numbers(text):
    return np.array([float(s) for s in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", text)])


def test_fixed_points_printed_derivatives(capsys):
    ours = load("fixed_points")
    printed_ours = capsys.readouterr().out
    theirs = load("fixed_points", "autograd")
    printed_theirs = capsys.readouterr().out
    assert len(_numbers(printed_ours)) == len(_numbers(printed_theirs)) == 6
    np.testing.assert_allclose(_numbers(printed_ours), _numbers(printed_theirs), rtol=1e-6)
    np.testing.assert_allclose(ours.grad(ours.sqrt)(3.0), theirs.grad(theirs.sqrt)(3.0), rtol=1e-6)


def test_fixed_points_all_but_the_second_derivative_through_fixed_point(capsys):
    """The program less its last print (above): the values, the first derivatives and
    grad(grad(np.sqrt)), the same numbers as autograd's (the same iterations, the same tol)."""
    load("fixed_points", "autograd")
    printed_theirs = capsys.readouterr().out
    source = (PROGRAMS / "fixed_points.py").read_text()
    assert SECOND in source
    source = source.replace(SECOND, "")
    filename = "<fixed_points.py less grad(grad(sqrt))>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": "_real_fixed_points_first"}
    exec(compile(source, filename, "exec"), namespace)
    printed_ours = capsys.readouterr().out
    assert len(_numbers(printed_ours)) == 5
    np.testing.assert_allclose(_numbers(printed_ours), _numbers(printed_theirs)[:5], rtol=1e-12)
    theirs = load("fixed_points", "autograd")
    np.testing.assert_allclose(namespace["grad"](namespace["sqrt"])(3.0), theirs.grad(theirs.sqrt)(3.0),
                               rtol=1e-12)
