"""Central finite differences in float64, the oracle most tests check gradients against."""
from __future__ import annotations

import numpy as np
import optree

import srcgrad


def numerical_grad(f, args, index, eps=1e-6):
    """Central finite-difference gradient of scalar ``f(*args)`` w.r.t. ``args[index]``.

    Source: central difference (f(x+h) - f(x-h)) / 2h, error O(h^2)
    (Nocedal & Wright, Numerical Optimization, 2nd ed., §8.1).
    """
    args = list(args)
    x = np.array(args[index], dtype=np.float64, order="C")  # reshape(-1) below must be a view
    grad = np.zeros_like(x)
    flat = x.reshape(-1)
    gflat = grad.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        args[index] = x.copy() if x.ndim else float(x)
        plus = float(f(*args))
        flat[i] = old - eps
        args[index] = x.copy() if x.ndim else float(x)
        minus = float(f(*args))
        flat[i] = old
        gflat[i] = (plus - minus) / (2 * eps)
    return grad


def finite_differences(f, args, index, eps=1e-6):
    """Central differences of scalar ``f(*args)`` w.r.t. every leaf of ``args[index]``."""
    leaves, spec = optree.tree_flatten(args[index])
    leaves = [np.array(v, dtype=np.float64) for v in leaves]
    out = []
    for k, leaf in enumerate(leaves):
        g = np.zeros_like(leaf)
        for i in np.ndindex(leaf.shape):
            values = []
            for step in (eps, -eps):
                moved = [v.copy() for v in leaves]
                moved[k][i] += step
                rebuilt = optree.tree_unflatten(spec, [m if m.ndim else float(m) for m in moved])
                values.append(float(f(*args[:index], rebuilt, *args[index + 1:])))
            g[i] = (values[0] - values[1]) / (2 * eps)
        out.append(g)
    return out


def check_gradient(f, *args, index=0, rtol=1e-6, atol=1e-7):
    ours = srcgrad.grad(f, wrt=index)(*args)
    got, spec = optree.tree_flatten(ours)
    assert spec == optree.tree_structure(args[index]), f"structure {spec}"
    for a, b in zip(got, finite_differences(f, args, index)):
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(np.asarray(a, dtype=np.float64), b, rtol=rtol, atol=atol)
