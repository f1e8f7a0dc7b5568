"""A small Transformer language model, PyTorch's tutorial model, trained with gradients from srcgrad.

``TransformerModel`` is the model of PyTorch's tutorial "Language Modeling with
nn.Transformer" (and of ``word_language_model/model.py``) written with ``srcgrad.nn``
in the same class structure and layer names: an ``nn.Embedding`` scaled by
``sqrt(d_model)``, a ``PositionalEncoding`` module whose sines and cosines are a
buffer (``register_buffer("pe", pe)``: state, not a parameter; no gradient, never
stepped), an ``nn.TransformerEncoder`` of 2 ``nn.TransformerEncoderLayer``\\ s
(multi-head self-attention and a feed-forward network, each with a residual
connection, layer normalisation and dropout; Vaswani et al. 2017) with the causal
mask ``nn.generate_square_subsequent_mask`` (each position attends to itself and the
positions before it), and a ``Linear`` decoder to the vocabulary.  The tutorial's
training loop: cross-entropy of the next word over ``bptt = 35`` positions, the
gradient's norm clipped to 0.5 (``nn.utils.clip_grad_norm_``), SGD at step size 5
decayed by 0.95 each epoch (``optim.lr_scheduler.StepLR``), perplexity per epoch.

srcgrad reads the loss, the model's ``forward``, the positional encoding, and the
encoder's layers (attention, layer norm, dropout, the feed-forward network) and
writes one function computing the loss and its backward sweep; the script saves
it and prints part of it.

Data: the docstrings of 36 Python standard-library modules (``_docstrings.py``:
about 250 KB of text, ~42,000 training words, no download), the text
``word_lstm_lm.py`` trains on.

Run it from the repository root::

    python examples/transformer_lm.py            # 5 epochs, under a minute
    python examples/transformer_lm.py --quick    # a few seconds (also SRCGRAD_QUICK=1), as CI does
    python examples/transformer_lm.py --out DIR  # write the plot and the code to DIR instead of out/

It writes ``out/transformer_lm.png`` (the loss per batch and per epoch) and
``out/transformer_lm_grad.py`` (the generated code), prints text the trained model
generates, and checks its own results: it exits with a message starting ``FAILED:``
if the validation perplexity does not fall (or, in the full run, stays above 250).
Quick mode also compares the gradient of a small model with finite differences,
and checks that the mask keeps the model causal (a later word changes no earlier
prediction).
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

START = time.perf_counter()  # the elapsed time printed at the end includes the imports

import numpy as np
from _docstrings import Corpus, batchify, get_batch, plot_language_model
from _gallery import check, quick_by_default

try:
    import srcgrad
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import srcgrad
from srcgrad import nn, optim
from srcgrad.nn import functional as F


# ---- the model: the tutorial's TransformerModel and PositionalEncoding ----------------------
class TransformerModel(nn.Module):
    def __init__(self, ntoken, d_model, nhead, d_hid, nlayers, dropout=0.5, dtype=np.float32):
        super().__init__()
        self.model_type = "Transformer"
        self.pos_encoder = PositionalEncoding(d_model, dropout, dtype=dtype)
        encoder_layers = nn.TransformerEncoderLayer(d_model, nhead, d_hid, dropout, dtype=dtype)
        self.transformer_encoder = nn.TransformerEncoder(encoder_layers, nlayers)
        self.embedding = nn.Embedding(ntoken, d_model, dtype=dtype)
        self.d_model = d_model
        self.linear = nn.Linear(d_model, ntoken, dtype=dtype)
        self.init_weights()

    def init_weights(self):
        initrange = 0.1
        # PyTorch: self.embedding.weight.data.uniform_(-initrange, initrange) etc.; the arrays are
        # written in place here (srcgrad.nn.init has no in-place initialisers).
        rng = nn.init.generator()
        self.embedding.weight[...] = rng.uniform(-initrange, initrange, self.embedding.weight.shape)
        self.linear.bias[...] = 0
        self.linear.weight[...] = rng.uniform(-initrange, initrange, self.linear.weight.shape)

    def forward(self, src, src_mask=None):
        """
        Arguments:
            src: integer array, shape ``[seq_len, batch_size]``
            src_mask: float array, shape ``[seq_len, seq_len]`` (default: the causal mask)

        Returns:
            output: array of shape ``[seq_len, batch_size, ntoken]``
        """
        src = self.embedding(src) * math.sqrt(self.d_model)
        src = self.pos_encoder(src)
        if src_mask is None:
            # (torch: nn.Transformer.generate_square_subsequent_mask(len(src)).to(device))
            src_mask = nn.generate_square_subsequent_mask(len(src), dtype=src.dtype)
        output = self.transformer_encoder(src, src_mask)
        output = self.linear(output)
        return output


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000, dtype=np.float32):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = np.arange(max_len)[:, None]
        div_term = np.exp(np.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = np.zeros((max_len, 1, d_model), dtype=dtype)
        pe[:, 0, 0::2] = np.sin(position * div_term)
        pe[:, 0, 1::2] = np.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        """
        Arguments:
            x: array, shape ``[seq_len, batch_size, embedding_dim]``
        """
        x = x + self.pe[:x.shape[0]]
        return self.dropout(x)


def loss_fn(model, data, targets):
    """The batch's mean cross-entropy of the next word (``criterion = nn.CrossEntropyLoss()``):
    the function srcgrad differentiates, with respect to the model."""
    output = model(data)
    output_flat = output.reshape(-1, model.linear.out_features)  # (torch: .view(-1, ntokens))
    return F.cross_entropy(output_flat, targets)


# ---- training and evaluation: the tutorial's train() and evaluate() ------------------------
def evaluate(model, eval_data, bptt):
    """Mean loss per word over a batchified split (no gradient)."""
    model.eval()
    total_loss = 0.0
    for i in range(0, len(eval_data) - 1, bptt):
        data, targets = get_batch(eval_data, i, bptt)
        total_loss += len(data) * float(loss_fn(model, data, targets))
    return total_loss / (len(eval_data) - 1)


def train_epoch(model, step, optimizer, train_data, bptt, history, log_interval):
    """One pass over the training data: clipped SGD steps; the batch losses appended to ``history``."""
    model.train()
    total_loss, start, timed = 0.0, time.perf_counter(), []
    num_batches = len(train_data) // bptt
    for batch, i in enumerate(range(0, len(train_data) - 1, bptt)):
        data, targets = get_batch(train_data, i, bptt)
        begin = time.perf_counter()
        loss, grads = step(model, data, targets)
        nn.utils.clip_grad_norm_(grads, 0.5)
        optimizer.step(grads)
        timed.append(time.perf_counter() - begin)
        history["batch_loss"].append(float(loss))
        total_loss += float(loss)
        if log_interval and batch % log_interval == 0 and batch > 0:
            cur_loss = total_loss / log_interval
            ms_per_batch = (time.perf_counter() - start) * 1000 / log_interval
            print(f"| epoch {history['epoch']:3d} | {batch:5d}/{num_batches:5d} batches | "
                  f"lr {optimizer.lr:02.2f} | ms/batch {ms_per_batch:5.2f} | "
                  f"loss {cur_loss:5.2f} | ppl {math.exp(cur_loss):8.2f}")
            total_loss, start = 0.0, time.perf_counter()
    history["step_s"] += timed[1:]  # (the first step of a run compiles)


def generate(model, corpus, words, temperature, rng, context=35):
    """Sample ``words`` words, one at a time, each from the model's prediction at the last
    position given (up to) the ``context`` words before it; ``<eos>`` ends a line."""
    model.eval()
    tokens = [int(rng.integers(len(corpus.dictionary)))]
    out = []
    for _ in range(words):
        src = np.array(tokens[-context:])[:, None]  # (seq_len, batch of 1)
        logits = model(src)[-1, 0].astype(np.float64) / temperature
        weights = np.exp(logits - logits.max())
        word_idx = int(rng.choice(len(weights), p=weights / weights.sum()))
        tokens.append(word_idx)
        word = corpus.dictionary.idx2word[word_idx]
        out.append("\n" if word == "<eos>" else word + " ")
    return "".join(out)


# ---- checks --------------------------------------------------------------------------------
def check_gradient(seed=0, step=1e-6):
    """srcgrad's gradient of a small model (float64, dropout off) against central finite
    differences, on every entry of every parameter; and the buffer ``pe`` is no parameter."""
    nn.init.manual_seed(seed)
    model = TransformerModel(11, 4, 2, 6, 2, dropout=0.0, dtype=np.float64)
    rng = np.random.default_rng(seed)
    data, targets = rng.integers(0, 11, (5, 2)), rng.integers(0, 11, 10)
    grads = dict(srcgrad.grad(loss_fn)(model, data, targets).named_parameters())
    check("pos_encoder.pe" not in grads and "pos_encoder.pe" in model.state_dict(),
          "the positional encoding should be a buffer: in the state, not among the parameters")
    worst = 0.0
    for name, p in model.named_parameters():
        numeric = np.zeros_like(p)
        for index in np.ndindex(p.shape):
            saved = p[index]
            p[index] = saved + step
            up = loss_fn(model, data, targets)
            p[index] = saved - step
            down = loss_fn(model, data, targets)
            p[index] = saved
            numeric[index] = (up - down) / (2 * step)
        worst = max(worst, float(np.max(np.abs(numeric - grads[name]))))
    check(worst < 1e-7, f"srcgrad's gradient differs from finite differences by {worst:.3g}")
    print(f"gradient check: srcgrad agrees with finite differences on every parameter of a 2-layer "
          f"TransformerModel (largest difference {worst:.1e}); pos_encoder.pe is a buffer, no gradient")

    # Causal: with the mask, changing the last word changes no earlier position's output.
    changed = data.copy()
    changed[-1] = (changed[-1] + 1) % 11
    before, after = model(data), model(changed)
    check(np.allclose(before[:-1], after[:-1]) and not np.allclose(before[-1], after[-1]),
          "the causal mask should hide later words from earlier positions")
    print("causal mask: changing the last word changes only the last position's prediction")


def show_code(code: str, path: Path) -> None:
    """Save the generated code; print where, and two parts of it: the positional encoding
    (the buffer ``pe`` read, added, and dropout) and the attention's scores and mask."""
    path.write_text(code)
    lines = code.splitlines()
    print(f"---- the gradient code srcgrad generated: one function of {len(lines)} lines, the model's "
          f"forward and every layer inlined (all of it in {path}) ----")
    start = next(i for i, line in enumerate(lines) if line.startswith("def "))
    print(lines[start])
    print("    ...")
    encoding = next(i for i, line in enumerate(lines) if "x = x + self.pe[" in line)
    print("\n".join(lines[encoding:encoding + 8]))
    print("    ...")
    attention = next(i for i, line in enumerate(lines) if "# transformer.py:" in line and "scores = " in line)
    print("\n".join(lines[attention:attention + 10]))
    print("    ...")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", default=quick_by_default(),
                        help="train briefly on part of the data, for CI (also SRCGRAD_QUICK=1)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "out",
                        help="where to write the plot and the generated code (default: out/)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=None, help="(default 5; quick: 2)")
    args = parser.parse_args(argv)
    epochs = args.epochs or (2 if args.quick else 5)
    batch_size, eval_batch_size, bptt = 20, 10, 35
    emsize, d_hid, nlayers, nhead, dropout = 128, 256, 2, 4, 0.2
    lr = 5.0

    corpus = Corpus()
    train_data = batchify(corpus.train, batch_size)
    val_data = batchify(corpus.valid, eval_batch_size)
    if args.quick:  # 12 batches of training data, a fifth of the validation set
        train_data, val_data = train_data[:12 * bptt + 1], val_data[:len(val_data) // 5]
    ntokens = len(corpus.dictionary)
    print(f"corpus: {len(corpus.train)} training, {len(corpus.valid)} validation words of the standard "
          f"library's docstrings; vocabulary {ntokens}")

    if args.quick:
        check_gradient(args.seed)
    nn.init.manual_seed(args.seed)
    model = TransformerModel(ntokens, emsize, nhead, d_hid, nlayers, dropout)
    print(model)
    print(f"buffers: {[name for name, _ in model.named_buffers()]} (not among the "
          f"{len(model.parameters())} parameters)")
    step = srcgrad.value_and_grad(loss_fn)  # (loss, gradient shaped like the model)
    optimizer = optim.SGD(model.parameters(), lr=lr)
    scheduler = optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.95)

    args.out.mkdir(parents=True, exist_ok=True)
    code_path = args.out / "transformer_lm_grad.py"
    show_code(srcgrad.source(step, model, *get_batch(train_data, 0, bptt)), code_path)

    history = {"batch_loss": [], "step_s": [], "steps_per_epoch": -(-(len(train_data) - 1) // bptt),
               "valid_loss": [evaluate(model, val_data, bptt)]}
    print(f"| before training | valid loss {history['valid_loss'][0]:5.2f} | "
          f"valid ppl {math.exp(history['valid_loss'][0]):8.2f}")
    train_start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        history["epoch"] = epoch
        epoch_start = time.perf_counter()
        train_epoch(model, step, optimizer, train_data, bptt, history, 0 if args.quick else 20)
        val_loss = evaluate(model, val_data, bptt)
        history["valid_loss"].append(val_loss)
        print("-" * 89)
        print(f"| end of epoch {epoch:3d} | time: {time.perf_counter() - epoch_start:5.2f}s | "
              f"valid loss {val_loss:5.2f} | valid ppl {math.exp(val_loss):8.2f}")
        print("-" * 89)
        scheduler.step()
    train_s = time.perf_counter() - train_start

    plot_path = args.out / "transformer_lm.png"
    if plot_language_model(history, plot_path, "Transformer LM"):
        print(f"plot: {plot_path}")
    print("---- text the trained model generates (temperature 0.8) ----")
    print(generate(model, corpus, 60 if args.quick else 120, 0.8, np.random.default_rng(args.seed)))
    print("----")
    first, last = math.exp(history["valid_loss"][0]), math.exp(history["valid_loss"][-1])
    print(f"validation perplexity: {first:.1f} -> {last:.1f} after {epochs} epochs")
    print(f"training: {train_s:.1f} s, {1e3 * float(np.median(history['step_s'])):.1f} ms per step "
          f"(median: loss, gradient, clipping and update of {batch_size} x {bptt} words)")
    print(f"elapsed: {time.perf_counter() - START:.1f} s in all")
    print(f"generated gradient code: {code_path}")
    check(last < first, f"the validation perplexity did not fall ({first:.1f} -> {last:.1f})")
    if not args.quick:
        check(last < 250, f"the validation perplexity {last:.1f} is above 250")
    print("transformer_lm: all checks passed")


if __name__ == "__main__":
    main()
