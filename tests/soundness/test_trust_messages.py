"""Refusals whose message told something untrue (found by an outside tester): the
refusal stays where one is due; the message names the user's line, says what is
refused and what to write instead, and shows no compiler name (``_t3``)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import srcgrad

X = np.array([1.0, 3.0])


def _first_line(error) -> str:
    return str(error.value).splitlines()[0]


class Delegating:
    """A model that answers any name it lacks (truthy), as a wrapper delegating to a table."""

    def __init__(self):
        self.w = np.array([1.0, 2.0])

    def __getattr__(self, name):
        return self.__dict__.get("table", {}).get(name, 1.0)

    def __call__(self, x):
        return x * self.w


def calls_the_first(models, x):
    return np.sum(models[0](x))


def test_a_model_with_getattr_is_no_gradient_function():
    # (it was refused as "passes a differentiated value to ..., a srcgrad gradient function")
    np.testing.assert_allclose(srcgrad.grad(calls_the_first, wrt=1)([Delegating()], X), [1.0, 2.0])


def keeps(v, acc=[]):  # noqa: B006 - the case under test
    acc.append(v)
    return v * 2


def calls_keeps(x):
    return np.sum(keeps(x))


def test_a_helper_changing_its_mutable_default_says_so():
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError) as refused:
        srcgrad.grad(calls_keeps)(X)
    first = _first_line(refused)
    assert f"{__file__}:{calls_keeps.__code__.co_firstlineno + 1}:" in first
    assert "changes its parameter `acc`" in first and "default" in first
    assert "acc is None" in str(refused.value)


TABLE = {}


def writes_a_global_dict(x):
    TABLE["a"] = x
    return np.sum(x)


def test_writing_into_a_global_dict_says_it_is_a_global():
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError) as refused:
        srcgrad.grad(writes_a_global_dict)(X)
    first = _first_line(refused)
    assert f"{__file__}:{writes_a_global_dict.__code__.co_firstlineno + 1}:" in first
    assert "the global `TABLE`" in first and "local array" not in first


class Lin:
    def __init__(self, w):
        self.w = w

    def __call__(self, x):
        return x * self.w


class Picks:
    def __init__(self):
        self.d = {"a": Lin(np.array([1.0, 2.0])), "b": Lin(np.array([3.0, 4.0]))}

    def __call__(self, x, k):
        return self.d[k](x)


def picks(m, x, k):
    return np.sum(m(x, k))


def test_a_dict_of_layers_indexed_at_run_time_names_it_as_written():
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError) as refused:
        srcgrad.grad(picks, wrt=0)(Picks(), X, "a")
    first = _first_line(refused)
    assert f"{__file__}:{Picks.__call__.__code__.co_firstlineno + 1}:" in first
    assert "`self.d`" in first and "`k`" in first and not re.search(r"\b_t\d", str(refused.value))
    # with a literal key it is right
    m = Picks()
    got = srcgrad.grad(lambda m, x: np.sum(m.d["b"](x)), wrt=0)(m, X)
    np.testing.assert_allclose(got.d["b"].w, X)
