"""HIPS autograd examples/data.py, the helpers the examples import (load_mnist over the
stand-in data_mnist.py: seeded random data of MNIST's shapes and dtypes, no download)."""
import matplotlib
import numpy as np
import pytest
from .conftest import load


def test_load_mnist_shapes_and_flavours():
    ours, theirs = load("data"), load("data", "autograd")
    N, train_images, train_labels, test_images, test_labels = ours.load_mnist()
    assert train_images.shape == (N, 784) and test_images.shape[1] == 784
    assert train_labels.shape == (N, 10) and test_labels.shape[1] == 10
    assert train_images.dtype == np.float64 and train_labels.dtype.kind == "i"
    assert np.all(train_labels.sum(axis=1) == 1) and 0 <= train_images.min() and train_images.max() <= 1
    for a, b in zip(ours.load_mnist(), theirs.load_mnist()):
        np.testing.assert_array_equal(a, b)


def test_make_pinwheel_and_save_images(tmp_path):
    matplotlib.use("Agg")
    ours, theirs = load("data"), load("data", "autograd")
    a = ours.make_pinwheel(0.3, 0.05, 5, 20, 0.25)
    b = theirs.make_pinwheel(0.3, 0.05, 5, 20, 0.25)
    assert a.shape == (100, 2)
    np.testing.assert_allclose(a, b, rtol=1e-12)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path)
        ours.save_images(ours.load_mnist()[1][:7], "images.png", vmin=0, vmax=1)
    assert (tmp_path / "images.png").exists()
