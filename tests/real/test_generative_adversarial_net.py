"""HIPS autograd examples/generative_adversarial_net.py: a GAN on (stand-in) MNIST, trained
with the example's own adam_minimax."""
import numpy as np
from .conftest import assert_close, load

NOISE_DIM, HIDDEN = 10, 20  # (the example: 10, 200)
PARAM_SCALE, BATCH_SIZE, STEP_SIZE = 0.001, 50, 0.01  # (batch 100)


def _setup(m):
    N, train_images, _, test_images, _ = m.load_mnist()
    init_gen_params = m.init_random_params(PARAM_SCALE, [NOISE_DIM, HIDDEN, 784])
    init_dsc_params = m.init_random_params(PARAM_SCALE, [784, HIDDEN, 1])
    num_batches = int(np.ceil(len(train_images) / BATCH_SIZE))

    def batch_indices(iter):
        idx = iter % num_batches
        return slice(idx * BATCH_SIZE, (idx + 1) * BATCH_SIZE)

    seed = m.npr.RandomState(0)

    def objective(gen_params, dsc_params, iter):
        idx = batch_indices(iter)
        return m.gan_objective(gen_params, dsc_params, train_images[idx], BATCH_SIZE, NOISE_DIM, seed)

    return init_gen_params, init_dsc_params, objective


def test_gan_gradient():
    ours, theirs = load("generative_adversarial_net"), load("generative_adversarial_net", "autograd")
    g, d, objective = _setup(ours)
    g2, d2, objective2 = _setup(theirs)
    # srcgrad spells autograd's grad(objective, argnum=(0, 1)) positionally
    assert_close(ours.grad(objective, (0, 1))(g, d, 0), theirs.grad(objective2, argnum=(0, 1))(g2, d2, 0))


def test_gan_adam_minimax_steps():
    ours, theirs = load("generative_adversarial_net"), load("generative_adversarial_net", "autograd")
    results = []
    for m in (ours, theirs):
        g, d, objective = _setup(m)
        trained = m.adam_minimax(m.grad(objective, (0, 1)), g, d, step_size_max=STEP_SIZE,
                                 step_size_min=STEP_SIZE, num_iters=3)
        results.append((trained, objective(*trained, 3)))
    assert_close(results[0][0], results[1][0])
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6)
