"""Compile once, run many: what srcgrad does on the first call, and what every later call costs.

The tutorial's "TensorFlow: Static Graphs" step contrasts a graph built once
and run many times with PyTorch's graph rebuilt at every forward pass.
srcgrad is on the static side: the first call of a gradient function reads
the loss's source, transforms it and compiles the generated Python; every
later call with arguments of the same ranks (number of dimensions: shapes
and values may change) runs that code directly.  Like a static graph, the code
is optimised once, ahead of the calls: the script prints the generated code
before optimisation (``srcgrad.grad(..., optimize=False)``), after it (the
default) and the difference between the two.

It measures, for the warm-up's two-layer network (N=64, D_in=1000, H=100,
D_out=10): the first call (compile, then run), the median of the later
calls, the hand-written backward of 01_numpy_warmup.py for reference, and a
call with a batch of another size (same ranks: no recompilation); then it
trains for 500 steps with the compiled code.

Run it from the repository root::

    python examples/05_static_graph.py           # 200 timed calls, 500 training steps
    python examples/05_static_graph.py --quick   # 30 and 50 (also SRCGRAD_QUICK=1), as CI does

It checks that the optimised and unoptimised code give the same gradients as
the hand-written backward (relative 1e-12), that optimisation made the code
shorter, that the first call costs more than a later one, and that the loss
falls; it exits with a message starting ``FAILED:`` otherwise.
"""
from __future__ import annotations

import argparse
import difflib
import sys
import time
from pathlib import Path

import numpy as np
from _gallery import check, quick_by_default

try:
    import srcgrad
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import srcgrad

N, D_IN, H, D_OUT = 64, 1000, 100, 10
LEARNING_RATE = 1e-6
RTOL = 1e-12


def loss(w1, w2, x, y):
    """The warm-up's sum of squared errors."""
    h = x.dot(w1)
    h_relu = np.maximum(h, 0)
    y_pred = h_relu.dot(w2)
    return np.square(y_pred - y).sum()


def grads_by_hand(w1, w2, x, y):
    """The warm-up's hand-written backward pass, for reference."""
    h = x.dot(w1)
    h_relu = np.maximum(h, 0)
    grad_y_pred = 2.0 * (h_relu.dot(w2) - y)
    grad_h = grad_y_pred.dot(w2.T)
    grad_h[h < 0] = 0
    return x.T.dot(grad_h), h_relu.T.dot(grad_y_pred)


def seconds(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def median_seconds(call, repeats: int) -> float:
    return float(np.median([seconds(call) for _ in range(repeats)]))


def relative_difference(ours, reference) -> float:
    return float(np.max(np.abs(ours - reference)) / np.max(np.abs(reference)))



def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        default=quick_by_default(),
                        help="30 timed calls and 50 steps instead of 200 and 500, for CI "
                             "(also SRCGRAD_QUICK=1)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    repeats, steps = (30, 50) if args.quick else (200, 500)

    rng = np.random.default_rng(args.seed)
    x = rng.standard_normal((N, D_IN))
    y = rng.standard_normal((N, D_OUT))
    w1 = rng.standard_normal((D_IN, H))
    w2 = rng.standard_normal((H, D_OUT))

    # ---- the code, before and after optimisation ----------------------------
    raw = srcgrad.grad(loss, wrt=("w1", "w2"), optimize=False)
    raw_code = srcgrad.source(raw, w1, w2, x, y)
    print("---- generated with optimize=False: the sweeps as the rules wrote them ----")
    print(raw_code, end="")

    dloss = srcgrad.grad(loss, wrt=("w1", "w2"))  # optimize=True is the default
    first_call = seconds(lambda: dloss(w1, w2, x, y))  # reads, transforms, compiles, then runs
    code = srcgrad.source(dloss, w1, w2, x, y)
    print("---- generated with the default optimize=True ----")
    print(code, end="")
    print("---- what the optimizer changed (dead code removed, the sum's fill folded) ----")
    diff = difflib.unified_diff(raw_code.splitlines(), code.splitlines(), "optimize=False",
                                "optimize=True", n=0, lineterm="")
    print("\n".join(line for line in diff if not line.startswith("@@")))
    check(len(code.splitlines()) < len(raw_code.splitlines()), "optimisation did not shorten the code")

    # ---- the same numbers either way ------------------------------------------
    by_hand = grads_by_hand(w1, w2, x, y)
    for label, gradient in (("optimize=False", raw), ("optimize=True", dloss)):
        for name, ours, theirs in zip(("w1", "w2"), gradient(w1, w2, x, y), by_hand):
            difference = relative_difference(ours, theirs)
            check(difference <= RTOL, f"{label}: the gradient of {name} differs from the hand-written "
                                      f"one by {difference:.3g} (relative; allowed {RTOL:g})")
    print(f"both versions give the hand-written gradients (relative {RTOL:g})")

    # ---- compile once, run many -------------------------------------------------
    steady = median_seconds(lambda: dloss(w1, w2, x, y), repeats)
    hand = median_seconds(lambda: grads_by_hand(w1, w2, x, y), repeats)
    other_batch = seconds(lambda: dloss(w1, w2, x[:32], y[:32]))  # other shapes, same ranks
    print(f"first call (compile + run):         {first_call * 1e3:8.2f} ms")
    print(f"later calls (median of {repeats:3d}):        {steady * 1e3:8.2f} ms")
    print(f"hand-written backward (median):     {hand * 1e3:8.2f} ms")
    print(f"first call with a batch of 32 rows: {other_batch * 1e3:8.2f} ms  (same ranks: no recompilation)")
    print(f"compiling cost about {first_call / steady:.0f} later calls; it is paid once per "
          "function, options and argument ranks")
    check(first_call > steady, f"the first call ({first_call * 1e3:.2f} ms) was not slower than the later "
                               f"ones ({steady * 1e3:.2f} ms): was the code compiled on the first call?")

    # ---- and train with it, like running the static graph in a loop ----------
    first = float(loss(w1, w2, x, y))
    start = time.perf_counter()
    for _ in range(steps):
        grad_w1, grad_w2 = dloss(w1, w2, x, y)
        w1 -= LEARNING_RATE * grad_w1
        w2 -= LEARNING_RATE * grad_w2
    elapsed = time.perf_counter() - start
    last = float(loss(w1, w2, x, y))
    print(f"training: loss {first:.6g} -> {last:.6g} in {steps} steps "
          f"({elapsed / steps * 1e3:.2f} ms per step)")
    factor = 1e-3 if args.quick else 1e-9
    check(last < factor * first,
          f"the loss did not fall enough: {first:.6g} -> {last:.6g} (wanted below {factor:g} x start)")
    print("05_static_graph: all checks passed")


if __name__ == "__main__":
    main()
