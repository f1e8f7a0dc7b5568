"""Forward mode on the tutorial's two-layer network: ``srcgrad.jvp`` against the
forward pass alone and against a hand-written NumPy JVP.

For each ``wrt`` (``w1``, ``w2``) one call of the generated ``f_jvp`` (value
and tangent) is timed against the loss alone (``two_layer_loss``) and against
the same JVP written by hand, in the same process on the same arrays,
interleaved repeat by repeat, after the tangents have been checked to agree.

What bounds the ratio to the forward pass: the tangent along ``w1`` needs
``x @ w1_dot``, a product as large as the forward pass's ``x @ w1`` (so even
the hand-written JVP costs about twice the forward pass); along ``w2`` the
tangent costs one small product.

Run from the repository root::

    python -m benchmarks.jvp            # print the table
    python -m benchmarks.jvp --quick    # tiny sizes, a few repeats (the smoke test)
    python -m benchmarks.jvp --threads 2
"""
from __future__ import annotations

import sys

from benchmarks import _env

_PINNED_AT_IMPORT = None
if __name__ == "__main__":
    _PINNED_AT_IMPORT = _env.threads_from_argv(sys.argv[1:])
    _env.pin_threads(_PINNED_AT_IMPORT)

import argparse  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import numpy as np  # noqa: E402

import srcgrad  # noqa: E402
from benchmarks.two_layer import FULL_SIZES, QUICK_SIZES, Stats, interleaved, make_data, two_layer_loss  # noqa: E402


def hand_written_jvp(w1, w2, x, y, w1_dot, w2_dot):
    """The loss and its directional derivative along ``(w1_dot, w2_dot)``, by hand
    (``None``: that weight is held fixed)."""
    h = x.dot(w1)
    h_relu = np.maximum(h, 0)
    y_pred = h_relu.dot(w2)
    r = y_pred - y
    if w1_dot is not None:
        h_relu_dot = x.dot(w1_dot) * (h > 0)
        y_pred_dot = h_relu_dot.dot(w2) if w2_dot is None else h_relu_dot.dot(w2) + h_relu.dot(w2_dot)
    else:
        y_pred_dot = h_relu.dot(w2_dot)
    return np.square(r).sum(), np.sum(2 * r * y_pred_dot)


@dataclass
class Row:
    wrt: str
    agree: bool
    forward: Stats
    hand: Stats
    srcgrad: Stats

    @property
    def ratio_to_forward(self) -> float:
        return self.srcgrad.median / self.forward.median

    @property
    def ratio_to_hand(self) -> float:
        return self.srcgrad.median / self.hand.median

    @property
    def hand_to_forward(self) -> float:
        return self.hand.median / self.forward.median


def main(argv=None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    repeats, warmup = (3, 1) if args.quick else (30, 5)
    rows = []
    w1, w2, x, y = make_data(np.float64, **sizes)
    rng = np.random.default_rng(1)
    for wrt in (0, 1):
        dot = rng.standard_normal((w1, w2)[wrt].shape)
        dots = (dot, None) if wrt == 0 else (None, dot)
        jvp = srcgrad.jvp(two_layer_loss, wrt=wrt)
        value, tangent = jvp(w1, w2, x, y, dot)
        expected = hand_written_jvp(w1, w2, x, y, *dots)
        agree = bool(np.allclose(value, expected[0], rtol=1e-12) and np.allclose(tangent, expected[1], rtol=1e-10))
        program = jvp.compiled((w1, w2, x, y)).function  # the generated code, without the API's checks
        stats, _ = interleaved({"forward": lambda *a: two_layer_loss(*a[:4]),
                                "hand": lambda *a: hand_written_jvp(*a[:4], *dots),
                                "srcgrad": program}, (w1, w2, x, y, dot), repeats, warmup)
        rows.append(Row(("w1", "w2")[wrt], agree, stats["forward"], stats["hand"], stats["srcgrad"]))
    print("| wrt | tangents agree | forward pass | hand-written JVP | srcgrad.jvp | jvp / forward | "
          "jvp / hand-written | hand-written / forward |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row.wrt} | {row.agree} | {row.forward.median * 1e6:.1f} µs | {row.hand.median * 1e6:.1f} µs | "
              f"{row.srcgrad.median * 1e6:.1f} µs | {row.ratio_to_forward:.2f}x | {row.ratio_to_hand:.2f}x | "
              f"{row.hand_to_forward:.2f}x |")
    return rows


if __name__ == "__main__":
    main()
