"""HIPS autograd's API names as srcgrad spells them: elementwise_grad,
hessian_vector_product, srcgrad.misc.flatten and srcgrad.misc.optimizers
(checked against exact values and, where autograd is installed, against it)."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from srcgrad.misc.flatten import flatten, flatten_func
from srcgrad.misc.optimizers import adam, rmsprop, sgd


def tanh(x):
    return (1.0 - np.exp(-2 * x)) / (1.0 + np.exp(-2 * x))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_elementwise_grad_is_each_outputs_derivative(dtype):
    x = np.linspace(-2, 2, 7).astype(dtype)
    g = srcgrad.elementwise_grad(tanh)(x)
    assert g.shape == x.shape and g.dtype == dtype
    np.testing.assert_allclose(g, 1 - np.tanh(x) ** 2, rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_elementwise_grad_of_its_own_result():
    x = np.linspace(-1, 1, 5)
    second = srcgrad.elementwise_grad(lambda x: x ** 3)(x)
    np.testing.assert_allclose(second, 3 * x ** 2)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_elementwise_grad_of_an_elementwise_grad(dtype):
    x = np.linspace(-2, 2, 7).astype(dtype)
    t = np.tanh(x.astype(np.float64))
    second = srcgrad.elementwise_grad(srcgrad.elementwise_grad(tanh))(x)
    assert second.dtype == dtype
    np.testing.assert_allclose(second, -2 * t * (1 - t ** 2), rtol=1e-4 if dtype == np.float32 else 1e-10,
                               atol=1e-6)


def _scaled(x, w, *, power=2.0):
    return w * x ** power


def test_elementwise_grad_keeps_the_functions_parameters():
    x, w = np.array([0.5, -1.5]), np.array([2.0, 3.0])
    np.testing.assert_allclose(srcgrad.elementwise_grad(_scaled, wrt="w")(x, w, power=3.0), x ** 3)
    np.testing.assert_allclose(srcgrad.elementwise_grad(_scaled)(x, w, power=3.0), 3 * w * x ** 2)
    np.testing.assert_allclose(srcgrad.elementwise_grad(srcgrad.elementwise_grad(_scaled))(x, w), 2 * w)
    np.testing.assert_allclose(srcgrad.elementwise_grad(np.sin)(x), np.cos(x))


def test_hessian_vector_product_is_hvp():
    def f(x):
        return np.sum(x ** 3) + x[0] * x[1]
    x, v = np.array([1.0, 2.0]), np.array([1.0, -1.0])
    np.testing.assert_allclose(srcgrad.hessian_vector_product(f)(x, v), [6 * 1 - 1, 1 - 12])


def test_flatten_round_trips_a_structure():
    value = [(np.ones((2, 3)), np.arange(3.0)), {"b": 2.0, "a": np.array([[5.0]])}]
    vector, unflatten = flatten(value)
    assert vector.shape == (6 + 3 + 1 + 1,)
    back = unflatten(vector * 2)
    np.testing.assert_array_equal(back[0][0], 2 * np.ones((2, 3)))
    np.testing.assert_array_equal(back[0][1], 2 * np.arange(3.0))
    assert back[1]["b"] == 4.0 and back[1]["a"].shape == (1, 1)
    with pytest.raises(ValueError, match="vector of 11"):
        unflatten(np.zeros(3))


def test_flatten_func_and_gradient_of_the_flat_function():
    def objective(params, scale):
        w, b = params
        return scale * (np.sum(w ** 2) + np.sum(b))
    flat, unflatten, x0 = flatten_func(objective, (np.ones(2), np.ones(3)))
    assert flat(x0, 2.0) == 2.0 * (2 + 3)
    g = srcgrad.grad(objective)((np.ones(2), np.ones(3)), 2.0)
    np.testing.assert_allclose(flatten(g)[0], [4, 4, 2, 2, 2])


def _quadratic(params, i):
    w, b = params
    return np.sum((w - 1.0) ** 2) + np.sum((b + 2.0) ** 2)


@pytest.mark.parametrize("optimize, kwargs", [(adam, dict(step_size=0.1, num_iters=400)),
                                              (sgd, dict(step_size=0.1, num_iters=400)),
                                              (rmsprop, dict(step_size=0.01, num_iters=600))])
def test_optimizers_minimize_a_structure(optimize, kwargs):
    seen = []
    w, b = optimize(srcgrad.grad(_quadratic), (np.zeros(2), np.zeros(1)),
                    callback=lambda x, i, g: seen.append((i, type(x), type(g))), **kwargs)
    np.testing.assert_allclose(w, [1.0, 1.0], atol=1e-3)
    np.testing.assert_allclose(b, [-2.0], atol=1e-3)
    assert seen[0] == (0, tuple, tuple) and len(seen) == kwargs["num_iters"]


@pytest.mark.parametrize("name", ["adam", "sgd", "rmsprop"])
def test_optimizers_take_autograds_steps(name):
    optimizers = pytest.importorskip("autograd.misc.optimizers")
    x0 = (np.array([0.5, -1.0]), np.array([2.0]))
    ours = globals()[name](srcgrad.grad(_quadratic), x0, num_iters=7)
    theirs = getattr(optimizers, name)(srcgrad.grad(_quadratic), x0, num_iters=7)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-14)


def _dot_plus(w, x):
    return np.dot(x, w) + np.tanh(w[:1])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_grad_of_an_output_of_one_element(dtype):
    w, x = np.array([0.5, -1.0, 2.0], dtype), np.ones((1, 3), dtype)
    g = srcgrad.grad(_dot_plus)(w, x)
    assert g.dtype == dtype
    np.testing.assert_allclose(g, [1 + 1 / np.cosh(0.5) ** 2, 1, 1], rtol=1e-6)
    value, g = srcgrad.value_and_grad(lambda v: v ** 2)(3 * np.ones((1, 1), dtype))
    assert value.shape == (1, 1) and g.shape == (1, 1) and g[0, 0] == 6


def test_grad_of_an_output_of_more_elements_is_refused():
    with pytest.raises(srcgrad.NonScalarOutputError, match=r"returned shape \(2,\)"):
        srcgrad.grad(lambda v: v * 2)(np.ones(2))


def _either(a, whole):
    return a if whole else a[0]  # (the result's rank is known only when the code runs)


def _picked(w, whole):
    return _either(np.sin(w[:1]) * 2.0, whole)


def _summed_in_a_loop(w, x, whole):
    total = np.zeros((1, 1), w.dtype) if whole else 0.0
    for i in range(3):
        total = total + np.tanh(x[i:i + 1] @ w[:, None]) * (i + 1)
    return total


class _Reshaped:
    def __init__(self, shape):
        self.shape = shape

    def loss(self, w):
        return np.reshape(np.sum(np.sin(w)), self.shape)


def _through_a_method(w, model):
    return model.loss(w)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("whole", [True, False])
def test_grad_of_an_output_of_one_element_whose_rank_is_known_when_it_runs(dtype, whole):
    """An output of shape (1,) or (1, 1), or a scalar, from the same code (a helper, a loop,
    a method): the seed takes the output's shape, as autograd's does."""
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    w, x = np.array([0.3, -0.2], dtype), np.arange(6, dtype=dtype).reshape(3, 2) / 4
    value, g = srcgrad.value_and_grad(_picked)(w, whole)
    assert np.shape(value) == ((1,) if whole else ())
    assert g.dtype == dtype
    np.testing.assert_allclose(g, [2 * np.cos(0.3), 0], rtol=rtol)
    g = srcgrad.grad(_summed_in_a_loop)(w, x, whole)
    exact = sum((i + 1) * x[i] / np.cosh(x[i] @ w) ** 2 for i in range(3))
    assert g.dtype == dtype
    np.testing.assert_allclose(g, exact, rtol=rtol * 10)
    for shape in ((1,), (1, 1), ()):
        g = srcgrad.grad(_through_a_method)(w, _Reshaped(shape))
        np.testing.assert_allclose(g, np.cos(w), rtol=rtol)
    if dtype == np.float64:
        srcgrad.testing.check_grads(_summed_in_a_loop, (w, x, whole))
        srcgrad.testing.check_grads(_through_a_method, (w, _Reshaped((1, 1))))


def test_grad_of_more_elements_whose_rank_is_known_when_it_runs_is_refused():
    with pytest.raises(srcgrad.NonScalarOutputError, match=r"returned shape \(1, 2\)"):
        srcgrad.grad(_either)(np.ones((1, 2)), True)
    with pytest.raises(srcgrad.NonScalarOutputError, match=r"returned shape \(2,\)"):
        srcgrad.grad(_either)(np.ones(2), True)


def test_check_grads_in_autograds_curried_form():
    from srcgrad.testing import check_grads

    def f(x):
        return np.sum(np.sin(x) * x ** 2)
    check_grads(f, modes=["rev"])(np.array([0.3, -1.2]))
    check_grads(f, order=2)(np.array([0.3, -1.2]))

    def wrong(x):  # a rule of the user's with a wrong adjoint fails the check
        return np.sum(_wrongly_differentiated(x))
    with pytest.raises(AssertionError):
        check_grads(wrong)(np.array([0.3, -1.2]))


def test_check_grads_perturbs_arguments_of_any_memory_layout():
    """A transposed or strided argument is perturbed, not a copy of it (its differences were
    zeros: a wrong gradient of zeros passed the check)."""
    from srcgrad.testing import check_grads

    def f(x):
        return np.sum(np.sin(x) * x)
    x = np.arange(1.0, 7.0).reshape(2, 3)
    for arg in (x.T, x[:, ::2], np.asfortranarray(x)):
        check_grads(f, (arg,))
    check_grads(lambda p: f(p["w"]), ({"w": x.T},))

    def dropped(x):
        return np.sum(_not_differentiated(x))
    with pytest.raises(AssertionError):
        check_grads(dropped, (x.T,))


@srcgrad.custom_adjoint
def _not_differentiated(x):
    return x ** 2


@_not_differentiated.defadjoint
def _not_differentiated_adjoint(ans_bar, ans, x):
    return 0 * ans_bar  # (wrong: 2 * x * ans_bar)


@srcgrad.custom_adjoint
def _wrongly_differentiated(x):
    return x ** 2


@_wrongly_differentiated.defadjoint
def _wrongly_differentiated_adjoint(ans_bar, ans, x):
    return ans_bar * x  # (2 * x is right)


def test_flatten_inside_a_differentiated_function():
    def l2(params):
        v, _ = flatten(params)
        return np.dot(v, v)

    def loss(params, x):
        for w, b in params:
            x = np.tanh(x @ w + b)
        return np.sum(x) + 0.1 * l2(params)
    rs = np.random.RandomState(0)
    params = [(rs.randn(3, 2), rs.randn(2)), (rs.randn(2, 1), rs.randn(1))]
    g = srcgrad.grad(l2)(params)
    for (gw, gb), (w, b) in zip(g, params):
        np.testing.assert_allclose(gw, 2 * w)
        np.testing.assert_allclose(gb, 2 * b)
    srcgrad.testing.check_grads(loss, (params, rs.randn(4, 3)))


def test_flatten_in_forward_mode():
    def l2(params):
        v, _ = flatten(params)
        return np.dot(v, v)
    p = (np.ones(2), 2 * np.ones(3))
    value, tangent = srcgrad.jvp(l2)(p, (np.array([1.0, -1.0]), np.array([0.0, 0.5, 0.0])))
    assert value == 14.0 and tangent == 2 * (1 - 1 + 2 * 0.5)



def _objective(p, x, scale=1.0):
    return scale * (np.sum(np.sin(p["a"]) * x) * p["b"][1] + np.sum(p["b"][0] ** 2))


STRUCTURE = {"a": np.array([0.3, -1.2]), "b": (np.array([[1.0, 2.0], [0.5, -0.5]]), 3.0)}


def _central(f, v, eps=1e-6):
    return np.array([(f(v + eps * e) - f(v - eps * e)) / (2 * eps) for e in np.eye(v.size)])


def test_unflatten_inside_a_differentiated_function():
    flat, unflatten, v = flatten_func(_objective, STRUCTURE)
    x = np.array([0.5, -1.0])
    np.testing.assert_allclose(srcgrad.grad(flat)(v, x), _central(lambda v: flat(v, x), v), rtol=1e-7)
    np.testing.assert_allclose(srcgrad.grad(flat)(v, x, scale=2.0), 2.0 * srcgrad.grad(flat)(v, x), rtol=1e-12)

    def read_in_a_loop(v):  # unflatten called on each iteration's vector
        total = 0.0
        for k in range(3):
            p = unflatten(v * (k + 1.0))
            total = total + np.sum(p["a"] ** 2) + p["b"][1]
        return total
    np.testing.assert_allclose(srcgrad.grad(read_in_a_loop)(v), _central(read_in_a_loop, v), rtol=1e-6)


def test_hessian_vector_product_of_a_flattened_variadic_function():
    flat, _, v = flatten_func(_objective, STRUCTURE)
    x, u = np.array([0.5, -1.0]), np.linspace(-1.0, 1.0, v.size)
    g = srcgrad.grad(flat)
    expected = (g(v + 1e-5 * u, x) - g(v - 1e-5 * u, x)) / 2e-5
    np.testing.assert_allclose(srcgrad.hessian_vector_product(flat)(v, x, u), expected, rtol=1e-6, atol=1e-8)
    _, tangent = srcgrad.jvp(flat)(v, x, u)
    np.testing.assert_allclose(tangent, np.dot(g(v, x), u), rtol=1e-12)


def test_autograds_argnum_keyword():
    def f(x, y):
        return np.sum(np.sin(x) * y ** 2)
    x, y = np.array([0.3, -1.0]), np.array([2.0, 0.5])
    np.testing.assert_allclose(srcgrad.grad(f, argnum=1)(x, y), 2 * np.sin(x) * y)
    gx, gy = srcgrad.grad(f, argnum=(0, 1))(x, y)
    np.testing.assert_allclose(gx, np.cos(x) * y ** 2)
    np.testing.assert_allclose(srcgrad.value_and_grad(f, argnum=1)(x, y)[1], gy)
    np.testing.assert_allclose(srcgrad.elementwise_grad(f, argnum=1)(x, y), gy)
    np.testing.assert_allclose(srcgrad.hessian_vector_product(f, argnum=1)(x, y, np.ones(2)), 2 * np.sin(x))
    with pytest.raises(TypeError, match="not both"):
        srcgrad.grad(f, 1, argnum=1)
