"""srcgrad.optim.lr_scheduler: learning rates worked by hand from the documented formulas,
state_dict and resuming, errors; then against torch.optim.lr_scheduler (the oracle, skipped
without it): the same learning rates and momenta at every step, and the same parameters when
they drive an optimizer on the same problem (float64, 1e-10)."""
from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from srcgrad import optim
from srcgrad.optim import lr_scheduler as sched


def sgd(lr=1.0, **kw):
    return optim.SGD({"w": np.zeros(2)}, lr=lr, **kw)


def lrs(scheduler, steps):
    """The learning rate at epochs 0 .. steps (the first from construction)."""
    out = [scheduler.get_last_lr()[0]]
    for _ in range(steps):
        scheduler.optimizer.step({"w": np.ones(2)})
        scheduler.step()
        out.append(scheduler.get_last_lr()[0])
    return out


# ---- by hand ---------------------------------------------------------------------------


def test_step_lr():
    opt = sgd()
    s = sched.StepLR(opt, step_size=2, gamma=0.5)
    assert lrs(s, 6) == [1, 1, 0.5, 0.5, 0.25, 0.25, 0.125]
    assert opt.lr == 0.125 and s.last_epoch == 6 and s.base_lrs == [1.0]


def test_multi_step_lr_counts_a_milestone_given_twice():
    s = sched.MultiStepLR(sgd(), milestones=[4, 2, 4], gamma=0.1)
    np.testing.assert_allclose(lrs(s, 5), [1, 1, 0.1, 0.1, 1e-3, 1e-3], rtol=1e-15)


def test_exponential_lr():
    assert lrs(sched.ExponentialLR(sgd(2.0), gamma=0.5), 3) == [2.0, 1.0, 0.5, 0.25]


def test_cosine_annealing_follows_the_closed_form_down_and_back_up():
    """η_t = η_min + (η_max - η_min)(1 + cos(π t / T_max)) / 2 (SGDR eq. 5), periodic after T_max."""
    got = lrs(sched.CosineAnnealingLR(sgd(0.5), T_max=4, eta_min=0.1), 12)
    expected = [0.1 + 0.4 * (1 + math.cos(math.pi * t / 4)) / 2 for t in range(13)]
    np.testing.assert_allclose(got, expected, rtol=1e-13)
    assert got[4] == pytest.approx(0.1) and got[8] == pytest.approx(0.5)


def test_cosine_annealing_follows_a_learning_rate_changed_by_hand():
    """The recursive form scales the distance to η_min: halving lr halves what is left of it."""
    opt = sgd(1.0)
    s = sched.CosineAnnealingLR(opt, T_max=10)
    s.step()
    opt.param_groups[0]["lr"] /= 2
    s.step()
    assert s.get_last_lr()[0] == pytest.approx((1 + math.cos(2 * math.pi / 10)) / 2 / 2, rel=1e-13)


def test_lambda_lr():
    s = sched.LambdaLR(sgd(0.1), lambda epoch: 0.9**epoch)
    np.testing.assert_allclose(lrs(s, 3), [0.1, 0.09, 0.081, 0.0729], rtol=1e-15)


def test_one_cycle_lr_and_its_momentum():
    """total 10, pct_start 0.3: lr rises from max_lr/25 to max_lr at step 2 (= 0.3·10 - 1),
    then falls to max_lr/25/1e4 at step 9; the momentum goes the other way, 0.95 → 0.85 → 0.95."""
    opt = sgd(1.0, momentum=0.9)
    s = sched.OneCycleLR(opt, max_lr=1.0, total_steps=10)
    assert opt.momentum == 0.95
    got, momenta = [s.get_last_lr()[0]], [opt.momentum]
    for _ in range(9):
        s.step()
        got.append(s.get_last_lr()[0])
        momenta.append(opt.momentum)
    assert got[0] == pytest.approx(0.04) and got[2] == 1.0 and got[9] == pytest.approx(4e-6)
    assert got[1] == pytest.approx(4e-2 + (1 - 4e-2) / 2)          # half way up, cos: the mean
    assert momenta[0] == 0.95 and momenta[2] == 0.85 and momenta[9] == pytest.approx(0.95)
    assert opt.param_groups[0]["max_lr"] == 1.0 and opt.param_groups[0]["min_lr"] == pytest.approx(4e-6)
    s.step()                                                         # step 10 = total_steps: allowed
    with pytest.raises(ValueError, match="tried to step 11 times"):
        s.step()


def test_one_cycle_lr_linear_three_phase_with_adam_betas():
    opt = optim.Adam({"w": np.zeros(2)}, lr=1.0, betas=(0.9, 0.99))
    s = sched.OneCycleLR(opt, max_lr=2.0, epochs=2, steps_per_epoch=5, pct_start=0.25,
                         anneal_strategy="linear", three_phase=True, div_factor=4.0)
    # phases end at steps 1.5, 3 and 9: 0.5 → 2 → 0.5 → 0.5e-4, linearly
    got = lrs(s, 9)
    np.testing.assert_allclose(got[:4], [0.5, 1.5, 1.5, 0.5], rtol=1e-14)
    assert got[9] == pytest.approx(0.5e-4)
    assert opt.betas[1] == 0.99 and opt.betas[0] == pytest.approx(0.95)


def test_reduce_lr_on_plateau():
    opt = sgd(1.0)
    s = sched.ReduceLROnPlateau(opt, patience=1, factor=0.5)
    got = []
    for metric in [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.49999]:
        s.step(metric)
        got.append(s.get_last_lr()[0])
    # two epochs without a 1e-4 relative improvement (more than patience = 1) halve lr
    assert got == [1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25]
    assert (s.best, s.num_bad_epochs, s.last_epoch) == (0.5, 1, 7)


def test_reduce_lr_on_plateau_max_abs_cooldown_min_lr():
    opt = sgd(1.0)
    s = sched.ReduceLROnPlateau(opt, mode="max", factor=0.1, patience=0, threshold=0.5, threshold_mode="abs",
                                cooldown=1, min_lr=0.05)
    got = []
    for metric in [1.0, 1.4, 1.4, 1.4, 1.4, 3.0]:
        s.step(np.array(metric))
        got.append(opt.lr)
    # 1.4 < 1.0 + 0.5: bad; reduce to 0.1, cool down one epoch, then reduce to max(0.01, 0.05)
    assert got == [1.0, 0.1, 0.1, 0.05, 0.05, 0.05]
    assert s.best == 3.0


def test_schedulers_compose_and_keep_the_first_initial_lr():
    opt = sgd(1.0)
    a = sched.StepLR(opt, step_size=2, gamma=0.5)
    b = sched.ExponentialLR(opt, gamma=0.9)
    assert b.base_lrs == [1.0] and opt.param_groups[0]["initial_lr"] == 1.0
    for _ in range(2):
        a.step()
        b.step()
    assert opt.lr == pytest.approx(0.5 * 0.9**2)


def test_state_dict_round_trip_resumes_the_schedule():
    opt = sgd(1.0, momentum=0.9)
    s = sched.OneCycleLR(opt, max_lr=0.3, total_steps=20)
    for _ in range(7):
        s.step()
    saved_opt, saved = opt.state_dict(), s.state_dict()
    rest = [s.step() or s.get_last_lr()[0] for _ in range(5)]

    fresh = sgd(5.0, momentum=0.1)
    resumed = sched.OneCycleLR(fresh, max_lr=0.3, total_steps=20)
    fresh.load_state_dict(saved_opt)
    resumed.load_state_dict(saved)
    assert resumed.last_epoch == 7
    assert [resumed.step() or resumed.get_last_lr()[0] for _ in range(5)] == rest


def test_lambda_lr_state_dict_keeps_a_callable_objects_attributes():
    class Warmup:
        def __init__(self, steps):
            self.steps = steps

        def __call__(self, epoch):
            return min(1.0, (epoch + 1) / self.steps)

    s = sched.LambdaLR(sgd(), [Warmup(4)])
    state = s.state_dict()
    assert state["lr_lambdas"] == [{"steps": 4}] and "optimizer" not in state
    other = sched.LambdaLR(sgd(), Warmup(10))
    other.load_state_dict(state)
    assert other.lr_lambdas[0].steps == 4
    assert sched.LambdaLR(sgd(), lambda e: 1.0).state_dict()["lr_lambdas"] == [None]


def test_resuming_with_last_epoch_needs_initial_lr():
    with pytest.raises(KeyError, match="initial_lr"):
        sched.StepLR(sgd(), step_size=2, last_epoch=3)
    opt = sgd(0.25)
    opt.param_groups[0]["initial_lr"] = 1.0
    s = sched.StepLR(opt, step_size=2, gamma=0.5, last_epoch=3)   # epoch 4: a multiple of 2
    assert s.last_epoch == 4 and opt.lr == 0.125 and s.base_lrs == [1.0]


def test_step_with_an_epoch_is_deprecated_and_uses_the_closed_form():
    s = sched.StepLR(sgd(), step_size=2, gamma=0.5)
    with pytest.warns(UserWarning, match="deprecated"):
        s.step(5)
    assert s.last_epoch == 5 and s.get_last_lr() == [0.25]


def test_get_last_lr_is_a_copy():
    s = sched.ExponentialLR(sgd(), gamma=0.5)
    s.get_last_lr().append(3.0)
    assert s.get_last_lr() == [1.0]


@pytest.mark.parametrize("make, error, message", [
    (lambda: sched.StepLR(sgd(), step_size=0), ValueError, "step_size"),
    (lambda: sched.CosineAnnealingLR(sgd(), T_max=0), ValueError, "T_max"),
    (lambda: sched.OneCycleLR(sgd(), max_lr=1.0), ValueError, "total_steps"),
    (lambda: sched.OneCycleLR(sgd(), max_lr=1.0, total_steps=10, pct_start=1.5), ValueError, "pct_start"),
    (lambda: sched.OneCycleLR(sgd(), max_lr=1.0, total_steps=10, anneal_strategy="exp"), ValueError,
     "anneal"),
    (lambda: sched.OneCycleLR(sgd(), max_lr=[1.0, 2.0], total_steps=10), ValueError,
     "one per parameter group"),
    (lambda: sched.OneCycleLR(optim.Adagrad({"w": np.zeros(1)}), max_lr=1.0, total_steps=10), ValueError,
     "cycle_momentum=False"),
    (lambda: sched.ReduceLROnPlateau(sgd(), factor=1.0), ValueError, "factor"),
    (lambda: sched.ReduceLROnPlateau(sgd(), mode="up"), ValueError, "mode"),
    (lambda: sched.StepLR(object(), step_size=1), TypeError, "not a srcgrad optimizer"),
])
def test_errors(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_one_cycle_without_momentum_cycling_leaves_adagrad_alone():
    opt = optim.Adagrad({"w": np.zeros(1)})
    s = sched.OneCycleLR(opt, max_lr=1.0, total_steps=4, cycle_momentum=False)
    assert s.get_last_lr() == [opt.lr] and opt.lr == pytest.approx(0.04)


# ---- against torch.optim.lr_scheduler ----------------------------------------------------

SCHEDULES = {  # name: (optimizer class name, optimizer keywords, [(scheduler name, keywords), ...])
    "step": ("SGD", {"lr": 0.1}, [("StepLR", {"step_size": 3, "gamma": 0.5})]),
    "multistep": ("SGD", {"lr": 0.1, "momentum": 0.9},
                  [("MultiStepLR", {"milestones": [2, 5, 5, 9], "gamma": 0.3})]),
    "exponential": ("Adam", {"lr": 0.05}, [("ExponentialLR", {"gamma": 0.9})]),
    "cosine": ("SGD", {"lr": 0.1}, [("CosineAnnealingLR", {"T_max": 7, "eta_min": 0.01})]),
    "cosine-short": ("RMSprop", {"lr": 0.01}, [("CosineAnnealingLR", {"T_max": 1})]),
    "lambda": ("Adagrad", {"lr": 0.5}, [("LambdaLR", {"lr_lambda": lambda e: 1 / (1 + e)})]),
    "onecycle-sgd": ("SGD", {"lr": 0.1, "momentum": 0.9},
                     [("OneCycleLR", {"max_lr": 0.05, "total_steps": 25})]),
    "onecycle-adam-3": ("Adam", {"lr": 0.1},
                        [("OneCycleLR", {"max_lr": 0.05, "epochs": 5, "steps_per_epoch": 5,
                                         "three_phase": True, "anneal_strategy": "linear", "pct_start": 0.4})]),
    "onecycle-rmsprop": ("RMSprop", {"lr": 0.1, "momentum": 0.5},
                               [("OneCycleLR", {"max_lr": 0.02, "total_steps": 24, "div_factor": 5.0,
                                                "final_div_factor": 100.0, "base_momentum": 0.5})]),
    "onecycle-no-momentum": ("Adadelta", {}, [("OneCycleLR", {"max_lr": 2.0, "total_steps": 25,
                                                              "cycle_momentum": False})]),
    "chained": ("SGD", {"lr": 0.1}, [("StepLR", {"step_size": 4, "gamma": 0.5}),
                                     ("CosineAnnealingLR", {"T_max": 6})]),
}
STEPS = 24


def quadratic(seed=6):
    rng = np.random.default_rng(seed)
    A, b = rng.standard_normal((10, 4)), rng.standard_normal(10)
    return (lambda w: 2 * A.T @ (A @ w - b)), rng.standard_normal(4)


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_schedule_and_trajectory_match_torch(name):
    torch = pytest.importorskip("torch")
    opt_name, opt_kw, schedulers = SCHEDULES[name]
    grad, w0 = quadratic()
    params = {"w": w0.copy()}
    tw = torch.tensor(w0, requires_grad=True)
    opt, topt = getattr(optim, opt_name)(params, **opt_kw), getattr(torch.optim, opt_name)([tw], **opt_kw)
    ours = [getattr(sched, s)(opt, **kw) for s, kw in schedulers]
    theirs = [getattr(torch.optim.lr_scheduler, s)(topt, **kw) for s, kw in schedulers]
    for step in range(STEPS + 1):
        group, tgroup = opt.param_groups[0], topt.param_groups[0]
        for key in ("lr", "momentum", "betas", "initial_lr"):
            if key in tgroup:
                np.testing.assert_allclose(group[key], tgroup[key], rtol=1e-13,
                                           err_msg=f"{key} at step {step}")
        for s, t in zip(ours, theirs):
            assert s.last_epoch == t.last_epoch
            np.testing.assert_allclose(s.get_last_lr(), t.get_last_lr(), rtol=1e-13)
        np.testing.assert_allclose(params["w"], tw.detach().numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=f"step {step}")
        if step == STEPS:
            break
        opt.step({"w": grad(params["w"])})
        tw.grad = torch.tensor(grad(tw.detach().numpy()))
        topt.step()
        for s, t in zip(ours, theirs):
            s.step()
            t.step()


@pytest.mark.parametrize("kw", [
    {},
    {"mode": "max", "factor": 0.5, "patience": 2, "threshold": 0.05, "cooldown": 2},
    {"threshold_mode": "abs", "threshold": 0.1, "patience": 1, "min_lr": 0.004, "eps": 1e-3},
    {"mode": "max", "threshold_mode": "abs", "patience": 0, "factor": 0.3},
])
def test_reduce_lr_on_plateau_matches_torch(kw):
    torch = pytest.importorskip("torch")
    opt = optim.SGD({"w": np.zeros(1)}, lr=0.1)
    topt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    s, t = sched.ReduceLROnPlateau(opt, **kw), torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **kw)
    metrics = np.random.default_rng(7).standard_normal(60).cumsum() * 0.1 + 3
    for metric in metrics:
        s.step(metric)
        t.step(metric)
        assert s.get_last_lr() == t.get_last_lr() and opt.lr == topt.param_groups[0]["lr"]
        assert (s.best, s.num_bad_epochs, s.cooldown_counter) == \
            (t.best, t.num_bad_epochs, t.cooldown_counter)
    assert opt.lr < 0.1                                   # (some reductions happened)


# (torch warns that its scheduler steps with no optimizer step: none is needed here)
@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before")
@pytest.mark.parametrize("name, kw", [("StepLR", {"step_size": 3, "gamma": 0.5}),
                                      ("MultiStepLR", {"milestones": [2, 6], "gamma": 0.5}),
                                      ("ExponentialLR", {"gamma": 0.9}),
                                      ("CosineAnnealingLR", {"T_max": 5})])
def test_resuming_with_last_epoch_matches_torch(name, kw):
    """A scheduler made again with last_epoch=k over an optimizer whose state was loaded
    continues as PyTorch's does."""
    torch = pytest.importorskip("torch")
    opt = optim.SGD({"w": np.zeros(1)}, lr=0.1)
    topt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    s, t = getattr(sched, name)(opt, **kw), getattr(torch.optim.lr_scheduler, name)(topt, **kw)
    for _ in range(4):
        s.step()
        t.step()
    opt2 = optim.SGD({"w": np.zeros(1)}, lr=1.0)
    opt2.load_state_dict(copy.deepcopy(opt.state_dict()))
    topt2 = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    topt2.load_state_dict(topt.state_dict())
    s2 = getattr(sched, name)(opt2, last_epoch=s.last_epoch, **kw)
    t2 = getattr(torch.optim.lr_scheduler, name)(topt2, last_epoch=t.last_epoch, **kw)
    for _ in range(6):
        np.testing.assert_allclose(s2.get_last_lr(), t2.get_last_lr(), rtol=1e-13)
        assert s2.last_epoch == t2.last_epoch
        s2.step()
        t2.step()
