"""The text the language-model examples train on: the docstrings of Python's standard library.

``word_lstm_lm.py`` and ``transformer_lm.py`` need a corpus of real English that
ships with what is installed, so that nothing is downloaded.  Python's own
documentation does: the docstrings of 36 standard-library modules (each
module's, its public classes' and functions', and the classes' public methods'),
gathered with ``inspect.getdoc`` as ``pydoc`` shows them, about 250 KB of text
(the exact text, and so the numbers the examples print, follow the Python version).

As PyTorch's ``word_language_model/data.py`` does with Wikitext-2, the text is
split into words and each line ends with ``<eos>``; here a line is a paragraph of
a docstring (its wrapped lines joined), words are lower-cased runs of letters
(``don't`` one word), numbers, and the punctuation ``. , ; : ( )``; other symbols
are dropped.  Every tenth docstring goes to the validation set and the one after
it to the test set, the rest to training (about 42,000, 5,300 and 3,900 words).
Words seen fewer than ``min_count`` times in the training set are ``<unk>``, as
Wikitext's rare words are (about 1,470 words in the vocabulary).
"""
from __future__ import annotations

import importlib
import inspect
import re
from collections import Counter

import numpy as np

MODULES = ("argparse", "ast", "bisect", "calendar", "collections", "configparser", "contextlib", "copy",
           "csv", "dataclasses", "datetime", "difflib", "enum", "fractions", "functools", "heapq", "inspect",
           "json", "logging", "pathlib", "pickle", "pprint", "random", "shlex", "shutil", "statistics",
           "string", "subprocess", "tempfile", "textwrap", "threading", "traceback", "typing", "unittest",
           "warnings", "zipfile")

WORD = re.compile(r"[a-z]+(?:'[a-z]+)?|[0-9]+|[.,;:()]")


def docstrings(modules=MODULES) -> list[str]:
    """The docstrings of ``modules``, each once, in a fixed order: each module's own, then
    its public classes' and functions' (those it defines, by name), each class followed by
    its public methods'."""
    found, seen = [], set()

    def add(obj):
        doc = inspect.getdoc(obj)
        if doc and doc not in seen:
            seen.add(doc)
            found.append(doc)

    for name in modules:
        module = importlib.import_module(name)
        add(module)
        for key, value in sorted(vars(module).items()):
            if key.startswith("_") or getattr(value, "__module__", None) != module.__name__:
                continue
            if inspect.isclass(value) or inspect.isfunction(value):
                add(value)
            if inspect.isclass(value):
                for method_name, method in sorted(vars(value).items()):
                    if not method_name.startswith("_") and inspect.isfunction(method):
                        add(method)
    return found


def paragraphs(doc: str) -> list[list[str]]:
    """A docstring's paragraphs (blank-line separated), each as its list of words."""
    out = []
    for paragraph in re.split(r"\n\s*\n", doc):
        words = WORD.findall(paragraph.lower())
        if words:
            out.append(words)
    return out


class Dictionary:
    """Words and their indices (``word_language_model/data.py``'s ``Dictionary``)."""

    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus:
    """``train``, ``valid`` and ``test``: each the whole split as one (words,) integer array,
    paragraphs ending with ``<eos>`` (``word_language_model/data.py``'s ``Corpus``, on the
    standard library's docstrings instead of Wikitext-2's files)."""

    def __init__(self, min_count: int = 3):
        splits = {"train": [], "valid": [], "test": []}
        for i, doc in enumerate(docstrings()):
            split = "valid" if i % 10 == 8 else "test" if i % 10 == 9 else "train"
            splits[split] += [words + ["<eos>"] for words in paragraphs(doc)]
        counts = Counter(word for line in splits["train"] for word in line)
        self.dictionary = Dictionary()
        self.dictionary.add_word("<unk>")
        for word, count in counts.items():  # (in order of first appearance)
            if count >= min_count:
                self.dictionary.add_word(word)
        self.train, self.valid, self.test = (self.tokenize(splits[key]) for key in ("train", "valid", "test"))

    def tokenize(self, lines):
        unk, index = self.dictionary.word2idx["<unk>"], self.dictionary.word2idx
        return np.array([index.get(word, unk) for line in lines for word in line], dtype=np.int64)


def batchify(data, bsz):
    """The word sequence cut into ``bsz`` columns, (len // bsz, bsz): each column a stream
    the model reads on from batch to batch (``word_language_model/main.py``'s ``batchify``)."""
    nbatch = len(data) // bsz
    return data[:nbatch * bsz].reshape(bsz, -1).T.copy()


def get_batch(source, i, bptt):
    """``bptt`` rows of ``source`` from row ``i`` and their next words, flattened:
    ``data`` (seq_len, bsz), ``target`` (seq_len * bsz,) (``main.py``'s ``get_batch``)."""
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].reshape(-1)
    return data, target


def plot_language_model(history, path, model: str) -> bool:
    """The training batches' and the validation's loss per word (and perplexity, on the right)
    of a language model trained on this corpus, saved to ``path``; False without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no plot")
        return False
    matplotlib.use("Agg")  # write a PNG; never needs a display
    import math

    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    steps = np.arange(1, len(history["batch_loss"]) + 1) / history["steps_per_epoch"]
    ax.plot(steps, history["batch_loss"], color="0.7", lw=0.8, label="training batch")
    epochs = np.arange(len(history["valid_loss"]))
    ax.plot(epochs, history["valid_loss"], "o-", label="validation")
    ax.set(xlabel="epoch", ylabel="loss per word (nats)",
           title=f"{model} on stdlib docstrings, gradients by srcgrad "
                 f"(valid ppl {math.exp(history['valid_loss'][-1]):.0f})")
    right = ax.secondary_yaxis("right", functions=(np.exp, lambda ppl: np.log(np.maximum(ppl, 1e-300))))
    right.set_yticks([50, 100, 200, 500, 1000, 2000, 5000])
    right.set_ylabel("perplexity")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
