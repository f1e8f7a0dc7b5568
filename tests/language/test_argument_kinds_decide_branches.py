"""``isinstance(p, (list, tuple))`` (or ``dict``) of a parameter whose kind the compiled
code is specialised on is decided when compiling, and the branch that does not run is
dropped before anything reads it: a pytree helper written for both a list and an array
(``v * v`` of a list would be refused) compiles for each."""
import numpy as np
import pytest

import srcgrad
from tests.finite_differences import numerical_grad


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


def given_a_display(x):
    return squared_norm([x, np.sin(x)]) + squared_norm((x * 2.0,))


def test_inlined_where_the_call_gives_a_list_or_tuple_display():
    np.testing.assert_allclose(srcgrad.grad(given_a_display)(X), numerical_grad(given_a_display, (X,), 0),
                               rtol=1e-6)


def given_an_array(x):
    return squared_norm([x, np.sin(x)]) + squared_norm(x)


def test_inlined_where_the_call_gives_an_array():  # (a parameter of the compiled function: its rank)
    np.testing.assert_allclose(srcgrad.grad(given_an_array)(X), numerical_grad(given_an_array, (X,), 0),
                               rtol=1e-6)


def reassigned(v):
    if isinstance(v, list):  # `v` is assigned below: not decided when compiling, run as written
        v = v[0]
    return np.sum(v * v)


def test_a_parameter_assigned_again_is_left_to_run():
    np.testing.assert_allclose(srcgrad.grad(reassigned)(X), 2.0 * X)
