"""HIPS autograd examples/mixture_variational_inference.py: black-box variational inference
with a mixture of 10 diagonal Gaussians (one ELBO per component, weighted), trained with
adam; the main block's objective."""
import numpy as np

from .conftest import assert_close, load, main_block

SKIP = ("plt.", "fig = ", "ax = fig", "def plot_isocontours", "def callback", "adam(", "num_plotting")


def _main(flavour):
    return main_block(load("mixture_variational_inference", flavour), skip=SKIP)


def test_mixture_vi_gradient():
    ours, theirs = _main("srcgrad"), _main("autograd")
    params = ours["init_var_params"](ours["D"])
    assert_close(ours["grad"](ours["objective"])(params, 0), theirs["grad"](theirs["objective"])(params, 0))


def test_mixture_vi_adam_steps():
    results = []
    for ns in (_main("srcgrad"), _main("autograd")):
        trained = ns["adam"](ns["grad"](ns["objective"]), ns["init_var_params"](ns["D"]), step_size=0.1,
                             num_iters=5)
        results.append((trained, ns["objective"](trained, 5)))
    assert_close(results[0], results[1])
