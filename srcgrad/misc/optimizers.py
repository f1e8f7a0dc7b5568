"""First-order optimizers over a structure of parameters, driven by a gradient
function ``gradient(x, i)`` (``i`` the iteration), as HIPS autograd's examples call
them: ``adam(grad(objective), init_params, step_size=0.01, num_iters=100,
callback=print_perf)``.  The structure is flattened into one vector for the
update (:func:`srcgrad.misc.flatten`), and handed back to ``gradient`` and
``callback(x, i, g)`` in its own form.  (For ``nn`` modules, ``srcgrad.optim``
holds the PyTorch-style optimizers.)"""
from __future__ import annotations

import functools

import numpy as np

from .flatten import flatten


def _on_flat_vectors(optimize):
    """Runs ``optimize`` on the flat vector of ``x0``, its gradient and callback seeing
    the structure; returns the structure."""

    @functools.wraps(optimize)
    def run(gradient, x0, callback=None, *args, **kwargs):
        flat0, unflatten = flatten(x0)

        def flat_gradient(x, i):
            return flatten(gradient(unflatten(x), i))[0]

        flat_callback = None if callback is None else (lambda x, i, g: callback(unflatten(x), i, unflatten(g)))
        return unflatten(optimize(flat_gradient, flat0, flat_callback, *args, **kwargs))

    return run


@_on_flat_vectors
def sgd(gradient, x, callback=None, num_iters=200, step_size=0.1, mass=0.9):
    """Gradient descent with momentum: ``v = mass v - (1 - mass) g``, ``x += step_size v``.

    Args:
        gradient: ``gradient(x, i)``, the gradient at ``x`` on iteration ``i``.
        x: the starting parameters (an array or a structure of arrays).
        callback: ``callback(x, i, g)`` before each step, or None.
        num_iters, step_size, mass: the number of steps, the step and the momentum.

    Returns:
        The parameters after ``num_iters`` steps, in ``x``'s structure.
    """
    velocity = np.zeros(len(x))
    for i in range(num_iters):
        g = gradient(x, i)
        if callback:
            callback(x, i, g)
        velocity = mass * velocity - (1.0 - mass) * g
        x = x + step_size * velocity
    return x


@_on_flat_vectors
def rmsprop(gradient, x, callback=None, num_iters=100, step_size=0.1, gamma=0.9, eps=10**-8):
    """RMSProp (Tieleman & Hinton, 2012): ``r = gamma r + (1 - gamma) g²``,
    ``x -= step_size g / (sqrt(r) + eps)``.  Arguments and result as :func:`sgd`."""
    average = np.ones(len(x))
    for i in range(num_iters):
        g = gradient(x, i)
        if callback:
            callback(x, i, g)
        average = average * gamma + g**2 * (1 - gamma)
        x = x - step_size * g / (np.sqrt(average) + eps)
    return x


@_on_flat_vectors
def adam(gradient, x, callback=None, num_iters=100, step_size=0.001, b1=0.9, b2=0.999, eps=10**-8):
    """Adam (Kingma & Ba, 2015, Algorithm 1), bias-corrected moments.

    ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g²``,
    ``x -= step_size m̂ / (sqrt(v̂) + eps)`` with ``m̂ = m / (1 - b1^(i+1))``,
    ``v̂ = v / (1 - b2^(i+1))``.  Arguments and result as :func:`sgd`.
    """
    m = np.zeros(len(x))
    v = np.zeros(len(x))
    for i in range(num_iters):
        g = gradient(x, i)
        if callback:
            callback(x, i, g)
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * (g**2) + b2 * v
        m_hat = m / (1 - b1 ** (i + 1))
        v_hat = v / (1 - b2 ** (i + 1))
        x = x - step_size * m_hat / (np.sqrt(v_hat) + eps)
    return x
