"""Autograd: no hand-written backward pass; ``@srcgrad.grad`` writes it from the forward pass.

The tutorial's "PyTorch: Variables and autograd" step: the same two-layer
ReLU network as the warm-up, trained by gradient descent, but the gradients
come from automatic differentiation.  In PyTorch, autograd records a graph
while the forward pass runs and walks it backwards; srcgrad instead reads the
forward pass's *source* once and writes the backward pass as Python, which
this script prints.  Used as a decorator, ``@srcgrad.grad(wrt=...)`` turns
the loss into its gradient; the undecorated loss stays at ``.fn``.

It starts with the textbook's autograd example (tensor chapter, "automatic
differentiation"): ``out = mean(3 (x + 2)^2)`` at ``x = ones((2, 2))``, whose
gradient is 4.5 in every entry.

Run it from the repository root::

    python examples/03_autograd.py           # 500 steps, about a second
    python examples/03_autograd.py --quick   # 50 steps (also SRCGRAD_QUICK=1), as CI does

It checks the textbook's 4.5, that the generated gradient matches the
hand-written one of 01_numpy_warmup.py (relative 1e-12) and that the loss
falls; it exits with a message starting ``FAILED:`` otherwise.
"""
from __future__ import annotations

import argparse
import sys
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


# ---- the textbook's example: d out / d x = 6 (x + 2) / 4 = 4.5 at x = 1 ------
@srcgrad.grad
def out_grad(x):
    y = x + 2
    z = y * y * 3
    return z.mean()


# ---- the two-layer network ---------------------------------------------------
@srcgrad.grad(wrt=("w1", "w2"))
def loss_grad(w1, w2, x, y):
    """The warm-up's sum of squared errors; the decorator makes this name its gradient
    with respect to w1 and w2, returned as a tuple (grad_w1, grad_w2)."""
    h = x.dot(w1)
    h_relu = np.maximum(h, 0)
    y_pred = h_relu.dot(w2)
    return np.square(y_pred - y).sum()


loss = loss_grad.fn  # the undecorated function: the loss itself


def grads_by_hand(w1, w2, x, y):
    """The backward pass of 01_numpy_warmup.py, written by hand, for the check."""
    h = x.dot(w1)
    h_relu = np.maximum(h, 0)
    grad_y_pred = 2.0 * (h_relu.dot(w2) - y)
    grad_h = grad_y_pred.dot(w2.T)
    grad_h[h < 0] = 0
    return x.T.dot(grad_h), h_relu.T.dot(grad_y_pred)



def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        default=quick_by_default(),
                        help="50 steps instead of 500, for CI (also SRCGRAD_QUICK=1)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    steps = 50 if args.quick else 500
    report_every = 10 if args.quick else 100

    # The textbook's example.
    x = np.ones((2, 2))
    print("---- the textbook's example: out = mean(3 (x + 2)^2) ----")
    srcgrad.show(out_grad, x)
    g = out_grad(x)
    print(f"d out / d x at x = ones((2, 2)):\n{g}")
    check(np.array_equal(g, np.full((2, 2), 4.5)), f"d out / d x should be 4.5 everywhere, got\n{g}")

    # The two-layer network.
    rng = np.random.default_rng(args.seed)
    x = rng.standard_normal((N, D_IN))
    y = rng.standard_normal((N, D_OUT))
    w1 = rng.standard_normal((D_IN, H))
    w2 = rng.standard_normal((H, D_OUT))

    print("---- the gradient code behind @srcgrad.grad(wrt=('w1', 'w2')) ----")
    srcgrad.show(loss_grad, w1, w2, x, y)

    grad_w1, grad_w2 = loss_grad(w1, w2, x, y)
    for name, ours, theirs in zip(("w1", "w2"), (grad_w1, grad_w2), grads_by_hand(w1, w2, x, y)):
        difference = float(np.max(np.abs(ours - theirs)) / np.max(np.abs(theirs)))
        check(difference <= RTOL, f"the gradient of {name} differs from the hand-written one by "
                                  f"{difference:.3g} (relative; allowed {RTOL:g})")
    print(f"the generated gradient matches the hand-written backward (relative {RTOL:g})")

    first = float(loss(w1, w2, x, y))
    print(f"step    0  loss {first:.6g}")
    for t in range(steps):
        grad_w1, grad_w2 = loss_grad(w1, w2, x, y)
        w1 -= LEARNING_RATE * grad_w1
        w2 -= LEARNING_RATE * grad_w2
        if t % report_every == report_every - 1:
            print(f"step {t + 1:4d}  loss {float(loss(w1, w2, x, y)):.6g}")
    last = float(loss(w1, w2, x, y))
    print(f"loss: {first:.6g} -> {last:.6g} in {steps} steps")
    factor = 1e-3 if args.quick else 1e-9
    check(last < factor * first,
          f"the loss did not fall enough: {first:.6g} -> {last:.6g} (wanted below {factor:g} x start)")
    print("03_autograd: all checks passed")


if __name__ == "__main__":
    main()
