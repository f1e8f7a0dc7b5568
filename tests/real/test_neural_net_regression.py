"""HIPS autograd examples/neural_net_regression.py: a small MLP fitted to a toy 1-D dataset."""
import numpy as np
from .conftest import assert_close, load

WEIGHT_PRIOR_VARIANCE = 10.0


def _setup(m):
    init_params = m.init_random_params(0.1, layer_sizes=[1, 4, 4, 1])
    inputs, targets = m.build_toy_dataset()

    def objective(weights, t):
        return -m.logprob(weights, inputs, targets) - m.log_gaussian(weights, WEIGHT_PRIOR_VARIANCE)

    return init_params, objective


def test_neural_net_regression_gradient():
    ours, theirs = load("neural_net_regression"), load("neural_net_regression", "autograd")
    p, objective = _setup(ours)
    p2, objective2 = _setup(theirs)
    assert_close(ours.grad(objective)(p, 0), theirs.grad(objective2)(p2, 0))


def test_neural_net_regression_likelihood_gradient():
    """The likelihood term alone (no flatten): nn_predict's loop over layers, norm.logpdf."""
    ours, theirs = load("neural_net_regression"), load("neural_net_regression", "autograd")
    inputs, targets = ours.build_toy_dataset()
    p = ours.init_random_params(0.1, layer_sizes=[1, 4, 4, 1])

    def loglik(m):
        return lambda weights: m.logprob(weights, inputs, targets)

    assert_close(ours.grad(loglik(ours))(p), theirs.grad(loglik(theirs))(p))


def test_neural_net_regression_adam_steps():
    ours, theirs = load("neural_net_regression"), load("neural_net_regression", "autograd")
    results = []
    for m in (ours, theirs):
        p, objective = _setup(m)
        trained = m.adam(m.grad(objective), p, step_size=0.01, num_iters=5)
        results.append((trained, objective(trained, 0)))
    assert_close(results[0][0], results[1][0])
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6)
