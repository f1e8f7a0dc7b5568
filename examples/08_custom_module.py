"""A custom ``nn.Module``: the tutorial's two-layer network as a class, trained with ``optim.SGD``.

The tutorial's "PyTorch: Custom nn Modules" step.  A model that is more than
a sequence of layers is a subclass of ``srcgrad.nn.Module`` whose
``__init__`` creates the layers it uses and whose ``forward`` says what to do
with them: here two ``nn.Linear`` layers with a ReLU between, fitted to
random data (N=64 examples, 1000 inputs, 100 hidden units, 10 outputs) by
minimising the sum of squared errors with plain gradient descent.

``srcgrad.value_and_grad(loss_fn)(model, x, y)`` differentiates with respect
to the model: the gradient is an object of the model's own structure
(``grads.linear1.weight``), which ``optimizer.step(grads)`` applies.  There
is no ``zero_grad``: gradients are values, never accumulated on the model.

The generated code is printed and saved: one function, the loss with the
model's ``forward`` and both ``Linear.forward`` calls inlined into it (each
layer read once, ``linear1 = model.linear1``, its lines under their own
``# layers.py`` comments), then the backward sweep in reverse.  The forward
alone, as the vjp of a method, from a shell: ``python -m srcgrad.cli show examples/08_custom_module.py:TwoLayerNet.forward
--mode vjp --wrt self --ndim self=tree,x=2``.

Run it from the repository root::

    python examples/08_custom_module.py           # 500 steps, a few seconds
    python examples/08_custom_module.py --quick   # 100 steps (also SRCGRAD_QUICK=1), as CI does

It checks the gradient against finite differences on a small copy of the
network, that the gradient has the model's structure, and that the loss
falls by a factor of 100 (10^5 in the full run); it exits with a message
starting ``FAILED:`` otherwise.  It writes ``out/08_custom_module_grad.py``.
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
from srcgrad.testing import check_grads

N, D_IN, H, D_OUT = 64, 1000, 100, 10


class TwoLayerNet(nn.Module):
    """Linear -> ReLU -> Linear; the layers are attributes, so they are the model's parameters."""

    def __init__(self, d_in, hidden, d_out):
        self.linear1 = nn.Linear(d_in, hidden)
        self.linear2 = nn.Linear(hidden, d_out)

    def forward(self, x):
        h_relu = np.maximum(self.linear1(x), 0)  # PyTorch's clamp(min=0)
        y_pred = self.linear2(h_relu)
        return y_pred


def loss_fn(model, x, y):
    """Sum of squared errors (PyTorch's ``MSELoss(reduction="sum")``)."""
    y_pred = model(x)
    return np.sum((y_pred - y) ** 2)



def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        default=quick_by_default(),
                        help="100 steps instead of 500, for CI (also SRCGRAD_QUICK=1)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "out",
                        help="where to save the generated code (default: the repository's out/)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    steps = 100 if args.quick else 500
    report_every = 20 if args.quick else 50
    start = time.perf_counter()

    # Random data, and the layers' PyTorch-default initialisation from a seeded generator.
    rng = np.random.default_rng(args.seed)
    x = rng.standard_normal((N, D_IN))
    y = rng.standard_normal((N, D_OUT))
    nn.init.manual_seed(args.seed)
    model = TwoLayerNet(D_IN, H, D_OUT)
    print(model)

    # The gradient w.r.t. the model matches finite differences, on a small network.
    check_grads(loss_fn, (TwoLayerNet(5, 4, 3), rng.standard_normal((6, 5)), rng.standard_normal((6, 3))))
    print("gradient check: srcgrad agrees with finite differences on every parameter of TwoLayerNet(5, 4, 3)")

    loss_and_grads = srcgrad.value_and_grad(loss_fn)  # wrt=0: the model
    code = srcgrad.source(loss_and_grads, model, x, y)  # the model and its layers inlined
    args.out.mkdir(parents=True, exist_ok=True)
    code_path = args.out / "08_custom_module_grad.py"
    code_path.write_text(code)
    print(f"---- the gradient code srcgrad generated (saved to {code_path}) ----")
    print(code)

    optimizer = optim.SGD(model, lr=1e-4)
    losses = []
    for t in range(steps):
        loss, grads = loss_and_grads(model, x, y)
        if t == 0:  # the gradient is shaped like the model: one array per parameter
            check(isinstance(grads, TwoLayerNet), f"the gradient is a {type(grads).__name__}, not a TwoLayerNet")
            for name, p in model.named_parameters():
                g = dict(grads.named_parameters())[name]
                check(g.shape == p.shape, f"gradient of {name} has shape {g.shape}, the parameter {p.shape}")
        optimizer.step(grads)
        losses.append(float(loss))
        if t % report_every == 0 or t == steps - 1:
            print(f"step {t:3d}  loss {loss:.6g}")

    factor = 1e-2 if args.quick else 1e-5
    print(f"loss: {losses[0]:.4g} -> {losses[-1]:.4g} in {steps} steps "
          f"({time.perf_counter() - start:.1f} s)")
    check(losses[-1] < factor * losses[0],
          f"the loss fell from {losses[0]:.4g} to {losses[-1]:.4g}, not below {factor:g} of its start")
    print("08_custom_module: all checks passed")


if __name__ == "__main__":
    main()
