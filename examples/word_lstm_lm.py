"""PyTorch's word-level LSTM language model, trained with gradients from srcgrad.

``RNNModel`` is ``pytorch/examples``' ``word_language_model/model.py`` written with
``srcgrad.nn`` in the same class structure and layer names: an ``Embedding``
encoder, a 2-layer ``nn.LSTM``, ``Dropout`` on its input and output, a ``Linear``
decoder to the vocabulary (its weight optionally tied to the encoder's, ``--tied``;
Press & Wolf 2017) and ``log_softmax``.  The training loop is ``main.py``'s:
truncated backpropagation through time over ``bptt = 35`` words, the LSTM's state
carried from batch to batch as a constant (``repackage_hidden``: here the state is
an argument the gradient is not taken with respect to, so no gradient flows into
the previous batch), the gradient's norm clipped to 0.25 with
``nn.utils.clip_grad_norm_``, plain SGD at step size 20 (or ``--optimizer adam``),
divided by 4 whenever the validation loss stops falling; perplexity printed per
epoch.  The gradient is ``srcgrad.value_and_grad(loss_fn, has_aux=True)``: the
loss, the model's new state (the aux), and the gradient, shaped like the model.

srcgrad reads the model's ``forward`` and every layer it calls (the LSTM's loop
over layers and time steps included) and writes one function computing the loss
and the backward sweep through time; the script saves it and prints part of it.

Data: the docstrings of 36 Python standard-library modules (``_docstrings.py``:
about 250 KB of text, ~42,000 training words, no download), split into words as
``word_language_model/data.py`` splits Wikitext-2.

Run it from the repository root::

    python examples/word_lstm_lm.py                    # 5 epochs, under a minute
    python examples/word_lstm_lm.py --quick            # a few seconds (also SRCGRAD_QUICK=1), as CI does
    python examples/word_lstm_lm.py --tied --optimizer adam
    python examples/word_lstm_lm.py --out DIR          # write the plot and the code to DIR instead of out/

It writes ``out/word_lstm_lm.png`` (the loss per batch and per epoch) and
``out/word_lstm_lm_grad.py`` (the generated code), prints text the trained model
generates (``generate.py``'s sampling), and checks its own results: it exits with a
message starting ``FAILED:`` if the validation perplexity does not fall (or, in
the full run, stays above 200).  Quick mode also compares the gradient of a
small model with tied weights with finite differences.
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


# ---- the model: word_language_model/model.py's RNNModel --------------------------------
class RNNModel(nn.Module):
    """Container module with an encoder, a recurrent module, and a decoder."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False,
                 dtype=np.float32):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp, dtype=dtype)
        if rnn_type in ["LSTM", "GRU"]:
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout, dtype=dtype)
        else:
            nonlinearity = {"RNN_TANH": "tanh", "RNN_RELU": "relu"}[rnn_type]
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout, dtype=dtype)
        self.decoder = nn.Linear(nhid, ntoken, dtype=dtype)
        # "Using the Output Embedding to Improve Language Models" (Press & Wolf 2016)
        if tie_weights:
            if nhid != ninp:
                raise ValueError("When using the tied flag, nhid must be equal to emsize")
            self.decoder.weight = self.encoder.weight
        self.init_weights()
        self.rnn_type = rnn_type
        self.nhid = nhid
        self.nlayers = nlayers

    def init_weights(self):
        initrange = 0.1
        # PyTorch: nn.init.uniform_(self.encoder.weight, -initrange, initrange) etc.; srcgrad.nn.init
        # has no in-place initialisers (uniform_, zeros_), so the arrays are written directly.
        rng = nn.init.generator()
        self.encoder.weight[...] = rng.uniform(-initrange, initrange, self.encoder.weight.shape)
        self.decoder.bias[...] = 0
        self.decoder.weight[...] = rng.uniform(-initrange, initrange, self.decoder.weight.shape)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        decoded = decoded.reshape(-1, self.ntoken)  # (torch: .view)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        dtype = self.encoder.weight.dtype  # (torch: weight.new_zeros)
        if self.rnn_type == "LSTM":
            return (np.zeros((self.nlayers, bsz, self.nhid), dtype),
                    np.zeros((self.nlayers, bsz, self.nhid), dtype))
        return np.zeros((self.nlayers, bsz, self.nhid), dtype)


def loss_fn(model, data, hidden, targets):
    """The batch's mean negative log-likelihood (``criterion = nn.NLLLoss()``), and the
    state after it: the function srcgrad differentiates, with respect to the model."""
    output, hidden = model(data, hidden)
    return F.nll_loss(output, targets), hidden


def repackage_hidden(h):
    """Wraps hidden states in new arrays, to detach them from their history (main.py's).

    With srcgrad there is no history to cut: the state the loss returned is a plain
    array, passed back in as an argument the gradient is not taken with respect to, so
    it is already a constant.  ``srcgrad.stop_gradient`` says so, and would cut the
    gradient inside a differentiated function too."""
    if isinstance(h, np.ndarray):
        return srcgrad.stop_gradient(h)
    return tuple(repackage_hidden(v) for v in h)


# ---- training and evaluation: word_language_model/main.py ------------------------------
def evaluate(model, data_source, bptt, eval_batch_size):
    """Mean loss per word over a batchified split, the state carried through (no gradient)."""
    model.eval()
    total_loss = 0.0
    hidden = model.init_hidden(eval_batch_size)
    for i in range(0, len(data_source) - 1, bptt):
        data, targets = get_batch(data_source, i, bptt)
        output, hidden = model(data, hidden)
        total_loss += len(data) * float(F.nll_loss(output.astype(np.float64), targets))
    return total_loss / (len(data_source) - 1)


def train_epoch(model, step, optimizer, train_data, args, history, log_interval):
    """One pass over the training data; the batch losses appended to ``history``."""
    model.train()
    hidden = model.init_hidden(args.batch_size)
    total_loss, start, timed = 0.0, time.perf_counter(), []
    for batch, i in enumerate(range(0, len(train_data) - 1, args.bptt)):
        data, targets = get_batch(train_data, i, args.bptt)
        # Starting each batch, we detach the hidden state from how it was previously produced.
        # If we didn't, the model would try backpropagating all the way to start of the dataset.
        hidden = repackage_hidden(hidden)
        begin = time.perf_counter()
        (loss, hidden), grads = step(model, data, hidden, targets)
        # `clip_grad_norm` helps prevent the exploding gradient problem in RNNs / LSTMs.
        # (With --tied, srcgrad's total norm counts the tied weight's two parts, encoder.weight and
        # decoder.weight, as two gradients; PyTorch's, the norm of their sum: the clipping differs slightly.)
        nn.utils.clip_grad_norm_(grads, args.clip)
        optimizer.step(grads)
        timed.append(time.perf_counter() - begin)
        history["batch_loss"].append(float(loss))
        total_loss += float(loss)
        if log_interval and batch % log_interval == 0 and batch > 0:
            cur_loss = total_loss / log_interval
            elapsed = time.perf_counter() - start
            print(f"| epoch {history['epoch']:3d} | {batch:5d}/{len(train_data) // args.bptt:5d} batches | "
                  f"lr {optimizer.lr:6.3g} | ms/batch {elapsed * 1000 / log_interval:6.1f} | "
                  f"loss {cur_loss:5.2f} | ppl {math.exp(cur_loss):8.2f}")
            total_loss, start = 0.0, time.perf_counter()
    history["step_s"] += timed[1:]  # (the first step of a run compiles)


def generate(model, corpus, words, temperature, rng):
    """Sample ``words`` words from the trained model (``word_language_model/generate.py``),
    starting from a random word; ``<eos>`` ends a line."""
    model.eval()
    hidden = model.init_hidden(1)
    input = rng.integers(len(corpus.dictionary), size=(1, 1))
    out = []
    for _ in range(words):
        output, hidden = model(input, hidden)
        word_weights = np.exp((output[0].astype(np.float64) - output[0].max()) / temperature)
        word_idx = rng.choice(len(word_weights), p=word_weights / word_weights.sum())  # torch.multinomial
        input[...] = word_idx
        word = corpus.dictionary.idx2word[word_idx]
        out.append("\n" if word == "<eos>" else word + " ")
    return "".join(out)


# ---- the gradient, checked ---------------------------------------------------------------
def check_gradient(seed=0, step=1e-6):
    """srcgrad's gradient of a small tied, 2-layer model (float64, dropout off) against
    central finite differences, on every entry of every parameter.  The tied weight is one
    array held under two names: the gradient gives each name the part that flows through
    it (the embedding's rows, the decoder's product), and their sum is its derivative."""
    nn.init.manual_seed(seed)
    model = RNNModel("LSTM", 12, 5, 5, 2, dropout=0.0, tie_weights=True, dtype=np.float64)
    rng = np.random.default_rng(seed)
    data, targets = rng.integers(0, 12, (4, 3)), rng.integers(0, 12, 12)
    hidden = tuple(0.1 * rng.standard_normal((2, 3, 5)) for _ in range(2))
    grads = dict(srcgrad.grad(loss_fn, has_aux=True)(model, data, hidden, targets)[0].named_parameters())
    grads["encoder.weight"] = grads["encoder.weight"] + grads.pop("decoder.weight")  # one array, two paths
    worst = 0.0
    for name, p in model.named_parameters():
        if name not in grads:  # (decoder.weight: the same array as encoder.weight)
            continue
        numeric = np.zeros_like(p)
        for index in np.ndindex(p.shape):
            saved = p[index]
            p[index] = saved + step
            up = loss_fn(model, data, hidden, targets)[0]
            p[index] = saved - step
            down = loss_fn(model, data, hidden, targets)[0]
            p[index] = saved
            numeric[index] = (up - down) / (2 * step)
        worst = max(worst, float(np.max(np.abs(numeric - grads[name]))))
    check(worst < 1e-7, f"srcgrad's gradient differs from finite differences by {worst:.3g}")
    print(f"gradient check: srcgrad agrees with finite differences on every parameter of a tied "
          f"2-layer LSTM model (largest difference {worst:.1e})")


def show_code(code: str, path: Path) -> None:
    """Save the generated code; print where, and two parts of it: the start of the forward
    sweep (the embedding and dropout inlined) and the start of the LSTM's backward loop
    over time (backpropagation through time, the saved values popped in reverse)."""
    path.write_text(code)
    lines = code.splitlines()
    print(f"---- the gradient code srcgrad generated: one function of {len(lines)} lines, the model's "
          f"forward, the LSTM and every layer inlined (all of it in {path}) ----")
    start = next(i for i, line in enumerate(lines) if line.startswith("def "))
    print("\n".join(lines[start:start + 12]))
    print("    ...")
    back = next(i for i, line in enumerate(lines) if "for t" in line and "reversed(" in line)
    print("\n".join(lines[back - 2:back + 12]))
    print("    ...")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", default=quick_by_default(),
                        help="train briefly on part of the data, for CI (also SRCGRAD_QUICK=1)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "out",
                        help="where to write the plot and the generated code (default: out/)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--emsize", type=int, default=128, help="size of word embeddings")
    parser.add_argument("--nhid", type=int, default=128, help="number of hidden units per layer")
    parser.add_argument("--nlayers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=None, help="initial learning rate (SGD 20, Adam 2e-3)")
    parser.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    parser.add_argument("--clip", type=float, default=0.25, help="gradient clipping")
    parser.add_argument("--epochs", type=int, default=None, help="(default 5; quick: 2)")
    parser.add_argument("--batch_size", type=int, default=20)
    parser.add_argument("--bptt", type=int, default=35, help="sequence length")
    parser.add_argument("--dropout", type=float, default=0.2)
    parser.add_argument("--tied", action="store_true", help="tie the word embedding and softmax weights")
    args = parser.parse_args(argv)
    epochs = args.epochs or (2 if args.quick else 5)
    lr = args.lr or (20.0 if args.optimizer == "sgd" else 2e-3)
    eval_batch_size = 10

    corpus = Corpus()
    train_data = batchify(corpus.train, args.batch_size)
    val_data = batchify(corpus.valid, eval_batch_size)
    if args.quick:  # 12 batches of training data, a fifth of the validation set
        train_data, val_data = train_data[:12 * args.bptt + 1], val_data[:len(val_data) // 5]
    ntokens = len(corpus.dictionary)
    print(f"corpus: {len(corpus.train)} training, {len(corpus.valid)} validation words of the standard "
          f"library's docstrings; vocabulary {ntokens}")

    if args.quick:
        check_gradient(args.seed)
    nn.init.manual_seed(args.seed)
    model = RNNModel("LSTM", ntokens, args.emsize, args.nhid, args.nlayers, args.dropout, args.tied)
    print(model)
    step = srcgrad.value_and_grad(loss_fn, has_aux=True)  # ((loss, hidden), gradient like the model)
    optimizer = (optim.SGD(model.parameters(), lr=lr) if args.optimizer == "sgd"
                 else optim.Adam(model.parameters(), lr=lr))

    args.out.mkdir(parents=True, exist_ok=True)
    code_path = args.out / "word_lstm_lm_grad.py"
    data, targets = get_batch(train_data, 0, args.bptt)
    show_code(srcgrad.source(step, model, data, model.init_hidden(args.batch_size), targets), code_path)

    history = {"batch_loss": [], "step_s": [], "steps_per_epoch": -(-(len(train_data) - 1) // args.bptt),
               "valid_loss": [evaluate(model, val_data, args.bptt, eval_batch_size)]}
    print(f"| before training | valid loss {history['valid_loss'][0]:5.2f} | "
          f"valid ppl {math.exp(history['valid_loss'][0]):8.2f}")
    best_val_loss = None
    train_start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        history["epoch"] = epoch
        epoch_start = time.perf_counter()
        train_epoch(model, step, optimizer, train_data, args, history, 0 if args.quick else 20)
        val_loss = evaluate(model, val_data, args.bptt, eval_batch_size)
        history["valid_loss"].append(val_loss)
        print("-" * 89)
        print(f"| end of epoch {epoch:3d} | time: {time.perf_counter() - epoch_start:5.2f}s | "
              f"valid loss {val_loss:5.2f} | valid ppl {math.exp(val_loss):8.2f}")
        print("-" * 89)
        if best_val_loss is None or val_loss < best_val_loss:
            best_val_loss = val_loss
        else:
            # Anneal the learning rate if no improvement has been seen in the validation dataset.
            optimizer.lr /= 4.0
    train_s = time.perf_counter() - train_start

    plot_path = args.out / "word_lstm_lm.png"
    if plot_language_model(history, plot_path, "2-layer LSTM"):
        print(f"plot: {plot_path}")
    print("---- text the trained model generates (temperature 0.8) ----")
    print(generate(model, corpus, 60 if args.quick else 120, 0.8, np.random.default_rng(args.seed)))
    print("----")
    first, last = math.exp(history["valid_loss"][0]), math.exp(history["valid_loss"][-1])
    print(f"validation perplexity: {first:.1f} -> {last:.1f} after {epochs} epochs")
    print(f"training: {train_s:.1f} s, {1e3 * float(np.median(history['step_s'])):.1f} ms per step "
          f"(median: loss, gradient, clipping and update of {args.batch_size} x {args.bptt} words)")
    print(f"elapsed: {time.perf_counter() - START:.1f} s in all")
    print(f"generated gradient code: {code_path}")
    check(last < first, f"the validation perplexity did not fall ({first:.1f} -> {last:.1f})")
    if not args.quick:
        check(last < 200, f"the validation perplexity {last:.1f} is above 200")
    print("word_lstm_lm: all checks passed")


if __name__ == "__main__":
    main()
