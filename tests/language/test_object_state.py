"""Object state as forward bookkeeping: caches (`self.cache = x`, `self.X.append(x)`),
counters (`self.calls += 1`), running statistics and lazily made parameters run as
written on primal values; what is stored is the value, with no adjoint (as PyTorch
under no_grad); a value stored and read back in the same block is differentiated
through; one read back where srcgrad cannot tell which value it is (after a branch,
in a later iteration, through code not inlined) is refused, at compile time in the
function that stores it, and when it runs where a later call reads it back."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import finite_differences

RS = np.random.RandomState(0)
X = RS.randn(4, 3)


class Dense:
    def __init__(self, w):
        self.w = w
        self.cache = None
        self.calls = 0

    def forward(self, x):
        self.cache = x
        self.calls += 1
        return x @ self.w


class Tanh:
    def __init__(self):
        self.out = None

    def forward(self, x):
        self.out = np.tanh(x)        # kept for a hand-written backward
        return self.out              # read back at once: differentiated through


class Net:
    def __init__(self, widths, dtype=np.float64):
        self.layers = []
        for m, n in zip(widths[:-1], widths[1:]):
            self.layers.append(Dense(RS.randn(m, n).astype(dtype)))
            self.layers.append(Tanh())

    def forward(self, x):
        for layer in self.layers:
            x = layer.forward(x)
        return x


def dense_loss(layer, x):
    return np.sum(layer.forward(x) ** 2)


def net_loss(net, x):
    return np.sum(net.forward(x) ** 2)


def _through_helper(layer, x):
    return layer.forward(x) * 2.0


def helper_loss(layer, x):
    return np.sum(_through_helper(layer, x))


def test_a_cache_and_a_counter_run_as_written():
    layer = Dense(RS.randn(3, 2))
    g = srcgrad.grad(dense_loss)(layer, X)
    np.testing.assert_allclose(g.w, 2 * X.T @ (X @ layer.w), rtol=1e-12)
    assert layer.calls == 1 and layer.cache is X
    srcgrad.grad(dense_loss)(layer, X)
    assert layer.calls == 2


def test_caches_in_a_loop_over_layers_of_different_widths():
    net = Net((3, 4, 2))
    g = srcgrad.grad(net_loss)(net, X)
    ws = [layer.w for layer in net.layers if isinstance(layer, Dense)]

    def loss(ws, x):
        for w in ws:
            x = np.tanh(x @ w)
        return np.sum(x ** 2)
    expected = finite_differences(loss, (ws, X), 0)
    got = [layer.w for layer in g.layers if hasattr(layer, "w")]
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(net.layers[-1].out, np.tanh(np.tanh(X @ ws[0]) @ ws[1]))


def test_a_cache_in_a_helper_and_with_respect_to_the_input():
    layer = Dense(RS.randn(3, 2))
    g = srcgrad.grad(helper_loss, wrt=1)(layer, X)
    np.testing.assert_allclose(g, 2.0 * np.ones((4, 2)) @ layer.w.T, rtol=1e-12)


def test_caches_in_float32():
    net = Net((3, 2), np.float32)
    g = srcgrad.grad(net_loss)(net, X.astype(np.float32))
    assert g.layers[0].w.dtype == np.float32
    w = net.layers[0].w.astype(np.float64)
    expected = finite_differences(lambda w, x: np.sum(np.tanh(x @ w) ** 2), (w, X), 0)[0]
    np.testing.assert_allclose(g.layers[0].w, expected, rtol=1e-3, atol=1e-4)


class BatchNorm:
    def __init__(self, n, momentum=0.1):
        self.gamma, self.beta = np.ones(n), np.zeros(n)
        self.running_mean, self.running_var = np.zeros(n), np.ones(n)
        self.momentum = momentum

    def forward(self, x):
        mean, var = np.mean(x, axis=0), np.var(x, axis=0)
        self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mean
        self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var
        return self.gamma * (x - mean) / np.sqrt(var + 1e-5) + self.beta


def bn_loss(bn, x):
    return np.sum(np.sin(bn.forward(x)))


def test_running_statistics_are_kept_and_not_differentiated():
    bn = BatchNorm(3)
    g = srcgrad.grad(bn_loss)(bn, X)
    np.testing.assert_allclose(bn.running_mean, 0.1 * X.mean(0), rtol=1e-12)
    np.testing.assert_allclose(bn.running_var, 0.9 + 0.1 * X.var(0), rtol=1e-12)
    xhat = (X - X.mean(0)) / np.sqrt(X.var(0) + 1e-5)
    np.testing.assert_allclose(g.gamma, np.sum(np.cos(xhat) * xhat, axis=0), rtol=1e-10)
    np.testing.assert_allclose(g.running_mean, 0.0)
    gx = srcgrad.grad(bn_loss, wrt=1)(BatchNorm(3), X)
    np.testing.assert_allclose(gx, finite_differences(bn_loss, (BatchNorm(3), X), 1)[0], rtol=1e-6, atol=1e-8)


class Lazy:
    def __init__(self, n_out):
        self.n_out, self.w = n_out, None

    def forward(self, x):
        if self.w is None:
            self.n_in = x.shape[1]
            self.w = np.random.RandomState(1).randn(self.n_in, self.n_out)
        return x @ self.w


def lazy_loss(layer, x):
    return np.sum(np.tanh(layer.forward(x)))


def test_a_lazily_made_parameter():
    layer = Lazy(2)
    g = srcgrad.grad(lazy_loss, wrt=1)(layer, X)
    assert layer.n_in == 3 and layer.w.shape == (3, 2)
    np.testing.assert_allclose(g, (1 - np.tanh(X @ layer.w) ** 2) @ layer.w.T, rtol=1e-12)
    g = srcgrad.grad(lazy_loss)(layer, X)  # made now: a parameter like any other
    np.testing.assert_allclose(g.w, X.T @ (1 - np.tanh(X @ layer.w) ** 2), rtol=1e-12)


class ReadsBackLater:
    def __init__(self, w):
        self.w = w

    def forward(self, x, flag):
        if flag:
            self.h = np.tanh(x @ self.w)
        else:
            self.h = x @ self.w
        return np.sum(self.h ** 2)


class ReadsBackNextIteration:
    def __init__(self, w):
        self.w, self.h = w, None

    def forward(self, x):
        total = 0.0
        for _ in range(2):
            if self.h is not None:
                total = total + np.sum(self.h)
            self.h = x @ self.w
        return total


def test_a_store_read_back_where_srcgrad_cannot_tell_the_value_is_refused():
    w = RS.randn(3, 2)
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="storing a value that is being differentiated"):
        srcgrad.grad(lambda m, x: m.forward(x, True))(ReadsBackLater(w), X)
    with pytest.raises(srcgrad.UnsupportedSyntaxError):
        srcgrad.grad(lambda m, x: m.forward(x), wrt=1)(ReadsBackNextIteration(w), X)


def test_a_store_read_back_at_once_is_differentiated_through():
    class Square:
        def forward(self, x):
            self.y = x * x
            return np.sum(self.y * 3.0)
    g = srcgrad.grad(lambda m, x: m.forward(x), wrt=1)(Square(), X)
    np.testing.assert_allclose(g, 6.0 * X, rtol=1e-12)


class Appends:
    def __init__(self, w):
        self.w, self.inputs = w, []

    def forward(self, x):
        self.inputs.append(x)
        return np.tanh(x @ self.w)


def test_an_appended_cache():
    layer = Appends(RS.randn(3, 2))
    g = srcgrad.grad(lambda m, x: np.sum(m.forward(x)))(layer, X)
    np.testing.assert_allclose(g.w, X.T @ (1 - np.tanh(X @ layer.w) ** 2), rtol=1e-12)
    assert len(layer.inputs) == 1 and layer.inputs[0] is X


# ---- a store read back by a later call of the same computation ----------------------------

class Stateful:
    """Reads its state, then replaces it (a smoother, an RNN cell keeping its last output)."""

    def __init__(self):
        self.w, self.prev = np.array(2.0), np.array(0.7)

    def forward(self, x):
        out = x * self.w + 0.5 * self.prev
        self.prev = out
        return out

    def penalty(self):
        return self.prev ** 2


class Context:
    def __init__(self):
        self.memory = None


class Writer:
    def __init__(self):
        self.w = np.array(1.5)

    def forward(self, x, ctx):
        ctx.memory = x * self.w
        return ctx.memory * 2.0


def called_twice(s, x1, x2):
    return s.forward(x1) * s.forward(x2)


def called_in_a_loop(s, xs):
    total = 0.0
    for x in xs:
        total = total + s.forward(x)
    return total


def read_by_another_method(s, x):
    return s.forward(x) + s.penalty()


def read_by_the_caller(s, x):
    y = s.forward(x)
    return y + s.prev ** 2


def read_through_a_context(writer, x):
    ctx = Context()
    h = writer.forward(x, ctx)
    return _reads_memory(h, ctx)


def _reads_memory(h, ctx):
    return h * ctx.memory


@pytest.mark.parametrize("loss, args", [
    (called_twice, (np.array(1.0), np.array(3.0))),
    (called_in_a_loop, (np.array([1.0, 3.0]),)),
    (read_by_another_method, (np.array(2.0),)),
    (read_by_the_caller, (np.array(2.0),)),
])
def test_a_kept_store_read_back_by_a_later_call_is_refused(loss, args):
    # (the adjoint of the read would go to the field's old value: silently wrong before)
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match=r"reads back `\.prev`.*stored \(at test_object_state"):
        srcgrad.grad(loss, wrt=tuple(range(1 + len(args))))(Stateful(), *args)


def test_a_kept_store_read_through_another_object_is_refused():
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match=r"reads back `\.memory`"):
        srcgrad.grad(read_through_a_context, wrt=(0, 1))(Writer(), np.array(2.0))


def test_state_read_then_replaced_once_per_call_is_differentiated():
    # One call per gradient: the read is of the state passed in, whose gradient it is.
    def once(s, x):
        return s.forward(x) ** 2
    s, x = Stateful(), np.array(1.3)
    g_s, g_x = srcgrad.grad(once, wrt=(0, 1))(s, x)
    out = x * 2.0 + 0.5 * 0.7
    np.testing.assert_allclose([g_s.w, g_s.prev, g_x], [2 * out * x, 2 * out * 0.5, 2 * out * 2.0], rtol=1e-12)
    # The next gradient call starts afresh: the state stored by this one is an input there.
    prev = s.prev
    g_s, g_x = srcgrad.grad(once, wrt=(0, 1))(s, x)
    np.testing.assert_allclose(g_s.prev, 2 * (x * 2.0 + 0.5 * prev) * 0.5, rtol=1e-12)
    s.prev = prev
    np.testing.assert_allclose(g_x, finite_differences(lambda x: once(_copy(s), x), (x,), 0)[0], rtol=1e-6)


def _copy(s):
    c = Stateful()
    c.w, c.prev = s.w, s.prev
    return c


class TrainingBatchNorm:
    """Running statistics updated in training, read in evaluation (one `if`, two branches)."""

    def __init__(self, n):
        self.gamma, self.mean, self.training = np.ones(n), np.zeros(n), True

    def forward(self, x):
        if self.training:
            m = x.mean(axis=0)
            self.mean = 0.9 * self.mean + 0.1 * m
        else:
            m = self.mean
        return (x - m) * self.gamma


def two_batches(bn, x):
    return np.sum(bn.forward(x) ** 2) + np.sum(bn.forward(x * 2.0) ** 2)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_running_statistics_in_one_branch_read_in_the_other(dtype):
    x = X.astype(dtype)
    g = srcgrad.grad(two_batches, wrt=1)(TrainingBatchNorm(3), x)
    assert g.dtype == dtype
    expected = finite_differences(lambda x: two_batches(TrainingBatchNorm(3), x), (X,), 0)[0]
    np.testing.assert_allclose(g, expected, rtol=1e-4 if dtype == np.float32 else 1e-6, atol=1e-4)
    bn = TrainingBatchNorm(3)
    bn.forward(X)
    bn.training = False  # evaluation: the statistics are an input, with a gradient of their own
    g_bn = srcgrad.grad(lambda bn, x: np.sum(bn.forward(x) ** 2))(bn, X)
    np.testing.assert_allclose(g_bn.mean, -2 * np.sum(X - bn.mean, axis=0), rtol=1e-12)


def test_a_field_a_call_added_is_not_in_the_gradient():
    layer = Dense(RS.randn(3, 2))
    del layer.cache
    g = srcgrad.grad(dense_loss)(layer, X)
    assert g.cache is None
    np.testing.assert_allclose(g.w, finite_differences(lambda w: dense_loss(Dense(w), X), (layer.w,), 0)[0], rtol=1e-6)


# ---- containers an object holds, grown by values being differentiated -------------------

class Recorder:
    """Keeps what it saw, as layers with hand-written backward passes do."""

    def __init__(self, w):
        self.w, self.inputs, self.derived = w, [], {"Z": [], "A": []}

    def __call__(self, x):
        self.inputs.append(x)
        z = x @ self.w
        self.derived["Z"].append(z)
        a = np.tanh(z)
        self.derived["A"].append(a)
        return a


class RecordsThenReads(Recorder):
    def __call__(self, x):
        self.inputs.append(x)
        return np.tanh(self.inputs[-1] @ self.w)


def recorded_twice(layer, x):
    return np.sum(layer(layer(x) @ np.eye(2, 3)) ** 2)


def recorded_in_a_loop(layer, x):
    for _ in range(3):
        x = layer(x) @ np.ones((2, 3)) * 0.5
    return np.sum(x ** 2)


def _recorded(layer, x):
    return layer(x) * 2.0


def recorded_in_a_helper(layer, x):
    return np.sum(_recorded(layer, x) + layer(x))


@pytest.mark.parametrize("loss", [recorded_twice, recorded_in_a_loop, recorded_in_a_helper])
def test_grown_caches_run_as_written_with_no_adjoint(loss):
    w = RS.randn(3, 2)
    layer = Recorder(w)
    g = srcgrad.grad(loss, wrt=(0, 1))(layer, X)
    expected_w = finite_differences(lambda w, x: loss(Recorder(w), x), (w, X), 0)[0]
    expected_x = finite_differences(lambda w, x: loss(Recorder(w), x), (w, X), 1)[0]
    np.testing.assert_allclose(g[0].w, expected_w, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g[1], expected_x, rtol=1e-6, atol=1e-8)
    calls = len(layer.inputs)
    assert calls in (2, 3) and len(layer.derived["Z"]) == calls and len(layer.derived["A"]) == calls
    assert layer.inputs[0] is X
    assert g[0].inputs is None and g[0].derived is None  # (what it kept is no gradient)


def test_grown_caches_in_float32():
    w = RS.randn(3, 2).astype(np.float32)
    g = srcgrad.grad(recorded_twice)(Recorder(w), X.astype(np.float32))
    assert g.w.dtype == np.float32
    np.testing.assert_allclose(g.w, srcgrad.grad(recorded_twice)(Recorder(w.astype(np.float64)), X).w, rtol=1e-4)


def test_a_grown_cache_read_back_is_refused():
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match="grows the `.inputs`"):
        srcgrad.grad(lambda m, x: np.sum(m(x)), wrt=1)(RecordsThenReads(RS.randn(3, 2)), X)


class History:
    def __init__(self, w):
        self.w, self.hist, self.cache = w, [], {"Z": []}

    def f(self, x):
        y = np.sin(x @ self.w)
        self.hist.append(y)
        self.cache["Z"].append(y)
        return y


@pytest.mark.parametrize("read", ["hist", "cache"])
def test_a_cache_grown_by_a_call_for_its_effect_and_read_back_is_refused(read):
    def loss(m, x):
        m.f(x)  # (its value unused: run for its effect)
        return np.sum(m.hist[0]) if read == "hist" else np.sum(m.cache["Z"][0])
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match="added it to the container"):
        srcgrad.grad(loss, wrt=(0, 1))(History(RS.randn(3, 2)), X)


class StatefulCell:
    """numpy-ml's RNN cell: each call reads the state the last one appended."""

    def __init__(self, w):
        self.w, self.states = w, [np.zeros((4, 2))]

    def __call__(self, x):
        h = np.tanh(x + self.states[-1] @ self.w)
        self.states.append(h)
        return h


class RunningMean:
    def __init__(self):
        self.mean = np.zeros(3)

    def forward(self, x):
        self.mean = 0.9 * self.mean + 0.1 * x.mean(axis=0)
        return x - self.mean


@pytest.mark.parametrize("loss", [
    lambda cell, xs: sum(np.sum(cell(xs[t]) ** 2) for t in range(3)),
    lambda bn, x: np.sum(bn.forward(x) ** 2) + np.sum(bn.forward(2.0 * x) ** 2),
])
def test_state_an_earlier_call_kept_read_by_the_next_with_respect_to_the_input_is_refused(loss):
    made = (StatefulCell(RS.randn(2, 2)), RS.randn(3, 4, 2)) if loss.__code__.co_varnames[0] == "cell" \
        else (RunningMean(), X)
    # (refused when it runs, or, where the object's calls are inlined, when compiling)
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match="reads back|is read after it"):
        srcgrad.grad(loss, wrt=1)(*made)


def test_float_attributes_of_layers_held_in_an_ordered_dict():
    from collections import OrderedDict

    class Scale:
        def __init__(self, p):
            self.p, self.w = p, np.ones(3)

        def forward(self, x):
            return x * self.w / (1.0 - self.p)

    class Model:
        def __init__(self, layers):
            self.layers = layers

    def loss(m, x):
        for layer in m.layers.values():
            x = layer.forward(x)
        return np.sum(x)
    g = srcgrad.grad(loss)(Model(OrderedDict(a=Scale(0.3), b=Scale(0.5))), np.ones(3))
    np.testing.assert_allclose(g.layers["a"].p, 3.0 / (0.7 ** 2 * 0.5), rtol=1e-12)
    np.testing.assert_allclose(g.layers["b"].p, 3.0 / (0.7 * 0.5 ** 2), rtol=1e-12)


class TwoCaches:
    """numpy-ml's Conv2D keeps the output and its row count in two lists of one dict."""

    def __init__(self, w):
        self.w, self.derived = w, {"Z": [], "rows": []}

    def forward(self, x):
        z = x @ self.w
        self.derived["Z"].append(z)
        self.derived["rows"].append(z.shape[0])
        return np.tanh(z)


def test_two_caches_in_one_dict_field():
    w = RS.randn(3, 2)
    layer = TwoCaches(w)
    g = srcgrad.grad(lambda m, x: np.sum(m.forward(x) ** 2))(layer, X)
    expected = finite_differences(lambda w: np.sum(TwoCaches(w).forward(X) ** 2), (w,), 0)[0]
    np.testing.assert_allclose(g.w, expected, rtol=1e-6, atol=1e-9)
    assert layer.derived["rows"] == [4] and len(layer.derived["Z"]) == 1


# ---- entries of the dicts an object holds (numpy-ml's `self.parameters`, `self.derived_variables`) ----

class DictBatchNorm:
    """numpy-ml's BatchNorm1D: parameters, running statistics and counters in dicts."""

    def __init__(self, n, dtype=np.float64):
        rs = np.random.RandomState(2)
        self.hyperparameters = {"momentum": 0.9, "epsilon": 1e-5}
        self.parameters = {"scaler": (rs.rand(n) + 0.5).astype(dtype), "intercept": rs.randn(n).astype(dtype),
                           "running_mean": np.zeros(n, dtype), "running_var": np.ones(n, dtype)}
        self.derived_variables = {"n_calls": 0}
        self.dv = {"n": 0}
        self.trainable, self.X = True, []

    def forward(self, X):
        P = self.parameters
        mm, ep = self.hyperparameters["momentum"], self.hyperparameters["epsilon"]
        rm, rv = P["running_mean"], P["running_var"]
        if self.trainable:
            X_mean, X_var = X.mean(axis=0), X.var(axis=0)
            self.parameters["running_mean"] = mm * rm + (1.0 - mm) * X_mean
            self.parameters["running_var"] = mm * rv + (1.0 - mm) * X_var
        else:
            X_mean, X_var = rm, rv
        self.X.append(X)
        self.derived_variables["n_calls"] += 1
        self.dv["n"] += 1
        return P["scaler"] * (X - X_mean) / np.sqrt(X_var + ep) + self.parameters["intercept"]


def dict_bn_loss(bn, x):
    return np.sum(np.sin(bn.forward(x)) ** 2)


def _dict_bn_helper(bn, x):
    return bn.forward(x) * 2.0


def dict_bn_in_a_helper(bn, x):
    return np.sum(np.tanh(_dict_bn_helper(bn, x)))


def _copied(make, f):
    import copy
    return lambda *args: f(copy.deepcopy(make), *args)


@pytest.mark.parametrize("loss", [dict_bn_loss, dict_bn_in_a_helper])
def test_running_statistics_and_counters_in_dict_entries(loss):
    bn = DictBatchNorm(3)
    g_bn, g_x = srcgrad.grad(loss, wrt=(0, 1))(bn, X)
    np.testing.assert_allclose(g_x, finite_differences(_copied(DictBatchNorm(3), loss), (X,), 0)[0],
                               rtol=1e-6, atol=1e-8)
    scaler = DictBatchNorm(3).parameters["scaler"]

    def by_scaler(s, x):
        b = DictBatchNorm(3)
        b.parameters["scaler"] = s
        return loss(b, x)
    np.testing.assert_allclose(g_bn.parameters["scaler"], finite_differences(by_scaler, (scaler, X), 0)[0],
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g_bn.parameters["running_mean"], 0.0)  # (training: not read)
    # Run as written, on the values: the statistics, the counters and the cache.
    np.testing.assert_allclose(bn.parameters["running_mean"], 0.1 * X.mean(0), rtol=1e-12)
    np.testing.assert_allclose(bn.parameters["running_var"], 0.9 + 0.1 * X.var(0), rtol=1e-12)
    assert bn.derived_variables["n_calls"] == 1 and bn.dv["n"] == 1 and len(bn.X) == 1
    # Evaluation in a later gradient call: the statistics are inputs, with gradients of their own.
    bn.trainable = False
    g_bn = srcgrad.grad(loss)(bn, X)
    rm = bn.parameters["running_mean"].copy()

    def by_mean(m, x):
        b = DictBatchNorm(3)
        b.trainable, b.parameters["running_mean"], b.parameters["running_var"] = False, m, \
            bn.parameters["running_var"]
        return loss(b, x)
    np.testing.assert_allclose(g_bn.parameters["running_mean"], finite_differences(by_mean, (rm, X), 0)[0],
                               rtol=1e-6, atol=1e-8)
    assert bn.derived_variables["n_calls"] == 2


def test_dict_entries_in_float32():
    g = srcgrad.grad(dict_bn_loss, wrt=1)(DictBatchNorm(3, np.float32), X.astype(np.float32))
    assert g.dtype == np.float32
    expected = finite_differences(_copied(DictBatchNorm(3), dict_bn_loss), (X,), 0)[0]
    np.testing.assert_allclose(g, expected, rtol=2e-3, atol=2e-3)


class Counted:
    def __init__(self, w):
        self.w, self.dv, self.derived_variables = w, {"n": 0}, {"n_calls": 0, "Z": []}

    def forward(self, x):
        self.dv["n"] += 1
        self.derived_variables["n_calls"] += 1
        z = x @ self.w
        self.derived_variables["Z"].append(z)
        return np.tanh(z)


def counted_in_a_loop(m, x):
    total = 0.0
    for i in range(3):
        total = total + np.sum(m.forward(x * (i + 1.0)) ** 2)
    return total


def test_counters_in_dict_entries_in_a_loop():
    w = RS.randn(3, 2)
    m = Counted(w)
    g_m, g_x = srcgrad.grad(counted_in_a_loop, wrt=(0, 1))(m, X)
    assert m.dv["n"] == 3 and m.derived_variables["n_calls"] == 3 and len(m.derived_variables["Z"]) == 3
    np.testing.assert_allclose(g_m.w, finite_differences(lambda w: counted_in_a_loop(Counted(w), X), (w,), 0)[0],
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g_x, finite_differences(lambda x: counted_in_a_loop(Counted(w), x), (X,), 0)[0],
                               rtol=1e-6, atol=1e-8)


class ReadsItsEntryBack:
    def __init__(self):
        self.w, self.cache = np.array(1.5), {"h": np.array(0.0)}

    def forward(self, x):
        self.cache["h"] = x * self.w
        return self.cache["h"] ** 2


class ReadsItsEntryBackAfterABranch(ReadsItsEntryBack):
    def forward(self, x):
        if x > 0:
            self.cache["h"] = x * self.w
        return self.cache["h"] ** 2


class Momentum:
    """An optimizer keeping a velocity per parameter name, read right after it is stored."""

    def __init__(self):
        self.cache = {}

    def update(self, name, w, g):
        if name not in self.cache:
            self.cache[name] = np.zeros_like(g)
        self.cache[name] = 0.9 * self.cache[name] + 0.1 * g
        return w - 0.5 * self.cache[name]


def momentum_step(w, x):
    opt = Momentum()
    w = opt.update("w", w, 2 * x.T @ np.tanh(x @ w))
    return np.sum(np.tanh(x @ w) ** 2)


def two_momentum_steps(w, x):
    opt = Momentum()
    for _ in range(2):  # (the second step reads the velocity the first kept: refused)
        w = opt.update("w", w, 2 * x.T @ np.tanh(x @ w))
    return np.sum(np.tanh(x @ w) ** 2)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_dict_entry_read_back_in_its_block_is_differentiated_through(dtype):
    g = srcgrad.grad(lambda m, x: m.forward(x), wrt=1)(ReadsItsEntryBack(), np.array(2.0, dtype))
    np.testing.assert_allclose(g, 2 * 2.0 * 1.5 ** 2, rtol=1e-6)
    w = RS.randn(3, 2)
    g_w, g_x = srcgrad.grad(momentum_step, wrt=(0, 1))(w.astype(dtype), X.astype(dtype))
    assert g_w.dtype == dtype
    tol = 1e-6 if dtype == np.float64 else 2e-3
    np.testing.assert_allclose(g_w, finite_differences(momentum_step, (w, X), 0)[0], rtol=tol, atol=tol)
    np.testing.assert_allclose(g_x, finite_differences(momentum_step, (w, X), 1)[0], rtol=tol, atol=tol)
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match=r"reads back `\.cache\['w'\]`"):
        srcgrad.grad(two_momentum_steps)(w, X)


def twice(bn, x):
    return dict_bn_loss(bn, x) + dict_bn_loss(bn, 2.0 * x)


def train_then_evaluate(bn, x):
    first = dict_bn_loss(bn, x)
    bn.trainable = False
    return first + dict_bn_loss(bn, 2.0 * x)


def test_a_dict_entry_read_back_is_refused():
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match=r"storing a value that is being differentiated in "
                       r"`self.cache\[\"h\"\]`"):
        srcgrad.grad(lambda m, x: m.forward(x), wrt=1)(ReadsItsEntryBackAfterABranch(), np.array(2.0))
    # Read back by a later call of the same computation (the statistics depend on `x`).
    for loss in (twice, train_then_evaluate):
        with pytest.raises(srcgrad.UnsupportedSyntaxError, match=r"reads back `\.parameters\['running_mean'\]`"):
            srcgrad.grad(loss, wrt=1)(DictBatchNorm(3), X)


class DetachedStatistics(DictBatchNorm):
    def forward(self, X):  # (the refusal's advice: the statistics read through stop_gradient)
        P = self.parameters
        rm = srcgrad.stop_gradient(P["running_mean"])
        X_mean = X.mean(axis=0)
        self.parameters["running_mean"] = 0.9 * rm + 0.1 * X_mean
        return P["scaler"] * (X - X_mean)


def test_statistics_read_through_stop_gradient_by_a_later_call():
    def loss(bn, x):
        return np.sum(bn.forward(x) ** 2) + np.sum(np.sin(bn.forward(2.0 * x)))
    g = srcgrad.grad(loss, wrt=1)(DetachedStatistics(3), X)
    np.testing.assert_allclose(g, finite_differences(_copied(DetachedStatistics(3), loss), (X,), 0)[0],
                               rtol=1e-6, atol=1e-8)


def test_writing_into_an_array_an_object_holds_is_refused():
    class Writes:
        def __init__(self):
            self.w, self.b = np.ones(3), np.zeros(3)

        def forward(self, x):
            self.b[0] = np.sum(x)
            return x * self.w + self.b
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match=r"not an array"):
        srcgrad.grad(lambda m, x: np.sum(m.forward(x)), wrt=1)(Writes(), np.ones(3))


# ---- a method of the user's named like a container's (`opt.update(w, g)`) ---------------------

class SGD:
    def __init__(self, lr):
        self.lr, self.steps = lr, 0

    def update(self, w, g):
        self.steps += 1
        return w - self.lr * g


def unrolled_steps(w, x):
    opt = SGD(0.1)
    for _ in range(2):
        w = opt.update(w, 2 * x.T @ (x @ w))
    return np.sum((x @ w) ** 2)


def _one_step(w, x, opt):
    return opt.update(w, 2 * x.T @ (x @ w))


def step_in_a_helper(w, x):
    return np.sum((x @ _one_step(w, x, SGD(0.1))) ** 2)


def step_by_an_optimizer_passed_in(w, x, opt):
    return np.sum((x @ opt.update(w, 2 * x.T @ (x @ w))) ** 2)


@pytest.mark.parametrize("loss", [unrolled_steps, step_in_a_helper,
                                  lambda w, x: step_by_an_optimizer_passed_in(w, x, SGD(0.1))])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_an_optimizer_update_method_is_the_users(loss, dtype):
    w = RS.randn(3, 2)
    g = srcgrad.grad(loss, wrt=(0, 1))(w.astype(dtype), X.astype(dtype))
    tol = 1e-6 if dtype == np.float64 else 2e-3
    for i, got in enumerate(g):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, finite_differences(loss, (w, X), i)[0], rtol=tol, atol=tol)


# ---- caches grown in a loop that also calls a layer srcgrad does not inline --------------------

class KeepsItsInput:
    """A layer with state of its own: compiled on its own, called at run time."""

    def __init__(self, w):
        self.w, self.last = w, None

    def __call__(self, x):
        self.last = x
        return np.tanh(x @ self.w)


class GrowsInALoop:
    def __init__(self, w):
        self.sub, self.derived = KeepsItsInput(w), {"Z": []}

    def forward(self, x):
        for _ in range(3):
            x = self.sub(x)
            self.derived["Z"].append(x)
        return x


class GrowsAfterTheLoop(GrowsInALoop):
    def forward(self, x):  # (the refusal's advice)
        values = []
        for _ in range(3):
            x = self.sub(x)
            values.append(x)
        self.derived["Z"].extend(values)
        return x


def test_a_cache_grown_in_a_loop_calling_a_stateful_layer():
    w = RS.randn(3, 3) * 0.5
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match=r'self.derived\["Z"\].extend\(values\)'):
        srcgrad.grad(lambda m, x: np.sum(m.forward(x) ** 2), wrt=1)(GrowsInALoop(w), X)
    m = GrowsAfterTheLoop(w)
    g = srcgrad.grad(lambda m, x: np.sum(m.forward(x) ** 2), wrt=1)(m, X)
    expected = finite_differences(lambda x: np.sum(GrowsAfterTheLoop(w).forward(x) ** 2), (X,), 0)[0]
    np.testing.assert_allclose(g, expected, rtol=1e-6, atol=1e-8)
    assert len(m.derived["Z"]) == 3


# ---- `self.acc += v`, `self.stats["sum"] += v` on an array: NumPy changes it in place -----------

class AccumulatesInPlace:
    def __init__(self):
        self.w, self.acc, self.stats = RS.randn(3, 2), np.zeros(3), {"sum": np.zeros(3), "n": 0}

    def field(self, x):
        s = self.acc  # (sees the change: `+=` on an array is in place)
        self.acc += x.sum(axis=0)
        return (x + s) @ self.w

    def entry(self, x):
        s = self.stats["sum"]
        self.stats["sum"] += x.sum(axis=0)
        self.stats["n"] += x.shape[0]  # (a counter: rebound)
        return (x + s) @ self.w

    def rebound(self, x):  # (the refusal's advice)
        s = self.stats["sum"]
        self.stats["sum"] = self.stats["sum"] + x.sum(axis=0)
        self.acc = self.acc + x.sum(axis=0)
        self.stats["n"] += x.shape[0]
        return (x + s) @ self.w


@pytest.mark.parametrize("method", ["field", "entry"])
def test_augmented_assignment_of_an_array_an_object_holds_is_refused(method):
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="changes the array it holds in place"):
        srcgrad.grad(lambda m, x: np.sum(getattr(m, method)(x) ** 2), wrt=1)(AccumulatesInPlace(), X)


def test_the_same_update_as_a_new_array():
    m = AccumulatesInPlace()
    g = srcgrad.grad(lambda m, x: np.sum(m.rebound(x) ** 2), wrt=1)(m, X)
    np.testing.assert_allclose(g, 2 * (X @ m.w) @ m.w.T, rtol=1e-12)
    np.testing.assert_allclose(m.stats["sum"], X.sum(0), rtol=1e-12)
    assert m.stats["n"] == 4


# ---- a sub-layer's output cached on the object and used again ----------------------------
# (a method that stores a field kept its sub-layers from being inlined, so `out * tanh(out)`
# of the sub-layer's output was an operator dispatched when it runs, which might read the
# field back: the cache was refused)

from srcgrad import nn  # noqa: E402
from srcgrad.testing import check_grads  # noqa: E402


class _CachingLayer(nn.Module):
    def __init__(self, dtype=np.float64):
        self.fc = nn.Linear(3, 3, dtype=dtype)
        self.last_out = None
        self.calls = 0

    def forward(self, x):
        out = self.fc(x)
        self.last_out = out  # kept for inspection
        self.calls += 1
        return out * np.tanh(out)


class _TwoCachingLayers(nn.Module):
    def __init__(self):
        self.a, self.b = _CachingLayer(), _CachingLayer()

    def forward(self, x):
        return self.b(self.a(x))


class _CachingAttention(nn.Module):
    def __init__(self):
        self.q, self.k = nn.Linear(4, 4), nn.Linear(4, 4)
        self.attn_weights = None

    def forward(self, x):
        scores = self.q(x) @ self.k(x).T
        att = np.exp(scores - np.max(scores, axis=-1, keepdims=True))
        att = att / np.sum(att, axis=-1, keepdims=True)
        self.attn_weights = att
        return att @ x + att.sum()


def _squared(model, x):
    return np.sum(model(x) ** 2)


@pytest.mark.parametrize("make, width", [(_CachingLayer, 3), (_TwoCachingLayers, 3), (_CachingAttention, 4)])
def test_a_sub_layers_output_cached_and_used_again(make, width):
    model = make()
    x = np.linspace(-1, 1, 2 * width).reshape(2, width)
    check_grads(_squared, (model, x), wrt=0)
    g = srcgrad.grad(_squared)(model, x)
    kept = model.attn_weights if make is _CachingAttention else (model.last_out if make is _CachingLayer
                                                                  else model.b.last_out)
    assert isinstance(kept, np.ndarray)  # (the store ran, on the value)
    assert g is not None


def test_a_sub_layers_output_cached_in_float32_and_in_a_loop():
    model = _CachingLayer(np.float32)
    x = np.linspace(-1, 1, 6).reshape(2, 3).astype(np.float32)

    def unrolled(m, x):
        for _ in range(3):
            x = m(x)
        return np.sum(x)
    g = srcgrad.grad(unrolled)(model, x)
    assert g.fc.weight.dtype == np.float32
    g64 = srcgrad.grad(unrolled)(model.double(), x.astype(np.float64))
    np.testing.assert_allclose(g.fc.weight, g64.fc.weight, rtol=2e-3, atol=1e-5)
    check_grads(unrolled, (model, x.astype(np.float64)), wrt=0)


class _KeepsHistory(nn.Module):
    def __init__(self):
        self.fc, self.out = nn.Linear(4, 3), nn.Linear(3, 1)
        self.history, self.stats = [], {}

    def forward(self, x):
        h = np.tanh(self.fc(x))
        self.history.append(h.mean())  # (a list of the model's holding no layer)
        self.stats["last"] = float(np.max(h))
        return self.out(h)


def test_a_history_kept_before_a_layer_call_leaves_the_layers_inlined():
    model, x = _KeepsHistory(), np.linspace(-1, 1, 8).reshape(2, 4)
    check_grads(_squared, (model, x), wrt=0)
    before = len(model.history)
    g = srcgrad.grad(_squared)(model, x)
    assert len(model.history) == before + 1  # (the store ran; what was there is an input, its gradient zero)
    assert all(v == 0.0 for v in g.history)
    shown = srcgrad.source(srcgrad.grad(_squared), model, x)  # (the forward, compiled on its own,
    assert "vjp_method(self, 'fc'" not in shown and "vjp_method(self, 'out'" not in shown  # inlines its layers)


class _Settings:
    temperature = 0.5
    scale = 2.0


class _ReadsSettingsFromAClass:
    cfg = _Settings  # (a class held as a class attribute: its attributes are settings)

    def __init__(self):
        self.W = np.array([[1.0, 0.5], [-0.25, 2.0]])

    def __call__(self, x):
        return self.cfg.scale * (x @ self.W) / self.cfg.temperature


def test_settings_read_from_a_class_the_model_holds():
    model, x = _ReadsSettingsFromAClass(), np.array([[1.0, -2.0], [0.5, 0.25]])
    check_grads(_squared, (model, x), wrt=0)
    check_grads(_squared, (model, x), wrt=1)
