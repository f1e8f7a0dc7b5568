"""HIPS autograd examples/ica.py: independent component analysis, a Student-t likelihood
(scipy.stats.t.logpdf with the location and scale differentiated) of 100-dimensional
data; the main block's objective handed to scipy.optimize.minimize (CG)."""
import numpy as np
from scipy.optimize import minimize

from .conftest import assert_close, load, main_block

SKIP = ("plt.", "fig1", "fig2", "ax_", "def callback", "minimize(")


def _main(flavour):
    return main_block(load("ica", flavour), skip=SKIP)


def test_ica_value_and_grad():
    ours, theirs = _main("srcgrad"), _main("autograd")
    assert_close(ours["data"], theirs["data"], rtol=0, atol=0)
    rs = np.random.RandomState(3)
    for params in (ours["init_params"], rs.randn(ours["total_num_params"])):
        assert_close(ours["value_and_grad"](ours["objective"])(params),
                     theirs["value_and_grad"](theirs["objective"])(params))


def test_ica_minimize_cg():
    results = []
    for ns in (_main("srcgrad"), _main("autograd")):
        r = minimize(ns["value_and_grad"](ns["objective"]), ns["init_params"], jac=True, method="CG",
                     options={"maxiter": 5})
        results.append((r.x, r.fun))
    assert_close(results[0], results[1])
