"""`np.einsum` with an ellipsis: the forms NumPy accepts are differentiated, one NumPy refuses
is NumPy's own error at the user's line."""

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import numerical_grad


HERE = __file__


def _line(fn, text):
    """The line number of ``text`` in this file, at or after ``fn``'s def."""
    lines = open(HERE).read().splitlines()
    start = fn.__code__.co_firstlineno
    return next(i + 1 for i in range(start - 1, len(lines)) if text in lines[i])


# ---- einsum with an ellipsis summed out: NumPy's own error, at the user's line -------------

def einsum_summed_ellipsis(x):
    return np.einsum("...ij,...ij->", x, x)


def test_einsum_ellipsis_summed_out_is_numpys_own_error_at_the_users_line():
    x = np.ones((2, 2, 3))
    with pytest.raises(ValueError, match="ellipsis") as plain:  # NumPy refuses the call itself
        einsum_summed_ellipsis(x)
    with pytest.raises(ValueError, match="ellipsis") as info:
        srcgrad.grad(einsum_summed_ellipsis)(x)
    assert str(info.value) == str(plain.value)
    line = _line(einsum_summed_ellipsis, "np.einsum")
    assert f"{HERE}:{line}" in info.value.__notes__[0]


@pytest.mark.parametrize("spec", ["...ij,...ij->...", "i...,i...->...", "...ij->"])
def test_einsum_ellipsis_forms_numpy_accepts(spec):
    x = np.random.default_rng(0).standard_normal((2, 2, 3) if spec != "...ij->" else (2, 3))

    def f(x):
        y = np.einsum(spec, x, x) if "," in spec else np.einsum(spec, x)
        return np.sum(np.sin(y))
    np.testing.assert_allclose(srcgrad.grad(f)(x), numerical_grad(f, [x], 0), rtol=1e-6, atol=1e-8)
