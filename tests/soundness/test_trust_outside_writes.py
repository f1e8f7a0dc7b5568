"""A callee that writes, in place, into an array the caller's backward sweep reads,
not given to it as an argument (a global, a class attribute, its receiver's):
refused at the call (analysis/outside.py).  Bookkeeping stays accepted."""
import numpy as np
import pytest

import srcgrad

G = np.array([3.0, 1.0, 2.0])
G32 = np.array([3.0, 1.0, 2.0], dtype=np.float32)
LOG = []
STATS = {"calls": 0}


def _reset():
    G[:] = [3.0, 1.0, 2.0]
    G32[:] = [3.0, 1.0, 2.0]


def _write():
    G[0] = 5.0


def _write_twice_removed():
    _write()


def _copyto():
    np.copyto(G, 5.0)


def _fill():
    G.fill(5.0)


def _iadd_global():
    global G
    G += 1.0


def _write32():
    G32[0] = 5.0


def two_calls_deep(x):
    a = np.sum(x * G)
    _write_twice_removed()
    return a * np.sum(x)


def in_a_loop(x):
    s = 0.0
    for _ in range(2):
        s = s + np.sum(x * G)
        _write()
    return s


def by_copyto(x):
    a = np.sum(x * G)
    _copyto()
    return a * np.sum(x)


def by_fill(x):
    a = np.sum(x * G)
    _fill()
    return a * np.sum(x)


def by_augmented_global(x):
    a = np.sum(x * G)
    _iadd_global()
    return a * np.sum(x)


def in_float32(x):
    a = np.sum(x * G32)
    _write32()
    return a * np.sum(x)


class Model:
    def __init__(self):
        self.w = np.array([3.0, 1.0, 2.0])
        self.calls = 0
        self.log = []

    def step(self):
        self.w[0] = 5.0

    def count(self, v):
        self.calls += 1
        self.log.append(v)

    def loss(self, x):
        a = np.sum(x * self.w)
        self.step()
        return a * np.sum(x)

    def counted_loss(self, x):
        a = np.sum(x * self.w)
        self.count(1.0)
        return a * np.sum(x)


def a_models_method(x, model):
    return model.loss(x)


@pytest.mark.parametrize("fn", [two_calls_deep, in_a_loop, by_copyto, by_fill, by_augmented_global,
                                in_float32])
def test_a_callee_writing_a_global_the_backward_sweep_reads_is_refused(fn):
    _reset()
    x = np.array([0.5, -1.0, 2.0], dtype=np.float32 if fn is in_float32 else np.float64)
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match="in place") as info:
        srcgrad.grad(fn)(x)
    assert "G" in str(info.value) or fn is in_a_loop or fn is two_calls_deep


def test_a_models_method_writing_its_own_array_is_refused():
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match="in place"):
        srcgrad.grad(a_models_method)(np.array([0.5, -1.0, 2.0]), Model())


def _bookkeeping(v):
    LOG.append(v)
    STATS["calls"] += 1
    print("step", STATS["calls"], end="\r")


def with_bookkeeping(x):
    a = np.sum(x * G)
    _bookkeeping(1.0)
    return a * np.sum(x)


def with_a_counting_method(x, model):
    return model.counted_loss(x)


def writes_before_the_read(x):
    _write()
    return np.sum(x * G)


@pytest.mark.parametrize("fn", [with_bookkeeping, with_a_counting_method, writes_before_the_read])
def test_bookkeeping_and_writes_before_the_read_are_differentiated(fn, capsys):
    _reset()
    x = np.array([0.5, -1.0, 2.0])
    rest = (Model(),) if fn is with_a_counting_method else ()
    g = srcgrad.grad(fn)(x, *rest)
    eps = 1e-6
    expected = []
    for e in np.eye(3):
        _reset()
        hi = fn(x + eps * e, *(Model(),) if rest else ())
        _reset()
        lo = fn(x - eps * e, *(Model(),) if rest else ())
        expected.append((hi - lo) / (2 * eps))
    np.testing.assert_allclose(g, expected, rtol=1e-6)
