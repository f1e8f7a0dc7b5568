"""Hessian-vector products on the tutorial's two-layer network: ``srcgrad.hvp``
(forward mode over the gradient's generated code) against one ``srcgrad.grad``,
and, where installed, ``jax.jvp(jax.grad)`` under ``jax.jit`` and PyTorch's
``torch.func.jvp(torch.func.grad)``, all on CPU in the same process, interleaved
repeat by repeat, after the products have been checked to agree.

The target (issue 13): ``hvp`` at most 4x the cost of one gradient
(forward-over-reverse costs about one gradient plus its tangent: ~2-3x).

Run from the repository root::

    python -m benchmarks.hvp            # print the table
    python -m benchmarks.hvp --quick    # tiny sizes, a few repeats
"""
from __future__ import annotations

import sys

from benchmarks import _env

if __name__ == "__main__":
    _env.pin_threads(_env.threads_from_argv(sys.argv[1:]))

import argparse  # noqa: E402

import numpy as np  # noqa: E402

import srcgrad  # noqa: E402
from benchmarks.two_layer import FULL_SIZES, QUICK_SIZES, interleaved, make_data, two_layer_loss  # noqa: E402

TARGET_RATIO = 4.0


def _peers(w1, w2, x, y, v):
    """Name -> (a callable of no arguments, its H v as NumPy) for the peers installed."""
    peers = {}
    try:
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_enable_x64", True)

        def loss(w1, w2, x, y):
            return jnp.sum(jnp.square(jnp.maximum(x @ w1, 0) @ w2 - y))
        jhvp = jax.jit(lambda w1, w2, x, y, v: jax.jvp(lambda w: jax.grad(loss)(w, w2, x, y), (w1,), (v,))[1])
        args = tuple(map(jnp.asarray, (w1, w2, x, y, v)))
        peers["jax.jvp(jax.grad), jit"] = (lambda: jhvp(*args).block_until_ready(), np.asarray(jhvp(*args)))
    except ImportError:
        pass
    try:
        import torch
        from torch.func import grad, jvp

        def tloss(w1, w2, x, y):
            return torch.sum(torch.square(torch.clamp(x @ w1, min=0) @ w2 - y))
        targs = tuple(torch.from_numpy(a) for a in (w1, w2, x, y, v))

        def thvp():
            return jvp(lambda w: grad(tloss)(w, *targs[1:4]), (targs[0],), (targs[4],))[1]
        peers["torch.func.jvp(grad)"] = (thvp, thvp().numpy())
    except ImportError:
        pass
    return peers


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    repeats, warmup = (3, 1) if args.quick else (30, 5)
    w1, w2, x, y = make_data(np.float64, **sizes)
    v = np.random.default_rng(1).standard_normal(w1.shape)
    gradient, hvp = srcgrad.grad(two_layer_loss), srcgrad.hvp(two_layer_loss)
    expected = hvp(w1, w2, x, y, v)
    eps = 1e-6
    difference = (gradient(w1 + eps * v, w2, x, y) - gradient(w1 - eps * v, w2, x, y)) / (2 * eps)
    impls = {"srcgrad.grad": lambda: gradient(w1, w2, x, y), "srcgrad.hvp": lambda: hvp(w1, w2, x, y, v)}
    agree = {"srcgrad.hvp": bool(np.allclose(expected, difference, rtol=1e-5, atol=1e-6 * np.abs(expected).max()))}
    for name, (call, value) in _peers(w1, w2, x, y, v).items():
        impls[name] = call
        agree[name] = bool(np.allclose(value, expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max()))
    stats, _ = interleaved({k: (lambda f: lambda *a: f())(f) for k, f in impls.items()}, (), repeats, warmup)
    base = stats["srcgrad.grad"].median
    print("| implementation | agrees | median | / srcgrad.grad |")
    print("|---|---|---|---|")
    for name, s in stats.items():
        print(f"| {name} | {agree.get(name, '-')} | {s.median * 1e6:.1f} µs | {s.median / base:.2f}x |")
    ratio = stats["srcgrad.hvp"].median / base
    print(f"hvp / grad = {ratio:.2f}x (target <= {TARGET_RATIO}x)")
    return stats, agree


if __name__ == "__main__":
    main()
