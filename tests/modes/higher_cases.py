"""The cases ``test_higher.py`` checks higher order on and ``test_batched.py`` checks batched
columns on: functions (loops, branches, helpers, methods, shared layers, the runtime helpers
of broadcasting), their arguments, and the gallery's models (``_model_cases``)."""
from __future__ import annotations

import numpy as np

import srcgrad
from srcgrad import nn, tree


def two_layer(w1, w2, x, y):
    """The tutorial's loss (examples/01_numpy_warmup.py)."""
    h = x.dot(w1)
    h_relu = np.maximum(h, 0)
    y_pred = h_relu.dot(w2)
    return np.square(y_pred - y).sum()


def loop_branch(x, w):
    total = 0.0
    h = x
    for i in range(3):
        if np.sum(h) > 0:
            h = np.tanh(h @ w)
        else:
            h = np.sin(h) * x
        total = total + np.sum(h ** 2) / (i + 1)
    return total


def layer(w, b, h):
    return np.tanh(h @ w + b)


def shared_layer(w, b, x):
    h = layer(w, b, x)
    h = layer(w, b, h)  # the same weights twice
    return np.mean(h ** 2)


class Model:
    def __init__(self, v):
        self.v = v

    def forward(self, w, x):
        return np.sum(np.exp((x @ w) @ self.v))


def with_model(w, model, x):
    return model.forward(w, x) + np.sum(w ** 2)


def helpers(x, b):
    """The runtime helpers of a gradient's code: broadcasting (``unbroadcast``), reductions
    over an axis (``broadcast_reduced``, ``max_adjoint``), indexing, reshapes."""
    z = np.exp(x) + b  # b broadcast over the rows
    m = np.max(z * x, axis=1)
    r = np.reshape(z, (-1,))
    return np.sum(np.mean(z ** 2, axis=0)) + np.sum(m ** 2) + np.sum(r[1:4] ** 3) + np.sum(x[0] * b)


rng = np.random.default_rng(0)
X, Y = rng.standard_normal((5, 4)), rng.standard_normal((5, 2))
W1, W2 = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
CASES = [
    (two_layer, (W1, W2, X, Y), 0),
    (two_layer, (W1, W2, X, Y), 1),
    (loop_branch, (rng.standard_normal(3), rng.standard_normal((3, 3))), 0),
    (loop_branch, (-np.abs(rng.standard_normal(3)), rng.standard_normal((3, 3))), 0),  # the other branch
    (loop_branch, (rng.standard_normal(3), rng.standard_normal((3, 3))), 1),
    (shared_layer, (rng.standard_normal((3, 3)), rng.standard_normal(3), rng.standard_normal((4, 3))), 0),
    (shared_layer, (rng.standard_normal((3, 3)), rng.standard_normal(3), rng.standard_normal((4, 3))), 1),
    (with_model, (0.3 * rng.standard_normal((3, 2)), Model(0.5 * rng.standard_normal(2)), rng.standard_normal((4, 3))), 0),
    (helpers, (rng.standard_normal((3, 4)), rng.standard_normal(4)), 0),
    (helpers, (rng.standard_normal((3, 4)), rng.standard_normal(4)), 1),
]
IDS = [f"{f.__name__}-wrt{w}-{i}" for i, (f, _, w) in enumerate(CASES)]


def gradient_difference(f, args, wrt, v, eps=1e-6):
    """``H v`` by central differences of srcgrad's gradient along ``v``."""
    g = srcgrad.grad(f, wrt=wrt)

    def moved(sign):
        return g(*[a + sign * eps * v if i == wrt else a for i, a in enumerate(args)])
    return (moved(1) - moved(-1)) / (2 * eps)


# ---- the gallery's models: hvp with respect to a whole model ------------------------
class DynamicNet(nn.Module):
    """examples/09's network, at a fixed depth: the middle layer shared three times."""

    def __init__(self, dtype):
        self.input_linear = nn.Linear(5, 4, dtype=dtype)
        self.middle_linear = nn.Linear(4, 4, dtype=dtype)
        self.output_linear = nn.Linear(4, 3, dtype=dtype)

    def forward(self, x):
        h_relu = np.maximum(self.input_linear(x), 0)
        for _ in range(3):
            h_relu = np.maximum(self.middle_linear(h_relu), 0)
        return self.output_linear(h_relu)


class SmallCNN(nn.Module):
    """examples/digits_cnn.py's model (conv with padding, pooling, linear), smaller; Tanh
    so that the Hessian is not zero almost everywhere."""

    def __init__(self, pool, side, dtype):
        self.conv = nn.Conv2d(2, 3, 3, padding=1, dtype=dtype)
        self.act = nn.Tanh()
        self.pool = pool
        self.to_vector = nn.Flatten()
        out = (side - pool.kernel_size[0]) // pool.stride + 1
        self.fc = nn.Linear(3 * out * out, 4, dtype=dtype)

    def forward(self, x):
        return self.fc(self.to_vector(self.pool(self.act(self.conv(x)))))


def squared_error(model, x, y):
    return np.sum((model(x) - y) ** 2)


def cross_entropy(model, x, labels):
    return nn.cross_entropy(model(x), labels)


def _leaves(t):
    return tree.flatten(t)[1]


def _moved(model, v, eps):
    return tree.unflatten(tree.flatten(model)[2], [a + eps * b if isinstance(a, np.ndarray) and a.dtype.kind == "f"
                                                   else a for a, b in zip(_leaves(model), _leaves(v))])


def _model_cases(dtype):
    r = np.random.default_rng(5)
    nn.init.manual_seed(0)
    return [
        (squared_error, DynamicNet(dtype), r.standard_normal((6, 5)).astype(dtype),
         r.standard_normal((6, 3)).astype(dtype)),
        (cross_entropy, SmallCNN(nn.MaxPool2d(3, stride=2), 6, dtype),  # overlapping windows
         r.standard_normal((2, 2, 6, 6)).astype(dtype), np.array([1, 3])),
        (cross_entropy, SmallCNN(nn.MaxPool2d(2), 5, dtype),  # tiling windows, the odd row cropped
         r.standard_normal((2, 2, 5, 5)).astype(dtype), np.array([0, 2])),
        (cross_entropy, SmallCNN(nn.AvgPool2d(2, stride=1), 4, dtype),
         r.standard_normal((2, 2, 4, 4)).astype(dtype), np.array([1, 3])),
    ]
