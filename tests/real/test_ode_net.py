"""HIPS autograd examples/ode_net.py: a neural ODE (an MLP as the dynamics, odeint through
autograd.builtins.tuple of its parameters) fit to a damped oscillator's trajectory
with adam."""
from .conftest import assert_close, load, main_block

SKIP = ("plt.", "fig = ", "= fig.add_subplot", "def callback", "optimized_params =")


def _main(flavour):
    return main_block(load("ode_net", flavour), skip=SKIP)


def test_ode_net_gradient():
    ours, theirs = _main("srcgrad"), _main("autograd")
    assert_close(ours["true_y"], theirs["true_y"])
    params = ours["init_params"]
    assert_close(ours["grad"](ours["train_loss"])(params, 0), theirs["grad"](theirs["train_loss"])(params, 0))


def test_ode_net_adam_steps():
    results = []
    for ns in (_main("srcgrad"), _main("autograd")):
        trained = ns["adam"](ns["grad"](ns["train_loss"]), ns["init_params"], num_iters=2)
        results.append((trained, ns["train_loss"](trained, 2)))
    assert_close(results[0], results[1])
