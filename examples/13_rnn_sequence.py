"""A recurrent network trained through time with a plain Python loop: predicting sine waves.

The tutorial's remark on dynamic graphs, made concrete: "a recurrent network
may run a different number of time steps for each data point; with a dynamic
graph this is ordinary flow control".  ``SineRNN.forward`` loops over the
time steps of a batch of sequences with a ``for`` loop, applying the same
``nn.RNNCell`` (Elman: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)``) at
every step and a linear read-out after it, collecting the outputs in a list
with ``append`` and stacking them.  The task: read a sine wave of random
phase and frequency one value at a time and predict the next value.

srcgrad writes the backward sweep of that loop (backpropagation through
time): the forward loop pushes the values each step's adjoint reads onto
``loop1_stack``, the backward loop pops them in reverse, carrying ``h_bar`` from step to step
and adding each step's adjoint of the shared cell into one gradient.  The
script prints that code and saves it.

Run it from the repository root::

    python examples/13_rnn_sequence.py           # 300 steps of Adam, a few seconds
    python examples/13_rnn_sequence.py --quick   # 60 steps (also SRCGRAD_QUICK=1), as CI does

It checks the gradient against finite differences on a small network, and
that the loss on held-out sequences falls by a factor of 10 (30 in the full
run); it exits with a message starting ``FAILED:`` otherwise.  It writes
``out/13_rnn_sequence_grad.py`` and, when matplotlib is installed,
``out/rnn_sine.png`` (a held-out wave and the network's predictions).
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

HIDDEN = 32
STEPS = 30      # time steps per sequence
BATCH = 32      # sequences per training batch
DT = 0.3        # time between samples


class SineRNN(nn.Module):
    """An RNN cell unrolled over time, and a linear read-out of each hidden state."""

    def __init__(self, hidden):
        self.hidden = hidden
        self.cell = nn.RNNCell(1, hidden)
        self.readout = nn.Linear(hidden, 1)

    def forward(self, xs):
        """xs: (T, N, 1), the sequences time-major -> (T, N, 1), the prediction after each step."""
        h = np.zeros((xs.shape[1], self.hidden))
        predictions = []
        for t in range(len(xs)):
            h = self.cell(xs[t], h)
            predictions.append(self.readout(h))
        return np.stack(predictions)


def loss_fn(model, xs, targets):
    """Mean squared error of the next-value predictions."""
    return np.mean((model(xs) - targets) ** 2)


def sine_batch(rng: np.random.Generator, batch: int, steps: int = STEPS):
    """Sine waves of random phase and frequency: (inputs, targets), each (steps, batch, 1);
    the target at step t is the input at step t + 1."""
    phase = rng.uniform(0, 2 * np.pi, size=(1, batch, 1))
    frequency = rng.uniform(0.5, 1.5, size=(1, batch, 1))
    t = DT * np.arange(steps + 1)[:, None, None]
    wave = np.sin(frequency * t + phase)
    return wave[:-1], wave[1:]



def plot(xs, targets, predictions, path: Path) -> bool:
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no plot")
        return False
    matplotlib.use("Agg")  # write a PNG; never needs a display
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5))
    t = DT * np.arange(1, len(targets) + 1)
    ax.plot(DT * np.arange(len(xs)), xs[:, 0, 0], "o", color="0.6", ms=3, label="input")
    ax.plot(t, targets[:, 0, 0], "-", color="0.3", label="next value (target)")
    ax.plot(t, predictions[:, 0, 0], "o-", ms=3, label="prediction")
    ax.set(xlabel="time", title="SineRNN on a held-out wave: predicting the next value, trained by srcgrad")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=3, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        default=quick_by_default(),
                        help="60 steps instead of 300, for CI (also SRCGRAD_QUICK=1)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "out",
                        help="where to save the code and the plot (default: the repository's out/)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    steps = 60 if args.quick else 300
    report_every = 10 if args.quick else 50
    start = time.perf_counter()

    rng = np.random.default_rng(args.seed)
    nn.init.manual_seed(args.seed)

    # Backpropagation through time matches finite differences, on a small network and 5 steps.
    small_xs, small_targets = sine_batch(rng, 2, steps=5)
    check_grads(loss_fn, (SineRNN(3), small_xs, small_targets))
    print("gradient check: srcgrad agrees with finite differences on every parameter of SineRNN(3)")

    model = SineRNN(HIDDEN)
    print(model)
    held_out = sine_batch(rng, 256)
    xs, targets = sine_batch(rng, BATCH)
    parts = [("SineRNN.forward: the loop over time and its reverse",
              srcgrad.source(srcgrad.vjp(SineRNN.forward, wrt="self"), model, xs)),
             ("RNNCell.forward, called as self.cell(xs[t], h): w.r.t. the cell and h",
              srcgrad.source(srcgrad.vjp(nn.RNNCell.forward, wrt=("self", "h")), model.cell, xs[0],
                             np.zeros((BATCH, HIDDEN))))]
    code = "\n\n".join(f"# ==== {title} ====\n{source}" for title, source in parts)
    args.out.mkdir(parents=True, exist_ok=True)
    code_path = args.out / "13_rnn_sequence_grad.py"
    code_path.write_text(code)
    print(f"---- the gradient code srcgrad generated (saved to {code_path}) ----")
    print(code)

    loss_and_grads = srcgrad.value_and_grad(loss_fn)
    optimizer = optim.Adam(model, lr=1e-2)
    before = float(loss_fn(model, *held_out))
    for step in range(steps):
        xs, targets = sine_batch(rng, BATCH)  # fresh waves every step
        loss, grads = loss_and_grads(model, xs, targets)
        optimizer.step(grads)
        if step % report_every == 0 or step == steps - 1:
            print(f"step {step:3d}  training loss {loss:.5f}")
    after = float(loss_fn(model, *held_out))

    factor = 10 if args.quick else 30
    print(f"held-out loss: {before:.4f} -> {after:.5f} ({before / after:.0f}x lower) in {steps} steps "
          f"({time.perf_counter() - start:.1f} s)")
    plot_path = args.out / "rnn_sine.png"
    if plot(held_out[0], held_out[1], model(held_out[0]), plot_path):
        print(f"plot: {plot_path}")
    check(after * factor < before,
          f"the held-out loss fell from {before:.4f} to {after:.5f}, less than {factor}x")
    print("13_rnn_sequence: all checks passed")


if __name__ == "__main__":
    main()
