"""HIPS autograd examples/logistic_regression.py: logistic regression by 100 steps of gradient
descent, after a numerical gradient check; the example runs on import."""
import numpy as np
from .conftest import load


def test_logistic_regression_training():
    ours, theirs = load("logistic_regression"), load("logistic_regression", "autograd")
    w0 = np.array([0.3, -0.2, 0.1])
    np.testing.assert_allclose(ours.training_gradient_fun(w0), theirs.training_gradient_fun(w0), rtol=1e-6)
    # the module-level loop: weights after 100 steps
    np.testing.assert_allclose(ours.weights, theirs.weights, rtol=1e-6)
    np.testing.assert_allclose(ours.training_loss(ours.weights), theirs.training_loss(theirs.weights),
                               rtol=1e-6)
