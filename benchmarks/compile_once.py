"""Closures compiled once: the autograd style's functions as values, timed per call.

Two workloads whose gradient code meets functions made while it runs:

- **mixture VI**: HIPS autograd's ``examples/mixture_variational_inference.py``
  (``tests/real/programs/``): the ELBO defines ``mixture_lower_bound``, a nested
  ``def`` over the call's parameters, at every call, and calls it once per mixture
  component.  Its reference is HIPS autograd's own gradient of the same source, in the
  same process.
- **alternating layers**: a cell that applies two ``Dense`` layers picked when the
  code runs (``layers[i % 2](h)``), one with a ``Sigmoid`` object, one with a ``Tanh``:
  one call site of ``Dense.__call__``, its receiver's layer class alternating.  Its
  reference is the hand-written backward pass.

Each gradient is checked against its reference first; then they are timed
interleaved, repeat by repeat.  Also reported: how many programs srcgrad compiled
during the timed calls (0: each code compiled once, before).

Run from the repository root::

    python -m benchmarks.compile_once            # print the table
    python -m benchmarks.compile_once --write    # ... and update docs/benchmarks.md
    python -m benchmarks.compile_once --quick    # a few repeats (the smoke test)
"""
from __future__ import annotations

import sys

from benchmarks import _env

if __name__ == "__main__":
    _env.pin_threads(_env.threads_from_argv(sys.argv[1:]))

import argparse  # noqa: E402
import importlib.util  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import srcgrad  # noqa: E402
from srcgrad import pipeline  # noqa: E402
from benchmarks.two_layer import Stats, interleaved  # noqa: E402

SECTION = "compile_once"
COMMAND = "python -m benchmarks.compile_once --write"
ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Row:
    workload: str
    reference: str
    srcgrad: Stats
    theirs: Stats
    compiles: int  # programs srcgrad compiled during the timed calls
    agree: bool

    @property
    def ratio(self) -> float:
        return self.srcgrad.median / self.theirs.median


class _Counting:
    """Counts ``pipeline._compile`` calls while installed."""

    def __init__(self):
        self.count, self._original = 0, None

    def __enter__(self):
        self._original = pipeline._compile

        def counting(*args, **kwargs):
            self.count += 1
            return self._original(*args, **kwargs)
        pipeline._compile = counting
        return self

    def __exit__(self, *exc):
        pipeline._compile = self._original


def _timed(name, reference, ours, theirs, args, agree, repeats, warmup) -> Row:
    ours(*args)  # compiled here, before counting
    with _Counting() as counted:
        stats, _ = interleaved({"srcgrad": ours, "theirs": theirs}, args, repeats, warmup)
    return Row(name, reference, stats["srcgrad"], stats["theirs"], counted.count, agree)


# ---- mixture VI against HIPS autograd ---------------------------------------------------

def _mixture_vi():
    """(srcgrad's gradient, autograd's, the parameters), or None without autograd."""
    try:
        import autograd  # noqa: F401
    except ImportError:
        return None
    # tests/real/conftest.py loads the program in both flavours (its own name here: under
    # pytest, it is `tests.real.conftest`).
    spec = importlib.util.spec_from_file_location("_real_programs", ROOT / "tests" / "real" / "conftest.py")
    programs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(programs)
    load, main_block = programs.load, programs.main_block

    skip = ("plt.", "fig = ", "ax = fig", "def plot_isocontours", "def callback", "adam(", "num_plotting")
    ours = main_block(load("mixture_variational_inference", "srcgrad"), skip=skip)
    theirs = main_block(load("mixture_variational_inference", "autograd"), skip=skip)
    params = ours["init_var_params"](ours["D"])
    return ours["grad"](ours["objective"]), theirs["grad"](theirs["objective"]), params


def mixture_row(repeats: int, warmup: int) -> Row | None:
    made = _mixture_vi()
    if made is None:
        return None
    ours, theirs, params = made
    agree = bool(np.allclose(ours(params, 0), theirs(params, 0), rtol=1e-6, atol=1e-9))
    return _timed("mixture VI, 10 components", "HIPS autograd", ours, theirs, (params, 0), agree, repeats,
                  warmup)


# ---- alternating layer classes against the hand-written backward -------------------------

class Sigmoid:
    def __call__(self, v):
        return 1 / (1 + np.exp(-v))


class Tanh:
    def __call__(self, v):
        return np.tanh(v)


class Dense:
    def __init__(self, w, act):
        self.w, self.act = w, act

    def __call__(self, x):
        return self.act(x @ self.w)


def cell_loss(layers, x):
    h = x
    for i in range(len(layers)):
        h = layers[i % 2](h)  # picked when the code runs: one call site, two receiver classes
    return np.sum(h)


def cell_backward(layers, x):
    """``cell_loss``'s gradient with respect to the layers' weights, by hand."""
    w1, w2 = layers[0].w, layers[1].w
    a = x @ w1
    s = 1 / (1 + np.exp(-a))
    t = np.tanh(s @ w2)
    b_bar = 1 - t ** 2
    a_bar = (b_bar @ w2.T) * s * (1 - s)
    return x.T @ a_bar, s.T @ b_bar


def alternating_row(repeats: int, warmup: int) -> Row:
    rng = np.random.default_rng(0)
    layers = [Dense(rng.standard_normal((16, 16)) * 0.3, Sigmoid()),
              Dense(rng.standard_normal((16, 16)) * 0.3, Tanh())]
    args = (layers, rng.standard_normal((8, 16)))
    ours = srcgrad.grad(cell_loss)
    agree = all(np.allclose(a.w, b, rtol=1e-10, atol=1e-12)
                for a, b in zip(ours(*args), cell_backward(*args)))
    return _timed("alternating layers (Sigmoid, Tanh)", "hand-written backward", ours, cell_backward, args,
                  agree, repeats, warmup)


def measure(repeats: int, warmup: int) -> list[Row]:
    rows = [mixture_row(repeats, warmup), alternating_row(repeats, warmup)]
    return [row for row in rows if row is not None]


def table(rows) -> str:
    lines = ["| workload | reference | srcgrad (ms) | reference (ms) | ratio | compiles while timed "
             "| agree |",
             "|---|---|---:|---:|---:|---:|---|"]
    for row in rows:
        lines.append(f"| {row.workload} | {row.reference} | {row.srcgrad.median * 1e3:.3f} | "
                     f"{row.theirs.median * 1e3:.3f} | {row.ratio:.2f} | {row.compiles} | "
                     f"{'yes' if row.agree else 'NO'} |")
    return "\n".join(lines)


def main(argv=None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    repeats, warmup = (3, 1) if args.quick else (20, 3)
    rows = measure(repeats, warmup)
    text = table(rows)
    print(text)
    if args.write:
        threads = args.threads or _env.DEFAULT_THREADS
        body = (f"## Closures compiled once\n\n{_env.machine_line(threads)}\n\n`{COMMAND}`: the gradient "
                "call of code that makes functions while it runs, against a reference timed in the same "
                "process (ratio: srcgrad over the reference, median of interleaved repeats).  Before "
                "programs were kept per code (issue 21), the same run gave 1.95 and 878, compiling 26 and "
                "52 programs while timed: the nested `def` at every call, `Dense.__call__` at every change "
                "of layer class.\n\n" + text)
        _env.write_section(SECTION, body)
    return rows


if __name__ == "__main__":
    main()
