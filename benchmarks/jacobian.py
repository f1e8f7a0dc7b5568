"""Batched Jacobians and Hessians: ``srcgrad.hessian`` of the tutorial's two-layer loss
with respect to ``w2``, ``srcgrad.jacfwd`` of its hidden layer with respect to ``x``
and ``srcgrad.jacrev`` of its scores on a few rows with respect to ``w1`` (few outputs,
many inputs), all columns (rows) in one batched run and in chunks, against the same
derivative one column per run (``srcgrad.hvp``/``srcgrad.jvp`` along each unit vector;
one forward sweep and the pullback of each unit vector of the output, as
``srcgrad.vjp`` gives it) and, where installed, ``jax.hessian``/``jax.jacfwd``/
``jax.jacrev`` under ``jax.jit``, interleaved in one process after the values have
been checked to agree.

Run from the repository root::

    python -m benchmarks.jacobian            # print the table
    python -m benchmarks.jacobian --quick    # tiny sizes, a few repeats
"""
from __future__ import annotations

import sys

from benchmarks import _env

if __name__ == "__main__":
    _env.pin_threads(_env.threads_from_argv(sys.argv[1:]))

import argparse  # noqa: E402

import numpy as np  # noqa: E402

import srcgrad  # noqa: E402
from benchmarks.two_layer import interleaved, make_data, two_layer_loss  # noqa: E402

SIZES = dict(n=64, d_in=50, h=20, d_out=4)   # w2: 80 parameters, a Hessian 80 x 80
QUICK = dict(n=8, d_in=6, h=5, d_out=3)


def hidden(x, w1):
    return np.tanh(x @ w1)


def scores(w1, w2, x):
    return np.tanh(x @ w1) @ w2


def _unit_vectors(shape):
    n = int(np.prod(shape))
    return [np.eye(n)[k].reshape(shape) for k in range(n)]


def _jax_peers(w1, w2, x, y):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return {}
    jax.config.update("jax_enable_x64", True)

    def loss(w2, w1, x, y):
        return jnp.sum(jnp.square(jnp.maximum(x @ w1, 0) @ w2 - y))
    jh = jax.jit(jax.hessian(loss))
    jj = jax.jit(jax.jacfwd(lambda x, w1: jnp.tanh(x @ w1)))
    a = tuple(map(jnp.asarray, (w2, w1, x, y)))
    xs = jnp.asarray(x[:1])
    jr = jax.jit(jax.jacrev(lambda w1, w2, x: jnp.tanh(x @ w1) @ w2))
    rows = jnp.asarray(x[:4])
    return {"jacrev": ("jax.jacrev, jit", lambda: jr(a[1], a[0], rows).block_until_ready(),
                       np.asarray(jr(a[1], a[0], rows))),
            "hessian": ("jax.hessian, jit", lambda: jh(*a).block_until_ready(), np.asarray(jh(*a))),
            "jacfwd": ("jax.jacfwd, jit", lambda: jj(xs, a[1]).block_until_ready(), np.asarray(jj(xs, a[1])))}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    repeats, warmup = (3, 1) if args.quick else (15, 3)
    w1, w2, x, y = make_data(np.float64, **(QUICK if args.quick else SIZES))
    loss = lambda w2, w1, x, y: two_layer_loss(w1, w2, x, y)  # noqa: E731 - w2 first: wrt=0
    hvp, jvp, vjp = srcgrad.hvp(loss), srcgrad.jvp(hidden), srcgrad.vjp(scores)
    x1, x4 = x[:1], x[:4]

    def pullbacks():
        value, pullback = vjp(w1, w2, x4)
        return np.stack([pullback(e) for e in _unit_vectors(value.shape)])
    columns = {
        "hessian": (lambda: np.stack([hvp(w2, w1, x, y, e) for e in _unit_vectors(w2.shape)], -1),
                    {"batched": srcgrad.hessian(loss), "chunk_size=16": srcgrad.hessian(loss, chunk_size=16)},
                    (w2, w1, x, y)),
        "jacfwd": (lambda: np.stack([jvp(x1, w1, e)[1] for e in _unit_vectors(x1.shape)], -1),
                   {"batched": srcgrad.jacfwd(hidden), "chunk_size=16": srcgrad.jacfwd(hidden, chunk_size=16)},
                   (x1, w1)),
        "jacrev": (pullbacks, {"batched": srcgrad.jacrev(scores), "chunk_size=8": srcgrad.jacrev(scores, chunk_size=8)},
                   (w1, w2, x4)),
    }
    peers = _jax_peers(w1, w2, x, y)
    results = {}
    print("| derivative | implementation | agrees | median | / one column per run |")
    print("|---|---|---|---|---|")
    for what, (loop, batched, call_args) in columns.items():
        expected = loop().reshape(batched["batched"](*call_args).shape)
        impls = {"one column per run": loop}
        agree = {}
        for name, fn in batched.items():
            impls[name] = (lambda fn: lambda: fn(*call_args))(fn)
            agree[name] = bool(np.allclose(fn(*call_args), expected, rtol=1e-10, atol=1e-12))
        if what in peers:
            name, call, value = peers[what]
            impls[name] = call
            agree[name] = bool(np.allclose(value.reshape(expected.shape), expected, rtol=1e-9, atol=1e-9))
        stats, _ = interleaved({k: (lambda f: lambda *a: f())(f) for k, f in impls.items()}, (), repeats, warmup)
        base = stats["one column per run"].median
        for name, s in stats.items():
            print(f"| {what} | {name} | {agree.get(name, '-')} | {s.median * 1e6:.1f} µs | {s.median / base:.2f}x |")
        results[what] = (stats, agree)
    return results


if __name__ == "__main__":
    main()
