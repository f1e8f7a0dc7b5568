"""HIPS autograd examples/negative_binomial_maxlike.py: maximum likelihood for a negative
binomial by scipy's Newton (Halley) iteration on rprime, a lambda returning
grad(loglike)(r, p(r)), with fprime=grad(rprime) and fprime2=grad(grad(rprime)): second
and third derivatives through a gradient taken inside the differentiated function."""
import numpy as np

from .conftest import assert_close, load, main_block

SKIP = ("r, p = fit_maxlike", "print(", "grad_both", "import matplotlib", "xm =", "plt.")


def _data(m):
    m.npr.seed(0)
    return m.negbin_sample(r=5, p=0.5, size=1000)


def test_negative_binomial_loglike_gradient():
    """The main block's loglike (gammaln of r + x), both partials, at a few points."""
    results = []
    for flavour in ("srcgrad", "autograd"):
        ns = main_block(load("negative_binomial_maxlike", flavour), skip=SKIP)
        grad_both = (ns["grad"](ns["loglike"], (0, 1)))
        results.append([grad_both(r, p) for r, p in ((5.0, 0.5), (1.0, 0.2), (12.0, 0.7))])
    assert_close(results[0], results[1])


def test_negative_binomial_fit_maxlike():
    results = []
    for m in (load("negative_binomial_maxlike"), load("negative_binomial_maxlike", "autograd")):
        results.append(m.fit_maxlike(_data(m), r_guess=1))
    assert_close(results[0], results[1])
    assert abs(results[0][0] - 5) < 1 and abs(results[0][1] - 0.5) < 0.1


def test_negative_binomial_main_block_grad_both():
    """The main block's stationarity check, at the true parameters for want of the fit."""
    skip = ("r, p = fit_maxlike", "print(", "import matplotlib", "xm =", "plt.")
    results = []
    for flavour in ("srcgrad", "autograd"):
        ns = main_block(load("negative_binomial_maxlike", flavour), skip=skip)
        results.append(ns["grad_both"](5.0, 0.5))
    assert_close(results[0], results[1])
