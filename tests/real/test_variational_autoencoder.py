"""HIPS autograd examples/variational_autoencoder.py: a VAE on binarised (stand-in) MNIST."""
import numpy as np
from .conftest import assert_close, load

LATENT_DIM, DATA_DIM = 4, 784  # (the example: 10, 784)
PARAM_SCALE, BATCH_SIZE, STEP_SIZE = 0.01, 40, 0.001  # (batch 200)


def _setup(m):
    N, train_images, _, test_images, _ = m.load_mnist()

    def binarise(images):
        on = images > 0.5
        images = images * 0 - 1
        images[on] = 1.0
        return images

    train_images = binarise(train_images)
    init_gen_params = m.init_net_params(PARAM_SCALE, [LATENT_DIM, 30, 20, DATA_DIM])  # (300, 200)
    init_rec_params = m.init_net_params(PARAM_SCALE, [DATA_DIM, 20, 30, LATENT_DIM * 2])
    combined_init_params = (init_gen_params, init_rec_params)
    num_batches = int(np.ceil(len(train_images) / BATCH_SIZE))

    def batch_indices(iter):
        idx = iter % num_batches
        return slice(idx * BATCH_SIZE, (idx + 1) * BATCH_SIZE)

    seed = m.npr.RandomState(0)

    def objective(combined_params, iter):
        data_idx = batch_indices(iter)
        gen_params, rec_params = combined_params
        return -m.vae_lower_bound(gen_params, rec_params, train_images[data_idx], seed) / DATA_DIM

    return combined_init_params, objective


def test_vae_gradient():
    ours, theirs = load("variational_autoencoder"), load("variational_autoencoder", "autograd")
    p, objective = _setup(ours)
    p2, objective2 = _setup(theirs)
    assert_close(ours.grad(objective)(p, 0), theirs.grad(objective2)(p2, 0))
    assert_close(ours.grad(objective)(p, 1), theirs.grad(objective2)(p2, 1))


def test_vae_adam_steps():
    ours, theirs = load("variational_autoencoder"), load("variational_autoencoder", "autograd")
    results = []
    for m in (ours, theirs):
        p, objective = _setup(m)
        trained = m.adam(m.grad(objective), p, step_size=STEP_SIZE, num_iters=4)
        results.append((trained, objective(trained, 4)))
    assert_close(results[0][0], results[1][0])
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6)
