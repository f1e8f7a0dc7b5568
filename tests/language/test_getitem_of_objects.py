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


# ---- layers read by index: `self.seq[0]`, `self.seq[-1]`, `self.layers[1]` --------------

from srcgrad import nn  # noqa: E402
from srcgrad.testing import check_grads  # noqa: E402


class _IndexesItsLayers(nn.Module):
    def __init__(self, dtype=np.float64):
        self.seq = nn.Sequential(nn.Linear(3, 3, dtype=dtype), nn.Tanh(), nn.Linear(3, 2, dtype=dtype))
        self.layers = [nn.Linear(2, 2, dtype=dtype), nn.Linear(2, 2, dtype=dtype)]

    def forward(self, x):
        h = self.seq[1](self.seq[0](x))
        h = self.seq[-1](h)
        return self.layers[1](self.layers[0](h)) + self.layers[-2](h)

    def head(self):
        return self.seq[-1]


def _indexed_loss(m, x):
    return np.sum(m(x) ** 2)


def _indexed_in_a_loop(m, x):
    total = 0.0
    for k in range(3):
        total = total + np.sum(m.seq[2](np.tanh(m.seq[0](x * (k + 1)))))
    return total


@pytest.mark.parametrize("loss", [_indexed_loss, _indexed_in_a_loop])
def test_layers_read_by_index_are_inlined_and_right(loss):
    model, x = _IndexesItsLayers(), np.linspace(-1, 1, 6).reshape(2, 3)
    check_grads(loss, (model, x), wrt=0)
    source = srcgrad.source(srcgrad.grad(loss), model, x)
    assert "dispatch." not in source  # (every layer inlined: plain NumPy code)


def test_layers_read_by_index_in_float32():
    model, x = _IndexesItsLayers(np.float32), np.linspace(-1, 1, 6).reshape(2, 3).astype(np.float32)
    g = srcgrad.grad(_indexed_loss)(model, x)
    assert g.seq.layers[0].weight.dtype == np.float32
    g64 = srcgrad.grad(_indexed_loss)(model.double(), x.astype(np.float64))
    np.testing.assert_allclose(g.seq.layers[-1].weight, g64.seq.layers[-1].weight, rtol=1e-3, atol=1e-5)


def test_a_layer_swapped_by_index_between_calls_compiles_again():
    model, x = _IndexesItsLayers(), np.linspace(-1, 1, 6).reshape(2, 3)
    grad = srcgrad.grad(_indexed_loss)
    grad(model, x)
    model.seq.layers[1] = nn.Sigmoid()
    check_grads(_indexed_loss, (model, x), wrt=0)
    g = grad(model, x)
    want = srcgrad.grad(_indexed_loss)(model, x)
    np.testing.assert_allclose(g.seq.layers[0].weight, want.seq.layers[0].weight, rtol=1e-12)


def test_a_slice_of_a_sequential_is_a_sequential_and_refused_in_differentiated_code():
    class Trunk(nn.Module):
        def __init__(self):
            self.seq = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))

        def forward(self, x):
            return self.seq[-1](self.seq[:-1](x))

    model, x = Trunk(), np.linspace(-1, 1, 6).reshape(2, 3)
    assert isinstance(model.seq[:-1], nn.Sequential) and len(model.seq[:-1]) == 2
    np.testing.assert_allclose(model(x), model.seq(x), rtol=1e-12)
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match=r"for layer in obj\.layers\[:-1\]"):
        srcgrad.grad(_indexed_loss)(model, x)  # (refused, saying what to write: not inlined)
