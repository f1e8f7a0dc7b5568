"""``srcgrad.scipy.signal.convolve``: HIPS autograd's generalised convolution (``axes``,
``dot_axes``), its values against SciPy's ``convolve`` and autograd's own (an oracle
only), its rule (``rules/scipy_signal.py``) by the dot-product test, and its gradients
through ``srcgrad.grad`` and ``srcgrad.jvp`` against central differences."""
from __future__ import annotations

import numpy as np
import pytest
from tests.finite_differences import numerical_grad

import srcgrad

signal = pytest.importorskip("scipy.signal")
from srcgrad.rules.scipy_signal import generalised_convolve
from srcgrad.scipy.signal import convolve

CONV_LAYER = {"axes": ([2, 3], [2, 3]), "dot_axes": ([1], [0])}  # convnet.py's: images x filters

# (A's shape, B's shape, keywords): each run in both modes.
CASES = [
    ((5,), (3,), {}),
    ((3,), (5,), {}),  # B the larger: slid the other way, the same values
    ((6, 7), (3, 2), {}),
    ((4, 2, 7, 6), (2, 3, 3, 2), CONV_LAYER),
    ((4, 2, 7, 6), (2, 3, 3, 2), {"axes": ([3, 2], [2, 3]), "dot_axes": ([1], [0])}),  # paired out of order
    ((4, 2, 7, 6), (2, 3, 3, 2), {"axes": ([2], [3]), "dot_axes": ([1], [0])}),  # one convolution axis
    ((2, 3, 3), (5, 2, 6, 7), {"axes": ([1, 2], [2, 3]), "dot_axes": ([0], [1])}),  # A the smaller
    ((2, 3, 4, 6), (4, 3, 5, 2), {"axes": ([3], [2]), "dot_axes": ([2, 1], [0, 1])}),  # two dot axes, crossed
    ((3, 5), (2, 4), {"axes": ([1], [1])}),  # no dot axes: an outer product of the others
    ((2, 6), (2, 3), {"axes": ([-1], [-1]), "dot_axes": ([0], [0])}),  # negative axes
]
IDS = [f"{a}x{b}-{i}" for i, (a, b, _) in enumerate(CASES)]


def _inputs(shape_a, shape_b, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape_a).astype(dtype), rng.standard_normal(shape_b).astype(dtype)


@pytest.mark.parametrize("mode", ["full", "valid"])
@pytest.mark.parametrize("shapes", [((5,), (3,)), ((3,), (5,)), ((6, 7), (3, 2)), ((2, 3), (4, 5)),
                                    ((4, 5, 3), (2, 3, 3))])
def test_plain_convolution_is_scipys(shapes, mode):
    A, B = _inputs(*shapes)
    np.testing.assert_allclose(convolve(A, B, mode=mode), signal.convolve(A, B, mode), atol=1e-12)


def test_one_convolution_axis_is_scipys_along_it():
    A, B = _inputs((3, 8), (4,))
    expected = np.stack([signal.convolve(row, B) for row in A])  # A's other axis first
    np.testing.assert_allclose(convolve(A, B, axes=([1], [0])), expected, atol=1e-12)


def test_a_convolutional_layer_is_a_sum_of_scipy_convolutions():
    A, B = _inputs((2, 3, 7, 6), (3, 4, 3, 2))
    out = convolve(A, B, mode="valid", **CONV_LAYER)
    expected = np.array([[sum(signal.convolve(A[n, c], B[c, f], "valid") for c in range(3)) for f in range(4)]
                         for n in range(2)])
    np.testing.assert_allclose(out, expected, atol=1e-12)


@pytest.mark.parametrize("mode", ["full", "valid"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_values_are_autograds(case, mode):
    autograd_signal = pytest.importorskip("autograd.scipy.signal")
    shape_a, shape_b, kw = case
    A, B = _inputs(shape_a, shape_b)
    kw = dict(kw, mode=mode)
    ours = convolve(A, B, **kw)
    if "axes" in kw:  # (autograd's own takes axes >= 0 only)
        kw = {k: [[i % n for i in ax] for ax, n in zip(v, (A.ndim, B.ndim))] if "axes" in k else v
              for k, v in kw.items()}
    theirs = autograd_signal.convolve(A, B, **kw)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, atol=1e-12)


@pytest.mark.parametrize("mode", ["full", "valid"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_rule_passes_the_dot_product_test(case, mode):
    """<u, J v> by central differences of the primitive, against <J^T u, v> from the rule,
    for A and B apart (the primitive is bilinear: the difference is exact up to rounding)."""
    shape_a, shape_b, kw = case
    A, B = _inputs(shape_a, shape_b)
    kw = dict(kw, mode=mode)
    ans = convolve(A, B, **kw)
    rng = np.random.default_rng(1)
    u, v_a, v_b = rng.standard_normal(ans.shape), rng.standard_normal(A.shape), rng.standard_normal(B.shape)
    A_bar, B_bar = generalised_convolve(u, ans, A, B, **kw)
    assert A_bar.shape == A.shape and B_bar.shape == B.shape
    eps = 1e-3
    along_a = np.sum(u * (convolve(A + eps * v_a, B, **kw) - convolve(A - eps * v_a, B, **kw))) / (2 * eps)
    along_b = np.sum(u * (convolve(A, B + eps * v_b, **kw) - convolve(A, B - eps * v_b, **kw))) / (2 * eps)
    assert np.sum(A_bar * v_a) == pytest.approx(along_a, rel=1e-9, abs=1e-9)
    assert np.sum(B_bar * v_b) == pytest.approx(along_b, rel=1e-9, abs=1e-9)


# ---- through the compiler -----------------------------------------------------------

def conv_loss(A, B, axes, dot_axes, mode):
    return np.sum(np.tanh(convolve(A, B, axes=axes, dot_axes=dot_axes, mode=mode)) ** 2)


def conv_layer_loss(x, w):
    c = convolve(x, w, axes=([2, 3], [2, 3]), dot_axes=([1], [0]), mode="valid")
    return np.sum(np.sin(c) * c)


@pytest.mark.parametrize("mode", ["full", "valid"])
@pytest.mark.parametrize("case", CASES[:4] + CASES[6:8], ids=IDS[:4] + IDS[6:8])
def test_gradients_are_central_differences(case, mode):
    shape_a, shape_b, kw = case
    A, B = _inputs(shape_a, shape_b)
    args = (A, B, kw.get("axes"), kw.get("dot_axes", ((), ())), mode)
    A_bar, B_bar = srcgrad.grad(conv_loss, wrt=(0, 1))(*args)
    np.testing.assert_allclose(A_bar, numerical_grad(conv_loss, args, 0), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(B_bar, numerical_grad(conv_loss, args, 1), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("mode", ["full", "valid"])
def test_tangent_is_the_gradient_along_it(mode):
    A, B = _inputs((3, 2, 6, 5), (2, 4, 3, 2))
    rng = np.random.default_rng(2)
    v_a, v_b = rng.standard_normal(A.shape), rng.standard_normal(B.shape)
    args = (A, B, CONV_LAYER["axes"], CONV_LAYER["dot_axes"], mode)
    value, tangent = srcgrad.jvp(conv_loss, wrt=(0, 1))(*args, (v_a, v_b))
    A_bar, B_bar = srcgrad.grad(conv_loss, wrt=(0, 1))(*args)
    assert value == pytest.approx(conv_loss(*args))
    assert tangent == pytest.approx(np.sum(A_bar * v_a) + np.sum(B_bar * v_b), rel=1e-10)


def test_float32_in_float32_out():
    A, B = _inputs((3, 2, 7, 6), (2, 4, 3, 3), dtype=np.float32)
    assert convolve(A, B, mode="valid", **CONV_LAYER).dtype == np.float32
    x_bar, w_bar = srcgrad.grad(conv_layer_loss, wrt=(0, 1))(A, B)
    assert x_bar.dtype == np.float32 and w_bar.dtype == np.float32
    x64, w64 = srcgrad.grad(conv_layer_loss, wrt=(0, 1))(A.astype(np.float64), B.astype(np.float64))
    np.testing.assert_allclose(x_bar, x64, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(w_bar, w64, rtol=1e-4, atol=1e-4)


def stacked(x, ws):
    for w in ws:  # each layer 'full': the images grow by the kernel less one
        x = np.tanh(convolve(x, w, axes=([2, 3], [2, 3]), dot_axes=([1], [0]), mode="full"))
    return np.sum(x ** 2)


def test_in_a_loop():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 1, 4, 4))
    ws = [0.5 * rng.standard_normal((1, 2, 2, 2)), 0.5 * rng.standard_normal((2, 3, 3, 2))]
    x_bar, ws_bar = srcgrad.grad(stacked, wrt=(0, 1))(x, ws)
    np.testing.assert_allclose(x_bar, numerical_grad(stacked, (x, ws), 0), rtol=1e-6, atol=1e-8)
    for i, w in enumerate(ws):
        def of_w(w_i, i=i):
            return stacked(x, [w_i if j == i else ws[j] for j in range(len(ws))])
        np.testing.assert_allclose(ws_bar[i], numerical_grad(of_w, (w,), 0), rtol=1e-6, atol=1e-8)


def _conv_relu(x, w, b):
    return np.maximum(convolve(x, w, axes=([2, 3], [2, 3]), dot_axes=([1], [0]), mode="valid") + b, 0.0)


def net(x, w1, b1, w2):
    h = _conv_relu(x, w1, b1)
    h = h[:, :, ::2, ::2]
    out = convolve(h, w2, axes=([2, 3], [2, 3]), dot_axes=([1], [0]))  # 'full' by default
    return np.sum(out ** 2) / out.size


def test_in_a_helper():
    rng = np.random.default_rng(4)
    args = (rng.standard_normal((2, 1, 8, 8)), rng.standard_normal((1, 3, 3, 3)),
            rng.standard_normal((1, 3, 1, 1)), rng.standard_normal((3, 2, 2, 2)))
    grads = srcgrad.grad(net, wrt=(0, 1, 2, 3))(*args)
    for i, g in enumerate(grads):
        np.testing.assert_allclose(g, numerical_grad(net, args, i), rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("kw, message", [
    ({"mode": "same"}, "mode 'same'"),
    ({"axes": ([0, 1], [0])}, "equal length"),
    ({"axes": ([1], [1]), "dot_axes": ([0], [0])}, "different sizes"),
    ({"axes": ([1], [1]), "dot_axes": ([1], [0])}, "more than once"),
])
def test_refuses_what_it_does_not_define(kw, message):
    A, B = _inputs((3, 4), (2, 3))
    with pytest.raises(ValueError, match=message):
        convolve(A, B, **kw)


def test_valid_needs_one_array_the_larger_along_every_axis():
    A, B = _inputs((6, 2), (3, 4))
    with pytest.raises(ValueError, match="the larger along every convolution axis"):
        convolve(A, B, mode="valid")
    assert convolve(A, B).shape == (8, 5)  # 'full' is defined
