"""The CuPy backend, checked without a GPU: every name the emitted code uses
exists in CuPy, and the emitted programs run correctly with NumPy standing in
for CuPy.  The numeric GPU tests run only where a GPU is present."""
from __future__ import annotations

import ast

import numpy as np
import pytest

import srcgrad
from srcgrad import nn
from srcgrad.backends import cupy as cupy_backend
from srcgrad.pipeline import Options, compile_function, rank_of_argument

from tests.language import test_calls
from tests.language import test_control_flow
from tests.soundness import test_mutation
from tests.examples import test_tutorial


def _gpu_present() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no CuPy, no driver, no device
        return False


GPU = _gpu_present()
needs_gpu = pytest.mark.skipif(not GPU, reason="no CUDA GPU is present (CuPy numeric tests need one)")

rng = np.random.default_rng(5)


class SmallCNN(nn.Module):
    def __init__(self):
        self.conv = nn.Conv2d(1, 2, 3, padding=1, rng=rng)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(8, 3, rng=rng)

    def forward(self, x):
        h = self.pool(np.maximum(self.conv(x), 0))
        return self.fc(np.reshape(h, (h.shape[0], -1)))


def cnn_loss(model, x, labels):
    return nn.cross_entropy(model(x), labels)


class TwoLayerNet(nn.Module):
    """The gallery's custom module (example 08)."""

    def __init__(self):
        self.linear1 = nn.Linear(3, 5, rng=rng)
        self.linear2 = nn.Linear(5, 2, rng=rng)

    def forward(self, x):
        return self.linear2(np.maximum(self.linear1(x), 0))


def mse_loss(model, x, y):
    return nn.mse_loss(model(x), y)


def rnn_loss(cell, xs, h):
    for t in range(len(xs)):
        h = cell(xs[t], h)
    return np.sum(h**2)


PROGRAMS = (
    [(test_tutorial.two_layer_loss, test_tutorial.data(n=4, d_in=5, h=3, d_out=2), (0, 1))]
    + [(f, a, w) for f, a, w in test_control_flow.CASES]
    + [(f, a, w) for f, a, w in test_mutation.CASES]
    + [(f, a, w) for f, a, w in test_calls.CASES]
    + [(cnn_loss, (SmallCNN(), rng.standard_normal((2, 1, 4, 4)), np.array([0, 2])), (0,))]
    # The gallery's models: Sequential with mse (06, 07), a custom module (08), an RNN (13).
    + [(mse_loss, (nn.Sequential(nn.Linear(3, 4, rng=rng), nn.ReLU(), nn.Linear(4, 2, rng=rng)),
                   rng.standard_normal((5, 3)), rng.standard_normal((5, 2))), (0,)),
       (mse_loss, (TwoLayerNet(), rng.standard_normal((5, 3)), rng.standard_normal((5, 2))), (0,)),
       (rnn_loss, (nn.RNNCell(3, 4, rng=rng), rng.standard_normal((5, 2, 3)), np.zeros((2, 4))), (0, 1))]
)
IDS = [f"{p[0].__name__}-{i}" for i, p in enumerate(PROGRAMS)]


@pytest.fixture
def numpy_stands_in_for_cupy(monkeypatch):
    monkeypatch.setattr(cupy_backend, "_stand_in", np)


@pytest.mark.parametrize("fn, args, wrt", PROGRAMS, ids=IDS)
def test_emitted_cupy_program_runs_with_numpy_standing_in(fn, args, wrt, numpy_stands_in_for_cupy):
    on_cupy = srcgrad.grad(fn, wrt=wrt, backend="cupy")
    expected = srcgrad.grad(fn, wrt=wrt)(*args)
    got = on_cupy(*args)
    assert "import cupy as cp" in srcgrad.source(on_cupy)
    for g, e in zip(srcgrad.tree.flatten(got)[1], srcgrad.tree.flatten(expected)[1]):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


def _cupy_names(source):
    """Every ``cp.a.b`` chain in generated code."""
    chains = []
    for node in ast.walk(ast.parse(source)):
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id == "cp" and parts:
            chains.append(tuple(reversed(parts)))
    return chains


@pytest.mark.parametrize("fn, args, wrt", PROGRAMS, ids=IDS)
def test_every_emitted_cupy_name_exists_in_cupy(fn, args, wrt):
    cupy = pytest.importorskip("cupy")
    options = Options("grad", tuple(srcgrad.api.GradientFunction(fn, "grad", wrt)._params[i] for i in wrt),
                      True, "cupy")
    source = compile_function(fn, options, tuple(rank_of_argument(a) for a in args)).source
    for chain in _cupy_names(source):
        target = cupy
        for part in chain:
            assert hasattr(target, part), f"cp.{'.'.join(chain)} is not in CuPy"
            target = getattr(target, part)


def every_rule(x, y):
    """One program calling a broad set of the rules, for the namespace check."""
    a = np.exp(x) + np.log1p(np.abs(x)) + np.sqrt(np.square(x) + 1) + np.tanh(x) * np.sin(x)
    b = np.maximum(a, y) + np.minimum(a, 0) + np.where(x > 0, a, y) + np.clip(a, -1, 1)
    c = np.sum(b, axis=0) + np.mean(b, axis=1, keepdims=True).sum() + np.max(b) + np.var(b) + np.std(b)
    d = np.einsum("ij,jk->ik", b, b.T) + np.outer(x[0], y[0]) @ np.ones((3, 3))
    e = np.concatenate([a, b], axis=0)[1:4] + np.stack([a, b])[0] + np.reshape(b.ravel(), (3, 3))
    f = np.expand_dims(e, 0).squeeze(0) + np.broadcast_to(x[0], (3, 3)) + np.linalg.norm(e)
    return np.sum(c) + np.sum(d) + np.sum(f) + np.prod(x[0]) + np.sum(x[[0, 0, 1]])


def test_every_name_of_a_broad_program_exists_in_cupy():
    cupy = pytest.importorskip("cupy")
    source = compile_function(every_rule, Options("grad", ("x", "y"), True, "cupy"), (2, 2)).source
    chains = _cupy_names(source)
    assert len(chains) > 20
    for chain in chains:
        target = cupy
        for part in chain:
            assert hasattr(target, part), f"cp.{'.'.join(chain)} is not in CuPy"
            target = getattr(target, part)


def test_broad_program_runs_with_numpy_standing_in(numpy_stands_in_for_cupy):
    x, y = rng.standard_normal((3, 3)), rng.standard_normal((3, 3))
    for got, expected in zip(srcgrad.grad(every_rule, wrt=(0, 1), backend="cupy")(x, y),
                             srcgrad.grad(every_rule, wrt=(0, 1))(x, y)):
        np.testing.assert_allclose(got, expected, rtol=1e-12)


def uses_spacing(x):
    return np.sum(x * np.spacing(x))


def test_numpy_function_without_cupy_counterpart_names_the_line():
    pytest.importorskip("cupy")
    with pytest.raises(srcgrad.UnsupportedSyntaxError) as excinfo:
        compile_function(uses_spacing, Options("grad", ("x",), False, "cupy"), (1,))
    message = str(excinfo.value)
    assert "test_cupy_backend.py" in message and "np.spacing" in message and "backend='numpy'" in message


def test_transfers_are_each_others_adjoints(numpy_stands_in_for_cupy):
    def f(x):
        on_device = srcgrad.to_device(x)
        return np.sum(srcgrad.to_host(on_device * on_device))

    x = np.array([1.0, -2.0, 3.0])
    np.testing.assert_array_equal(srcgrad.grad(f)(x), 2 * x)
    code = srcgrad.source(srcgrad.grad(f), x)
    assert "rt.to_host(" in code or "x_bar = " in code


def test_default_backend_for_a_whole_program(numpy_stands_in_for_cupy):
    srcgrad.set_default_backend("cupy")
    try:
        assert "import cupy as cp" in srcgrad.source(srcgrad.grad(test_tutorial.two_layer_loss))
    finally:
        srcgrad.set_default_backend("numpy")
    with pytest.raises(ValueError, match="unknown backend"):
        srcgrad.set_default_backend("tpu")


@pytest.mark.skipif(GPU, reason="checks the error where no GPU is present")
def test_choosing_cupy_without_a_gpu_says_so():
    with pytest.raises(srcgrad.BackendError, match="CuPy|GPU") as excinfo:
        srcgrad.grad(test_tutorial.two_layer_loss, backend="cupy")(*test_tutorial.data(n=2, d_in=3))
    assert "backend='numpy'" in str(excinfo.value)
    with pytest.raises(srcgrad.BackendError):
        srcgrad.to_device(np.ones(2))


# ---- on a GPU --------------------------------------------------------------
@needs_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("fn, args, wrt", PROGRAMS, ids=IDS)
def test_gpu_gradients_match_numpy(fn, args, wrt):
    import cupy

    def to_gpu(value):
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            return cupy.asarray(value)
        if isinstance(value, nn.Module):
            import copy

            return copy.deepcopy(value).to("cuda")
        return value

    expected = srcgrad.grad(fn, wrt=wrt)(*args)
    got = srcgrad.grad(fn, wrt=wrt, backend="cupy")(*[to_gpu(a) for a in args])
    for g, e in zip(srcgrad.tree.flatten(got)[1], srcgrad.tree.flatten(expected)[1]):
        np.testing.assert_allclose(cupy.asnumpy(g), e, rtol=1e-10, atol=1e-10)


def test_forward_mode_of_a_broad_program_on_cupy(numpy_stands_in_for_cupy):
    """Forward mode's emitted CuPy code: every name exists in CuPy, and it runs (NumPy
    standing in) to the NumPy program's value and tangent."""
    x, y = rng.standard_normal((3, 3)), rng.standard_normal((3, 3))
    dots = (rng.standard_normal((3, 3)), rng.standard_normal((3, 3)))
    on_cupy = srcgrad.jvp(every_rule, wrt=(0, 1), backend="cupy")
    for got, expected in zip(on_cupy(x, y, dots), srcgrad.jvp(every_rule, wrt=(0, 1))(x, y, dots)):
        np.testing.assert_allclose(got, expected, rtol=1e-12)
    cupy = pytest.importorskip("cupy")
    chains = _cupy_names(srcgrad.source(on_cupy, x, y))
    assert len(chains) > 20
    for chain in chains:
        target = cupy
        for part in chain:
            assert hasattr(target, part), f"cp.{'.'.join(chain)} is not in CuPy"
            target = getattr(target, part)
