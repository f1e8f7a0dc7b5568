"""Loop-heavy gradients under ``backend="numba"`` (issue 24): srcgrad-numba against
srcgrad-numpy, hand-written NumPy and ``jax.jit`` (when JAX is installed).

Two workloads of ``benchmarks/control_flow.py``, float64 throughout:

- **scalar loop** -- ``x = x - 0.001 * np.sin(x) * x`` 1,000 times on a Python float;
  JAX: ``jax.grad`` of a ``lax.fori_loop``, jitted.
- **RNN** -- ``h = np.tanh(xs[t] @ wx + h @ wh + b)`` for T=100 steps, batch 8, input 16,
  hidden 32, loss ``np.sum(h ** 2)``; JAX: ``jax.grad`` of a ``lax.scan``, jitted.

Steady state: every implementation's gradients are checked against the hand-written
ones, each is warmed up, then all are timed interleaved in one process (JAX's results
blocked until ready), and the table gives each one's median time and its ratio to
hand-written NumPy and to ``jax.jit``.  Compile time is reported apart: the first
call's time, srcgrad's as its own compile + the first run (numba's jit and one run;
srcgrad's first compile in a process also loads numba's registry of what it
compiles), JAX's its tracing and XLA's compile.

Run from the repository root::

    python -m benchmarks.numba_loops            # print the table
    python -m benchmarks.numba_loops --quick    # a few repeats (the smoke test)
"""
from __future__ import annotations

import sys

from benchmarks import _env

if __name__ == "__main__":
    _env.pin_threads(_env.threads_from_argv(sys.argv[1:]))

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import srcgrad  # noqa: E402
from srcgrad.gradient_function import GradientFunction  # noqa: E402
from benchmarks.control_flow import (hand_rnn, hand_scalar_loop, interleaved, max_rel_diff, rnn,  # noqa: E402
                                     rnn_args, scalar_loop)

RTOL = 1e-9  # the same float64 operations, but numba's and XLA's kernels sum in their own order


def _jax_versions():
    """``{workload: jitted gradient}``, or None without JAX."""
    try:
        import jax
        import jax.numpy as jnp
        from jax import lax
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    def loop(x):
        return lax.fori_loop(0, 1000, lambda i, x: x - 0.001 * jnp.sin(x) * x, x)

    def net(xs, wx, wh, b):
        def step(h, x):
            return jnp.tanh(x @ wx + h @ wh + b), None
        h, _ = lax.scan(step, jnp.zeros((xs.shape[1], wh.shape[0])), xs)
        return jnp.sum(h ** 2)

    scalar = jax.jit(jax.grad(loop))
    recurrent = jax.jit(jax.grad(net, argnums=(1, 2, 3)))
    return {"scalar loop": lambda x: scalar(x).block_until_ready(),
            "RNN": lambda *a: jax.block_until_ready(recurrent(*a))}


def _first_call(fn, args) -> str:
    """The first call's time; srcgrad's as its own compile + the first run (numba's jit)."""
    start = time.perf_counter()
    if isinstance(fn, GradientFunction):
        fn.compiled(args)
    compiled = time.perf_counter()
    fn(*args)
    end = time.perf_counter()
    if isinstance(fn, GradientFunction):
        return f"{compiled - start:.3f}s + {end - compiled:.3f}s"
    return f"{end - start:.3f}s"


def measure(name, f, hand, args, wrt, jitted, number, repeats):
    """One workload's row: ``{implementation: (median seconds, first call)}``."""
    impls = {"srcgrad-numba": srcgrad.grad(f, wrt=wrt, backend="numba"),
             "srcgrad-numpy": srcgrad.grad(f, wrt=wrt), "hand NumPy": hand}
    if jitted is not None:
        impls["jax.jit"] = jitted
    first = {k: _first_call(fn, args) for k, fn in impls.items()}
    reference = _as_numpy(hand(*args))
    for k, fn in impls.items():
        diff = max_rel_diff(_as_numpy(fn(*args)), reference)
        assert diff < RTOL, f"{name}: {k} differs from the hand-written gradient by {diff:.2g}"
    stats = interleaved({k: (fn, args) for k, fn in impls.items()}, number, repeats, warmup=3)
    return {k: (stats[k].median, first[k]) for k in impls}


def _as_numpy(g):
    return tuple(np.asarray(v) for v in g) if isinstance(g, (tuple, list)) else (np.asarray(g),)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=_env.DEFAULT_THREADS)
    options = parser.parse_args(argv)
    jax_versions = _jax_versions()
    xs, wx, wh, b = rnn_args(100, 8, 16, 32)
    work = [("scalar loop", scalar_loop, hand_scalar_loop, (0.5,), 0, 200),
            ("RNN", rnn, hand_rnn, (xs, wx, wh, b), (1, 2, 3), 50)]
    repeats = 5 if options.quick else 25
    print(f"threads: {options.threads}; jax: {'installed' if jax_versions else 'not installed'}")
    for name, f, hand, args, wrt, number in work:
        jitted = jax_versions[name] if jax_versions else None
        row = measure(name, f, hand, args, wrt, jitted, max(number // 10, 5) if options.quick else number,
                      repeats)
        base, jax_time = row["hand NumPy"][0], row.get("jax.jit", (None,))[0]
        print(f"\n{name}\n{'implementation':16} {'median':>10} {'/hand':>7} {'/jax.jit':>9} {'first call (srcgrad + run)':>27}")
        for k, (median, first) in row.items():
            vs_jax = f"{median / jax_time:8.2f}x" if jax_time else "        -"
            print(f"{k:16} {median * 1e6:8.1f}us {median / base:6.2f}x {vs_jax} {first:>27}")


if __name__ == "__main__":
    main()
