"""HIPS autograd examples/neural_net.py: an MLP on (stand-in) MNIST, trained with adam."""
import numpy as np
from .conftest import assert_close, load

LAYER_SIZES = [784, 20, 10, 10]  # (the example: [784, 200, 100, 10])
L2_REG, PARAM_SCALE, BATCH_SIZE, STEP_SIZE = 1.0, 0.1, 32, 0.001


def _setup(m):
    """The example's main block, for module ``m`` (either flavour)."""
    N, train_images, train_labels, test_images, test_labels = m.load_mnist()
    init_params = m.init_random_params(PARAM_SCALE, LAYER_SIZES)
    num_batches = int(np.ceil(len(train_images) / BATCH_SIZE))

    def batch_indices(iter):
        idx = iter % num_batches
        return slice(idx * BATCH_SIZE, (idx + 1) * BATCH_SIZE)

    def objective(params, iter):
        idx = batch_indices(iter)
        return -m.log_posterior(params, train_images[idx], train_labels[idx], L2_REG)

    return init_params, objective, (train_images, train_labels)


def test_neural_net_gradient():
    ours, theirs = load("neural_net"), load("neural_net", "autograd")
    p, objective, _ = _setup(ours)
    p2, objective2, _ = _setup(theirs)
    for it in (0, 3):
        assert_close(ours.grad(objective)(p, it), theirs.grad(objective2)(p2, it))


def test_neural_net_adam_steps():
    ours, theirs = load("neural_net"), load("neural_net", "autograd")
    results = []
    for m in (ours, theirs):
        p, objective, (X, Y) = _setup(m)
        trained = m.adam(m.grad(objective), p, step_size=STEP_SIZE, num_iters=4)
        results.append((trained, objective(trained, 0), m.accuracy(trained, X, Y)))
    assert_close(results[0][0], results[1][0])
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6)
    assert results[0][2] == results[1][2]
