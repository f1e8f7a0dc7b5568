"""HIPS autograd examples/gplvm.py: a GP latent-variable model (gaussian_process.py's
make_gp_funs over data.py's pinwheel); latents and kernel parameters differentiated
together, the main block's objective handed to scipy.optimize.minimize (CG)."""
import numpy as np
from scipy.optimize import minimize

from .conftest import assert_close, load, main_block

SKIP = ("plt.", "fig =", "_ax =", "def callback", "minimize(")


def _main(flavour):
    return main_block(load("gplvm", flavour), skip=SKIP)


def test_gplvm_value_and_grad():
    ours, theirs = _main("srcgrad"), _main("autograd")
    rs = np.random.RandomState(3)
    for params in (ours["init_params"], 0.5 * rs.randn(len(ours["init_params"]))):
        assert_close(ours["value_and_grad"](ours["objective"])(params),
                     theirs["value_and_grad"](theirs["objective"])(params))


def test_gplvm_minimize_cg():
    results = []
    for ns in (_main("srcgrad"), _main("autograd")):
        r = minimize(ns["value_and_grad"](ns["objective"]), ns["init_params"], jac=True, method="CG",
                     options={"maxiter": 3})
        results.append((r.x, r.fun))
    assert_close(results[0], results[1])
