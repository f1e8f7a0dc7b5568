"""The two-layer network as ``nn.Sequential(nn.Linear, nn.ReLU, nn.Linear)``, gradient descent by hand.

The tutorial's "PyTorch: nn" step: the network is built from layers that
hold their own parameters (weights and biases, initialised as PyTorch does),
the loss is ``nn.mse_loss``, and training is plain gradient descent on every
parameter.  ``srcgrad.value_and_grad(loss)(model, x, y)`` differentiates with
respect to the model itself: the gradient is a model of the same structure,
so ``grads.named_parameters()`` pairs with ``model.named_parameters()``.

The generated code differentiates the loss with each layer's ``forward``
inlined (one function, no pullback calls: each layer's operations and their
adjoints appear in place); the script prints it, and for comparison the vjp
srcgrad generates for ``nn.Linear.forward`` on its own.

Sizes are the tutorial's (N=64, D_in=1000, H=100, D_out=10, 500 steps).  The
tutorial sums the squared errors (``size_average=False``) with learning rate
1e-4; ``nn.mse_loss`` averages them over the N * D_out = 640 entries, so the
same steps take a learning rate 640 times larger.

Run it from the repository root::

    python examples/06_nn.py           # 500 steps, a few seconds
    python examples/06_nn.py --quick   # 50 steps (also SRCGRAD_QUICK=1), as CI does

It checks the model's gradient against central finite differences on a small
copy of the network (``srcgrad.testing.check_grads``) and that the loss falls;
it exits with a message starting ``FAILED:`` otherwise.
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
from srcgrad import nn
from srcgrad.testing import check_grads

N, D_IN, H, D_OUT = 64, 1000, 100, 10
LEARNING_RATE = 1e-4 * N * D_OUT  # the tutorial's 1e-4 for the summed loss; ours is the mean


def two_layer_net(d_in, hidden, d_out, rng):
    return nn.Sequential(
        nn.Linear(d_in, hidden, rng=rng),
        nn.ReLU(),
        nn.Linear(hidden, d_out, rng=rng),
    )


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

    # The gradient with respect to every parameter of a small copy, against finite differences.
    small = two_layer_net(5, 4, 3, rng)
    try:
        check_grads(loss, (small, rng.standard_normal((6, 5)), rng.standard_normal((6, 3))), wrt=0)
    except AssertionError as error:
        raise SystemExit(f"FAILED: the model's gradient disagrees with finite differences:\n"
                         f"{error}") from None
    print("check_grads: the gradient of every parameter agrees with central finite differences")

    x = rng.standard_normal((N, D_IN))
    y = rng.standard_normal((N, D_OUT))
    model = two_layer_net(D_IN, H, D_OUT, rng)
    print(model)

    loss_and_grads = srcgrad.value_and_grad(loss)  # wrt=0: the model
    print("---- the gradient code srcgrad generated for loss() ----")
    srcgrad.show(loss_and_grads, model, x, y)
    print("---- and nn.Linear.forward's own vjp (the code above inlines it instead) ----")
    srcgrad.show(srcgrad.vjp(nn.Linear.forward, wrt=("self", "x")), model[0], x)

    losses = []
    start = time.perf_counter()
    for t in range(steps):
        value, grads = loss_and_grads(model, x, y)
        losses.append(float(value))
        if t % report_every == report_every - 1 or t == 0:
            print(f"step {t + 1:4d}  loss {value:.6g}")
        # Gradient descent on each parameter, in place; grads has the model's structure.
        grads_by_name = dict(grads.named_parameters())
        for name, param in model.named_parameters():
            param -= LEARNING_RATE * grads_by_name[name]
    elapsed = time.perf_counter() - start

    print(f"loss: {losses[0]:.6g} -> {losses[-1]:.6g} in {steps} steps "
          f"({elapsed / steps * 1e3:.1f} ms per step)")
    factor = 0.2 if args.quick else 1e-5
    check(losses[-1] < factor * losses[0],
          f"the loss did not fall enough: {losses[0]:.6g} -> {losses[-1]:.6g} "
          f"(wanted below {factor:g} x start)")
    print("06_nn: all checks passed")


if __name__ == "__main__":
    main()
