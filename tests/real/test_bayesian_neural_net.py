"""HIPS autograd examples/bayesian_neural_net.py: black-box variational inference
(black_box_svi.py) of a Bayesian MLP's weights on a toy 1-D dataset."""
import numpy as np
import autograd
import srcgrad
from .conftest import assert_close, load

LAYER_SIZES, NUM_SAMPLES = [1, 8, 8, 1], 5  # (the example: [1, 20, 20, 1], 20)



def _setup(m):
    np_ = m.np
    svi = load("black_box_svi", "autograd" if m.__name__.startswith("_real_autograd") else "srcgrad")
    rbf = lambda x: np_.exp(-(x**2))
    num_weights, predictions, logprob = m.make_nn_funs(layer_sizes=LAYER_SIZES, L2_reg=0.1,
                                                       noise_variance=0.01, nonlinearity=rbf)
    inputs, targets = m.build_toy_dataset()
    log_posterior = lambda weights, t: logprob(weights, inputs, targets)
    objective, gradient, unpack_params = svi.black_box_variational_inference(log_posterior, num_weights,
                                                                             num_samples=NUM_SAMPLES)
    rs = m.npr.RandomState(0)
    init_mean = rs.randn(num_weights)
    init_log_std = -5 * np.ones(num_weights)
    init_var_params = np.concatenate([init_mean, init_log_std])
    return objective, gradient, init_var_params, logprob, num_weights, (inputs, targets)


def test_bayesian_neural_net_gradient():
    ours, theirs = load("bayesian_neural_net"), load("bayesian_neural_net", "autograd")
    _, gradient, x0, *_ = _setup(ours)
    _, gradient2, *_ = _setup(theirs)
    assert_close(gradient(x0, 0), gradient2(x0, 0))


def test_bayesian_neural_net_logprob_gradient():
    """logprob of a batch of weight samples, summed: the network alone."""
    ours, theirs = load("bayesian_neural_net"), load("bayesian_neural_net", "autograd")
    *_, logprob, num_weights, (inputs, targets) = _setup(ours)
    *_, logprob2, _, _ = _setup(theirs)
    w = np.random.RandomState(1).randn(3, num_weights)
    got = srcgrad.grad(lambda w: np.sum(logprob(w, inputs, targets)))(w)
    want = autograd.grad(lambda w: theirs.np.sum(logprob2(w, inputs, targets)))(w)
    assert_close(got, want)


def test_bayesian_neural_net_adam_steps():
    ours, theirs = load("bayesian_neural_net"), load("bayesian_neural_net", "autograd")
    results = []
    for m in (ours, theirs):
        objective, gradient, x0, *_ = _setup(m)
        trained = m.adam(gradient, x0, step_size=0.1, num_iters=3)
        results.append((trained, objective(trained, 3)))
    assert_close(results[0][0], results[1][0])
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6)
