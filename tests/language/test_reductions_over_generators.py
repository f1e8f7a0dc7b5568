"""`sum`, `max` and `min` over a generator expression (with `start=`, in a loop, over layers in
a helper and a method), checked against central finite differences in float64."""

import numpy as np
import pytest

import srcgrad


def jacobian_fd(f, x, eps=1e-6):
    """Central differences: shape f(x).shape + x.shape."""
    x = np.asarray(x, dtype=np.float64)
    y0 = np.asarray(f(x))
    J = np.zeros(y0.shape + x.shape)
    for idx in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[idx] = eps
        J[(Ellipsis,) + idx] = (np.asarray(f(x + step)) - np.asarray(f(x - step))) / (2 * eps)
    return J


def sums_a_generator_with_a_start_keyword(x):
    return sum((x[j] ** 2 for j in range(3)), start=x[0])


def test_sum_of_a_generator_with_start_keyword():
    x = np.array([0.5, -0.7, 1.3])
    np.testing.assert_allclose(srcgrad.grad(sums_a_generator_with_a_start_keyword)(x),
                               jacobian_fd(sums_a_generator_with_a_start_keyword, x), atol=1e-6)


def largest_of_a_generator(x):
    return max(v * v for v in x)


def smallest_of_a_generator_in_a_loop(x):
    s = 0.0
    for k in range(1, 3):
        s = s + min(np.sin(v * k) for v in x)
    return s


def largest_layer_output(x, ws):
    return max(np.sum(np.tanh(w @ x)) for w in ws)


class _Layers:
    def __init__(self, ws):
        self.ws = ws

    def loss(self, x):
        return max(np.sum(w @ x) for w in self.ws) - min(np.sum(w * x) for w in self.ws)


@pytest.mark.parametrize("f", [largest_of_a_generator, smallest_of_a_generator_in_a_loop],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_max_and_min_of_a_generator(f, dtype):
    x = np.array([0.5, -0.7, 1.3], dtype=dtype)
    g = srcgrad.grad(f)(x)
    assert g.dtype == dtype
    np.testing.assert_allclose(g, jacobian_fd(f, x.astype(np.float64)), rtol=1e-4, atol=1e-5)


def test_max_of_a_generator_over_layers_in_a_helper_and_a_method():
    rng = np.random.default_rng(3)
    ws = [rng.normal(size=(3, 3)) for _ in range(3)]
    x = rng.normal(size=3)
    g = srcgrad.grad(lambda x: largest_layer_output(x, ws) * 2.0)(x)
    np.testing.assert_allclose(g, jacobian_fd(lambda x: largest_layer_output(x, ws) * 2.0, x), rtol=1e-6)
    model = _Layers(ws)
    g = srcgrad.grad(_Layers.loss, wrt=1)(model, x)
    np.testing.assert_allclose(g, jacobian_fd(model.loss, x), rtol=1e-6, atol=1e-8)
