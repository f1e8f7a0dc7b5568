"""HIPS autograd examples/black_box_svi.py (used by bayesian_neural_net.py): black-box
variational inference of a 2-D density, by reparameterised samples, trained with adam."""
import numpy as np
from .conftest import assert_close, load


def _setup(m, num_samples=50):
    np_, norm = m.np, m.norm
    D = 2

    def log_density(x, t):
        mu, log_sigma = x[:, 0], x[:, 1]
        sigma_density = norm.logpdf(log_sigma, 0, 1.35)
        mu_density = norm.logpdf(mu, 0, np_.exp(log_sigma))
        return sigma_density + mu_density

    objective, gradient, unpack_params = m.black_box_variational_inference(log_density, D,
                                                                           num_samples=num_samples)
    init_mean = -1 * np.ones(D)
    init_log_std = -5 * np.ones(D)
    return objective, gradient, np.concatenate([init_mean, init_log_std])


def test_black_box_svi_gradient():
    ours, theirs = load("black_box_svi"), load("black_box_svi", "autograd")
    _, gradient, x0 = _setup(ours)
    _, gradient2, _ = _setup(theirs)
    assert_close(gradient(x0, 0), gradient2(x0, 0))


def test_black_box_svi_adam_steps():
    ours, theirs = load("black_box_svi"), load("black_box_svi", "autograd")
    results = []
    for m in (ours, theirs):
        objective, gradient, x0 = _setup(m)
        trained = m.adam(gradient, x0, step_size=0.1, num_iters=5)
        results.append((trained, objective(trained, 5)))
    assert_close(results[0][0], results[1][0])
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6)
