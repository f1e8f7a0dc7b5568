"""PyTorch's own example models, written with ``srcgrad.nn`` in their class structure and
layer names, against PyTorch eager: one training step at the examples' sizes.

Each workload is a pair: the torch model as ``pytorch/examples`` writes it, and the same
class written with ``srcgrad.nn`` (``F`` is ``srcgrad.nn.functional``), loaded from the
torch model's ``state_dict``.  A step is the loss and the gradient of every parameter
(torch: ``zero_grad``, forward, ``backward``; srcgrad: ``value_and_grad(loss)(model, ...)``),
dropout off (``eval()``) so that the two compute the same thing; the gradients are
checked against torch's before anything is timed.

Run from the repository root (torch needed)::

    python -m benchmarks.pytorch_examples            # float32 and float64, every model
    python -m benchmarks.pytorch_examples --quick    # a few repeats, smaller batches
    python -m benchmarks.pytorch_examples --write    # ... and update docs/benchmarks.md
    python -m benchmarks.pytorch_examples --profile mnist_cnn   # top lines by time

The models (``pytorch/examples``, BSD licence; rewritten here, not copied):

- ``mnist_cnn``: ``mnist/main.py``'s ``Net`` (conv 1->32 3x3, conv 32->64 3x3, max pool 2,
  linear 9216->128->10, log-softmax, NLL), batch 64.
- ``vae``: ``vae/main.py``'s ``VAE`` (784->400->(20, 20), 20->400->784), the
  reparameterisation's noise given, BCE (sum) + KL divergence, batch 128.
- ``word_lm``: ``word_language_model``'s ``RNNModel`` with an LSTM (embedding 200, 2
  layers of 200, decoder to 33,278 words as Wikitext-2), sequence 35, batch 20.
"""
from __future__ import annotations

import sys
import time

from benchmarks import _env

if __name__ == "__main__":
    _env.pin_threads(1)

import numpy as np  # noqa: E402

import srcgrad  # noqa: E402
from srcgrad import nn  # noqa: E402
from srcgrad.nn import functional as F  # noqa: E402


# ---- the models, written with srcgrad.nn -------------------------------------------------

class MnistNet(nn.Module):
    def __init__(self, dtype=np.float64):
        self.conv1 = nn.Conv2d(1, 32, 3, 1, dtype=dtype)
        self.conv2 = nn.Conv2d(32, 64, 3, 1, dtype=dtype)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128, dtype=dtype)
        self.fc2 = nn.Linear(128, 10, dtype=dtype)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = x.reshape(x.shape[0], -1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


def mnist_loss(model, x, target):
    return F.nll_loss(model(x), target)


class VAE(nn.Module):
    def __init__(self, dtype=np.float64):
        self.fc1 = nn.Linear(784, 400, dtype=dtype)
        self.fc21 = nn.Linear(400, 20, dtype=dtype)
        self.fc22 = nn.Linear(400, 20, dtype=dtype)
        self.fc3 = nn.Linear(20, 400, dtype=dtype)
        self.fc4 = nn.Linear(400, 784, dtype=dtype)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return F.sigmoid(self.fc4(h3))

    def forward(self, x, eps):
        mu, logvar = self.encode(x.reshape(-1, 784))
        z = mu + eps * np.exp(0.5 * logvar)
        return self.decode(z), mu, logvar


def vae_loss(model, x, eps):
    recon, mu, logvar = model(x, eps)
    bce = F.binary_cross_entropy(recon, x.reshape(-1, 784), reduction="sum")
    kld = -0.5 * np.sum(1 + logvar - mu ** 2 - np.exp(logvar))
    return bce + kld


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.2, dtype=np.float64):
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp, dtype=dtype)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout, dtype=dtype)
        self.decoder = nn.Linear(nhid, ntoken, dtype=dtype)
        self.ntoken = ntoken

    def forward(self, tokens, hidden):
        emb = self.drop(self.encoder(tokens))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).reshape(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden


def word_lm_loss(model, tokens, hidden, targets):
    output, _ = model(tokens, hidden)
    return F.nll_loss(output, targets)


# ---- the same models in torch -------------------------------------------------------------

def _torch_models():
    import torch
    import torch.nn as tnn
    import torch.nn.functional as TF

    class TorchMnistNet(tnn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = tnn.Conv2d(1, 32, 3, 1)
            self.conv2 = tnn.Conv2d(32, 64, 3, 1)
            self.dropout1 = tnn.Dropout(0.25)
            self.dropout2 = tnn.Dropout(0.5)
            self.fc1 = tnn.Linear(9216, 128)
            self.fc2 = tnn.Linear(128, 10)

        def forward(self, x):
            x = TF.relu(self.conv1(x))
            x = TF.relu(self.conv2(x))
            x = TF.max_pool2d(x, 2)
            x = self.dropout1(x)
            x = torch.flatten(x, 1)
            x = TF.relu(self.fc1(x))
            x = self.dropout2(x)
            return TF.log_softmax(self.fc2(x), dim=1)

    class TorchVAE(tnn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = tnn.Linear(784, 400)
            self.fc21 = tnn.Linear(400, 20)
            self.fc22 = tnn.Linear(400, 20)
            self.fc3 = tnn.Linear(20, 400)
            self.fc4 = tnn.Linear(400, 784)

        def forward(self, x, eps):
            h1 = TF.relu(self.fc1(x.view(-1, 784)))
            mu, logvar = self.fc21(h1), self.fc22(h1)
            z = mu + eps * torch.exp(0.5 * logvar)
            return torch.sigmoid(self.fc4(TF.relu(self.fc3(z)))), mu, logvar

    class TorchRNNModel(tnn.Module):
        def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.2):
            super().__init__()
            self.drop = tnn.Dropout(dropout)
            self.encoder = tnn.Embedding(ntoken, ninp)
            self.rnn = tnn.LSTM(ninp, nhid, nlayers, dropout=dropout)
            self.decoder = tnn.Linear(nhid, ntoken)
            self.ntoken = ntoken

        def forward(self, tokens, hidden):
            emb = self.drop(self.encoder(tokens))
            output, hidden = self.rnn(emb, hidden)
            decoded = self.decoder(self.drop(output)).view(-1, self.ntoken)
            return TF.log_softmax(decoded, dim=1), hidden

    def mnist(model, x, target):
        return TF.nll_loss(model(x), target)

    def vae(model, x, eps):
        recon, mu, logvar = model(x, eps)
        bce = TF.binary_cross_entropy(recon, x.view(-1, 784), reduction="sum")
        return bce - 0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())

    def word_lm(model, tokens, hidden, targets):
        output, _ = model(tokens, hidden)
        return TF.nll_loss(output, targets)

    return {"mnist_cnn": (TorchMnistNet, mnist), "vae": (TorchVAE, vae), "word_lm": (TorchRNNModel, word_lm)}


# ---- workloads ------------------------------------------------------------------------------

WORD_LM = dict(ntoken=33278, ninp=200, nhid=200, nlayers=2)


def workload(name, dtype, quick=False, seed=0):
    """``(srcgrad model, srcgrad loss, torch model, torch loss, srcgrad args, torch args)``,
    the srcgrad model loaded from the torch model's ``state_dict``, both in ``eval()``."""
    import torch

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    tdtype = torch.float64 if dtype == np.float64 else torch.float32
    TorchModel, torch_loss = _torch_models()[name]
    if name == "mnist_cnn":
        batch = 8 if quick else 64
        ours, loss = MnistNet(dtype), mnist_loss
        theirs = TorchModel()
        x = rng.random((batch, 1, 28, 28)).astype(dtype)
        target = rng.integers(0, 10, batch)
        args = (x, target)
    elif name == "vae":
        batch = 16 if quick else 128
        ours, loss = VAE(dtype), vae_loss
        theirs = TorchModel()
        args = (rng.random((batch, 1, 28, 28)).astype(dtype), rng.standard_normal((batch, 20)).astype(dtype))
    elif name == "word_lm":
        sizes = dict(WORD_LM, ntoken=1000) if quick else WORD_LM
        seq, batch = (5, 4) if quick else (35, 20)
        ours, loss = RNNModel(**sizes, dtype=dtype), word_lm_loss
        theirs = TorchModel(**sizes)
        tokens = rng.integers(0, sizes["ntoken"], (seq, batch))
        hidden = (np.zeros((sizes["nlayers"], batch, sizes["nhid"]), dtype),) * 2
        args = (tokens, hidden, rng.integers(0, sizes["ntoken"], seq * batch))
    else:
        raise KeyError(name)
    theirs = theirs.to(tdtype).eval()
    ours.load_state_dict(theirs.state_dict())
    ours.eval()
    return ours, loss, theirs, torch_loss, args, _to_torch(args, tdtype)


def _to_torch(value, tdtype):
    import torch

    if isinstance(value, tuple):
        return tuple(_to_torch(v, tdtype) for v in value)
    if value.dtype.kind == "f":
        return torch.tensor(value, dtype=tdtype)
    return torch.tensor(value)


def step_pair(name, dtype, quick=False):
    """Two functions, one training step each (srcgrad's, torch's), returning
    ``(loss, {parameter name: gradient})``."""
    ours, loss, theirs, torch_loss, args, targs = workload(name, dtype, quick)
    value_and_grad = srcgrad.value_and_grad(loss)

    def srcgrad_step():
        value, grads = value_and_grad(ours, *args)
        return value, grads

    def torch_step():
        theirs.zero_grad()
        value = torch_loss(theirs, *targs)
        value.backward()
        return value

    return srcgrad_step, torch_step, ours, theirs


def check(name, dtype=np.float64, quick=True, rtol=1e-7, pair=None):
    """The largest relative difference between srcgrad's gradients and torch's (names as
    torch's ``named_parameters``); raises AssertionError above ``rtol``.  ``pair``: what
    :func:`step_pair` gave, to check those steps."""
    srcgrad_step, torch_step, ours, theirs = pair or step_pair(name, dtype, quick)
    value, grads = srcgrad_step()
    torch_value = torch_step()
    ours_by_name = dict(grads.named_parameters())
    worst = abs(float(value) - torch_value.item()) / max(abs(torch_value.item()), 1e-30)
    for key, p in theirs.named_parameters():
        g, t = np.asarray(ours_by_name[key], np.float64), p.grad.detach().double().numpy()
        scale = max(np.max(np.abs(t)), 1e-30)
        worst = max(worst, float(np.max(np.abs(g - t))) / scale)
    assert worst <= rtol, f"{name}: srcgrad's gradients differ from torch's by {worst:.2e} (relative)"
    return worst


def _median_ms(fn, repeats):
    fn()  # (compiled, warm)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def run(names, quick=False):
    import torch

    torch.set_num_threads(1)
    rows = []
    for name in names:
        for dtype in (np.float32, np.float64):
            pair = step_pair(name, dtype, quick)
            srcgrad_step, torch_step, _, _ = pair
            start = time.perf_counter()
            srcgrad_step()  # (compiles: the first dtype's; the second's is specialised again)
            compile_s = time.perf_counter() - start
            worst = check(name, dtype, quick, rtol=1e-3 if dtype == np.float32 else 1e-7, pair=pair)
            repeats = 3 if quick else 20
            # (interleaved, so that a slow spell of the machine falls on both)
            ours, theirs = [], []
            for _ in range(2):
                theirs.append(_median_ms(torch_step, repeats))
                ours.append(_median_ms(srcgrad_step, repeats))
            rows.append((name, np.dtype(dtype).name, min(ours), min(theirs), min(ours) / min(theirs),
                         compile_s, worst))
    return rows


def table(rows) -> str:
    lines = ["| model | dtype | srcgrad, ms | torch eager, ms | srcgrad / torch | first call (compile), s "
             "| grads vs torch (max rel.) |", "|---|---|---|---|---|---|---|"]
    for name, dtype, ours, theirs, ratio, compile_s, worst in rows:
        lines.append(f"| {name} | {dtype} | {ours:.2f} | {theirs:.2f} | **{ratio:.2f}x** | {compile_s:.2f} "
                     f"| {worst:.1e} |")
    return "\n".join(lines)


def profile(name, dtype=np.float64, top=5, repeats=5):
    """The ``top`` lines of srcgrad's generated step by time, printed: each line of generated
    code timed from its start to the next line's (a trace function, so the step runs slower,
    but the lines' shares hold), with the user's line it came from."""
    import linecache

    srcgrad_step, _, _, _ = step_pair(name, dtype)
    srcgrad_step()
    spent: dict = {}
    last = [None, 0.0]

    def tracer(frame, event, arg):
        if not frame.f_code.co_filename.startswith("<srcgrad"):
            return None
        if event in ("line", "return"):
            now = time.perf_counter()
            if last[0] is not None:
                spent[last[0]] = spent.get(last[0], 0.0) + now - last[1]
            last[0], last[1] = ((frame.f_code.co_filename, frame.f_lineno) if event == "line" else None), now
        return tracer
    sys.settrace(tracer)
    try:
        for _ in range(repeats):
            srcgrad_step()
    finally:
        sys.settrace(None)
    total = sum(spent.values())
    print(f"{name} ({np.dtype(dtype).name}): {1e3 * total / repeats:.1f} ms per step in generated lines")
    for (filename, line), seconds in sorted(spent.items(), key=lambda kv: -kv[1])[:top]:
        text = linecache.getline(filename, line).strip()
        print(f"  {100 * seconds / total:5.1f}%  {text[:110]}")


NAMES = ("mnist_cnn", "vae", "word_lm")

if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--profile" in argv:
        profile(argv[argv.index("--profile") + 1], top=12)
        sys.exit(0)
    quick = "--quick" in argv
    text = table(run(NAMES, quick))
    print(_env.machine_line(1))
    print(text)
    if "--write" in argv:
        _env.write_section("pytorch_examples", _env.machine_line(1) + "\n\n" + text + "\n")
