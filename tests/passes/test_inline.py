"""Calls whose target is known at compile time are inlined (transforms/inline.py).

Each kind of call is checked twice: the gradient (central differences, or
exact values), and the shape of the generated code (one flat function, no
run-time call, the callee's lines under their own comments).  Where inlining
would change what the code means (recursion, a callee writing into its
argument, an object changed while the code runs) the call stays a run-time
call, and the gradient is still right or refused as before.
"""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from srcgrad import nn
from srcgrad.testing import check_grads

rng = np.random.default_rng(7)
X = rng.standard_normal((4, 3))
W = rng.standard_normal((3, 3))
V = rng.standard_normal(3)


def flat(code):
    """The code is one function with no run-time call of the user's code."""
    return code.count("\ndef ") == 1 and not any(call in code for call in ("vjp_call", "vjp_method", "_vjp("))


# ---- module-level functions -----------------------------------------------------

def dense(x, w, scale=1.0, *, shift=0.0):
    h = x @ w
    return np.tanh(h * scale + shift)


def twice(x, w):
    return np.sum(dense(dense(x, w), w) ** 2)


def in_a_loop(x, w):
    h = x
    for i in range(3):
        h = dense(h, w, 0.5)
    return np.sum(h)


def in_branches(x, w, v):
    if np.sum(v) > 0:
        h = dense(x, w, scale=2.0)
    else:
        h = dense(x, w, shift=1.0)
    return np.sum(h * v)


def with_keywords(x, w):
    return np.sum(dense(w=w, x=x, shift=0.25, scale=3.0))


def clipped(x):
    if np.max(x) > 1.0:  # an early return: exits runs on the callee first
        return np.clip(x, -1.0, 1.0)
    return x * 1.0


def early_return(x, w):
    return np.sum(clipped(x @ w) ** 2)


@pytest.mark.parametrize("fn", [twice, in_a_loop, in_branches, with_keywords, early_return])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_module_level_helpers_are_inlined_and_right(fn, dtype):
    args = (X.astype(dtype), W.astype(dtype), V.astype(dtype))[:fn.__code__.co_argcount]
    code = srcgrad.source(srcgrad.grad(fn, wrt=1), *args)
    assert flat(code), code
    assert "# test_inline.py:" in code and "h = x @ w" in code or fn is early_return
    grads = srcgrad.grad(fn, wrt=tuple(range(len(args))))(*args)
    assert all(g.dtype == dtype for g in grads)
    if dtype == np.float64:
        check_grads(fn, args, wrt=tuple(range(len(args))))
    else:
        expected = srcgrad.grad(fn, wrt=tuple(range(len(args))))(*(a.astype(np.float64) for a in args))
        for g, e in zip(grads, expected):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_callee_locals_are_renamed_apart_and_read_well():
    code = srcgrad.source(srcgrad.grad(twice, wrt=1), X, W)
    # The first call's `h` keeps its name, the second's takes the function's prefix.
    assert "h = x @ w" in code and "dense_h = " in code
    # Parameters the callee never assigns are the caller's own names.
    assert "dense_x" not in code and "dense_w" not in code


SCALE = 3.0


def scaled(x):
    return x * SCALE


def shadows_a_global(x, SCALE):  # the caller's local, named like the callee's global
    return np.sum(scaled(x) * SCALE)


def test_callee_reads_its_own_globals():
    got = srcgrad.grad(shadows_a_global, wrt=(0, 1))(V, 2.0)
    np.testing.assert_allclose(got[0], np.full(3, 6.0))
    np.testing.assert_allclose(got[1], np.sum(V * 3.0))


def test_callee_global_data_read_at_each_call(tmp_path, monkeypatch):
    import importlib
    (tmp_path / "srcgrad_inline_settings.py").write_text(
        "import numpy as onp\nFACTOR = 2.0\n\n\ndef act(x):\n    return onp.tanh(x) * FACTOR\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    module = importlib.import_module("srcgrad_inline_settings")

    def f(x):
        return np.sum(module.act(x))
    g = srcgrad.grad(f)
    np.testing.assert_allclose(g(V), 2.0 * (1 - np.tanh(V) ** 2))
    assert flat(srcgrad.source(g, V))
    module.FACTOR = 5.0  # data: read afresh, as the original would
    np.testing.assert_allclose(g(V), 5.0 * (1 - np.tanh(V) ** 2))


def _noisy(x, gen):
    return x * gen.normal(size=3)


def random_before_and_inside(x, gen):
    return np.sum(gen.normal(size=3) * _noisy(x, gen))


def test_calls_run_in_pythons_order():
    """The draw written before the call happens before the callee's draws."""
    value, g = srcgrad.value_and_grad(random_before_and_inside)(V, np.random.default_rng(3))
    gen = np.random.default_rng(3)
    a, b = gen.normal(size=3), gen.normal(size=3)
    np.testing.assert_allclose(value, np.sum(a * V * b))
    np.testing.assert_allclose(g, a * b)


def conditional_calls(x, w):
    h = dense(x, w) if np.sum(x) > 0 else dense(x, w, 2.0)
    return np.sum(h) + (np.sum(x) > 100 and np.sum(dense(x, w)))


def test_calls_evaluated_conditionally_stay_calls():
    check_grads(conditional_calls, (X, W), wrt=(0, 1))


# ---- what is not inlined ---------------------------------------------------------

def power(x, n):
    if n <= 1:
        return x
    return x * power(x, n - 1)


def calls_power(x):
    return np.sum(power(x, 3))


def test_recursion_is_not_inlined_and_still_right():
    code = srcgrad.source(srcgrad.grad(calls_power), V)
    assert "power_vjp" in code  # the first call is inlined, the recursive one is not
    np.testing.assert_allclose(srcgrad.grad(calls_power)(V), 3 * V ** 2)


def writes_into(a):
    a[0] = 0.0
    return a


def calls_a_writer(x):
    y = x * 2.0
    return np.sum(writes_into(y) * x)


def test_a_callee_that_writes_into_its_argument_is_inlined():
    # (its write is then the caller's own, into `y`, a new array nothing else reads)
    expected = 4.0 * V
    expected[0] = 0.0
    np.testing.assert_allclose(srcgrad.grad(calls_a_writer)(V), expected)


def test_intermediates_name_the_functions_own_values_only():
    def loss(x, w):
        return np.sum(dense(x, w))
    with pytest.raises(srcgrad.errors.UserCodeError, match="never assigns"):
        srcgrad.grad(loss, intermediates=("h",))(X, W)


# ---- methods and layers of object arguments -----------------------------------

class Affine:
    def __init__(self, w, b):
        self.w, self.b = w, b

    def __call__(self, x):
        return self.apply(x)

    def apply(self, x):
        return x @ self.w + self.b


class Block(nn.Module):
    def __init__(self):
        self.inner = nn.Linear(3, 3)
        self.act = nn.Tanh()

    def forward(self, x):
        return self.act(self.inner(x))


class Net(nn.Module):
    def __init__(self):
        self.first = Block()
        self.second = Block()
        self.head = Affine(rng.standard_normal((3, 2)), rng.standard_normal(2))

    def forward(self, x):
        h = self.second(self.first(x))
        return self.head(h)


def net_loss(model, x):
    return np.sum(model(x) ** 2)


def test_methods_and_nested_modules_are_inlined():
    model = Net()
    code = srcgrad.source(srcgrad.grad(net_loss), model, X)
    assert flat(code), code
    assert "first = model.first" in code and "inner = first.inner" in code
    assert "# layers.py:" in code and "# test_inline.py:" in code
    check_grads(net_loss, (model, X), wrt=(0, 1))
    g = srcgrad.grad(net_loss)(model, X)
    assert isinstance(g, Net) and isinstance(g.first.inner, nn.Linear) and g.head.w.shape == (3, 2)


class Doubled(nn.Module):
    def forward(self, x):
        return 2.0 * x


def test_a_layer_replaced_by_another_class_compiles_again():
    from tests.finite_differences import numerical_grad
    model = Net()
    g = srcgrad.grad(net_loss, wrt=1)
    np.testing.assert_allclose(g(model, X), numerical_grad(net_loss, (model, X), 1), rtol=1e-6, atol=1e-8)
    program = g._last
    first = program.source
    model.first.act = Doubled()  # another class: the code inlined Tanh's forward
    got = g(model, X)
    assert program.source != first and "2.0 * x" in program.source
    np.testing.assert_allclose(got, numerical_grad(net_loss, (model, X), 1), rtol=1e-6, atol=1e-8)
    model.first.act = nn.Tanh()
    np.testing.assert_allclose(g(model, X), numerical_grad(net_loss, (model, X), 1), rtol=1e-6, atol=1e-8)


def test_a_method_rebound_on_the_class_compiles_again():
    model = Net()
    g = srcgrad.grad(net_loss, wrt=1)
    g(model, X)
    saved = Affine.apply
    Affine.apply = lambda self, x: x @ self.w * 2.0 + self.b
    try:
        from tests.finite_differences import numerical_grad
        np.testing.assert_allclose(g(model, X), numerical_grad(net_loss, (model, X), 1), rtol=1e-6, atol=1e-8)
    finally:
        Affine.apply = saved


def _swap_head(model):
    model.head = Affine(model.head.w * 3.0, model.head.b)  # stores an attribute: not inlined
    return 0.0


def changes_its_layer_on_the_way(model, x):
    s = _swap_head(model)
    return np.sum(model(x) ** 2) + s


def test_an_object_given_to_a_call_that_is_not_inlined_is_called_at_run_time():
    """The call may change which layers the model holds: its layers are found when the code runs."""
    model = Net()
    code = srcgrad.source(srcgrad.grad(changes_its_layer_on_the_way, wrt=1), model, X)
    assert "dispatch.vjp_call(model" in code or "dispatch.vjp_method(model" in code


def test_generated_code_of_a_model_is_one_readable_function():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    try:
        import digits_cnn
    finally:
        sys.path.pop(0)
    model = digits_cnn.DigitsCNN()
    x = rng.random((4, 1, 8, 8)).astype(np.float32)
    code = srcgrad.source(srcgrad.value_and_grad(digits_cnn.loss), model, x, np.arange(4))
    assert flat(code), code
    lines = code.splitlines()
    # The loss first, then each layer in order, then the backward sweep in reverse.
    order = [next(i for i, line in enumerate(lines) if text in line) for text in
             ("conv = model.conv", "pool = model.pool", "fc = model.fc",
              "nn.cross_entropy(model(x), labels)", "---- backward sweep ----")]
    assert order == sorted(order)
    backward = code[code.index("---- backward sweep ----"):]
    assert backward.index("log_probabilities = ") < backward.index("y = cols.T @ ")  # the convolution's adjoint, last


# ---- a list of layers, unrolled -----------------------------------------------------

def sequential_loss(model, x):
    return np.sum(model(x) ** 2)


def test_sequential_is_unrolled_over_its_layers():
    model = nn.Sequential(nn.Linear(3, 4, dtype=np.float64), nn.Tanh(), nn.Linear(4, 2, dtype=np.float64))
    code = srcgrad.source(srcgrad.grad(sequential_loss), model, X)
    assert flat(code), code
    assert "layers = model.layers" in code and "layers[2]" in code
    assert "rt.vjp_field" not in code  # each layer's weight is known to be a matrix
    check_grads(sequential_loss, (model, X), wrt=(0, 1))
    g = srcgrad.grad(sequential_loss)(model, X)
    assert isinstance(g, nn.Sequential) and g.layers[2].weight.shape == (2, 4) and g.layers[1] is not None


def test_a_list_of_layers_that_grows_or_changes_compiles_again():
    from tests.finite_differences import numerical_grad
    model = nn.Sequential(nn.Linear(3, 3, dtype=np.float64), nn.Tanh())
    g = srcgrad.grad(sequential_loss, wrt=1)
    g(model, X)
    for change in (lambda: model.layers.append(nn.Linear(3, 2, dtype=np.float64)),
                   lambda: model.layers.__setitem__(1, nn.Sigmoid()),
                   lambda: model.layers.pop(0)):
        change()
        np.testing.assert_allclose(g(model, X), numerical_grad(sequential_loss, (model, X), 1),
                                   rtol=1e-6, atol=1e-8)


# ---- the model-shaped gradient, built by one walk ----------------------------------

class Odd:
    """Attributes of every kind an object of parameters may hold."""

    def __init__(self):
        self.w = rng.standard_normal((2, 3))
        self.w32 = rng.standard_normal(3).astype(np.float32)
        self.temperature = 0.5
        self.steps = 3
        self.flag = True
        self.mask = np.array([1, 0, 1])
        self.shape = (2, 3)
        self.name = "odd"
        self.inner = Block()
        self.empty = nn.ReLU()

    @property
    def doubled(self):
        return 2 * self.w


def odd_loss(m, x):
    return np.sum(m.inner(x) * m.temperature) + np.sum(m.w32 * m.w) * m.steps


def test_model_gradient_by_one_walk_equals_the_general_path(monkeypatch):
    from srcgrad import tree
    model = Odd()
    fast = srcgrad.grad(odd_loss)(model, X)

    monkeypatch.setattr(tree, "layout", lambda obj: None)  # the general path: flattening
    slow = srcgrad.grad(odd_loss)(model, X)
    assert type(fast) is Odd and type(fast.inner.inner) is nn.Linear
    for key in vars(slow):
        a, b = getattr(fast, key), getattr(slow, key)
        if isinstance(b, np.ndarray):
            assert a.dtype == b.dtype and a is not getattr(model, key)
            np.testing.assert_array_equal(a, b)
        elif isinstance(b, (nn.Module,)):
            for name, value in b.named_parameters():
                np.testing.assert_array_equal(dict(a.named_parameters())[name], value)
        else:
            assert a == b and type(a) is type(b), key
    check_grads(odd_loss, (model, X), wrt=0)


def test_model_ranks_by_one_walk_equal_the_flattened_ones(monkeypatch):
    from srcgrad import pipeline, tree
    models = [Odd(), Net(), nn.Sequential(nn.Linear(2, 2), nn.ReLU()), nn.ReLU(), Block()]
    fast = [pipeline.rank_of_argument(m) for m in models]
    monkeypatch.setattr(tree, "layout", lambda obj: None)  # the general path: flattening
    for m, rank in zip(models, fast):
        slow = pipeline.rank_of_argument(m)
        assert rank == slow and hash(rank) == hash(slow), type(m).__name__


def test_a_function_rebound_in_a_callees_module_compiles_again(tmp_path, monkeypatch):
    import importlib
    (tmp_path / "srcgrad_inline_chain.py").write_text(
        "def inner(x):\n    return x * 2.0\n\n\ndef outer(x):\n    return inner(x) + 1.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    module = importlib.import_module("srcgrad_inline_chain")

    def f(x):
        return np.sum(module.outer(x) ** 2)
    g = srcgrad.grad(f)
    np.testing.assert_allclose(g(V), 4.0 * (2.0 * V + 1.0))
    assert flat(srcgrad.source(g, V))
    module.inner = lambda x: x * 3.0  # read by the inlined `outer`: compiled again
    np.testing.assert_allclose(g(V), 6.0 * (3.0 * V + 1.0))


# ---- a method set on the instance after compiling (found by an outside tester: the class's ran) ----

class _Square(nn.Module):
    def forward(self, x):
        return x * x


class _Scaled:
    def __init__(self):
        self.w = np.array([0.5, -1.0, 2.0])

    def act(self, x):
        return x * self.w


def _sum_of_call(m, x):
    return np.sum(m(x))


def _sum_of_act_squared(m, x):
    return np.sum(m.act(x) ** 2)


def test_a_method_set_on_the_instance_after_compiling_is_the_one_that_runs():
    x = np.array([1.0, 2.0, 0.5])
    value_and_grad = srcgrad.value_and_grad(_sum_of_call, wrt=1)
    value, g = value_and_grad(_Square(), x)
    assert np.isclose(value, np.sum(x * x)) and np.allclose(g, 2 * x)
    m = _Square()
    m.forward = lambda z: z * z * z
    value, g = value_and_grad(m, x)
    assert np.isclose(value, np.sum(x ** 3)) and np.allclose(g, 3 * x ** 2)
    grad = srcgrad.grad(_sum_of_act_squared, wrt=1)
    m2 = _Scaled()
    assert np.allclose(grad(m2, x), 2 * x * m2.w ** 2)
    m2.act = lambda z: z ** 3
    assert np.allclose(grad(m2, x), 6 * x ** 5)
    inner = nn.Sequential(nn.Sequential(nn.Linear(3, 3), nn.Tanh()), nn.Linear(3, 1))
    seq_grad = srcgrad.grad(_sum_of_call, wrt=1)
    seq_grad(inner, x[None])
    inner.layers[0].layers[1].forward = np.sin
    eps, numeric = 1e-6, np.zeros((1, 3))
    for i in range(3):
        e = np.zeros((1, 3))
        e[0, i] = eps
        numeric[0, i] = (_sum_of_call(inner, x[None] + e) - _sum_of_call(inner, x[None] - e)) / (2 * eps)
    assert np.allclose(seq_grad(inner, x[None]), numeric, atol=1e-7)


# ---- a callee that rebinds a global the caller reads (found by an outside tester: the old value;
#      the code now reads a global where the source does: tests/soundness/test_trust_globals.py) ----

_SCALE = 2.0


def _set_scale(v):
    global _SCALE
    _SCALE = v


def _rescaled(x):
    _set_scale(3.0)
    return np.sum(_SCALE * x * x)


def _scaled_by_global(x):
    return np.sum(_SCALE * x * x)


def test_a_callee_rebinding_a_global_the_function_reads_is_seen():
    global _SCALE
    x = np.array([1.0, 2.0])
    try:
        assert np.allclose(srcgrad.grad(_rescaled)(x), 6.0 * x)
    finally:
        _SCALE = 2.0
    grad = srcgrad.grad(_scaled_by_global)
    assert np.allclose(grad(x), 4.0 * x)
    _SCALE = 5.0  # rebound between calls: seen
    try:
        assert np.allclose(grad(x), 10.0 * x)
    finally:
        _SCALE = 2.0


# ---- models stay inlined when a layer's values reach a call that is not -----------------
# (inline._leaks once took a tuple of ints unpacked from a layer, a field holding None and
# an array's rows for values that may hold a layer: given to dropout's `rng.random(x.shape)`,
# the whole model fell back to one run-time call, generic code)

def _summed_model(m, x):
    return np.sum(m(x) ** 2)


@pytest.mark.parametrize("make", [
    lambda: nn.Sequential(nn.LayerNorm(4), nn.Dropout(0.5)),
    lambda: nn.Sequential(nn.Linear(4, 4, bias=False), nn.Dropout(0.5)),
    lambda: nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.Dropout(0.5), nn.Flatten()),
])
def test_models_with_dropout_are_inlined(make):
    model = make().eval()
    x = np.random.default_rng(0).standard_normal((2, 1, 4, 4) if isinstance(model[0], nn.Conv2d) else (2, 4))
    source = srcgrad.source(srcgrad.grad(_summed_model), model, x)
    assert "dispatch.vjp_call(m" not in source and "vjp_method" not in source
    srcgrad.testing.check_grads(_summed_model, (model, x), wrt=0)


def test_an_embedding_model_with_dropout_is_inlined():
    class LM(nn.Module):
        def __init__(self):
            self.encoder = nn.Embedding(10, 4)
            self.drop = nn.Dropout(0.2)
            self.decoder = nn.Linear(4, 10)

        def forward(self, tokens):
            return self.decoder(self.drop(self.encoder(tokens)))

    model = LM().eval()
    tokens = np.array([[1, 2], [3, 9]])
    source = srcgrad.source(srcgrad.grad(_summed_model), model, tokens)
    assert "dispatch.vjp_call(m" not in source and "vjp_method" not in source
    srcgrad.testing.check_grads(_summed_model, (model, tokens), wrt=0)


# ---- `if self.bias is not None:` decided by the layer's field when compiling ------------

def test_a_field_tested_against_none_decides_its_branch_and_is_guarded():
    model = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 2, bias=False))
    x = np.linspace(-1, 1, 6).reshape(2, 3)
    grad = srcgrad.grad(_summed_model)
    source = srcgrad.source(grad, model, x)
    assert "is not None" not in source and "is None" not in source
    check_grads(_summed_model, (model, x), wrt=0)
    model.layers[0].bias = None  # (the guard sees it: compiled again, the other branch)
    assert grad(model, x).layers[0].bias is None
    check_grads(_summed_model, (model, x), wrt=0)
    model.layers[2].bias = np.array([0.5, -0.25])
    g = grad(model, x)
    np.testing.assert_allclose(g.layers[2].bias, 2 * np.sum(model(x), axis=0), rtol=1e-12)


def test_a_layer_without_parameters_is_read_as_the_layer_it_holds():
    """A Dropout (no parameters) is an entry of the model's ranks: `model.drop` is read as a
    field, its `p` as a constant (both were dispatched as possible properties)."""
    from srcgrad import pipeline

    class WithDropout(nn.Module):
        def __init__(self):
            self.fc, self.drop, self.out = nn.Linear(3, 4), nn.Dropout(0.3), nn.Linear(4, 2)

        def forward(self, x):
            return self.out(self.drop(np.tanh(self.fc(x))))

    model, x = WithDropout().eval(), np.linspace(-1, 1, 6).reshape(2, 3)
    rank = pipeline.rank_of_argument(model)
    assert [k for k, _ in rank] == ["fc", "drop", "out"]
    source = srcgrad.source(srcgrad.grad(_summed_model), model, x)
    assert "vjp_field" not in source and "vjp_method" not in source  # (the layer and its `p`: read as such)
    check_grads(_summed_model, (model, x), wrt=0)


class _ResidualBlock(nn.Module):
    """torchvision's BasicBlock at small sizes: BatchNorm in training mode keeps running
    statistics (stores into its fields), the other layers around it."""

    def __init__(self):
        self.lin1, self.bn1 = nn.Linear(3, 3), nn.BatchNorm1d(3)
        self.lin2, self.bn2 = nn.Linear(3, 3), nn.BatchNorm1d(3)

    def forward(self, x):
        identity = x
        out = np.tanh(self.bn1(self.lin1(x)))
        out = self.bn2(self.lin2(out))
        return np.tanh(out + identity)


def _residual_loss(model, x):
    return np.sum(model(x) ** 2)


def test_a_layer_keeping_running_statistics_leaves_the_others_inlined():
    """BatchNorm's call is made when the code runs (its stores are bookkeeping), checked after
    by the guards; it changes no layer and returns none, so the Linear layers around it are
    inlined rather than the whole model compiled for layers known only when it runs."""
    from tests.finite_differences import numerical_grad
    model, x = _ResidualBlock(), np.random.default_rng(0).standard_normal((5, 3))
    code = srcgrad.source(srcgrad.grad(_residual_loss), model, x)
    assert "vjp_method(model, 'bn1'" in code and "specialised.check" in code  # (called, then checked)
    assert "vjp_method(model, 'lin1'" not in code and "lin1.weight" in code  # (Linear: inlined)
    before, count = model.bn1.running_mean.copy(), int(model.bn1.num_batches_tracked)
    grads = srcgrad.grad(_residual_loss)(model, x)
    assert not np.allclose(model.bn1.running_mean, before)  # (updated by the call, once)
    assert int(model.bn1.num_batches_tracked) == count + 1
    for layer in ("lin1", "lin2"):
        def loss_of(w, layer=layer):
            old = getattr(model, layer).weight
            getattr(model, layer).weight = w
            try:
                return _residual_loss(model, x)
            finally:
                getattr(model, layer).weight = old
        numeric = numerical_grad(loss_of, [getattr(model, layer).weight.copy()], 0)
        np.testing.assert_allclose(getattr(grads, layer).weight, numeric, rtol=1e-5, atol=1e-7)
