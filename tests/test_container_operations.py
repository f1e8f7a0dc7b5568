"""Python's containers as values, each operation with an adjoint of its own:
``sorted`` (the permutation's inverse applied to the adjoint; ties in Python's stable
order), ``d[k] += v`` on an entry holding a number (rebound, as Python does), and the
list and dict methods that reorder, copy or remove entries."""
import numpy as np
import pytest

import srcgrad
from conftest import numerical_grad

X = np.array([[0.5, -1.0, 0.25], [1.5, 0.3, -0.7], [-0.2, 0.8, 1.1], [0.9, -0.4, 0.6]])


def sorted_generator(w):
    s = sorted(np.sum(x * w) for x in X)
    return s[0] * 2 + s[-1] + s[1] * s[2]


def sorted_array(w):
    return sorted(X @ w)[-1] * 3 + sorted(X @ w)[0]


def sorted_reverse(w):
    s = sorted([np.sum(w), np.sum(w ** 2), float(w[0])], reverse=True)
    return s[0] * 3 + s[1] * 2 + s[2]


def sorted_by_key(w):
    xs = [w, w ** 2, np.sin(w)]
    s = sorted(xs, key=lambda v: np.sum(v))
    return np.sum(s[0] * 3 + s[1] * 2 + s[2])


def sorted_ties(w):
    s = sorted([np.sum(w), np.sum(w), np.sum(w * 0.5)])  # equal items keep their order
    return s[0] * 3 + s[1] * 2 + s[2] * 5


def sorted_in_loop(w):
    total = 0.0
    for k in range(1, 3):
        s = sorted([np.sum(w * x) for x in X[:k + 1]])
        total = total + s[0] * k
    return total


def _smallest_two(vs):
    s = sorted(vs)
    return s[0] + 2 * s[1]


def sorted_in_helper(w):
    return _smallest_two([np.sum(x * w) for x in X])


class Ranker:
    def __init__(self, scale):
        self.scale = scale

    def __call__(self, w):
        s = sorted([np.sum(x * w) * self.scale for x in X], reverse=True)
        return s[0] - s[-1]


def sorted_as_method(w):
    return Ranker(1.5)(w)


def dict_entry_accumulated(w):
    stats = {"loss": 0.0, "n": 0}
    for i in range(3):
        stats["loss"] += np.sum(np.sin(w * i))
        stats["n"] += 1
    return stats["loss"] / stats["n"]


def dict_entry_accumulated_once(w):
    stats = {"loss": 0.0}
    stats["loss"] += np.sum(w ** 2)
    return stats["loss"] * 2


CASES = [sorted_generator, sorted_array, sorted_reverse, sorted_by_key, sorted_ties, sorted_in_loop,
         sorted_in_helper, sorted_as_method, dict_entry_accumulated, dict_entry_accumulated_once]


@pytest.mark.parametrize("optimize", [True, False])
@pytest.mark.parametrize("f", CASES, ids=[f.__name__ for f in CASES])
def test_gradient_matches_finite_differences(f, optimize):
    w = np.array([0.3, -0.7, 1.1])
    got = srcgrad.grad(f, optimize=optimize)(w)
    np.testing.assert_allclose(got, numerical_grad(f, (w,), 0), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("f", [sorted_generator, sorted_by_key, sorted_as_method, dict_entry_accumulated])
def test_float32_stays_float32(f):
    w = np.array([0.3, -0.7, 1.1], dtype=np.float32)
    got = srcgrad.grad(f)(w)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, numerical_grad(f, (w.astype(np.float64),), 0), rtol=2e-3, atol=1e-4)


@pytest.mark.parametrize("f", [sorted_generator, sorted_reverse, sorted_by_key, sorted_ties])
def test_forward_mode(f):
    w, v = np.array([0.3, -0.7, 1.1]), np.array([1.0, 0.5, -0.2])
    _, tangent = srcgrad.jvp(f)(w, v)
    np.testing.assert_allclose(tangent, numerical_grad(f, (w,), 0) @ v, rtol=1e-6, atol=1e-8)


def sorted_items(p):
    total = 0.0
    for i, (k, v) in enumerate(sorted(p.items())):
        total = total + (i + 1) * np.sum(v ** 2)
    return total


def test_sorted_items_of_a_dict_argument():
    p = {"b": np.array([0.3, -0.7]), "a": np.array([1.1]), "c": np.array([0.5, 0.2, -0.1])}
    got = srcgrad.grad(sorted_items)(p)
    for k in p:
        def f(v, k=k):
            return sorted_items({**p, k: v})
        np.testing.assert_allclose(got[k], numerical_grad(f, (p[k],), 0), rtol=1e-6)


def entry_holding_an_array(w):
    acc = np.zeros(3)
    stats = {"acc": acc, "n": 0}
    for i in range(2):
        stats["n"] += 1
        stats["acc"] += w * i  # (NumPy adds into `acc` itself)
    return np.sum(stats["acc"]) + np.sum(acc * w)


def test_an_entry_holding_an_array_is_refused():
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match=r"in place") as raised:
        srcgrad.grad(entry_holding_an_array)(np.ones(3))
    assert "test_container_operations.py:" in str(raised.value) and 'stats["acc"] += w * i' in str(raised.value)
