"""HIPS autograd examples/gaussian_process.py: a GP's log marginal likelihood (an RBF
kernel, mvn.logpdf, linalg.solve in predict), its value_and_grad handed to
scipy.optimize.minimize (CG), as the example's main block does."""
import numpy as np
from scipy.optimize import minimize

from .conftest import assert_close, load, main_block

SKIP = ("plt.", "fig =", "ax =", "def callback", "minimize(")


def _main(flavour):
    return main_block(load("gaussian_process", flavour), skip=SKIP)


def test_gaussian_process_value_and_grad():
    ours, theirs = _main("srcgrad"), _main("autograd")
    rs = np.random.RandomState(3)
    for params in (ours["init_params"], rs.randn(ours["num_params"])):
        assert_close(ours["value_and_grad"](ours["objective"])(params),
                     theirs["value_and_grad"](theirs["objective"])(params))


def test_gaussian_process_minimize_cg():
    results = []
    for ns in (_main("srcgrad"), _main("autograd")):
        r = minimize(ns["value_and_grad"](ns["objective"]), ns["init_params"], jac=True, method="CG",
                     options={"maxiter": 10})
        results.append((r.x, r.fun, r.nit))
    assert_close(results[0][:2], results[1][:2])
    assert results[0][2] == results[1][2]
