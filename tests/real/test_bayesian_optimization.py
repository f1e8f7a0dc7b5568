"""HIPS autograd examples/bayesian_optimization.py: a GP surrogate (gaussian_process.py)
and expected improvement, each next query point found by L-BFGS-B on value_and_grad of
the acquisition function (closures with default arguments), the GP's hyperparameters by
CG; the main block's example_function over [0, 1.1]."""
import numpy as np

from .conftest import assert_close, load, main_block

SKIP = ("plt.", "fig = ", "ax = fig", "def callback", "best_x, best_y =")
NUM_ITERS = 3  # (the example: 20)


def _main(flavour):
    return main_block(load("bayesian_optimization", flavour), skip=SKIP)


def test_bayesian_optimization_acquisition_gradients():
    """expected_new_max and probability_of_improvement (norm.cdf and norm.pdf with the
    location and scale differentiated) in the GP's predictive mean and std."""
    rs = np.random.RandomState(0)
    mean, std = rs.randn(5), np.exp(rs.randn(5))
    results = []
    for m in (load("bayesian_optimization"), load("bayesian_optimization", "autograd")):
        for acquisition in (m.expected_new_max, m.probability_of_improvement):
            loss = lambda mean, std: m.np.sum(acquisition(mean, std, 0.3))
            results.append(m.value_and_grad(loss, (0, 1))(mean, std))
    assert_close(results[:2], results[2:])


def test_bayesian_optimize():
    results = []
    for ns in (_main("srcgrad"), _main("autograd")):
        results.append(ns["bayesian_optimize"](ns["example_function"], ns["domain_min"], ns["domain_max"],
                                               num_iters=NUM_ITERS))
    assert_close(results[0], results[1])
