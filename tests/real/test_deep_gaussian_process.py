"""HIPS autograd examples/deep_gaussian_process.py: two GPs (gaussian_process.py's
make_gp_funs) stacked through hidden values that are parameters too; the main block's
objective, its value_and_grad handed to scipy.optimize.minimize (CG)."""
import numpy as np
from scipy.optimize import minimize

from .conftest import assert_close, load, main_block

SKIP = ("plt.", "fig =", "ax_", "def plot_gp", "def callback", "minimize(")


def _main(flavour):
    return main_block(load("deep_gaussian_process", flavour), skip=SKIP)


def test_deep_gaussian_process_value_and_grad():
    ours, theirs = _main("srcgrad"), _main("autograd")
    rs = np.random.RandomState(3)
    for params in (ours["init_params"], 0.5 * rs.randn(ours["total_num_params"])):
        assert_close(ours["value_and_grad"](ours["objective"])(params),
                     theirs["value_and_grad"](theirs["objective"])(params))


def test_deep_gaussian_process_minimize_cg():
    results = []
    for ns in (_main("srcgrad"), _main("autograd")):
        r = minimize(ns["value_and_grad"](ns["objective"]), ns["init_params"], jac=True, method="CG",
                     options={"maxiter": 5})
        results.append((r.x, r.fun))
    assert_close(results[0], results[1])
