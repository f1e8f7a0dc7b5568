"""Indexing objects of the user's with `__getitem__`: made in the function, passed in, or
holding constants; refused at the user's line rather than dropped or crashing."""
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
    assert str(refused.value).split(":")[0].endswith("test_getitem_of_objects.py")


def test_indexing_an_object_of_constants_made_here_runs_as_written():
    np.testing.assert_allclose(srcgrad.grad(indexes_an_object_of_constants)(np.ones(3)), np.full(3, 3.0))


class _Indexed:
    """A class whose own __getitem__ computes from its field."""

    def __init__(self, c):
        self.c = c

    def __getitem__(self, i):
        return self.c * (i + 1.0)


def _index_an_object(p, x):
    return np.sum(p[1] * x)


def _index_an_object_in_a_loop(p, x):
    total = 0.0
    for i in range(2):
        total = total + np.sum(p[i] * x)
    return total


@pytest.mark.parametrize("fn", [_index_an_object, _index_an_object_in_a_loop])
def test_an_objects_own_getitem_is_refused_not_dropped(fn):
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match="__getitem__") as info:
        srcgrad.grad(fn)(_Indexed(np.array([1.0, 2.0])), np.ones(2))
    assert "test_getitem_of_objects.py" in str(info.value)
