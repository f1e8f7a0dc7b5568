"""HIPS autograd examples/convnet.py: a LeNet-style convolutional net on (stand-in) MNIST,
trained by SGD with momentum.  Its convolution is autograd's generalised one
(``autograd.scipy.signal.convolve``, axes= and dot_axes=): srcgrad.scipy.signal.convolve."""
import numpy as np

from .conftest import assert_close, load, main_block

L2_REG, PARAM_SCALE, LEARNING_RATE, MOMENTUM, BATCH_SIZE = 1.0, 0.1, 1e-3, 0.9, 20  # (batch 256)


def _setup(m):
    data_mnist = load("data_mnist", "autograd" if m.__name__.startswith("_real_autograd") else "srcgrad")
    input_shape = (1, 28, 28)
    layer_specs = [  # (the example: 6 and 16 filters, 120 and 84 units)
        m.conv_layer((5, 5), 2),
        m.maxpool_layer((2, 2)),
        m.conv_layer((5, 5), 3),
        m.maxpool_layer((2, 2)),
        m.tanh_layer(12),
        m.tanh_layer(8),
        m.softmax_layer(10),
    ]
    add_color_channel = lambda x: x.reshape((x.shape[0], 1, x.shape[1], x.shape[2]))
    one_hot = lambda x, K: np.array(x[:, None] == np.arange(K)[None, :], dtype=int)
    train_images, train_labels, test_images, test_labels = data_mnist.mnist()
    train_images = add_color_channel(train_images) / 255.0
    train_labels = one_hot(train_labels, 10)
    N_weights, pred_fun, loss_fun, frac_err = m.make_nn_funs(input_shape, layer_specs, L2_REG)
    W = m.npr.RandomState(0).randn(N_weights) * PARAM_SCALE
    return W, loss_fun, m.make_batches(60, BATCH_SIZE), train_images, train_labels


def test_convnet_gradient():
    ours, theirs = load("convnet"), load("convnet", "autograd")
    W, loss, batches, X, T = _setup(ours)
    W2, loss2, *_ = _setup(theirs)
    assert_close(ours.grad(loss)(W, X[:BATCH_SIZE], T[:BATCH_SIZE]),
                 theirs.grad(loss2)(W2, X[:BATCH_SIZE], T[:BATCH_SIZE]))


def test_convnet_sgd_steps():
    ours, theirs = load("convnet"), load("convnet", "autograd")
    results = []
    for m in (ours, theirs):
        W, loss_fun, batch_idxs, train_images, train_labels = _setup(m)
        loss_grad = m.grad(loss_fun)
        cur_dir = np.zeros(len(W))
        for idxs in batch_idxs:
            grad_W = loss_grad(W, train_images[idxs], train_labels[idxs])
            cur_dir = MOMENTUM * cur_dir + (1.0 - MOMENTUM) * grad_W
            W -= LEARNING_RATE * cur_dir
        results.append((W, loss_fun(W, train_images[:BATCH_SIZE], train_labels[:BATCH_SIZE])))
    assert_close(results[0][0], results[1][0])
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6)


def test_convnet_main_block_one_epoch():
    """The main block as written (the example's layer sizes, batches of 256), for one epoch,
    the weights drawn from a seeded RandomState (the block's is unseeded)."""
    results = []
    for flavour in ("srcgrad", "autograd"):
        ns = main_block(load("convnet", flavour), skip=("num_epochs = 50", "rs = npr.RandomState()"),
                        before={"num_epochs": 1, "rs": np.random.RandomState(0)})
        results.append(ns["W"])
    assert_close(results[0], results[1])
