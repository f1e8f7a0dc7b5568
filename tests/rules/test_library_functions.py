"""Library functions with derivative rules of their own: ``srcgrad.integrate.odeint`` (the
adjoint method), ``srcgrad.misc.fixed_points.fixed_point`` (the implicit function theorem),
and ``grad`` of a NumPy function that has a rule (``grad(np.sqrt)``).  Gradients are checked
against central differences and, where installed, HIPS autograd."""
import numpy as np
import pytest

import srcgrad
from srcgrad.integrate import odeint
from srcgrad.misc.fixed_points import fixed_point


def central_difference(f, x, eps=1e-6):
    """The gradient of the scalar ``f`` at the array ``x``, by central differences."""
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        step = np.zeros(x.shape)
        step[i] = eps
        out[i] = (f(x + step) - f(x - step)) / (2 * eps)
    return out


# ---- grad of a NumPy function with a rule ------------------------------------------------

@pytest.mark.parametrize("fn, first, second", [
    (np.sqrt, lambda x: 0.5 / np.sqrt(x), lambda x: -0.25 * x ** -1.5),
    (np.tanh, lambda x: 1 - np.tanh(x) ** 2, lambda x: -2 * np.tanh(x) * (1 - np.tanh(x) ** 2)),
    (np.exp, np.exp, np.exp),
])
def test_grad_and_grad_of_grad_of_a_numpy_function(fn, first, second):
    for x in (0.3, 2.0):
        np.testing.assert_allclose(srcgrad.grad(fn)(x), first(x), rtol=1e-12)
        np.testing.assert_allclose(srcgrad.grad(srcgrad.grad(fn))(x), second(x), rtol=1e-12)
    value, slope = srcgrad.value_and_grad(fn)(0.7)
    np.testing.assert_allclose((value, slope), (fn(0.7), first(0.7)), rtol=1e-12)
    x = np.array([0.2, 1.0, 3.0])
    np.testing.assert_allclose(srcgrad.elementwise_grad(fn)(x), first(x), rtol=1e-12)


def test_grad_of_a_numpy_function_with_several_arguments_and_keywords():
    a, b = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])
    a_bar, b_bar = srcgrad.grad(np.dot, wrt=(0, 1))(a, b)
    np.testing.assert_allclose(a_bar, b)
    np.testing.assert_allclose(b_bar, a)
    np.testing.assert_allclose(srcgrad.grad(np.sum)(np.ones((2, 3)), axis=None), np.ones((2, 3)))


def test_a_numpy_function_without_a_rule_is_still_refused():
    with pytest.raises(srcgrad.NoSourceError, match="np.fft.fft is NumPy's function"):
        srcgrad.grad(np.fft.fft)
    with pytest.raises(srcgrad.NoSourceError, match="np.argsort is NumPy's function"):
        srcgrad.grad(np.argsort)  # (a zero derivative: no rule to differentiate)


# ---- odeint -------------------------------------------------------------------------------

A = np.array([[-0.1, 2.0], [-2.0, -0.1]])
Y0 = np.array([1.0, 0.5])
T = np.linspace(0.0, 1.0, 5)
TIGHT = dict(rtol=1e-10, atol=1e-10)


def oscillator(y, t, A):
    return np.dot(y ** 3, A) + 0.1 * np.sin(t)


def loss(y0, t, A):
    return np.sum(odeint(oscillator, y0, t, (A,), **TIGHT) ** 2)


def test_odeint_values_are_scipys():
    import scipy.integrate
    np.testing.assert_array_equal(odeint(oscillator, Y0, T, (A,)),
                                  scipy.integrate.odeint(oscillator, Y0, T, args=(A,)))


def test_odeint_gradient_in_y0_t_and_args_against_central_differences():
    y0_bar, t_bar, A_bar = srcgrad.grad(loss, wrt=(0, 1, 2))(Y0, T, A)
    np.testing.assert_allclose(y0_bar, central_difference(lambda y: loss(y, T, A), Y0), rtol=1e-5)
    np.testing.assert_allclose(t_bar, central_difference(lambda t: loss(Y0, t, A), T), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(A_bar, central_difference(lambda m: loss(Y0, T, m), A), rtol=1e-5)


def test_odeint_gradient_against_autograd():
    autograd = pytest.importorskip("autograd")
    import autograd.numpy as anp
    from autograd.builtins import tuple as atuple
    from autograd.scipy.integrate import odeint as autograd_odeint

    def their_oscillator(y, t, A):
        return anp.dot(y ** 3, A) + 0.1 * anp.sin(t)

    def their_loss(y0, t, A):  # (the default tolerances: the same steps as ours, to rounding)
        return anp.sum(autograd_odeint(their_oscillator, y0, t, atuple((A,))) ** 2)

    def our_loss(y0, t, A):
        return np.sum(odeint(oscillator, y0, t, (A,)) ** 2)

    ours = srcgrad.grad(our_loss, wrt=(0, 1, 2))(Y0, T, A)
    theirs = autograd.grad(their_loss, (0, 1, 2))(Y0, T, A)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-7)


def decay(y, t, rates):
    return -rates["k"] * y + rates["source"]


def _helper(y0, rates):
    return odeint(decay, y0, np.array([0.0, 0.5, 1.0]), (rates,), **TIGHT)[-1]


def test_odeint_in_a_loop_in_a_helper_with_a_dict_argument():
    """A structure as the dynamics' argument gets an adjoint of its structure; two calls in
    a loop, through a helper, accumulate."""
    def run(k):
        rates = {"k": k, "source": np.array([0.1, 0.2])}
        y = np.array([1.0, 2.0])
        for _ in range(2):
            y = _helper(y, rates)
        return np.sum(y)

    k = np.array([0.5, 1.5])
    np.testing.assert_allclose(srcgrad.grad(run)(k), central_difference(run, k), rtol=1e-5)


def test_odeint_dynamics_closing_over_a_differentiated_value_is_refused():
    def f(k):
        def dynamics(y, t):
            return -k * y
        return np.sum(odeint(dynamics, np.ones(2), T))
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="reads `k`"):
        srcgrad.grad(f)(0.5)


def test_odeint_float32_inputs_give_float64_states():
    """SciPy integrates in float64: float32 inputs give float64 states, and the same gradient."""
    y0 = Y0.astype(np.float32)
    assert odeint(oscillator, y0, T, (A,)).dtype == np.float64
    np.testing.assert_allclose(srcgrad.grad(loss)(y0, T, A), srcgrad.grad(loss)(Y0, T, A), rtol=1e-6)


# ---- fixed_point --------------------------------------------------------------------------

def newton_sqrt(a):
    return lambda x: 0.5 * (x + a / x)


def absolute(x, y):
    return np.max(np.abs(x - y))


def root(a):
    return fixed_point(newton_sqrt, a, 1.0, absolute, 1e-12)


def test_fixed_point_sqrt_by_newton():
    np.testing.assert_allclose(root(2.0), np.sqrt(2.0), rtol=1e-14)
    for a in (0.5, 2.0, 9.0):
        np.testing.assert_allclose(srcgrad.grad(root)(a), 0.5 / np.sqrt(a), rtol=1e-10)


def contraction(params):
    W, b = params

    def step(x):
        return 0.5 * x + 0.4 * np.tanh(W @ x + b)
    return step


def equilibrium(W, b):
    return np.sum(fixed_point(contraction, (W, b), np.zeros(3), absolute, 1e-13) ** 2)


W0 = np.array([[0.3, -0.2, 0.1], [0.0, 0.4, -0.3], [0.2, 0.1, -0.1]])
B0 = np.array([0.5, -0.3, 0.8])


def test_fixed_point_vector_problem_against_central_differences():
    W_bar, b_bar = srcgrad.grad(equilibrium, wrt=(0, 1))(W0, B0)
    np.testing.assert_allclose(W_bar, central_difference(lambda W: equilibrium(W, B0), W0), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(b_bar, central_difference(lambda b: equilibrium(W0, b), B0), rtol=1e-6, atol=1e-9)


def test_fixed_point_against_autograd():
    """The same iterations from the same start with the same tolerance: the same numbers.
    (``a`` an array: autograd's gradient with respect to a tuple ``a`` differs at tol's level.)"""
    autograd = pytest.importorskip("autograd")
    import autograd.numpy as anp
    from autograd.misc.fixed_points import fixed_point as their_fixed_point

    def their_contraction(b):
        return lambda x: 0.5 * x + 0.4 * anp.tanh(anp.dot(W0, x) + b)

    def their_equilibrium(b):
        distance = lambda x, y: anp.max(anp.abs(x - y))  # noqa: E731
        return anp.sum(their_fixed_point(their_contraction, b, anp.zeros(3), distance, 1e-5) ** 2)

    def our_contraction(b):
        return lambda x: 0.5 * x + 0.4 * np.tanh(W0 @ x + b)

    def our_equilibrium(b):
        return np.sum(fixed_point(our_contraction, b, np.zeros(3), absolute, 1e-5) ** 2)

    np.testing.assert_allclose(srcgrad.grad(our_equilibrium)(B0), autograd.grad(their_equilibrium)(B0), rtol=1e-10)


def test_fixed_point_of_a_step_it_cannot_read_is_refused():
    def step_of(a):
        step = lambda x: 0.5 * (x + a / x)  # noqa: E731
        return [step][0]
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="last statement does not return"):
        srcgrad.grad(lambda a: fixed_point(step_of, a, 1.0, absolute, 1e-10))(2.0)


def test_fixed_point_in_forward_mode():
    for a in (0.5, 2.0):
        value, tangent = srcgrad.jvp(root)(a, 1.0)
        np.testing.assert_allclose(tangent, 0.5 / np.sqrt(a), rtol=1e-10)
    v = np.array([0.3, -1.0, 0.5])
    _, tangent = srcgrad.jvp(equilibrium, wrt=1)(W0, B0, v)
    np.testing.assert_allclose(tangent, np.dot(srcgrad.grad(equilibrium, wrt=1)(W0, B0), v), rtol=1e-8)


def cubed_roots(a):
    return np.sum(fixed_point(newton_sqrt, a, np.ones(3), absolute, 1e-12) ** 3)


def test_second_derivatives_through_fixed_point():
    """grad(grad), hessian and hvp: forward mode over the gradient code, which calls the
    adjoint of fixed_point (its rule runs as a function) by the adjoint's own tangent rule."""
    for a in (0.5, 2.0, 9.0):
        np.testing.assert_allclose(srcgrad.grad(srcgrad.grad(root))(a), -0.25 * a ** -1.5, rtol=1e-10)
    a = np.array([0.5, 2.0, 3.0])
    np.testing.assert_allclose(srcgrad.hessian(cubed_roots)(a), np.diag(0.75 * a ** -0.5), rtol=1e-10, atol=1e-14)
    # the parameters a tuple (W, b), the contraction a closure over them
    H = srcgrad.hessian(equilibrium, wrt=1)(W0, B0)
    np.testing.assert_allclose(H, H.T, rtol=1e-8)
    gradient = srcgrad.grad(equilibrium, wrt=1)
    for v in np.eye(3):
        np.testing.assert_allclose(H @ v, srcgrad.hvp(equilibrium, wrt=1)(W0, B0, v), rtol=1e-10)
        e = 1e-6
        np.testing.assert_allclose(H @ v, (gradient(W0, B0 + e * v) - gradient(W0, B0 - e * v)) / (2 * e),
                                   rtol=1e-6, atol=1e-8)
    H_W = srcgrad.hessian(equilibrium, wrt=0)(W0, B0).reshape(9, 9)
    np.testing.assert_allclose(H_W, H_W.T, rtol=1e-8, atol=1e-12)


def test_a_third_derivative_through_fixed_point_is_refused():
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="fixed_point") as info:
        srcgrad.grad(srcgrad.grad(srcgrad.grad(root)))(2.0)
    assert info.value.origin.line == root.__code__.co_firstlineno


def test_odeint_in_forward_mode_is_refused():
    def loss(y0):
        return np.sum(odeint(oscillator, y0, T, (A,)))
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match="reverse mode only"):
        srcgrad.jvp(loss)(Y0, np.ones_like(Y0))
