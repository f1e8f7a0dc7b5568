"""srcgrad.optim.LBFGS: worked by hand on quadratics, its closure convention
(``closure() -> (loss, gradient)``, what ``srcgrad.value_and_grad`` returns), and against
torch.optim.LBFGS (the oracle, skipped without it) with and without the strong-Wolfe line
search: the same parameters after each step, the same losses returned, the same counts."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import srcgrad
from srcgrad import nn, optim

# ---- worked by hand --------------------------------------------------------------------


def test_secant_steps_on_a_one_dimensional_quadratic():
    """f = (x - 3)² / 2 from x = 0, lr = 1, no line search.  Iteration 1: d = -g = 3 and
    t = min(1, 1/‖g‖₁) = 1/3, so x = 1.  Iteration 2: s = 1, y = g(1) - g(0) = 1, so
    H⁰ = sᵀy/yᵀy = 1 and the two-loop recursion gives d = -g + (sᵀg / sᵀy)(...) = 2: x = 3,
    the minimum, where g = 0 stops the step (3 evaluations, 2 iterations)."""
    p = {"x": np.array([0.0])}
    calls = []

    def closure():
        calls.append(p["x"][0])
        return 0.5 * (p["x"][0] - 3) ** 2, {"x": p["x"] - 3}

    opt = optim.LBFGS(p, lr=1)
    loss = opt.step(closure)
    assert loss == 4.5                                   # the first evaluation's, as PyTorch
    assert calls == [0.0, 1.0, 3.0]
    assert p["x"][0] == 3.0
    state = opt.state["x"]
    assert (state["func_evals"], state["n_iter"]) == (3, 2)
    assert state["H_diag"] == 1.0 and state["ro"] == [1.0]
    assert opt.step(closure) == 0.0 and state["func_evals"] == 4   # converged: one evaluation, no move


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_minimises_a_convex_quadratic_exactly(line_search_fn):
    rng = np.random.default_rng(0)
    M = rng.standard_normal((8, 8))
    A, b = M @ M.T + 8 * np.eye(8), rng.standard_normal(8)
    p = {"w": np.zeros((2, 4))}

    def closure():
        w = p["w"].ravel()
        return 0.5 * w @ A @ w - b @ w, {"w": (A @ w - b).reshape(2, 4)}

    opt = optim.LBFGS(p, lr=1 if line_search_fn else 0.5, max_iter=100, line_search_fn=line_search_fn,
                      tolerance_grad=1e-12, tolerance_change=0)
    opt.step(closure)
    np.testing.assert_allclose(p["w"].ravel(), np.linalg.solve(A, b), rtol=1e-7, atol=1e-7)


def test_defaults_are_pytorchs():
    opt = optim.LBFGS({"w": np.zeros(2)})
    assert (opt.lr, opt.max_iter, opt.max_eval, opt.tolerance_grad, opt.tolerance_change, opt.history_size,
            opt.line_search_fn) == (1.0, 20, 25, 1e-7, 1e-9, 100, None)
    assert optim.LBFGS({"w": np.zeros(2)}, max_iter=8).max_eval == 10       # max_iter * 5 // 4


def test_history_keeps_the_last_pairs_and_carries_over_steps():
    rng = np.random.default_rng(1)
    A = np.diag(rng.uniform(1, 10, 6))
    p = {"w": rng.standard_normal(6)}

    def closure():
        return 0.5 * p["w"] @ A @ p["w"], {"w": A @ p["w"]}

    opt = optim.LBFGS(p, lr=0.1, max_iter=4, history_size=2)
    opt.step(closure)
    state = opt.state["w"]
    assert len(state["old_dirs"]) == 2 and state["n_iter"] == 4
    y_last = state["old_dirs"][-1]
    opt.step(closure)
    assert state["n_iter"] == 8 and len(state["old_dirs"]) == 2 and opt.step_count == 2
    assert not any(y is y_last for y in state["old_dirs"][1:])  # (the newest pairs are new arrays)


def test_state_dict_round_trip_resumes_the_same_iterates():
    rng = np.random.default_rng(2)
    A, b = rng.standard_normal((10, 4)), rng.standard_normal(10)

    def closure_of(p):
        return lambda: (np.sum((A @ p["w"] - b) ** 2), {"w": 2 * A.T @ (A @ p["w"] - b)})

    p = {"w": np.zeros(4)}
    a = optim.LBFGS(p, lr=0.05, max_iter=3, history_size=5)
    a.step(closure_of(p))
    q = copy.deepcopy(p)
    b_opt = optim.LBFGS(q, lr=9.0)
    b_opt.load_state_dict(a.state_dict())
    assert b_opt.lr == 0.05 and b_opt.max_iter == 3
    for _ in range(2):
        a.step(closure_of(p))
        b_opt.step(closure_of(q))
    np.testing.assert_array_equal(p["w"], q["w"])
    with pytest.raises(ValueError, match="from 'Adam'"):
        b_opt.load_state_dict(optim.Adam({"w": np.zeros(4)}).state_dict())
    with pytest.raises(ValueError, match="shape"):
        optim.LBFGS({"w": np.zeros(5)}).load_state_dict(a.state_dict())


def test_float32_parameters_stay_float32():
    p = {"w": np.array([1.0, -2.0], dtype=np.float32)}
    opt = optim.LBFGS(p, line_search_fn="strong_wolfe")
    opt.step(lambda: (float(np.sum(p["w"] ** 2)), {"w": 2 * p["w"]}))
    assert p["w"].dtype == np.float32
    np.testing.assert_allclose(p["w"], 0, atol=1e-6)


def test_with_value_and_grad_of_a_model():
    """The closure convention: `value_and_grad(loss)(model, x, y)` is the closure's result."""
    rng = np.random.default_rng(3)
    model = nn.Sequential(nn.Linear(3, 8, rng=rng), nn.Tanh(), nn.Linear(8, 1, rng=rng))
    x = rng.standard_normal((32, 3))
    y = np.sin(x @ np.array([1.0, -2.0, 0.5]))[:, None]

    def loss(model, x, y):
        return nn.mse_loss(model(x), y)

    value_and_grad = srcgrad.value_and_grad(loss)
    opt = optim.LBFGS(model.parameters(), line_search_fn="strong_wolfe")
    first = opt.step(lambda: value_and_grad(model, x, y))
    for _ in range(4):
        opt.step(lambda: value_and_grad(model, x, y))
    assert loss(model, x, y) < 0.05 * first


def test_closure_errors_say_what_to_return():
    p = {"w": np.zeros(2)}
    opt = optim.LBFGS(p)
    with pytest.raises(TypeError, match="value_and_grad"):
        opt.step()
    with pytest.raises(TypeError, match=r"returned float, not \(loss, gradient\)"):
        opt.step(lambda: 1.0)
    with pytest.raises(ValueError, match=r"'w' has shape \(3,\)"):
        opt.step(lambda: (1.0, {"w": np.zeros(3)}))
    with pytest.raises(TypeError, match="nothing to zero"):
        opt.zero_grad()
    with pytest.raises(ValueError, match="line_search_fn"):
        optim.LBFGS(p, line_search_fn="backtracking")
    with pytest.raises(ValueError, match="history_size"):
        optim.LBFGS(p, history_size=0)


def test_a_closure_that_raises_in_the_line_search_leaves_the_last_iterate():
    p = {"w": np.array([1.0, 2.0])}
    calls = []

    def closure():
        calls.append(1)
        if len(calls) == 2:                          # the line search's first trial point
            raise RuntimeError("data loader failed")
        return float(np.sum(p["w"] ** 2)), {"w": 2 * p["w"]}

    opt = optim.LBFGS(p, line_search_fn="strong_wolfe")
    with pytest.raises(RuntimeError, match="data loader"):
        opt.step(closure)
    np.testing.assert_array_equal(p["w"], [1.0, 2.0])


# ---- against torch.optim.LBFGS -------------------------------------------------------------


def rosenbrock(x):
    return float(np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2))


def rosenbrock_grad(x):
    g = np.zeros_like(x)
    g[:-1] = -400 * x[:-1] * (x[1:] - x[:-1] ** 2) - 2 * (1 - x[:-1])
    g[1:] += 200 * (x[1:] - x[:-1] ** 2)
    return g


def logistic(x, data=np.random.default_rng(4).standard_normal((40, 5))):
    """Logistic loss of labels sign(data[:, 0]) with weights x (5,): smooth and convex."""
    z = data @ x * np.sign(data[:, 0])
    return float(np.sum(np.logaddexp(0, -z))) + 0.05 * float(x @ x)


def logistic_grad(x, data=np.random.default_rng(4).standard_normal((40, 5))):
    labels = np.sign(data[:, 0])
    z = data @ x * labels
    return -(data * labels[:, None]).T @ np.exp(-np.logaddexp(0, z)) + 0.1 * x   # (1 / (1 + e^z))


PROBLEMS = {"rosenbrock": (rosenbrock, rosenbrock_grad, np.array([-1.2, 1.0, -0.5, 0.8, 1.5])),
            "logistic": (logistic, logistic_grad, np.array([0.3, -0.2, 0.1, 0.5, -0.4]))}
CASES = [  # (problem, LBFGS keyword arguments)
    ("rosenbrock", {"lr": 0.01}),
    ("rosenbrock", {"lr": 0.01, "history_size": 3, "max_iter": 7}),
    ("rosenbrock", {"line_search_fn": "strong_wolfe"}),
    ("rosenbrock", {"line_search_fn": "strong_wolfe", "history_size": 3}),
    ("rosenbrock", {"line_search_fn": "strong_wolfe", "max_iter": 10, "max_eval": 11}),
    ("logistic", {"lr": 0.5}),
    ("logistic", {"line_search_fn": "strong_wolfe", "lr": 0.3, "tolerance_change": 1e-12}),
    ("logistic", {"line_search_fn": "strong_wolfe", "tolerance_grad": 1e-3}),
    # line searches that extrapolate from a short first trial (where the cubic has no minimum too)
    # until they run out of evaluations, and that overshoot: the zoom's every branch, its trial
    # moved off an end of the bracket after too little progress included.  (Each trajectory here
    # changes by under 1e-13 when the gradients are perturbed by 1e-15: the comparison is fair.)
    ("logistic", {"line_search_fn": "strong_wolfe", "lr": 0.01, "max_eval": 5}),
    ("rosenbrock", {"line_search_fn": "strong_wolfe", "lr": 0.003, "max_eval": 5}),
    ("logistic", {"line_search_fn": "strong_wolfe", "lr": 200, "history_size": 5}),
    ("rosenbrock", {"line_search_fn": "strong_wolfe", "lr": 10}),
]


@pytest.mark.parametrize("problem, kw", CASES,
                         ids=["-".join([p] + [f"{k}={v}" for k, v in kw.items()]) for p, kw in CASES])
def test_trajectory_matches_torch(problem, kw):
    torch = pytest.importorskip("torch")
    f, grad, x0 = PROBLEMS[problem]
    tol = 1e-10
    # two parameters (an object's path order: 'a' then 'b'), flattened in the same order by both
    p = {"a": x0[:2].reshape(2, 1).copy(), "b": x0[2:].copy()}
    ta = torch.tensor(x0[:2].reshape(2, 1), requires_grad=True)
    tb = torch.tensor(x0[2:], requires_grad=True)
    opt, topt = optim.LBFGS(p, **kw), torch.optim.LBFGS([ta, tb], **kw)

    def closure():
        x = np.concatenate([p["a"].ravel(), p["b"]])
        g = grad(x)
        return f(x), {"a": g[:2].reshape(2, 1), "b": g[2:]}

    def torch_closure():
        x = np.concatenate([ta.detach().numpy().ravel(), tb.detach().numpy()])
        g = grad(x)
        ta.grad, tb.grad = torch.tensor(g[:2].reshape(2, 1)), torch.tensor(g[2:])
        return torch.tensor(f(x), dtype=torch.float64)

    for step in range(6):
        loss, torch_loss = opt.step(closure), topt.step(torch_closure)
        np.testing.assert_allclose(loss, float(torch_loss), rtol=tol, atol=tol, err_msg=f"step {step + 1}")
        for ours, theirs in ((p["a"], ta), (p["b"], tb)):
            np.testing.assert_allclose(ours, theirs.detach().numpy(), rtol=tol, atol=tol,
                                       err_msg=f"step {step + 1}")
        ours, theirs = opt.state["a"], topt.state[ta]
        assert (ours["func_evals"], ours["n_iter"]) == (theirs["func_evals"], theirs["n_iter"]), step
        assert len(ours["old_dirs"]) == len(theirs["old_dirs"])


def test_model_trained_as_torch_trains_it():
    """A two-layer network, its gradient by srcgrad.value_and_grad and by torch's autograd:
    two strong-Wolfe steps of ten iterations land on the same weights.  (The two gradients
    differ in their last bits; more iterations amplify that past 1e-10 for some weights.)"""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((16, 3)), rng.standard_normal((16, 1))
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    tmodel = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1)).double()
    model.load_state_dict(tmodel.state_dict())

    def loss(model, x, y):
        return nn.mse_loss(model(x), y)

    value_and_grad = srcgrad.value_and_grad(loss)
    opt = optim.LBFGS(model.parameters(), line_search_fn="strong_wolfe", max_iter=10)
    topt = torch.optim.LBFGS(tmodel.parameters(), line_search_fn="strong_wolfe", max_iter=10)
    tx, ty = torch.tensor(x), torch.tensor(y)

    def torch_closure():
        topt.zero_grad()
        out = torch.nn.functional.mse_loss(tmodel(tx), ty)
        out.backward()
        return out

    for _ in range(2):
        opt.step(lambda: value_and_grad(model, x, y))
        topt.step(torch_closure)
    for name, value in tmodel.state_dict().items():
        np.testing.assert_allclose(model.state_dict()[name], value.numpy(), rtol=1e-10, atol=1e-10,
                                   err_msg=name)
