"""Guided backpropagation: saliency maps of the digits CNN, with a gradient hook or a custom adjoint.

A saliency map is the gradient of one class score with respect to the input
image: which pixels, changed a little, change the score most.  Guided
backpropagation (Springenberg et al. 2015, "Striving for Simplicity: The All
Convolutional Net", section 3.4) changes one rule of the backward pass: at
each ReLU, only *positive* adjoints flow back, and only where the ReLU's
input was positive, ``x_bar = max(h_bar, 0) * (x > 0)``.  The maps come out
sharper, showing what speaks *for* the class.  In PyTorch this takes hooks
(``register_hook`` / ``register_full_backward_hook``); with srcgrad, two ways:

1. a hook on a named intermediate: the CNN's forward written out as one
   function, ``class_score``, whose ReLU output is ``h``;
   ``srcgrad.grad(class_score, wrt="images", hooks={"h": clamp})`` calls
   ``clamp`` on ``h``'s adjoint in the backward sweep (the generated code
   shows where);
2. a custom adjoint: ``guided_relu``, declared with
   ``@srcgrad.custom_adjoint`` and given its own rule, in a ``GuidedReLU``
   module swapped into a copy of the model; the compiler inlines the rule.

The network is the one of ``digits_cnn.py`` (imported from it), trained here
first: 2 epochs with ``--quick``, 10 otherwise.

Run it from the repository root::

    pip install -e '.[examples]'
    python examples/12_guided_backprop.py           # about ten seconds
    python examples/12_guided_backprop.py --quick   # a few seconds (also SRCGRAD_QUICK=1), as CI does

It writes ``out/guided_backprop.png`` (one test image of each digit, its
plain gradient and its guided map) and ``out/12_guided_backprop_grad.py``,
and checks: the plain gradient against finite differences; the maps have the
images' shape and dtype; under the guided rule the adjoint reaching each
ReLU's input is non-negative, while the plain one has negative entries; the
guided maps differ from the plain ones; the hook and the custom adjoint give
the same maps.  It exits with a message starting ``FAILED:`` otherwise.
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

import matplotlib
from digits_cnn import DigitsCNN, load_data, train  # this directory: the main example

from srcgrad import nn
from srcgrad.testing import check_grads


def class_score(model, images, digits):
    """The score of each image's own digit, summed over the batch.

    ``DigitsCNN.forward`` written out so that the ReLU's input and output
    have names (``conv``, ``h``) that ``hooks=`` and ``intermediates=`` can
    refer to.  Images do not interact, so the gradient of the sum gives each
    image its own map.

    Args:
        model: a trained DigitsCNN.
        images: (N, 1, 8, 8).
        digits: (N,) the class whose score to explain, per image.
    """
    conv = model.conv(images)
    h = np.maximum(conv, 0)
    scores = model.fc(model.to_vector(model.pool(h)))
    return np.sum(scores[np.arange(len(digits)), digits])


def clamp_negative(h_bar):
    """Guided backpropagation's rule, applied to the adjoint of a ReLU's output."""
    return np.maximum(h_bar, 0)


# ---- the other way: a ReLU with its own adjoint ----------------------------------
@srcgrad.custom_adjoint
def guided_relu(x):
    return np.maximum(x, 0)


@guided_relu.defadjoint
def guided_relu_adjoint(ans_bar, ans, x):
    """Only positive adjoints pass, and only where the input was positive."""
    return np.maximum(ans_bar, 0) * (x > 0)


class GuidedReLU(nn.Module):
    def forward(self, x):
        return guided_relu(x)


def own_class_score(model, images, digits):
    """``class_score`` through the model's own forward (for the GuidedReLU copy)."""
    scores = model(images)
    return np.sum(scores[np.arange(len(digits)), digits])



def plot(images, digits, plain, guided, path: Path) -> None:
    matplotlib.use("Agg")  # write a PNG; never needs a display
    import matplotlib.pyplot as plt

    rows = [("image", images, "gray_r"), ("gradient", plain, "RdBu_r"), ("guided", guided, "RdBu_r")]
    fig, axes = plt.subplots(len(rows), len(digits), figsize=(1.3 * len(digits), 4.2))
    for row, (label, maps, cmap) in enumerate(rows):
        for col in range(len(digits)):
            ax = axes[row, col]
            m = maps[col, 0]
            if label == "image":
                ax.imshow(m, cmap=cmap, vmin=0, vmax=1)
                ax.set_title(f"digit {digits[col]}", fontsize=9)
            else:  # red: raises the score, blue: lowers it; symmetric around 0
                bound = float(np.abs(m).max()) or 1.0
                ax.imshow(m, cmap=cmap, vmin=-bound, vmax=bound)
            ax.set_xticks([])
            ax.set_yticks([])
        axes[row, 0].set_ylabel(label)
    fig.suptitle("d score(digit) / d image: plain and guided backpropagation (srcgrad)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        default=quick_by_default(),
                        help="train 2 epochs instead of 10, for CI (also SRCGRAD_QUICK=1)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "out",
                        help="where to write the maps and the code (default: the repository's out/)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    start = time.perf_counter()

    x_train, y_train, x_test, y_test = load_data(args.seed)
    nn.init.manual_seed(args.seed)
    model = DigitsCNN()
    history = train(model, x_train, y_train, x_test, y_test, epochs=2 if args.quick else 10, seed=args.seed)
    print(f"trained the digits CNN: test accuracy {history['test_acc'][-1]:.3f}")

    # One test image of each digit; explain the score of its own digit.
    first = [int(np.flatnonzero(y_test == d)[0]) for d in range(10)]
    images, digits = x_test[first], y_test[first]

    plain = srcgrad.grad(class_score, wrt="images", intermediates=("conv", "h"))
    guided = srcgrad.grad(class_score, wrt="images", intermediates=("conv", "h"),
                          hooks={"h": clamp_negative})
    plain_maps, plain_adjoints = plain(model, images, digits)
    guided_maps, guided_adjoints = guided(model, images, digits)

    guided_model = DigitsCNN()
    guided_model.load_state_dict(model.state_dict())
    guided_model.relu = GuidedReLU()
    custom_maps = srcgrad.grad(own_class_score, wrt="images")(guided_model, images, digits)

    args.out.mkdir(parents=True, exist_ok=True)
    parts = [
        ('grad(class_score, wrt="images", hooks={"h": clamp_negative}, intermediates=("conv", "h"))',
         srcgrad.source(guided, model, images, digits)),
        ("GuidedReLU.forward: the custom adjoint, inlined",
         srcgrad.source(srcgrad.vjp(GuidedReLU.forward, wrt=("self", "x")), guided_model.relu,
                        model.conv(images))),
        ("Conv2d.forward, called as model.conv(images): w.r.t. its input (the images)",
         srcgrad.source(srcgrad.vjp(nn.Conv2d.forward, wrt="x"), model.conv, images)),
    ]
    sections = [f"# ==== {title} ====\n{code}" for title, code in parts]
    code_path = args.out / "12_guided_backprop_grad.py"
    code_path.write_text("\n\n".join(sections))
    print(f"---- the gradient code srcgrad generated (all of it, the convolution too: {code_path}) ----")
    print("\n".join(sections[:2]))

    plot_path = args.out / "guided_backprop.png"
    plot(images, digits, plain_maps, guided_maps, plot_path)
    print(f"saliency maps: {plot_path}")

    # ---- checks ----
    # The plain saliency is the true gradient: finite differences in float64, on two images with a
    # little noise, so that no two values in a max-pooling window tie (there the max has no derivative).
    noisy = images[:2] + np.random.default_rng(args.seed).uniform(0, 0.01, images[:2].shape)
    check_grads(class_score, (model, noisy, digits[:2]), wrt=1, rtol=1e-5, atol=1e-7)
    print("gradient check: the plain saliency agrees with finite differences")
    for name, maps in (("plain", plain_maps), ("guided", guided_maps), ("custom-adjoint", custom_maps)):
        check(maps.shape == images.shape and maps.dtype == images.dtype,
              f"the {name} maps are {maps.shape} {maps.dtype}, the images {images.shape} {images.dtype}")
    check(np.all(guided_adjoints["h"] >= 0) and np.all(guided_adjoints["conv"] >= 0),
          "under the guided rule, the adjoints at the ReLU are non-negative")
    check(np.any(plain_adjoints["conv"] < 0), "the plain adjoint at the ReLU has negative entries")
    # The CNN has one ReLU, and only pooling and a linear layer after it, so the
    # guided adjoint there is exactly the positive part of the plain one.
    check(np.array_equal(guided_adjoints["h"], np.maximum(plain_adjoints["h"], 0)),
          "the guided adjoint of the ReLU's output is the positive part of the plain one")
    check(not np.allclose(guided_maps, plain_maps, atol=1e-3 * float(np.abs(plain_maps).max())),
          "the guided maps differ from the plain gradients")
    check(np.allclose(custom_maps, guided_maps, rtol=1e-5, atol=1e-7),
          "the hook and the custom adjoint give the same guided maps "
          f"(largest difference {float(np.abs(custom_maps - guided_maps).max()):.3g})")
    print(f"checks passed: maps of shape {guided_maps.shape}; guided adjoints at the ReLU >= 0 "
          f"(plain: {np.mean(plain_adjoints['conv'] < 0):.0%} negative); hook == custom adjoint "
          f"({time.perf_counter() - start:.1f} s)")
    print("12_guided_backprop: all checks passed")


if __name__ == "__main__":
    main()
