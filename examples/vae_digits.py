"""PyTorch's variational autoencoder, on scikit-learn's digits, with gradients from srcgrad.

``VAE`` is ``pytorch/examples``' ``vae/main.py`` model written with ``srcgrad.nn`` in
the same class structure and layer names (Kingma & Welling 2014): an encoder
``fc1`` to a hidden layer and ``fc21``/``fc22`` to the mean and log-variance of a
Gaussian over a latent code, a decoder ``fc3``/``fc4`` back to pixel
probabilities, ``reparameterize`` drawing ``z = mu + eps * exp(logvar / 2)``, and the
loss ``BCE + KLD``: the reconstruction's binary cross-entropy summed over pixels and
the batch, plus the KL divergence of the code's Gaussian from N(0, I)
(Appendix B).  Sizes are scaled to the 8x8 images: 64 -> 128 -> 8 -> 128 -> 64
(PyTorch's: 784 -> 400 -> 20 -> 400 -> 784 on MNIST).

The one change from PyTorch's code: the noise ``eps`` (``torch.randn_like(std)``) is
drawn by the training loop and passed to ``forward``, so the function srcgrad
differentiates is deterministic and the gradient is the one of that draw (a
single-sample reparameterised estimate of the ELBO's gradient, as in PyTorch).  (Drawing
it inside, ``eps = np.random.randn(*std.shape)``, differentiates too: srcgrad runs the draw
in the forward sweep and keeps it for the backward one.)
Trained with ``optim.Adam(lr=1e-3)`` on mini-batches of 128, as PyTorch's.

srcgrad reads the loss, the model's ``encode``/``reparameterize``/``decode`` and
each layer and writes their backward pass as one function, printed and saved.

Data: ``sklearn.datasets.load_digits`` (1,797 8x8 images shipped with
scikit-learn, no download), pixels scaled to [0, 1], split 80/20 into training
and test sets.

Run it from the repository root::

    pip install -e '.[examples]'
    python examples/vae_digits.py            # 200 epochs, a few seconds
    python examples/vae_digits.py --quick    # 20 epochs (also SRCGRAD_QUICK=1), as CI does
    python examples/vae_digits.py --out DIR  # write the plot and the code to DIR instead of out/

It writes ``out/vae_digits.png`` (the loss per epoch, test digits beside their
reconstructions, and digits decoded from codes drawn from the prior) and
``out/vae_digits_grad.py`` (the generated code), and checks its own results: it
exits with a message starting ``FAILED:`` if the test loss does not fall (in the
full run, to below 25 nats per image).  Quick mode also compares srcgrad's
gradient with finite differences on a small VAE.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

START = time.perf_counter()  # the elapsed time printed at the end includes the imports

import numpy as np
from _gallery import check, quick_by_default

try:
    import srcgrad
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import srcgrad

import matplotlib
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from srcgrad import nn, optim
from srcgrad.nn import functional as F
from srcgrad.testing import check_grads

PIXELS = 64  # 8x8


# ---- the model: vae/main.py's VAE ------------------------------------------------------
class VAE(nn.Module):
    def __init__(self, hidden=128, latent=8, dtype=np.float32):
        super().__init__()
        self.fc1 = nn.Linear(PIXELS, hidden, dtype=dtype)
        self.fc21 = nn.Linear(hidden, latent, dtype=dtype)
        self.fc22 = nn.Linear(hidden, latent, dtype=dtype)
        self.fc3 = nn.Linear(latent, hidden, dtype=dtype)
        self.fc4 = nn.Linear(hidden, PIXELS, dtype=dtype)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar, eps):
        std = np.exp(0.5 * logvar)
        # PyTorch: eps = torch.randn_like(std); here the caller draws it (see the module's docstring).
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return F.sigmoid(self.fc4(h3))

    def forward(self, x, eps):
        mu, logvar = self.encode(x.reshape(-1, PIXELS))
        z = self.reparameterize(mu, logvar, eps)
        return self.decode(z), mu, logvar


# Reconstruction + KL divergence losses summed over all elements and batch
def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.reshape(-1, PIXELS), reduction="sum")
    # see Appendix B from VAE paper:
    # Kingma and Welling. Auto-Encoding Variational Bayes. ICLR, 2014
    # https://arxiv.org/abs/1312.6114
    # 0.5 * sum(1 + log(sigma^2) - mu^2 - sigma^2)
    KLD = -0.5 * np.sum(1 + logvar - mu ** 2 - np.exp(logvar))
    return BCE + KLD


def loss(model, data, eps):
    """The function srcgrad differentiates (w.r.t. the model): the batch's summed loss."""
    recon_batch, mu, logvar = model(data, eps)
    return loss_function(recon_batch, data, mu, logvar)


# ---- data, training, testing ---------------------------------------------------------------
def load_data(seed):
    """Digits as (N, 8, 8) float32 images in [0, 1] (pixel values are 0..16), train and test."""
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)
    x_train, x_test = train_test_split(images, test_size=0.2, stratify=digits.target, random_state=seed)
    return x_train, x_test


def test(model, x_test, rng, batch_size=128):
    """The test set's loss per image (fresh noise; no gradient), as main.py's ``test``."""
    total = 0.0
    for first in range(0, len(x_test), batch_size):
        data = x_test[first:first + batch_size]
        eps = rng.standard_normal((len(data), model.fc21.out_features)).astype(data.dtype)
        total += float(loss(model, data, eps))
    return total / len(x_test)


def train(model, x_train, x_test, epochs, seed, batch_size=128, lr=1e-3, log_every=20):
    """Adam on shuffled mini-batches, as main.py's ``train``; the losses per image, per epoch."""
    step = srcgrad.value_and_grad(loss)  # (loss, gradient shaped like the model)
    optimizer = optim.Adam(model.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    latent = model.fc21.out_features
    history = {"train": [], "test": [test(model, x_test, np.random.default_rng(seed))], "step_s": []}
    for epoch in range(1, epochs + 1):
        train_loss = 0.0
        order = rng.permutation(len(x_train))
        for first in range(0, len(order), batch_size):
            data = x_train[order[first:first + batch_size]]
            eps = rng.standard_normal((len(data), latent)).astype(data.dtype)  # torch.randn_like(std)
            begin = time.perf_counter()
            value, grads = step(model, data, eps)
            optimizer.step(grads)
            history["step_s"].append(time.perf_counter() - begin)
            train_loss += float(value)
        history["train"].append(train_loss / len(x_train))
        history["test"].append(test(model, x_test, np.random.default_rng(seed)))
        if epoch % log_every == 0 or epoch == 1:
            print(f"====> Epoch: {epoch} Average loss: {history['train'][-1]:.4f}   "
                  f"Test set loss: {history['test'][-1]:.4f}")
    return history


def check_gradient(x, seed=0):
    """srcgrad's gradient of a small VAE (float64) against central finite differences, on
    every parameter (``srcgrad.testing.check_grads``)."""
    nn.init.manual_seed(seed)
    model = VAE(hidden=6, latent=3, dtype=np.float64)
    eps = np.random.default_rng(seed).standard_normal((len(x), 3))
    check_grads(loss, (model, x.astype(np.float64), eps), rtol=1e-6)
    print("gradient check: srcgrad agrees with finite differences on every parameter of "
          "VAE(hidden=6, latent=3)")


def plot(history, originals, reconstructions, samples, path: Path):
    matplotlib.use("Agg")  # write a PNG; never needs a display
    import matplotlib.pyplot as plt

    def tile(images, rows):  # (n, 8, 8) -> one (rows * 9, cols * 9) image, a pixel of space between
        cols = len(images) // rows
        padded = np.pad(images, ((0, 0), (0, 1), (0, 1)))  # (shown inverted: white space)
        return padded.reshape(rows, cols, 9, 9).transpose(0, 2, 1, 3).reshape(rows * 9, cols * 9)

    fig, (ax_loss, ax_recon, ax_sample) = plt.subplots(1, 3, figsize=(13, 4),
                                                       gridspec_kw={"width_ratios": [1.2, 1, 1]})
    ax_loss.plot(np.arange(1, len(history["train"]) + 1), history["train"], label="train")
    ax_loss.plot(np.arange(len(history["test"])), history["test"], label="test")
    ax_loss.set(xlabel="epoch", ylabel="loss per image (BCE + KLD, nats)", title="loss")
    ax_loss.legend()
    ax_recon.imshow(1 - tile(np.concatenate([originals, reconstructions]), 2), cmap="gray", vmin=0, vmax=1)
    ax_recon.set_title("test digits (top) and reconstructions")
    ax_sample.imshow(1 - tile(samples, 4), cmap="gray", vmin=0, vmax=1)
    ax_sample.set_title("decoded from z ~ N(0, I)")
    for ax in (ax_recon, ax_sample):
        ax.axis("off")
    fig.suptitle("VAE on scikit-learn digits, gradients by srcgrad")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", default=quick_by_default(),
                        help="20 epochs instead of 200, for CI (also SRCGRAD_QUICK=1)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "out",
                        help="where to write the plot and the generated code (default: out/)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    epochs = 20 if args.quick else 200

    x_train, x_test = load_data(args.seed)
    if args.quick:
        check_gradient(x_train[:4], args.seed)
    nn.init.manual_seed(args.seed)
    model = VAE()
    print(model)

    args.out.mkdir(parents=True, exist_ok=True)
    code_path = args.out / "vae_digits_grad.py"
    eps = np.zeros((128, model.fc21.out_features), np.float32)
    code = srcgrad.source(srcgrad.value_and_grad(loss), model, x_train[:128], eps)
    code_path.write_text(code)
    print(f"---- the gradient code srcgrad generated (one function, every layer inlined; saved to "
          f"{code_path}) ----")
    print(code)

    train_start = time.perf_counter()
    history = train(model, x_train, x_test, epochs, args.seed, log_every=5 if args.quick else 25)
    train_s = time.perf_counter() - train_start

    rng = np.random.default_rng(args.seed + 1)
    originals = x_test[:8]
    eps = rng.standard_normal((8, model.fc21.out_features)).astype(np.float32)
    reconstructions = model(originals, eps)[0].reshape(-1, 8, 8)
    samples = model.decode(rng.standard_normal((32, model.fc21.out_features)).astype(np.float32))
    plot_path = args.out / "vae_digits.png"
    plot(history, originals, reconstructions, samples.reshape(-1, 8, 8), plot_path)

    first, last = history["test"][0], history["test"][-1]
    print(f"test loss per image: {first:.2f} -> {last:.2f} after {epochs} epochs")
    print(f"training: {train_s:.1f} s, {1e3 * float(np.median(history['step_s'][1:])):.2f} ms per step "
          f"(median: loss, gradient and Adam update of a batch of 128)")
    print(f"elapsed: {time.perf_counter() - START:.1f} s in all")
    print(f"plot: {plot_path}")
    print(f"generated gradient code: {code_path}")
    check(last < first, f"the test loss did not fall ({first:.2f} -> {last:.2f})")
    if not args.quick:
        check(last < 25, f"the test loss {last:.2f} is not below 25 nats per image")
    print("vae_digits: all checks passed")


if __name__ == "__main__":
    main()
