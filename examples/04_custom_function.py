"""Your own primitive with your own adjoint: the tutorial's custom ReLU, with ``@srcgrad.custom_adjoint``.

The tutorial's "Defining new autograd functions" step: ReLU as an operation
whose backward pass you write yourself (PyTorch's ``autograd.Function`` with
``forward`` and ``backward``).  In srcgrad the forward is an ordinary
function marked ``@srcgrad.custom_adjoint``, and the backward is a function
registered with ``@my_relu.defadjoint``: it takes the output's adjoint, the
output, then ``my_relu``'s parameters, and returns the input's adjoint.  The
compiler then inlines your adjoint wherever ``my_relu`` is called, instead of
differentiating its body; the generated code printed below shows it.

The script checks the adjoint against central finite differences with
``srcgrad.testing.check_grads`` (on small arrays: one pair of loss
evaluations per entry), checks that the network's gradients with ``my_relu``
equal those with the built-in ``np.maximum(h, 0)`` (relative 1e-12), and
trains the warm-up network with ``my_relu`` (N=64, D_in=1000, H=100,
D_out=10, learning rate 1e-6).

Run it from the repository root::

    python examples/04_custom_function.py           # 500 steps, about a second
    python examples/04_custom_function.py --quick   # 50 steps (also SRCGRAD_QUICK=1), as CI does

It exits with a message starting ``FAILED:`` if a check fails or the loss does not fall.
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
from srcgrad.testing import check_grads

N, D_IN, H, D_OUT = 64, 1000, 100, 10
LEARNING_RATE = 1e-6
RTOL = 1e-12


@srcgrad.custom_adjoint
def my_relu(x):
    """ReLU, max(x, 0) elementwise; srcgrad uses my_relu_adjoint for its derivative."""
    return np.maximum(x, 0)


# elementwise=True: the output has the input's shape, entry by entry.  It lets
# srcgrad know the ranks after my_relu, so the code after it is specialised
# (`y_pred_bar @ w2.T`); without it the generated code calls general helpers
# (`rt.dot_lhs(...)`), equally correct.
@my_relu.defadjoint(elementwise=True)
def my_relu_adjoint(ans_bar, ans, x):
    """The tutorial's backward: the output's adjoint, zeroed where the input was negative.

    Args:
        ans_bar: the adjoint of my_relu's output (d loss / d output), x's shape.
        ans: my_relu's output (not needed here).
        x: my_relu's input.

    Returns:
        The adjoint of x.  At x == 0 exactly, where ReLU has no derivative, this
        passes the adjoint through (as the tutorial's backward does); NumPy's
        built-in rule for np.maximum(x, 0) gives 0 there.  Random inputs are
        never exactly 0, so the two agree below.
    """
    x_bar = ans_bar.copy()
    x_bar[x < 0] = 0
    return x_bar


def loss(w1, w2, x, y):
    """The warm-up's network, with your ReLU."""
    h = x.dot(w1)
    h_relu = my_relu(h)
    y_pred = h_relu.dot(w2)
    return np.square(y_pred - y).sum()


def loss_builtin_relu(w1, w2, x, y):
    """The same network with NumPy's ReLU, whose adjoint srcgrad knows."""
    h = x.dot(w1)
    h_relu = np.maximum(h, 0)
    y_pred = h_relu.dot(w2)
    return np.square(y_pred - y).sum()


def relu_probe(h, v):
    """<v, my_relu(h)>: its gradient in h is my_relu_adjoint(v, ., h), the rule alone."""
    return np.sum(my_relu(h) * v)



def data(rng, n, d_in, hidden, d_out):
    """(w1, w2, x, y), standard normal, the tutorial's shapes."""
    x = rng.standard_normal((n, d_in))
    y = rng.standard_normal((n, d_out))
    w1 = rng.standard_normal((d_in, hidden))
    w2 = rng.standard_normal((hidden, d_out))
    return w1, w2, x, y


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

    # 1. The adjoint against finite differences: the rule alone, then inside the network.
    try:
        check_grads(relu_probe, (rng.standard_normal((4, 5)), rng.standard_normal((4, 5))), wrt=0)
        check_grads(loss, data(rng, 6, 5, 4, 3), wrt=(0, 1))
    except AssertionError as error:
        raise SystemExit(f"FAILED: my_relu_adjoint disagrees with finite differences:\n{error}") from None
    print("check_grads: my_relu_adjoint agrees with central finite differences")

    # 2. The generated code: your adjoint, inlined where my_relu is called.
    w1, w2, x, y = data(rng, N, D_IN, H, D_OUT)
    loss_and_grads = srcgrad.value_and_grad(loss, wrt=("w1", "w2"))
    code = srcgrad.source(loss_and_grads, w1, w2, x, y)
    print("---- the gradient code srcgrad generated for loss(), with my_relu_adjoint inlined ----")
    print(code, end="")
    check("h_bar[h < 0] = 0" in code, "my_relu_adjoint's body does not appear in the generated code")

    # 3. The same gradients as with NumPy's own ReLU.
    builtin = srcgrad.grad(loss_builtin_relu, wrt=("w1", "w2"))
    _, ours = loss_and_grads(w1, w2, x, y)
    for name, a, b in zip(("w1", "w2"), ours, builtin(w1, w2, x, y)):
        difference = float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
        check(difference <= RTOL, f"the gradient of {name} with my_relu differs from the one with "
                                  f"np.maximum(h, 0) by {difference:.3g} (relative; allowed {RTOL:g})")
    print(f"with my_relu the gradients equal those with np.maximum(h, 0) (relative {RTOL:g})")

    # 4. Training with it.
    losses = []
    for t in range(steps):
        value, (grad_w1, grad_w2) = loss_and_grads(w1, w2, x, y)
        losses.append(float(value))
        if t % report_every == report_every - 1 or t == 0:
            print(f"step {t + 1:4d}  loss {value:.6g}")
        w1 -= LEARNING_RATE * grad_w1
        w2 -= LEARNING_RATE * grad_w2
    print(f"loss: {losses[0]:.6g} -> {losses[-1]:.6g} in {steps} steps")
    factor = 1e-3 if args.quick else 1e-9
    check(losses[-1] < factor * losses[0],
          f"the loss did not fall enough: {losses[0]:.6g} -> {losses[-1]:.6g} "
          f"(wanted below {factor:g} x start)")
    print("04_custom_function: all checks passed")


if __name__ == "__main__":
    main()
