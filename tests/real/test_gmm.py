"""HIPS autograd examples/gmm.py: a Gaussian mixture's log likelihood (mvn.logpdf with mean
and covariance differentiated, logsumexp) over a dict of parameters, flattened by
flatten_func; grad and hessian_vector_product handed to scipy's Newton-CG."""
import numpy as np
from scipy.optimize import minimize

from .conftest import assert_close, load, main_block

SKIP = ("plt.", "fig = ", "ax = fig", "def callback", "minimize(")

def _main(flavour):
    return main_block(load("gmm", flavour), skip=SKIP)


def test_gmm_gradient_of_the_dict():
    ours, theirs = _main("srcgrad"), _main("autograd")
    rs = np.random.RandomState(1)
    for params in (ours["init_params"],
                   {k: v + 0.3 * rs.randn(*v.shape) for k, v in ours["init_params"].items()}):
        assert_close(ours["grad"](ours["objective"])(params), theirs["grad"](theirs["objective"])(params))


def test_gmm_flattened_grad():
    ours, theirs = _main("srcgrad"), _main("autograd")
    x0 = ours["flattened_init_params"]
    assert_close(ours["grad"](ours["flattened_obj"])(x0), theirs["grad"](theirs["flattened_obj"])(x0))


def test_gmm_flattened_hvp():
    ours, theirs = _main("srcgrad"), _main("autograd")
    x0 = ours["flattened_init_params"]
    v = np.random.RandomState(2).randn(len(x0))
    assert_close(ours["hessian_vector_product"](ours["flattened_obj"])(x0, v),
                 theirs["hessian_vector_product"](theirs["flattened_obj"])(x0, v))


def test_gmm_newton_cg():
    results = []
    for ns in (_main("srcgrad"), _main("autograd")):
        fo = ns["flattened_obj"]
        r = minimize(fo, ns["flattened_init_params"], jac=ns["grad"](fo),
                     hessp=ns["hessian_vector_product"](fo),
                     method="Newton-CG", options={"maxiter": 3})
        results.append((r.x, r.fun))
    assert_close(results[0], results[1])
