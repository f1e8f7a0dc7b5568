"""``isinstance(p, (list, tuple))`` (or ``dict``) of a parameter whose kind the compiled
code is specialised on is decided when compiling, and the branch that does not run is
dropped before anything reads it: a pytree helper written for both a list and an array
(``v * v`` of a list would be refused) compiles for each."""
import numpy as np
import pytest

import srcgrad
from conftest import numerical_grad


def squared_norm(v):
    if isinstance(v, (list, tuple)):
        return sum(squared_norm(e) for e in v)
    if isinstance(v, dict):
        return sum(squared_norm(e) for e in v.values())
    return np.sum(v * v)


X = np.array([0.3, -0.7, 1.1])


@pytest.mark.parametrize("tree", [X, [X, 2.0 * X], (X,), {"a": X, "b": X * 3.0}], ids=["array", "list", "tuple", "dict"])
def test_a_pytree_helper_of_each_kind(tree):
    grads = srcgrad.grad(squared_norm)(tree)
    flat_tree = srcgrad.tree.flatten(tree)[1]
    for g, leaf in zip(srcgrad.tree.flatten(grads)[1], flat_tree):
        np.testing.assert_allclose(g, 2.0 * leaf)


def through_a_helper(x):
    return squared_norm([x, np.sin(x)]) + squared_norm(x)


@pytest.mark.xfail(strict=True, raises=srcgrad.UnsupportedSyntaxError, reason=(
    "inlined with a list display for `v`, the callee's `isinstance` is not decided by the display's "
    "kind (only the compiled function's own parameters' kinds decide it): `v.values()` is refused"))
def test_called_on_a_list_and_an_array():
    np.testing.assert_allclose(srcgrad.grad(through_a_helper)(X), numerical_grad(through_a_helper, (X,), 0),
                               rtol=1e-6)


def reassigned(v):
    if isinstance(v, list):  # `v` is assigned below: not decided when compiling, run as written
        v = v[0]
    return np.sum(v * v)


def test_a_parameter_assigned_again_is_left_to_run():
    np.testing.assert_allclose(srcgrad.grad(reassigned)(X), 2.0 * X)
