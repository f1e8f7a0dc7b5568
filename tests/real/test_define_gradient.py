"""HIPS autograd examples/define_gradient.py: a logsumexp made a primitive with its own VJP
(autograd.extend's @primitive and defvjp, srcgrad.extend's here)."""
import numpy as np
from .conftest import load, main_block


def _example_func(m):
    def example_func(y):
        z = y**2
        lse = m.logsumexp(z)
        return m.np.sum(lse)

    return example_func


def test_define_gradient_custom_vjp():
    ours, theirs = load("define_gradient"), load("define_gradient", "autograd")
    y = np.random.RandomState(0).randn(10)
    got = ours.grad(_example_func(ours))(y)
    want = theirs.grad(_example_func(theirs))(y)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(got, 2 * y * np.exp(y**2 - np.log(np.sum(np.exp(y**2)))), rtol=1e-10)


def test_define_gradient_main_block():
    """The program as its author runs it: the gradient printed, then check_grads."""
    main_block(load("define_gradient"))
