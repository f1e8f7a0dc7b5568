"""Models as ordinary Python: nn modules, optimizers, custom adjoints, hooks and
gradients of intermediate values."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from srcgrad import nn, optim
from srcgrad.nn import functional
from srcgrad.testing import check_grads

rng = np.random.default_rng(11)


class TwoLayerNet(nn.Module):
    def __init__(self, d_in, hidden, d_out):
        self.linear1 = nn.Linear(d_in, hidden, rng=rng)
        self.linear2 = nn.Linear(hidden, d_out, rng=rng)

    def forward(self, x):
        h_relu = np.maximum(self.linear1(x), 0)
        return self.linear2(h_relu)


def mse(model, x, y):
    return nn.mse_loss(model(x), y)


def regression_data(n=32, d_in=4, d_out=2):
    x = rng.standard_normal((n, d_in))
    y = np.tanh(x @ rng.standard_normal((d_in, d_out)))
    return x, y


OPTIMIZERS = {
    "SGD": lambda p: optim.SGD(p, lr=0.05, momentum=0.9),
    "SGD-nesterov": lambda p: optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4),
    "Adam": lambda p: optim.Adam(p, lr=0.02),
    "AdamW": lambda p: optim.AdamW(p, lr=0.02),
    "Adagrad": lambda p: optim.Adagrad(p, lr=0.1),
    "RMSprop": lambda p: optim.RMSprop(p, lr=0.01),
}


@pytest.mark.parametrize("make_optimizer", OPTIMIZERS.values(), ids=OPTIMIZERS.keys())
@pytest.mark.parametrize("make_model", [
    lambda: TwoLayerNet(4, 16, 2),
    lambda: nn.Sequential(nn.Linear(4, 16, rng=rng), nn.ReLU(), nn.Linear(16, 2, rng=rng)),
], ids=["TwoLayerNet", "Sequential"])
def test_models_train_with_each_optimizer(make_model, make_optimizer):
    x, y = regression_data()
    model = make_model()
    opt = make_optimizer(model)
    step = srcgrad.value_and_grad(mse)
    first, _ = step(model, x, y)
    for _ in range(150):
        loss, grads = step(model, x, y)
        opt.step(grads)
    assert loss < 0.2 * first


LAYERS = [
    ("Linear", lambda: nn.Linear(3, 4, rng=rng), (5, 3)),
    ("Conv2d-stride-padding", lambda: nn.Conv2d(2, 3, 3, stride=2, padding=1, rng=rng), (2, 2, 5, 5)),
    ("Conv2d-no-bias", lambda: nn.Conv2d(1, 2, (2, 3), bias=False, rng=rng), (2, 1, 4, 5)),
    ("Sequential-CNN", lambda: nn.Sequential(nn.Conv2d(1, 2, 3, padding=1, rng=rng), nn.ReLU(),
                                             nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8, 3, rng=rng)),
     (2, 1, 4, 4)),
    ("AvgPool2d-Tanh", lambda: nn.Sequential(nn.AvgPool2d(2), nn.Tanh(), nn.Flatten(),
                                             nn.Linear(4, 2, rng=rng)), (2, 1, 4, 4)),
    ("Sigmoid-Dropout-eval", lambda: nn.Sequential(nn.Linear(3, 4, rng=rng), nn.Sigmoid(),
                                                   nn.Dropout(0.5)).eval(), (5, 3)),
]


def squared(model, x):
    return np.sum(model(x) ** 2)


@pytest.mark.parametrize("make, shape", [(m, s) for _, m, s in LAYERS], ids=[n for n, _, _ in LAYERS])
def test_layer_gradients_match_finite_differences_on_every_parameter(make, shape):
    model, x = make(), rng.standard_normal(shape)
    check_grads(squared, (model, x), wrt=(0, 1))


def rnn_loss(cell, xs, h):
    for t in range(len(xs)):
        h = cell(xs[t], h)
    return np.sum(h**2)


def test_rnn_cell_through_time():
    check_grads(rnn_loss, (nn.RNNCell(3, 4, rng=rng), rng.standard_normal((5, 2, 3)), np.zeros((2, 4))),
                wrt=(0, 1))


def test_dropout_in_training_scales_kept_units():
    layer = nn.Dropout(0.5, seed=3)
    x = np.ones((4, 6))
    g = srcgrad.grad(squared, wrt=1)(layer, x)
    kept = np.random.default_rng(3).random(x.shape) >= 0.5
    np.testing.assert_allclose(g, np.where(kept, 2 * x * 4, 0))


def test_losses_have_their_textbook_values():
    logits = np.array([[2.0, 0.5, -1.0], [0.0, 0.0, 0.0]])
    labels = np.array([0, 2])
    logp = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
    assert nn.cross_entropy(logits, labels) == pytest.approx(-(logp[0, 0] + logp[1, 2]) / 2)
    assert nn.nll_loss(logp, labels) == pytest.approx(nn.cross_entropy(logits, labels))
    assert nn.mse_loss(np.array([1.0, 3.0]), np.array([0.0, 1.0])) == pytest.approx(2.5)
    check_grads(nn.cross_entropy, (logits, labels), wrt=0)


def weighted_log_softmax(logits, weights):
    return np.sum(functional.log_softmax(logits) * weights)


def test_softmax_losses_exact_with_the_shift_held_constant():
    """The shift by the maximum is stop_gradient-ed (log-softmax ignores it): the gradient
    is softmax - onehot exactly, with tied maxima too, in the logits' dtype."""
    logits = np.array([[2.0, 2.0, -1.0], [0.0, 0.0, 0.0], [1.0, 3.0, 3.0]])
    labels = np.array([0, 2, 1])
    probs = np.exp(logits) / np.sum(np.exp(logits), axis=1, keepdims=True)
    expected = (probs - np.eye(3)[labels]) / 3
    np.testing.assert_allclose(srcgrad.grad(nn.cross_entropy)(logits, labels), expected, rtol=1e-12)
    g32 = srcgrad.grad(nn.cross_entropy)(logits.astype(np.float32), labels)
    assert g32.dtype == np.float32
    np.testing.assert_allclose(g32, expected, rtol=1e-5)
    weights = np.random.default_rng(0).standard_normal(logits.shape)
    check_grads(weighted_log_softmax, (logits, weights), wrt=0)
    for row in (0, 2):  # central differences sit between the tied maxima: the value moves smoothly
        check_grads(nn.cross_entropy, (logits[row:row + 1], labels[row:row + 1]), wrt=0)


def test_module_without_forward_is_reported():
    class NoForward(nn.Module):
        def __init__(self):
            self.w = np.ones(2)

    with pytest.raises(TypeError, match="no forward method"):
        srcgrad.grad(squared)(NoForward(), np.ones(2))


def test_state_dict_round_trip_and_train_eval():
    model = TwoLayerNet(3, 5, 2)
    state = model.state_dict()
    assert sorted(state) == ["linear1.bias", "linear1.weight", "linear2.bias", "linear2.weight"]
    other = TwoLayerNet(3, 5, 2)
    other.load_state_dict(state)
    np.testing.assert_array_equal(other.linear1.weight, model.linear1.weight)
    with pytest.raises(ValueError, match="linear1.weight"):
        other.load_state_dict({**state, "linear1.weight": np.zeros((2, 2))})
    assert not model.eval().linear1.training and model.train().linear2.training


def test_kaiming_uniform_bound_matches_pytorch_default():
    layer = nn.Linear(100, 50, rng=np.random.default_rng(0))
    assert np.abs(layer.weight).max() <= 1 / np.sqrt(100)
    assert np.abs(layer.weight).max() > 0.9 / np.sqrt(100)


# ---- custom adjoints, hooks, intermediates, stop_gradient ------------------
@srcgrad.custom_adjoint
def my_relu(x):
    return np.maximum(x, 0)


@my_relu.defadjoint
def my_relu_adjoint(ans_bar, ans, x):
    return ans_bar * (x > 0)


def net_with_custom_relu(w1, w2, x, y):
    h = x @ w1
    h_relu = my_relu(h)
    y_pred = h_relu @ w2
    return np.sum((y_pred - y) ** 2)


def net_with_builtin_relu(w1, w2, x, y):
    h = x @ w1
    h_relu = np.maximum(h, 0)
    y_pred = h_relu @ w2
    return np.sum((y_pred - y) ** 2)


ARGS = (rng.standard_normal((3, 4)), rng.standard_normal((4, 2)), rng.standard_normal((5, 3)),
        rng.standard_normal((5, 2)))


def test_custom_relu_is_used_by_the_compiler_and_matches_the_builtin():
    check_grads(net_with_custom_relu, ARGS, wrt=(0, 1))
    custom = srcgrad.grad(net_with_custom_relu, wrt=(0, 1))(*ARGS)
    builtin = srcgrad.grad(net_with_builtin_relu, wrt=(0, 1))(*ARGS)
    for a, b in zip(custom, builtin):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    code = srcgrad.source(srcgrad.grad(net_with_custom_relu, wrt=(0, 1)), *ARGS)
    assert "h_bar = h_relu_bar * (h > 0)" in code


def test_intermediate_adjoints_like_retain_grad():
    g, watched = srcgrad.grad(net_with_builtin_relu, intermediates=("h", "h_relu"))(*ARGS)
    w1, w2, x, y = ARGS
    h = x @ w1
    h_relu_bar = 2 * (np.maximum(h, 0) @ w2 - y) @ w2.T
    np.testing.assert_allclose(watched["h_relu"], h_relu_bar, rtol=1e-12)
    np.testing.assert_allclose(watched["h"], h_relu_bar * (h > 0), rtol=1e-12)
    np.testing.assert_allclose(g, x.T @ watched["h"], rtol=1e-12)


def test_hook_changes_an_adjoint_guided_backprop():
    clamp = lambda g: np.maximum(g, 0)  # noqa: E731 - guided backpropagation's rule
    g = srcgrad.grad(net_with_builtin_relu, hooks={"h_relu": clamp})(*ARGS)
    w1, w2, x, y = ARGS
    h = x @ w1
    h_relu_bar = np.maximum(2 * (np.maximum(h, 0) @ w2 - y) @ w2.T, 0)
    np.testing.assert_allclose(g, x.T @ (h_relu_bar * (h > 0)), rtol=1e-12)


def test_stop_gradient_blocks_a_path():
    def f(x):
        return np.sum(x * srcgrad.stop_gradient(x))

    x = np.array([1.0, -2.0])
    np.testing.assert_array_equal(srcgrad.grad(f)(x), x)


def test_intermediates_naming_nothing_is_an_error():
    with pytest.raises(srcgrad.UserCodeError, match="never assigns"):
        srcgrad.grad(net_with_builtin_relu, intermediates=("nope",))(*ARGS)


def test_check_grads_catches_a_wrong_rule():
    @srcgrad.custom_adjoint
    def twice(x):
        return 2 * x

    @twice.defadjoint
    def wrong(ans_bar, ans, x):
        return 3 * ans_bar

    def f(x):
        return np.sum(twice(x))

    with pytest.raises(AssertionError, match="argument x"):
        check_grads(f, (np.ones(3),))
