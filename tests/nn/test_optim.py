"""srcgrad.optim against the published update equations, on dicts, objects and nestings.

Each ``ref_*`` function below is written directly from the equations its
optimizer's docstring cites, in float64, without in-place tricks; the
optimizers must reproduce them step by step.  Gradients are hand-written
(fixed sequences, or the analytic gradient of a quadratic), never srcgrad.grad.
"""
from __future__ import annotations

import copy

import numpy as np
import pytest

import srcgrad
from srcgrad import nn, optim

# ---- reference updates, one parameter array, straight from the papers --------------


def ref_sgd(p, gs, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """PyTorch's documented SGD algorithm; returns θ_1 .. θ_T."""
    out, b = [], None
    for t, g in enumerate(gs, start=1):
        if weight_decay:
            g = g + weight_decay * p
        if momentum:
            b = g if t == 1 else momentum * b + (1 - dampening) * g
            g = g + momentum * b if nesterov else b
        p = p - lr * g
        out.append(p)
    return out


def ref_adam(p, gs, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False):
    """Kingma & Ba 2015, Algorithm 1 (+ L2 decay added to the gradient); amsgrad: Reddi et al.
    2018, the running maximum of v_t, bias-corrected as PyTorch documents."""
    b1, b2 = betas
    m = v = v_max = np.zeros_like(p)
    out = []
    for t, g in enumerate(gs, start=1):
        g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g**2
        v_max = np.maximum(v_max, v)
        m_hat = m / (1 - b1**t)
        v_hat = (v_max if amsgrad else v) / (1 - b2**t)
        p = p - lr * m_hat / (np.sqrt(v_hat) + eps)
        out.append(p)
    return out


def ref_adamw(p, gs, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False):
    """Loshchilov & Hutter 2019, Algorithm 2, as PyTorch parameterises the decay (γλθ)."""
    b1, b2 = betas
    m = v = v_max = np.zeros_like(p)
    out = []
    for t, g in enumerate(gs, start=1):
        p = p - lr * weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g**2
        v_max = np.maximum(v_max, v)
        p = p - lr * (m / (1 - b1**t)) / (np.sqrt((v_max if amsgrad else v) / (1 - b2**t)) + eps)
        out.append(p)
    return out


def ref_adadelta(p, gs, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0):
    """Zeiler 2012, Algorithm 1, scaled by lr (+ L2 decay added to the gradient), as PyTorch documents."""
    v = u = np.zeros_like(p)
    out = []
    for g in gs:
        g = g + weight_decay * p
        v = rho * v + (1 - rho) * g**2
        delta = np.sqrt(u + eps) / np.sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta**2
        p = p - lr * delta
        out.append(p)
    return out


def ref_adagrad(p, gs, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10):
    """Duchi et al. 2011 diagonal Adagrad with PyTorch's lr_decay."""
    s = np.full_like(p, initial_accumulator_value)
    out = []
    for t, g in enumerate(gs, start=1):
        clr = lr / (1 + (t - 1) * lr_decay)
        g = g + weight_decay * p
        s = s + g**2
        p = p - clr * g / (np.sqrt(s) + eps)
        out.append(p)
    return out


def ref_rmsprop(p, gs, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False):
    """Hinton lecture 6e / PyTorch's documented RMSprop (centred: Graves 2013)."""
    v = gbar = b = np.zeros_like(p)
    out = []
    for g in gs:
        g = g + weight_decay * p
        v = alpha * v + (1 - alpha) * g**2
        v_tilde = v
        if centered:
            gbar = alpha * gbar + (1 - alpha) * g
            v_tilde = v - gbar**2
        if momentum > 0:
            b = momentum * b + g / (np.sqrt(v_tilde) + eps)
            p = p - lr * b
        else:
            p = p - lr * g / (np.sqrt(v_tilde) + eps)
        out.append(p)
    return out


# (id, optimizer class, keyword arguments): each run against its reference above.
CONFIGS = [
    ("sgd", optim.SGD, {"lr": 0.1}),
    ("sgd-wd", optim.SGD, {"lr": 0.1, "weight_decay": 0.3}),
    ("sgd-momentum", optim.SGD, {"lr": 0.1, "momentum": 0.9}),
    ("sgd-dampening", optim.SGD, {"lr": 0.1, "momentum": 0.8, "dampening": 0.3, "weight_decay": 0.1}),
    ("sgd-nesterov", optim.SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.05}),
    ("adam", optim.Adam, {"lr": 0.1}),
    ("adam-wd", optim.Adam, {"lr": 0.05, "betas": (0.8, 0.95), "eps": 1e-3, "weight_decay": 0.2}),
    ("adamw", optim.AdamW, {"lr": 0.1, "weight_decay": 0.3}),
    ("adamw-nodecay", optim.AdamW, {"lr": 0.1, "weight_decay": 0.0, "betas": (0.5, 0.9)}),
    ("adam-amsgrad", optim.Adam, {"lr": 0.05, "betas": (0.8, 0.5), "weight_decay": 0.1, "amsgrad": True}),
    ("adamw-amsgrad", optim.AdamW, {"lr": 0.05, "betas": (0.7, 0.6), "amsgrad": True}),
    ("adadelta", optim.Adadelta, {}),
    ("adadelta-all", optim.Adadelta, {"lr": 0.5, "rho": 0.7, "eps": 1e-3, "weight_decay": 0.2}),
    ("adagrad", optim.Adagrad, {"lr": 0.5}),
    ("adagrad-all", optim.Adagrad, {"lr": 0.5, "lr_decay": 0.1, "weight_decay": 0.2,
                                        "initial_accumulator_value": 0.3, "eps": 1e-6}),
    ("rmsprop", optim.RMSprop, {"lr": 0.01}),
    ("rmsprop-centered", optim.RMSprop, {"lr": 0.01, "alpha": 0.9, "centered": True}),
    ("rmsprop-momentum", optim.RMSprop, {"lr": 0.01, "momentum": 0.9, "weight_decay": 0.1}),
    ("rmsprop-all", optim.RMSprop, {"lr": 0.01, "alpha": 0.8, "eps": 1e-4, "momentum": 0.5,
                                        "centered": True, "weight_decay": 0.1}),
]
REFS = {optim.SGD: ref_sgd, optim.Adam: ref_adam, optim.AdamW: ref_adamw,
        optim.Adagrad: ref_adagrad, optim.RMSprop: ref_rmsprop, optim.Adadelta: ref_adadelta}
# One configuration per optimizer with every optional feature on.
FULL = {c[0]: c for c in CONFIGS if c[0] in
        ("sgd-nesterov", "sgd-dampening", "adam-wd", "adamw", "adam-amsgrad", "adagrad-all", "rmsprop-all",
         "adadelta-all")}
STEPS = 4


def make(config, params):
    _, cls, kw = config
    return cls(params, **kw)


def reference(config, p0, gs):
    _, cls, kw = config
    return REFS[cls](np.asarray(p0, dtype=np.float64), [np.asarray(g, np.float64) for g in gs], **kw)


def ids(configs):
    return [c[0] for c in configs]


# ---- structures --------------------------------------------------------------------


class Linear:
    """A user layer: two array attributes plus non-parameter attributes carried along."""

    def __init__(self, n_in, n_out, rng):
        self.weight = rng.standard_normal((n_in, n_out))
        self.bias = rng.standard_normal(n_out)
        self.n_in = n_in
        self.activation = "relu"


class MLP:
    """A model holding a list of layers and a 0-d array."""

    def __init__(self, rng):
        self.layers = [Linear(3, 4, rng), Linear(4, 2, rng)]
        self.scale = np.array(rng.standard_normal())


def dict_params(rng):
    return {"w": rng.standard_normal((3, 2)), "b": rng.standard_normal(2)}


def leaves(model):
    """Leaves of each test structure by path name, in a fixed order (reads the structure directly)."""
    if isinstance(model, dict):
        return {k: model[k] for k in sorted(model)}
    if isinstance(model, Linear):
        return {"weight": model.weight, "bias": model.bias}
    out = {}
    for i, layer in enumerate(model.layers):
        out[f"layers[{i}].weight"] = layer.weight
        out[f"layers[{i}].bias"] = layer.bias
    out["scale"] = model.scale
    return out


STRUCTURES = {
    "dict": dict_params,
    "object": lambda rng: Linear(3, 2, rng),
    "nested": MLP,
}


@pytest.mark.parametrize("config", CONFIGS, ids=ids(CONFIGS))
def test_matches_published_equations(config):
    rng = np.random.default_rng(0)
    params = dict_params(rng)
    start = copy.deepcopy(params)
    grads = [dict_params(rng) for _ in range(STEPS)]
    opt = make(config, params)
    expected = {k: reference(config, start[k], [g[k] for g in grads]) for k in params}
    for t in range(STEPS):
        opt.step(grads[t])
        for k in params:
            np.testing.assert_allclose(params[k], expected[k][t], rtol=1e-12, atol=1e-15,
                                       err_msg=f"{config[0]} step {t + 1} '{k}'")
    assert opt.step_count == STEPS


@pytest.mark.parametrize("structure", sorted(STRUCTURES))
@pytest.mark.parametrize("config", list(FULL.values()), ids=list(FULL))
def test_structures(config, structure):
    rng = np.random.default_rng(1)
    build = STRUCTURES[structure]
    model = build(rng)
    start = {k: v.copy() for k, v in leaves(model).items()}
    grads = [build(rng) for _ in range(3)]
    opt = make(config, model)
    for g in grads:
        opt.step(g)
    for k, p in leaves(model).items():
        expected = reference(config, start[k], [leaves(g)[k] for g in grads])[-1]
        np.testing.assert_allclose(p, expected, rtol=1e-12, atol=1e-15, err_msg=k)
    assert sorted(opt.state) == sorted(leaves(model))
    if structure != "dict":                  # non-parameter attributes are left alone
        layer = model.layers[0] if structure == "nested" else model
        assert (layer.n_in, layer.activation) == (3, "relu")


def test_nested_dict_gradient_for_object_parameters():
    """A sparse-adjoint-style nested dict matches an object's paths, in any key order."""
    rng = np.random.default_rng(2)
    model = MLP(rng)
    w0 = model.layers[1].weight.copy()
    g = {"scale": np.array(1.0),
         "layers": [{"weight": np.ones((3, 4)), "bias": np.ones(4)},
                    {"bias": np.ones(2), "weight": np.full((4, 2), 2.0)}]}
    optim.SGD(model, lr=0.5).step(g)
    np.testing.assert_array_equal(model.layers[1].weight, w0 - 1.0)


# ---- small exact examples worked by hand --------------------------------------------


def test_sgd_momentum_by_hand():
    # θ0 = 1, g = 1 each step, γ = 0.1, μ = 0.9: b = 1, 1.9, 2.71; θ = 0.9, 0.71, 0.439
    p = {"x": np.array([1.0])}
    opt = optim.SGD(p, lr=0.1, momentum=0.9)
    got = []
    for _ in range(3):
        opt.step({"x": np.array([1.0])})
        got.append(p["x"][0])
    np.testing.assert_allclose(got, [0.9, 0.71, 0.439], rtol=1e-14)
    np.testing.assert_allclose(opt.state["x"]["momentum_buffer"], [2.71], rtol=1e-14)


def test_sgd_nesterov_by_hand():
    # b = 1, 1.9; step uses g + μ b: 1.9, 2.71 → θ = 1 - 0.19 = 0.81, 0.81 - 0.271 = 0.539
    p = [np.array([1.0])]
    opt = optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True)
    opt.step([np.array([1.0])])
    np.testing.assert_allclose(p[0], [0.81], rtol=1e-14)
    opt.step([np.array([1.0])])
    np.testing.assert_allclose(p[0], [0.539], rtol=1e-14)


def test_adam_and_adagrad_first_step_is_lr_times_sign():
    # Adam: m̂_1 = g, v̂_1 = g²; Adagrad: s_1 = g²  →  Δθ = -lr g / (|g| + ε)
    for cls in (optim.Adam, optim.Adagrad):
        p = {"x": np.array([0.0, 0.0, 0.0])}
        cls(p, lr=0.25, eps=0.0).step({"x": np.array([3.0, -0.5, 2e-3])})
        np.testing.assert_allclose(p["x"], [-0.25, 0.25, -0.25], rtol=1e-14, err_msg=cls.__name__)


def test_adamw_decay_is_decoupled():
    # With g = 0 the moments stay 0 and only the decay acts: θ ← (1 - γλ) θ, exactly.
    p = {"x": np.array([2.0, -4.0])}
    opt = optim.AdamW(p, lr=0.1, weight_decay=0.5)
    for _ in range(3):
        opt.step({"x": np.zeros(2)})
    np.testing.assert_allclose(p["x"], np.array([2.0, -4.0]) * 0.95**3, rtol=1e-14)
    # Adam's coupled L2 decay instead goes through the normalisation: first step moves by lr.
    q = {"x": np.array([2.0, -4.0])}
    optim.Adam(q, lr=0.1, weight_decay=0.5, eps=0.0).step({"x": np.zeros(2)})
    np.testing.assert_allclose(q["x"], [1.9, -3.9], rtol=1e-14)


def test_adagrad_lr_decay_by_hand():
    # g = 1: s_t = t; γ̃_t = 1/(1 + (t-1)/2); Δθ_t = -γ̃_t / √t
    p = {"x": np.array([0.0])}
    opt = optim.Adagrad(p, lr=1.0, lr_decay=0.5, eps=0.0)
    for _ in range(3):
        opt.step({"x": np.array([1.0])})
    expected = -sum(1 / (1 + (t - 1) / 2) / np.sqrt(t) for t in (1, 2, 3))
    np.testing.assert_allclose(p["x"], [expected], rtol=1e-14)


def test_rmsprop_centered_by_hand():
    # α = 0.5, g = 2 then 4: v = 2, 9; ḡ = 1, 2.5; ṽ = 1, 2.75
    p = {"x": np.array([0.0])}
    opt = optim.RMSprop(p, lr=1.0, alpha=0.5, eps=0.0, centered=True)
    opt.step({"x": np.array([2.0])})
    np.testing.assert_allclose(p["x"], [-2.0], rtol=1e-14)
    opt.step({"x": np.array([4.0])})
    np.testing.assert_allclose(p["x"], [-2.0 - 4.0 / np.sqrt(2.75)], rtol=1e-14)


def test_amsgrad_keeps_the_largest_second_moment():
    # β1 = 0, β2 = 0.5, ε = 0, g = 4 then 1: v = 8, 4.5 and v^max = 8, 8; v̂_2 = 8 / 0.75,
    # so the second step is -1 / √(32/3) (plain Adam: -1 / √6).
    for amsgrad, second in ((True, 1 / np.sqrt(32 / 3)), (False, 1 / np.sqrt(6.0))):
        p = {"x": np.array([0.0])}
        opt = optim.Adam(p, lr=1.0, betas=(0.0, 0.5), eps=0.0, amsgrad=amsgrad)
        opt.step({"x": np.array([4.0])})
        np.testing.assert_allclose(p["x"], [-1.0], rtol=1e-14)
        opt.step({"x": np.array([1.0])})
        np.testing.assert_allclose(p["x"], [-1.0 - second], rtol=1e-14)
        assert ("max_exp_avg_sq" in opt.state["x"]) == amsgrad
        if amsgrad:
            np.testing.assert_allclose(opt.state["x"]["max_exp_avg_sq"], [8.0], rtol=1e-14)


def test_adadelta_by_hand():
    # ρ = 0.5, ε = 1, γ = 1, g = 2: v = 2, Δx = √1/√3 · 2, u = Δx²/2 = 2/3
    p = {"x": np.array([0.0])}
    opt = optim.Adadelta(p, rho=0.5, eps=1.0)
    opt.step({"x": np.array([2.0])})
    np.testing.assert_allclose(p["x"], [-2 / np.sqrt(3)], rtol=1e-14)
    np.testing.assert_allclose(opt.state["x"]["acc_delta"], [2 / 3], rtol=1e-14)
    # g = 2 again: v = 3, Δx = √(5/3)/2 · 2 = √(5/3)
    opt.step({"x": np.array([2.0])})
    np.testing.assert_allclose(p["x"], [-2 / np.sqrt(3) - np.sqrt(5 / 3)], rtol=1e-14)
    assert (opt.lr, opt.rho, opt.eps, opt.weight_decay) == (1.0, 0.5, 1.0, 0.0)
    assert optim.Adadelta(p).rho == 0.9 and optim.Adadelta(p).eps == 1e-6  # PyTorch's defaults


def test_rmsprop_centered_constant_gradient_stays_finite():
    # Long runs of one constant gradient drive ṽ to ~0; rounding must not make it NaN.
    p = {"x": np.array([0.0, 0.0], dtype=np.float32)}
    opt = optim.RMSprop(p, lr=1e-3, alpha=0.5, centered=True)
    for _ in range(200):
        opt.step({"x": np.array([0.1, 3.0], dtype=np.float32)})
    assert np.all(np.isfinite(p["x"]))


# ---- dtype, identity, schedules ---------------------------------------------------


@pytest.mark.parametrize("grad_dtype", [np.float32, np.float64])
@pytest.mark.parametrize("config", list(FULL.values()), ids=list(FULL))
def test_float32_stays_float32(config, grad_dtype):
    rng = np.random.default_rng(3)
    params = {k: v.astype(np.float32) for k, v in dict_params(rng).items()}
    start = copy.deepcopy(params)
    grads = [{k: v.astype(grad_dtype) for k, v in dict_params(rng).items()} for _ in range(3)]
    opt = make(config, params)
    for g in grads:
        opt.step(g)
    for k, p in params.items():
        assert p.dtype == np.float32
        assert all(buf.dtype == np.float32 for buf in opt.state[k].values())
        expected = reference(config, start[k], [g[k].astype(np.float32) for g in grads])[-1]
        np.testing.assert_allclose(p, expected, rtol=2e-5, atol=2e-6, err_msg=k)


@pytest.mark.parametrize("config", list(FULL.values()), ids=list(FULL))
def test_updates_in_place(config):
    rng = np.random.default_rng(4)
    model = MLP(rng)
    before = leaves(model)
    copies = {k: v.copy() for k, v in before.items()}
    view = model.layers[0].weight[0]          # a view the user holds sees the update
    view0 = view.copy()
    grads = MLP(rng)
    grads_copy = copy.deepcopy(leaves(grads))
    make(config, model).step(grads)
    for k, arr in leaves(model).items():
        assert arr is before[k], k
        assert not np.array_equal(arr, copies[k]), k
    assert not np.array_equal(view, view0)
    for k, g in leaves(grads).items():       # gradients are not modified
        np.testing.assert_array_equal(g, grads_copy[k])


def test_lr_assigned_between_steps_takes_effect():
    p = {"x": np.array([1.0])}
    opt = optim.SGD(p, lr=0.1)
    opt.step({"x": np.array([1.0])})
    opt.lr = 0.5
    opt.step({"x": np.array([1.0])})
    np.testing.assert_allclose(p["x"], [0.4], rtol=1e-14)
    opt.lr = -1.0
    with pytest.raises(ValueError, match="lr"):
        opt.step({"x": np.array([1.0])})


def test_param_groups_is_a_view_of_the_hyper_parameters():
    """PyTorch's `opt.param_groups[0]["lr"]`: reads and assigns the optimizer's attributes."""
    w = np.array([1.0])
    opt = optim.Adam({"w": w}, lr=0.1)
    (group,) = opt.param_groups
    assert group["lr"] == 0.1 and group["betas"] == (0.9, 0.999) and group["amsgrad"] is False
    assert group["params"][0] is w
    assert list(group) == ["params", "lr", "betas", "eps", "weight_decay", "amsgrad"]
    group["lr"] *= 5
    assert opt.lr == 0.5
    group["initial_lr"] = 0.1                      # (a key of the caller's: kept, and saved)
    assert opt.param_groups[0]["initial_lr"] == 0.1 and "initial_lr" in opt.param_groups[0]
    assert opt.state_dict()["group"] == {"initial_lr": 0.1}
    twin = optim.Adam({"w": np.array([1.0])})
    twin.load_state_dict(opt.state_dict())
    assert twin.param_groups[0]["initial_lr"] == 0.1 and twin.lr == 0.5
    with pytest.raises(TypeError, match="read-only"):
        group["params"] = []
    with pytest.raises(TypeError, match="cannot be deleted"):
        del group["lr"]
    with pytest.raises(KeyError):
        group["momentum"]
    group["lr"] = -1.0                             # checked where an assigned attribute is: at step
    with pytest.raises(ValueError, match="lr"):
        opt.step({"w": np.ones(1)})


def test_tied_weights_update_once_with_summed_gradient():
    w = np.array([1.0, 2.0])
    params = {"a": w, "b": w}
    opt = optim.SGD(params, lr=0.1)
    opt.step({"a": np.array([1.0, 1.0]), "b": np.array([2.0, 0.0])})
    np.testing.assert_allclose(w, [0.7, 1.9], rtol=1e-14)
    assert list(opt.state) == ["a"]


def test_overlapping_views_are_rejected():
    w = np.zeros(4)
    with pytest.raises(ValueError, match=r"'a'.*'b'.*sharing memory"):
        optim.SGD({"a": w[:3], "b": w[2:]}, lr=0.1)


def test_repr():
    opt = optim.Adam({"w": np.zeros((3, 2)), "b": np.zeros(2)}, lr=0.01)
    assert repr(opt) == ("Adam(2 arrays (8 values), step=0, lr=0.01, betas=(0.9, 0.999), "
                         "eps=1e-08, weight_decay=0.0, amsgrad=False)")


# ---- state_dict ----------------------------------------------------------------------


@pytest.mark.parametrize("config", list(FULL.values()), ids=list(FULL))
def test_state_dict_round_trip(config):
    rng = np.random.default_rng(5)
    model = MLP(rng)
    grads = [MLP(rng) for _ in range(5)]
    a = make(config, model)
    for g in grads[:2]:
        a.step(g)
    state = a.state_dict()
    saved = copy.deepcopy(state)
    twin = copy.deepcopy(model)
    _, cls, kw = config
    b = cls(twin, **{**kw, "lr": 123.0})
    b.load_state_dict(state)
    assert b.lr == kw["lr"] and b.step_count == 2
    for g in grads[2:]:
        a.step(g)
        b.step(g)
    for k, p in leaves(model).items():
        np.testing.assert_array_equal(leaves(twin)[k], p, err_msg=k)
    # The snapshot is a copy: later steps did not change it, and b does not alias it.
    for name, bufs in saved["state"].items():
        for key, value in bufs.items():
            np.testing.assert_array_equal(state["state"][name][key], value)
            assert b.state[name][key] is not state["state"][name][key]
    assert state["optimizer"] == cls.__name__ and set(state["state"]) == set(leaves(model))


def test_load_state_dict_errors():
    params = {"w": np.zeros((2, 2))}
    sd = optim.Adam(params).state_dict()
    with pytest.raises(ValueError, match="from 'Adam'"):
        optim.SGD(params, lr=0.1).load_state_dict(sd)
    with pytest.raises(ValueError, match="'w'"):
        optim.Adam({"v": np.zeros((2, 2))}).load_state_dict(sd)
    opt = optim.Adam(params)
    opt.step({"w": np.ones((2, 2))})
    sd = opt.state_dict()
    sd["state"]["w"]["exp_avg"] = np.zeros(3)
    fresh = optim.Adam({"w": np.zeros((2, 2))}, lr=0.5)
    with pytest.raises(ValueError, match=r"exp_avg.*'w'.*\(3,\).*\(2, 2\)"):
        fresh.load_state_dict(sd)
    assert fresh.lr == 0.5 and fresh.step_count == 0 and fresh.state == {"w": {}}


# ---- errors that name the path --------------------------------------------------------


class Net:
    def __init__(self):
        self.linear1 = Linear(3, 2, np.random.default_rng(6))
        self.linear2 = Linear(2, 1, np.random.default_rng(7))


def test_missing_gradient_names_path():
    net = Net()
    w0 = net.linear2.weight.copy()
    opt = optim.Adam(net)
    grads = {"linear2": {"weight": np.ones((2, 1)), "bias": np.ones(1)}}
    with pytest.raises(ValueError, match=r"'linear1\.weight'.*no such entry"):
        opt.step(grads)
    np.testing.assert_array_equal(net.linear2.weight, w0)   # nothing changed
    assert opt.step_count == 0 and opt.state["linear2.weight"] == {}


def test_extra_gradient_names_path():
    opt = optim.SGD({"w": np.zeros(2)}, lr=0.1)
    with pytest.raises(ValueError, match=r"'extra\[0\]' which is not among"):
        opt.step({"w": np.zeros(2), "extra": [np.zeros(1), np.zeros(1)]})


def test_gradient_shape_mismatch_names_path_and_shapes():
    net = Net()
    before = {k: v.copy() for k, v in leaves({"a": net.linear1.weight, "b": net.linear2.weight}).items()}
    grads = Net()
    grads.linear2.weight = np.ones((1, 2))                   # transposed: (1, 2) vs (2, 1)
    opt = optim.SGD(net, lr=0.1)
    with pytest.raises(ValueError, match=r"'linear2\.weight' has shape \(1, 2\).*shape \(2, 1\)"):
        opt.step(grads)
    np.testing.assert_array_equal(net.linear1.weight, before["a"])   # earlier leaves untouched too


def test_python_float_parameter_raises_type_error():
    with pytest.raises(TypeError, match=r"'temperature' is a float.*np\.array\(0\.5\)"):
        optim.SGD({"w": np.zeros(2), "temperature": 0.5}, lr=0.1)


def test_int_array_parameter_raises_type_error():
    with pytest.raises(TypeError, match=r"'layers\[1\]'.*int64.*astype"):
        optim.Adam({"layers": [np.zeros(2), np.arange(3, dtype=np.int64)]})


def test_read_only_and_empty_parameters():
    ro = np.zeros(2)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match=r"'w' is a read-only"):
        optim.SGD({"w": ro}, lr=0.1)
    with pytest.raises(ValueError, match="no parameters"):
        optim.SGD({}, lr=0.1)


@pytest.mark.parametrize("make_bad, message", [
    (lambda p: optim.SGD(p, lr=-0.1), "lr"),
    (lambda p: optim.SGD(p, lr=0.1, nesterov=True), "nesterov"),
    (lambda p: optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.1, nesterov=True), "nesterov"),
    (lambda p: optim.Adam(p, betas=(1.0, 0.9)), r"betas\[0\]"),
    (lambda p: optim.Adam(p, betas=0.9), "pair"),
    (lambda p: optim.AdamW(p, eps=-1e-8), "eps"),
    (lambda p: optim.Adagrad(p, lr_decay=-1), "lr_decay"),
    (lambda p: optim.RMSprop(p, alpha=1.5), "alpha"),
    (lambda p: optim.RMSprop(p, momentum="0.9"), "momentum"),
    (lambda p: optim.Adadelta(p, rho=1.1), "rho"),
    (lambda p: optim.Adadelta(p, lr=-1.0), "lr"),
])
def test_bad_hyper_parameters(make_bad, message):
    with pytest.raises(ValueError, match=message):
        make_bad({"w": np.zeros(2)})


# ---- integration: a least-squares quadratic ------------------------------------------

QUADRATIC = [
    (optim.SGD, {"lr": 0.01}),
    (optim.SGD, {"lr": 0.005, "momentum": 0.9, "nesterov": True}),
    (optim.Adam, {"lr": 0.05}),
    (optim.AdamW, {"lr": 0.05, "weight_decay": 1e-4}),
    (optim.Adagrad, {"lr": 0.5}),
    (optim.RMSprop, {"lr": 0.01, "centered": True, "momentum": 0.5}),
    (optim.Adam, {"lr": 0.05, "amsgrad": True}),
]  # (Adadelta's steps start at about √ε and it closes in slowly: its equations are tested above)


@pytest.mark.parametrize("cls, kw", QUADRATIC, ids=[f"{c.__name__}-{i}" for i, (c, _) in enumerate(QUADRATIC)])
def test_minimises_quadratic(cls, kw):
    rng = np.random.default_rng(8)
    A = rng.standard_normal((12, 4))
    b = A @ rng.standard_normal(4)                   # consistent: the minimum loss is 0

    def loss(w):
        return float(np.sum((A @ w - b) ** 2))

    def grad(w):                                     # ∇ Σ (Aw - b)² = 2 Aᵀ(Aw - b)
        return 2 * A.T @ (A @ w - b)

    params = {"w": np.zeros(4)}
    opt = cls(params, **kw)
    start = loss(params["w"])
    for _ in range(300):
        opt.step({"w": grad(params["w"])})
    assert loss(params["w"]) < start * 1e-6, (cls.__name__, start, loss(params["w"]))



# ---- PyTorch's spelling: optim.Adam(model.parameters()) ---------------------------------
class _TwoLayer(nn.Module):
    def __init__(self, dtype=np.float64):
        rng = np.random.default_rng(5)
        self.linear1, self.linear2 = nn.Linear(3, 4), nn.Linear(4, 1)
        for layer in (self.linear1, self.linear2):
            layer.weight[...] = rng.normal(size=layer.weight.shape)
            layer.bias[...] = rng.normal(size=layer.bias.shape)
        if dtype != np.float64:
            for layer in (self.linear1, self.linear2):
                layer.weight, layer.bias = layer.weight.astype(dtype), layer.bias.astype(dtype)

    def forward(self, x):
        return self.linear2(np.tanh(self.linear1(x)))

    def loss(self, x, y):
        return np.mean((self(x) - y) ** 2)


@pytest.mark.parametrize("make", [optim.SGD, optim.Adam, optim.AdamW, optim.RMSprop, optim.Adagrad, optim.Adadelta])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_model_parameters_as_pytorch_users_write_it(make, dtype):
    """`make(model.parameters())` updates the model just as `make(model)` does, given the
    model's gradient or a list of gradients in parameters() order."""
    x, y = np.ones((5, 3), dtype), np.zeros((5, 1), dtype)
    a, b, c = _TwoLayer(dtype), _TwoLayer(dtype), _TwoLayer(dtype)
    opt_a, opt_b, opt_c = make(a, lr=0.1), make(b.parameters(), lr=0.1), make(c.parameters(), lr=0.1)
    grad = srcgrad.grad(_TwoLayer.loss, wrt=0)
    for _ in range(3):
        opt_a.step(grad(a, x, y))
        opt_b.step(grad(b, x, y))
        g = grad(c, x, y)
        opt_c.step([g.linear1.weight, g.linear1.bias, g.linear2.weight, g.linear2.bias])
    for model in (b, c):
        for (name, p), q in zip(model.named_parameters(), a.parameters()):
            assert p.dtype == dtype
            np.testing.assert_array_equal(p, q, err_msg=name)
    assert list(opt_b.state) == ["linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"]


def test_plain_list_given_a_model_gradient_says_to_pass_the_model():
    model = _TwoLayer()
    opt = optim.SGD(list(model.parameters()), lr=0.1)
    with pytest.raises(ValueError, match="give the optimizer the model itself"):
        opt.step(srcgrad.grad(_TwoLayer.loss, wrt=0)(model, np.ones((5, 3)), np.zeros((5, 1))))


def test_a_parameter_rebound_after_the_optimizer_was_made_is_refused_at_step():
    """`model.l.weight = model.l.weight.copy()` (a manual step, a load): `step` updated the old
    array, which the model no longer holds, silently; now a ValueError naming the path."""
    from srcgrad import nn

    class Net(nn.Module):
        def __init__(self):
            self.l = nn.Linear(3, 1, rng=np.random.default_rng(0))

        def forward(self, x):
            return self.l(x)

    for make in (lambda net: optim.SGD(net, lr=0.1), lambda net: optim.Adam(net.parameters(), lr=0.1)):
        net = Net()
        opt = make(net)
        g = {"l": {"weight": np.ones_like(net.l.weight), "bias": np.ones_like(net.l.bias)}}
        opt.step(g)  # (fine while the arrays are the model's)
        net.l.weight = net.l.weight.copy()
        with pytest.raises(ValueError, match="'l.weight' was rebound"):
            opt.step(g)
    params = [np.ones(3), np.ones(2)]
    opt = optim.SGD(params, lr=0.1)
    params[1] = np.zeros(2)
    with pytest.raises(ValueError, match=r"'\[1\]' was rebound"):
        opt.step([np.ones(3), np.ones(2)])
