"""The ``nn`` network trained with ``optim.Adam`` instead of gradient descent by hand.

The tutorial's "PyTorch: optim" step: the same ``nn.Sequential`` two-layer
network and ``nn.mse_loss`` as 06_nn.py, but the update rule is an optimizer
from ``srcgrad.optim``: ``optim.Adam(model, lr=1e-4)`` holds the moment
estimates for every parameter, and ``optimizer.step(grads)`` updates the
model's arrays in place from a gradient of the model's structure.  (The
tutorial's loss is summed and ours averaged; Adam's steps do not depend on
the loss's scale, so its learning rate, 1e-4, is kept.)

The gradient code is the same as in 06_nn.py; the script prints the loss's.

Run it from the repository root::

    python examples/07_optim.py           # 500 steps, a few seconds
    python examples/07_optim.py --quick   # 50 steps (also SRCGRAD_QUICK=1), as CI does

It checks the first step against Adam's definition (Kingma & Ba 2015,
Algorithm 1: after one step the bias-corrected moments are g and g^2, so
every parameter moves by lr * g / (|g| + eps)) and that the loss falls; it
exits with a message starting ``FAILED:`` otherwise.
"""
from __future__ import annotations

import argparse
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
from srcgrad import nn, optim

N, D_IN, H, D_OUT = 64, 1000, 100, 10
LEARNING_RATE = 1e-4
EPS = 1e-8  # Adam's default


def loss(model, x, y):
    """Mean squared error of the model's prediction: the function srcgrad differentiates."""
    y_pred = model(x)
    return nn.mse_loss(y_pred, y)



def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        default=quick_by_default(),
                        help="50 steps instead of 500, for CI (also SRCGRAD_QUICK=1)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    steps = 50 if args.quick else 500
    report_every = 10 if args.quick else 100

    rng = np.random.default_rng(args.seed)
    x = rng.standard_normal((N, D_IN))
    y = rng.standard_normal((N, D_OUT))
    model = nn.Sequential(
        nn.Linear(D_IN, H, rng=rng),
        nn.ReLU(),
        nn.Linear(H, D_OUT, rng=rng),
    )
    optimizer = optim.Adam(model, lr=LEARNING_RATE, eps=EPS)
    print(model)
    print(optimizer)

    loss_and_grads = srcgrad.value_and_grad(loss)  # wrt=0: the model
    print("---- the gradient code srcgrad generated for loss() (nn.Linear.forward inlined) ----")
    srcgrad.show(loss_and_grads, model, x, y)

    losses = []
    start = time.perf_counter()
    for t in range(steps):
        value, grads = loss_and_grads(model, x, y)
        losses.append(float(value))
        if t % report_every == report_every - 1 or t == 0:
            print(f"step {t + 1:4d}  loss {value:.6g}")
        before = model.state_dict() if t == 0 else None
        optimizer.step(grads)
        if t == 0:
            # Adam's first step, from its definition: each parameter moves by lr * g / (|g| + eps).
            moved = {name: before[name] - param for name, param in model.named_parameters()}
            for name, g in grads.named_parameters():
                expected = LEARNING_RATE * g / (np.abs(g) + EPS)
                error = float(np.max(np.abs(moved[name] - expected)))
                check(error <= 1e-9 * LEARNING_RATE, f"Adam's first step moved {name} by up to {error:.3g} "
                                                     f"more or less than lr * g / (|g| + eps)")
            print("Adam's first step moved every parameter by lr * g / (|g| + eps), as defined")
    elapsed = time.perf_counter() - start

    print(f"loss: {losses[0]:.6g} -> {losses[-1]:.6g} in {steps} steps "
          f"({elapsed / steps * 1e3:.1f} ms per step)")
    factor = 0.5 if args.quick else 1e-5
    check(losses[-1] < factor * losses[0],
          f"the loss did not fall enough: {losses[0]:.6g} -> {losses[-1]:.6g} "
          f"(wanted below {factor:g} x start)")
    print("07_optim: all checks passed")


if __name__ == "__main__":
    main()
