"""Random draws differentiated by reparameterisation (Kingma & Welling, "Auto-Encoding
Variational Bayes", ICLR 2014, §2.4): a draw is a smooth function of its
parameters and of a parameter-free noise ``z`` (``normal(loc, scale) = loc +
scale * z``), and its derivative holds ``z`` fixed.  The rules recover ``z``
from the draw itself (``z = (ans - loc) / scale``), so nothing is drawn twice.

Only these location-scale families are differentiated; every other random
function given a value being differentiated is refused at compile time (its
output has no derivative in that argument that srcgrad could compute: a
discrete draw, a shape parameter such as ``gamma``'s).  Where ``scale`` (or
``high - low``) is 0 the noise cannot be recovered from the draw: the adjoint
of ``scale`` is NaN there, never a silent number.

Their tangents are derived as an elementwise function's (``"pointwise"``): each
element of the draw depends only on the matching (broadcast) elements of the
parameters, with the noise held fixed.
"""
from __future__ import annotations

import random as _pyrandom

import numpy as np

from ..runtime import unbroadcast
from .registry import defadjoint

_GENERATORS = (np.random.RandomState, np.random.Generator)


@defadjoint(np.random.normal, diff=("loc", "scale"),
            methods=tuple((cls, "normal") for cls in _GENERATORS), tangent="pointwise")
def normal(ans_bar, ans, loc=0.0, scale=1.0, size=None):
    """``ans = loc + scale * z``: ``loc_bar = ans_bar``, ``scale_bar = ans_bar * z``."""
    return unbroadcast(ans_bar, loc), unbroadcast(ans_bar * ((ans - loc) / scale), scale)


@defadjoint(np.random.uniform, diff=("low", "high"),
            methods=tuple((cls, "uniform") for cls in _GENERATORS), tangent="pointwise")
def uniform(ans_bar, ans, low=0.0, high=1.0, size=None):
    """``ans = low + (high - low) * u``, ``u`` uniform on [0, 1)."""
    u = (ans - low) / (high - low)
    return unbroadcast(ans_bar * (1 - u), low), unbroadcast(ans_bar * u, high)


@defadjoint(np.random.exponential, diff=("scale",),
            methods=tuple((cls, "exponential") for cls in _GENERATORS), tangent="pointwise")
def exponential(ans_bar, ans, scale=1.0, size=None):
    """``ans = scale * e``, ``e`` standard exponential."""
    return unbroadcast(ans_bar * (ans / scale), scale)


@defadjoint(_pyrandom.gauss, _pyrandom.normalvariate, diff=("mu", "sigma"),
            methods=((_pyrandom.Random, "gauss"), (_pyrandom.Random, "normalvariate")), tangent="pointwise")
def gauss(ans_bar, ans, mu=0.0, sigma=1.0):
    """Python's ``random.gauss(mu, sigma) = mu + sigma * z``."""
    return ans_bar, ans_bar * ((ans - mu) / sigma)


@defadjoint(_pyrandom.uniform, diff=("a", "b"), methods=((_pyrandom.Random, "uniform"),), tangent="pointwise")
def py_uniform(ans_bar, ans, a, b):
    """Python's ``random.uniform(a, b) = a + (b - a) * u``."""
    u = (ans - a) / (b - a)
    return ans_bar * (1 - u), ans_bar * u


@defadjoint(_pyrandom.expovariate, diff=("lambd",), methods=((_pyrandom.Random, "expovariate"),), tangent="pointwise")
def expovariate(ans_bar, ans, lambd=1.0):
    """Python's ``random.expovariate(lambd) = e / lambd``: ``d ans / d lambd = -ans / lambd``."""
    return -ans_bar * (ans / lambd)
