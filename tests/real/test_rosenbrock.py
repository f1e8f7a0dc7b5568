"""HIPS autograd examples/rosenbrock.py: value_and_grad handed to scipy.optimize.minimize (CG);
the example runs on import."""
import numpy as np
from .conftest import load


def test_rosenbrock_minimize(capsys):
    ours, theirs = load("rosenbrock"), load("rosenbrock", "autograd")
    for x in ([0.0, 0.0], [-1.2, 1.0], [0.5, 2.0]):
        x = np.array(x)
        value, gradient = ours.rosenbrock_with_grad(x)
        value2, gradient2 = theirs.rosenbrock_with_grad(x)
        np.testing.assert_allclose(value, value2, rtol=1e-12)
        np.testing.assert_allclose(gradient, gradient2, rtol=1e-6)
    np.testing.assert_allclose(ours.result.x, theirs.result.x, rtol=1e-6)
    assert ours.result.nit == theirs.result.nit
    np.testing.assert_allclose(ours.result.x, [1.0, 1.0], atol=1e-3)
