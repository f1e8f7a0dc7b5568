"""Defects a newcomer found trying the README (fixed; each asserts the right behaviour)."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad


class Indexed:
    def __init__(self, w):
        self.w = w

    def __getitem__(self, i):
        return self.w[i]


def indexes_an_object_made_here(x):
    s = Indexed(x)
    return s[0] * s[1]


def indexes_an_object_of_constants(x):
    s = Indexed(np.array([2.0, 3.0]))
    return np.sum(x) * s[1]


def test_indexing_an_object_made_here_is_refused_at_the_line_not_a_crash():
    # It crashed with IndexError inside rt.getitem_adjoint (the adjoint keyed by position
    # matched no field).  Passed in, the same object was refused already.
    with pytest.raises(srcgrad.errors.UserCodeError, match="`__getitem__`") as refused:
        srcgrad.grad(indexes_an_object_made_here)(np.array([0.3, -0.2, 0.5]))
    assert str(refused.value).split(":")[0].endswith("test_found_by_newcomer.py")


def test_indexing_an_object_of_constants_made_here_runs_as_written():
    np.testing.assert_allclose(srcgrad.grad(indexes_an_object_of_constants)(np.ones(3)), np.full(3, 3.0))
