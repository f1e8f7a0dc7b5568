# From HIPS autograd examples/data_mnist.py (MIT licence, LICENSE.autograd beside this file); mnist() changed:
# it builds seeded random data of MNIST's shapes and dtypes (small N) instead of downloading.
import array
import gzip
import os
import struct
from urllib.request import urlretrieve

import numpy as np

N_TRAIN, N_TEST = 300, 100  # (MNIST: 60000, 10000)


def download(url, filename):
    if not os.path.exists("data"):
        os.makedirs("data")
    out_file = os.path.join("data", filename)
    if not os.path.isfile(out_file):
        urlretrieve(url, out_file)


def mnist():
    rs = np.random.RandomState(0)
    train_images = rs.randint(0, 256, size=(N_TRAIN, 28, 28)).astype(np.uint8)
    train_labels = rs.randint(0, 10, size=N_TRAIN).astype(np.uint8)
    test_images = rs.randint(0, 256, size=(N_TEST, 28, 28)).astype(np.uint8)
    test_labels = rs.randint(0, 10, size=N_TEST).astype(np.uint8)
    return train_images, train_labels, test_images, test_labels
