"""Control flow and weight sharing: a network whose depth is drawn at random on every forward pass.

The tutorial's "PyTorch: Control Flow + Weight Sharing" step.  ``DynamicNet``
is a fully connected ReLU network whose forward pass draws a number from 0 to
3 with ``random.randint`` and applies the *same* middle layer that many times,
with an ordinary Python ``for`` loop.  Every forward pass is a different
computation, and the middle layer's weights are shared by all its uses.

srcgrad reads ``forward``'s source, loop included, and writes a backward
sweep with the loop reversed: the forward loop pushes what each iteration
needs onto a stack (``loop1_stack``) and the backward loop pops it, running
as many times as the forward one did.  ``random.randint`` is drawn once, by
the forward sweep, and the adjoints of the shared layer from every iteration
add up into one gradient (``self_bar = rt.add(self_bar, ...)``).  The script
prints that code and saves it.

Run it from the repository root::

    python examples/09_control_flow_weight_sharing.py           # 500 steps, a few seconds
    python examples/09_control_flow_weight_sharing.py --quick   # 100 steps (also SRCGRAD_QUICK=1), as CI does

It checks, on a small network and for each depth 0-3, that the gradient
matches central finite differences taken at the same depth, and that the
shared layer's gradient is exactly zero when the loop runs no iteration;
then it trains with SGD and momentum, as the tutorial does, and checks that
the loss falls (the median of the last fifth of the steps below 1/10 of the
first loss, 1/100 in the full run).  It exits with a message starting
``FAILED:`` otherwise, and writes ``out/09_control_flow_weight_sharing_grad.py``.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
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


class DynamicNet(nn.Module):
    """input layer -> the middle layer 0 to 3 times (the same weights each time) -> output layer."""

    def __init__(self, d_in, hidden, d_out):
        self.input_linear = nn.Linear(d_in, hidden)
        self.middle_linear = nn.Linear(hidden, hidden)
        self.output_linear = nn.Linear(hidden, d_out)

    def forward(self, x):
        h_relu = np.maximum(self.input_linear(x), 0)
        for _ in range(random.randint(0, 3)):
            h_relu = np.maximum(self.middle_linear(h_relu), 0)
        y_pred = self.output_linear(h_relu)
        return y_pred


def loss_fn(model, x, y):
    """Sum of squared errors."""
    y_pred = model(x)
    return np.sum((y_pred - y) ** 2)



def next_depth() -> int:
    """The depth the next forward pass will draw, without drawing it."""
    state = random.getstate()
    depth = random.randint(0, 3)
    random.setstate(state)
    return depth


def check_each_depth(rng, entries=4, step=1e-6) -> None:
    """srcgrad's gradient against central differences, at every depth.

    Reseeding ``random`` before each evaluation replays the same draw, so the
    finite differences are taken through the same depth as the gradient.
    """
    model = DynamicNet(5, 4, 3)
    x, y = rng.standard_normal((6, 5)), rng.standard_normal((6, 3))
    gradient = srcgrad.grad(loss_fn)
    seen = set()
    for seed in range(100):
        random.seed(seed)
        depth = next_depth()
        if depth in seen:
            continue
        seen.add(depth)
        grads = dict(gradient(model, x, y).named_parameters())
        if depth == 0:
            check(not np.any(grads["middle_linear.weight"]),
                  "the shared layer has a gradient although the loop ran no iteration")
        for name, p in model.named_parameters():  # the model's own arrays: perturbed in place
            for flat in rng.choice(p.size, size=min(entries, p.size), replace=False):
                index = np.unravel_index(flat, p.shape)
                saved = p[index]
                p[index] = saved + step
                random.seed(seed)
                up = loss_fn(model, x, y)
                p[index] = saved - step
                random.seed(seed)
                down = loss_fn(model, x, y)
                p[index] = saved
                numeric = (up - down) / (2 * step)
                got = grads[name][index]
                check(abs(got - numeric) <= 1e-6 * max(1.0, abs(numeric)),
                      f"depth {depth}: d loss / d {name}{[int(i) for i in index]}: srcgrad {got:.9g}, "
                      f"finite differences {numeric:.9g}")
        if len(seen) == 4:
            break
    check(seen == {0, 1, 2, 3}, f"only depths {sorted(seen)} were drawn")
    print(f"gradient check: srcgrad agrees with finite differences at depths 0, 1, 2 and 3 "
          f"({entries} entries of each parameter)")


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

    rng = np.random.default_rng(args.seed)
    nn.init.manual_seed(args.seed)
    check_each_depth(rng)
    random.seed(args.seed)  # the depths drawn while training

    x = rng.standard_normal((N, D_IN))
    y = rng.standard_normal((N, D_OUT))
    model = DynamicNet(D_IN, H, D_OUT)
    print(model)

    code = srcgrad.source(srcgrad.vjp(DynamicNet.forward, wrt="self"), model, x)
    args.out.mkdir(parents=True, exist_ok=True)
    code_path = args.out / "09_control_flow_weight_sharing_grad.py"
    code_path.write_text(code)
    print(f"---- the gradient code srcgrad generated for DynamicNet.forward (saved to {code_path}) ----")
    print(code)

    # The tutorial's optimizer: SGD with momentum (a random depth makes plain SGD slow).
    loss_and_grads = srcgrad.value_and_grad(loss_fn)
    optimizer = optim.SGD(model, lr=1e-4, momentum=0.9)
    losses, depths = [], Counter()
    for t in range(steps):
        depths[next_depth()] += 1
        loss, grads = loss_and_grads(model, x, y)
        optimizer.step(grads)
        losses.append(float(loss))
        if t % report_every == 0 or t == steps - 1:
            print(f"step {t:3d}  loss {loss:10.4f}")

    print("depths drawn: " + ", ".join(f"{d}: {depths[d]} times" for d in range(4)))
    tail = float(np.median(losses[-(steps // 5):]))
    factor = 0.1 if args.quick else 0.01
    print(f"loss: {losses[0]:.4g} at the start, median {tail:.4g} over the last {steps // 5} steps "
          f"({time.perf_counter() - start:.1f} s)")
    check(len(depths) == 4, f"training drew only depths {sorted(depths)}")
    check(tail < factor * losses[0],
          f"the loss did not fall enough: median {tail:.4g} over the last steps, start {losses[0]:.4g}")
    print("09_control_flow_weight_sharing: all checks passed")


if __name__ == "__main__":
    main()
