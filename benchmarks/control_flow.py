"""Control flow: srcgrad against hand-written NumPy adjoints (and HIPS autograd, PyTorch eager).

Four workloads, each a gradient step whose forward pass has a loop:

- **dynamic net** -- the tutorial's control-flow and weight-sharing net:
  ``Linear+ReLU``, then the shared middle ``Linear+ReLU`` applied a depth drawn
  by ``random.randint(0, 3)`` times (written as a call to the user's own
  function ``middle_layer``), then ``Linear`` and a squared-error loss; N=64,
  D_in=1000, H=100, D_out=10.  ``random`` is seeded identically before each
  implementation's timed batch, so all of them see the same depth sequence.
  Also timed: the same net with the layer written inline in the loop body,
  which isolates the cost of a call to a user function.
- **RNN** -- ``h = np.tanh(xs[t] @ wx + h @ wh + b)`` for T=100 steps, batch 8,
  input 16, hidden 32; loss ``np.sum(h ** 2)`` of the final ``h``; against
  hand-written backpropagation through time.
- **scalar loop** -- ``x = x - 0.001 * np.sin(x) * x`` 1000 times on a Python
  float; against a plain-Python derivative loop (forward storing ``x`` and
  ``sin(x)``, backward multiplying the local derivatives).
- **memory** -- peak memory of 100 steps of ``h = np.tanh(h @ w)`` on 500x500
  matrices, measured with :mod:`tracemalloc` (NumPy reports its allocations to
  it) and as the rise of the peak resident set, each implementation in a fresh
  process; against a hand-written push/pop adjoint.

Every implementation's gradients are checked against the hand-written ones
before anything is timed.  Peers (``autograd``, ``torch`` for CPU) are used
when installed (``pip install '.[bench]'``) and skipped with a note otherwise.

Run from the repository root::

    python -m benchmarks.control_flow            # print the tables
    python -m benchmarks.control_flow --write    # ... and update docs/benchmarks.md
    python -m benchmarks.control_flow --quick    # tiny sizes, a few repeats (the smoke test)
    python -m benchmarks.control_flow --threads 2
"""
from __future__ import annotations

import sys

from benchmarks import _env

# BLAS libraries read their thread count once, when NumPy loads them: pin it
# before the NumPy import below (so that import is deliberately not at the top).
_PINNED_AT_IMPORT = None
if __name__ == "__main__":
    _PINNED_AT_IMPORT = _env.threads_from_argv(sys.argv[1:])
    _env.pin_threads(_PINNED_AT_IMPORT)

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import srcgrad  # noqa: E402
from benchmarks.two_layer import Stats  # noqa: E402

SECTION = "control_flow"
COMMAND = "python -m benchmarks.control_flow --write"
ROOT = Path(__file__).resolve().parent.parent
PEERS = ("autograd", "torch")
# Gradient agreement before timing, as max|g - r| / max|r| per gradient: the
# same float64 operations in (nearly) the same order, so only rounding differs;
# peers use other kernels (PyTorch its own BLAS) and summation orders.
SRCGRAD_RTOL = 1e-10
PEER_RTOL = 1e-8
# Seeds whose first random.randint(0, 3) draws depth 3, 1, 0 and 2: checking
# gradients under these covers every depth of the dynamic net.
DEPTH_SEEDS = (0, 1, 2, 5)


# ---------------------------------------------------------------------------
# The functions srcgrad differentiates (what a user writes).


def middle_layer(h, w_mid, b_mid):
    """The shared middle layer: Linear + ReLU."""
    return np.maximum(h @ w_mid + b_mid, 0)


def dynamic_net(x, w_in, b_in, w_mid, b_mid, w_out, b_out, y):
    """The tutorial's dynamic net: the shared middle layer applied 0-3 times."""
    h = np.maximum(x @ w_in + b_in, 0)
    for _ in range(random.randint(0, 3)):
        h = middle_layer(h, w_mid, b_mid)
    y_pred = h @ w_out + b_out
    return np.sum((y_pred - y) ** 2)


def dynamic_net_inline(x, w_in, b_in, w_mid, b_mid, w_out, b_out, y):
    """The same net with the middle layer written in the loop body."""
    h = np.maximum(x @ w_in + b_in, 0)
    for _ in range(random.randint(0, 3)):
        h = np.maximum(h @ w_mid + b_mid, 0)
    y_pred = h @ w_out + b_out
    return np.sum((y_pred - y) ** 2)


def rnn(xs, wx, wh, b):
    """An Elman RNN over ``xs`` (T, batch, input); the loss is the final state's squared norm."""
    h = np.zeros((xs.shape[1], wh.shape[0]))
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ wx + h @ wh + b)
    return np.sum(h**2)


def scalar_loop(x):
    """A scalar recurrence on a Python float."""
    for i in range(1000):
        x = x - 0.001 * np.sin(x) * x
    return x


def tanh_chain(h, w):
    """100 steps of a tanh recurrence: the stack of saved values is the memory."""
    for i in range(100):
        h = np.tanh(h @ w)
    return np.sum(h)


# ---------------------------------------------------------------------------
# Hand-written references: what a careful person writes in NumPy.


def hand_dynamic_net(x, w_in, b_in, w_mid, b_mid, w_out, b_out, y):
    """Forward keeping each layer's output (the next layer's input, and its ReLU mask); backward."""
    h = np.maximum(x @ w_in + b_in, 0)
    hs = [h]
    for _ in range(random.randint(0, 3)):
        h = np.maximum(h @ w_mid + b_mid, 0)
        hs.append(h)
    y_pred = h @ w_out + b_out
    g = 2.0 * (y_pred - y)
    w_out_bar = h.T @ g
    b_out_bar = g.sum(axis=0)
    g_h = g @ w_out.T
    w_mid_bar = np.zeros_like(w_mid)
    b_mid_bar = np.zeros_like(b_mid)
    for k in range(len(hs) - 1, 0, -1):
        g_z = g_h * (hs[k] > 0)
        w_mid_bar += hs[k - 1].T @ g_z
        b_mid_bar += g_z.sum(axis=0)
        g_h = g_z @ w_mid.T
    g_z = g_h * (hs[0] > 0)
    w_in_bar = x.T @ g_z
    b_in_bar = g_z.sum(axis=0)
    return w_in_bar, b_in_bar, w_mid_bar, b_mid_bar, w_out_bar, b_out_bar


def hand_rnn(xs, wx, wh, b):
    """Backpropagation through time, accumulating the weight gradients step by step."""
    h = np.zeros((xs.shape[1], wh.shape[0]))
    hs = [h]
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ wx + h @ wh + b)
        hs.append(h)
    g_h = 2.0 * h
    wx_bar = np.zeros_like(wx)
    wh_bar = np.zeros_like(wh)
    b_bar = np.zeros_like(b)
    for t in range(xs.shape[0] - 1, -1, -1):
        g_z = g_h * (1.0 - hs[t + 1] ** 2)
        wx_bar += xs[t].T @ g_z
        wh_bar += hs[t].T @ g_z
        b_bar += g_z.sum(axis=0)
        g_h = g_z @ wh.T
    return wx_bar, wh_bar, b_bar


def hand_scalar_loop(x):
    """Forward storing ``x`` and ``sin(x)``; backward multiplying ``d x_next / d x``."""
    saved = []
    for i in range(1000):
        s = np.sin(x)
        saved.append((x, s))
        x = x - 0.001 * s * x
    g = 1.0
    for x, s in reversed(saved):
        g = g * (1.0 - 0.001 * (np.cos(x) * x + s))
    return float(g)


def hand_tanh_chain(h, w):
    """Push each step's input; pop them in reverse.  Returns ``(h_bar, w_bar)``."""
    stack = []
    for i in range(100):
        stack.append(h)
        h = np.tanh(h @ w)
    g_h = np.ones_like(h)
    w_bar = np.zeros_like(w)
    for i in range(100):
        h_in = stack.pop()
        g_z = g_h * (1.0 - h**2)
        w_bar += h_in.T @ g_z
        g_h = g_z @ w.T
        h = h_in
    return g_h, w_bar


# ---------------------------------------------------------------------------
# Peers: the same forward passes in HIPS autograd and in PyTorch (CPU, eager).


def _autograd_versions(anp):
    """The workloads written with ``autograd.numpy`` (the only change from the NumPy ones)."""

    def dynamic(x, w_in, b_in, w_mid, b_mid, w_out, b_out, y):
        h = anp.maximum(x @ w_in + b_in, 0)
        for _ in range(random.randint(0, 3)):
            h = anp.maximum(h @ w_mid + b_mid, 0)
        return anp.sum((h @ w_out + b_out - y) ** 2)

    def rnn_(xs, wx, wh, b):
        h = anp.zeros((xs.shape[1], wh.shape[0]))
        for t in range(xs.shape[0]):
            h = anp.tanh(xs[t] @ wx + h @ wh + b)
        return anp.sum(h**2)

    def scalar(x):
        for i in range(1000):
            x = x - 0.001 * anp.sin(x) * x
        return x

    def chain(h, w):
        for i in range(100):
            h = anp.tanh(h @ w)
        return anp.sum(h)

    return {"dynamic_net": dynamic, "rnn": rnn_, "scalar_loop": scalar, "memory": chain}


def _torch_versions(torch):
    """The workloads in PyTorch eager mode; each returns the gradients of its leaf tensors."""

    def dynamic(x, w_in, b_in, w_mid, b_mid, w_out, b_out, y):
        h = (x @ w_in + b_in).clamp(min=0)
        for _ in range(random.randint(0, 3)):
            h = (h @ w_mid + b_mid).clamp(min=0)
        loss = ((h @ w_out + b_out - y) ** 2).sum()
        params = (w_in, b_in, w_mid, b_mid, w_out, b_out)
        # At depth 0 the middle layer is unused: its gradient is zero, which PyTorch spells None.
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        return tuple(torch.zeros_like(p) if g is None else g for p, g in zip(params, grads))

    def rnn_(xs, wx, wh, b):
        h = torch.zeros((xs.shape[1], wh.shape[0]), dtype=xs.dtype)
        for t in range(xs.shape[0]):
            h = torch.tanh(xs[t] @ wx + h @ wh + b)
        return torch.autograd.grad((h**2).sum(), (wx, wh, b))

    def scalar(x):
        x0 = x
        for i in range(1000):
            x = x - 0.001 * torch.sin(x) * x
        return torch.autograd.grad(x, (x0,))

    def chain(h, w):
        h0 = h
        for i in range(100):
            h = torch.tanh(h @ w)
        return torch.autograd.grad(h.sum(), (h0, w))

    return {"dynamic_net": dynamic, "rnn": rnn_, "scalar_loop": scalar, "memory": chain}


@dataclass
class Peer:
    """One installed peer: how to build its gradient function for a workload and read its output."""

    name: str
    version: str
    make: Callable  # (workload key, wrt, numpy args) -> (callable, its args)
    to_numpy: Callable  # its gradients -> tuple of NumPy arrays


def _autograd_peer(threads: int) -> Peer:
    """HIPS autograd (raises ImportError when it is not installed; it runs on NumPy's BLAS)."""
    from importlib.metadata import version

    import autograd
    import autograd.numpy as anp

    fns = _autograd_versions(anp)

    def make(key, wrt, args):
        return autograd.grad(fns[key], argnum=wrt if len(wrt) > 1 else wrt[0]), args

    def to_numpy(g):
        return tuple(np.asarray(a, dtype=np.float64) for a in _as_tuple(g))

    return Peer("autograd", version("autograd"), make, to_numpy)


def _torch_peer(threads: int) -> Peer:
    """PyTorch eager on the CPU, on ``threads`` threads (raises ImportError when not installed)."""
    import torch

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(threads)
    except RuntimeError:  # already set, or parallel work already started in this process
        pass
    fns = _torch_versions(torch)

    def make(key, wrt, args):
        tensors = [torch.tensor(a, dtype=torch.float64) if isinstance(a, float) else torch.from_numpy(a)
                   for a in args]
        for i in wrt:
            tensors[i].requires_grad_()
        return fns[key], tuple(tensors)

    return Peer("torch", torch.__version__, make, lambda g: tuple(t.detach().numpy() for t in g))


def load_peers(threads: int, only: tuple[str, ...] = PEERS) -> tuple[dict[str, Peer], list[str]]:
    """Import the peers named in ``only`` that are installed, pinned to ``threads`` threads.

    Returns:
        The peers by name, and one note per peer that is not installed.
    """
    loaders = {"autograd": _autograd_peer, "torch": _torch_peer}
    peers, notes = {}, []
    for name in only:
        try:
            peers[name] = loaders[name](threads)
        except ImportError:
            notes.append(f"{name} is not installed: its column is skipped (pip install '.[bench]')")
    return peers, notes


# ---------------------------------------------------------------------------
# Inputs.


def dynamic_args(n, d_in, h, d_out, seed=0):
    """``(x, w_in, b_in, w_mid, b_mid, w_out, b_out, y)``; weights scaled by 1/sqrt(fan-in)."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, d_in)),
            rng.standard_normal((d_in, h)) / np.sqrt(d_in), rng.standard_normal(h) * 0.1,
            rng.standard_normal((h, h)) / np.sqrt(h), rng.standard_normal(h) * 0.1,
            rng.standard_normal((h, d_out)) / np.sqrt(h), rng.standard_normal(d_out) * 0.1,
            rng.standard_normal((n, d_out)))


def rnn_args(t, batch, d_in, hidden, seed=0):
    """``(xs, wx, wh, b)`` with ``xs`` of shape (t, batch, d_in)."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((t, batch, d_in)), rng.standard_normal((d_in, hidden)) / np.sqrt(d_in),
            rng.standard_normal((hidden, hidden)) / np.sqrt(hidden), rng.standard_normal(hidden) * 0.1)


def scalar_args():
    return (0.5,)


def memory_args(size, seed=0):
    """``(h, w)``, both ``size`` x ``size``; ``w`` scaled so that tanh does not saturate."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((size, size)), rng.standard_normal((size, size)) / np.sqrt(size)


FULL = dict(dynamic=dict(n=64, d_in=1000, h=100, d_out=10), rnn=dict(t=100, batch=8, d_in=16, hidden=32),
            memory=500)
QUICK = dict(dynamic=dict(n=4, d_in=6, h=5, d_out=3), rnn=dict(t=5, batch=2, d_in=3, hidden=4), memory=12)


@dataclass
class Workload:
    """One timed workload: what srcgrad differentiates, its reference, and how to check and time it."""

    key: str
    title: str
    target: float
    fn: Callable
    hand: Callable
    wrt: tuple
    args: tuple
    number: int  # calls per timed batch
    repeats: int
    seeds: tuple = (0,)
    peers: bool = True


def workloads(sizes: dict, quick: bool) -> list[Workload]:
    """The timed workloads with their sizes, calls per batch and repeats (a full run is about 90 s)."""
    scale = (lambda full: 3) if quick else (lambda full: full)
    dyn = dynamic_args(**sizes["dynamic"])
    return [
        Workload("dynamic_net", "dynamic net (shared layer called)", 1.05, dynamic_net, hand_dynamic_net,
                 (1, 2, 3, 4, 5, 6), dyn, number=8, repeats=scale(400), seeds=DEPTH_SEEDS),
        Workload("dynamic_net", "dynamic net (layer inline)", 1.1, dynamic_net_inline, hand_dynamic_net,
                 (1, 2, 3, 4, 5, 6), dyn, number=8, repeats=scale(400), seeds=DEPTH_SEEDS, peers=False),
        Workload("rnn", "RNN, T={t}".format(**sizes["rnn"]), 1.3, rnn, hand_rnn, (1, 2, 3),
                 rnn_args(**sizes["rnn"]), number=1, repeats=scale(300)),
        Workload("scalar_loop", "scalar loop, 1000 steps", 2.0, scalar_loop, hand_scalar_loop, (0,),
                 scalar_args(), number=1, repeats=scale(60)),
    ]


# ---------------------------------------------------------------------------
# Checking and timing.


def max_rel_diff(ours, reference) -> float:
    """``max|g - r| / max|r|`` over the gradients (inf when a shape differs)."""
    worst = 0.0
    for g, r in zip(ours, reference, strict=True):
        g, r = np.asarray(g, dtype=np.float64), np.asarray(r, dtype=np.float64)
        if g.shape != r.shape:
            return float("inf")
        scale = float(np.max(np.abs(r))) or 1.0
        worst = max(worst, float(np.max(np.abs(g - r))) / scale)
    return worst


def _as_tuple(g):
    return g if isinstance(g, tuple) else (g,)


def check(fn, to_numpy, hand, args, hand_args, seeds) -> float:
    """The largest relative difference from the hand-written gradients over ``seeds`` (depths)."""
    worst = 0.0
    for seed in seeds:
        random.seed(seed)
        reference = _as_tuple(hand(*hand_args))
        random.seed(seed)
        worst = max(worst, max_rel_diff(to_numpy(fn(*args)), reference))
    return worst


def interleaved(impls: dict, number: int, repeats: int, warmup: int) -> dict[str, Stats]:
    """Time each ``(callable, args)`` in ``impls``, alternating between them repeat by repeat.

    Before each implementation's batch of ``number`` calls, ``random`` is
    seeded with the repeat's index (outside the timed region), so every
    implementation sees the same sequence of random depths.  The order is
    reversed every other repeat and the garbage collector is off while timing,
    as in ``benchmarks/two_layer.py``.

    Returns:
        Per-implementation :class:`Stats` in seconds per call.
    """
    for fn, args in impls.values():
        random.seed(0)
        for _ in range(warmup):
            fn(*args)
    names = list(impls)
    samples = {name: [] for name in names}
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for i in range(repeats):
            for name in names if i % 2 == 0 else names[::-1]:
                fn, args = impls[name]
                random.seed(i)
                start = time.perf_counter()
                for _ in range(number):
                    fn(*args)
                samples[name].append((time.perf_counter() - start) / number)
    finally:
        if was_enabled:
            gc.enable()
    return {name: Stats(s) for name, s in samples.items()}


@dataclass
class Row:
    """One workload's result.  Times in seconds per gradient step."""

    key: str
    title: str
    target: float
    grads_agree: bool
    max_rel_diff: float
    hand: Stats | None = None
    srcgrad: Stats | None = None
    number: int = 0
    peers: dict[str, Stats] = field(default_factory=dict)
    peer_diffs: dict[str, float] = field(default_factory=dict)
    peer_notes: dict[str, str] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        """srcgrad's median over the hand-written median: the headline number."""
        return self.srcgrad.median / self.hand.median

    @property
    def paired_ratio(self) -> float:
        """Median of the per-repeat ratios (each srcgrad batch over the hand-written one next to it)."""
        return statistics.median(s / h for s, h in zip(self.srcgrad.samples, self.hand.samples))

    def peer_ratio(self, name: str) -> float:
        return self.peers[name].median / self.hand.median


def measure(work: Workload, peers: dict[str, Peer], warmup: int) -> Row:
    """Check every implementation's gradients against the hand-written ones, then time those that agree."""
    gradient = srcgrad.grad(work.fn, wrt=work.wrt)
    diff = check(gradient, _as_tuple, work.hand, work.args, work.args, work.seeds)
    row = Row(work.key, work.title, work.target, diff <= SRCGRAD_RTOL, diff)
    if not row.grads_agree:  # timing a wrong gradient would be meaningless
        return row
    impls = {"hand": (work.hand, work.args), "srcgrad": (gradient, work.args)}
    for name, peer in (peers.items() if work.peers else ()):
        try:
            fn, args = peer.make(work.key, work.wrt, work.args)
            peer_diff = check(fn, peer.to_numpy, work.hand, args, work.args, work.seeds)
        except Exception as exc:  # a peer that cannot run this workload: say so, do not fail
            row.peer_notes[name] = f"{type(exc).__name__}: {exc}"
            continue
        row.peer_diffs[name] = peer_diff
        if peer_diff <= PEER_RTOL:
            impls[name] = (fn, args)
        else:
            row.peer_notes[name] = f"gradients differ (max rel. diff {peer_diff:.1e}), not timed"
    stats = interleaved(impls, work.number, work.repeats, warmup)
    row.hand, row.srcgrad, row.number = stats.pop("hand"), stats.pop("srcgrad"), work.number
    row.peers = stats
    return row


# ---------------------------------------------------------------------------
# Memory: each implementation in a fresh process.

MEMORY_TARGET = 1.2


def _proc_status_kib(field_name: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Reset the kernel's resident-set high-water mark (Linux >= 4.0); False where it cannot."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def memory_child(impl: str, size: int, threads: int, out: str | None = None) -> dict:
    """Measure one implementation of the tanh chain in this (fresh) process.

    Compiles and warms up on a tiny input of the same ranks first, so neither
    compilation nor first-call set-up is counted.  Then: the tracemalloc peak
    (every NumPy buffer, Python object and tuple allocated during the gradient
    step), and the rise of the kernel's peak resident set over the resident set
    just before it (which also sees PyTorch's allocator, invisible to
    tracemalloc).  The inputs exist before either measurement starts.
    """
    to_numpy = _as_tuple
    if impl == "hand":
        fn, convert = hand_tanh_chain, (lambda a: a)
    elif impl == "srcgrad":
        fn, convert = srcgrad.grad(tanh_chain, wrt=(0, 1)), (lambda a: a)
    else:
        peer = load_peers(threads, only=(impl,))[0][impl]
        fn, to_numpy = peer.make("memory", (0, 1), memory_args(2))[0], peer.to_numpy
        convert = lambda a: peer.make("memory", (0, 1), a)[1]  # noqa: E731
    fn(*convert(memory_args(3, seed=1)))  # compile / warm up
    args = convert(memory_args(size))
    gc.collect()
    rss_ok = _reset_peak_rss()
    rss_before = _proc_status_kib("VmRSS")
    tracemalloc.start()
    start = time.perf_counter()
    grads = fn(*args)
    seconds = time.perf_counter() - start
    traced_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    hwm = _proc_status_kib("VmHWM")
    rss_rise = (hwm - rss_before) * 1024 if rss_ok and hwm is not None and rss_before is not None else None
    if out:  # for the parent's gradient check
        np.savez(out, *to_numpy(grads))
    return dict(impl=impl, traced_peak=traced_peak, rss_rise=rss_rise, seconds=seconds)


@dataclass
class MemoryRow:
    """One implementation's peak memory (bytes) on the tanh chain; None where not measured."""

    impl: str
    traced_peak: int | None
    rss_rise: int | None
    seconds: float | None
    grads_agree: bool | None = None
    max_rel_diff: float | None = None
    note: str = ""


def measure_memory(size: int, threads: int, peers: dict[str, Peer]) -> list[MemoryRow]:
    """Measure each implementation of the tanh chain in a child process, then check its gradients.

    The children save their gradients; each is compared with the hand-written
    child's, so the large step runs once per implementation.
    """
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path)
    rows, grads = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for impl in ("hand", "srcgrad", *peers):
            out = Path(tmp) / f"{impl}.npz"
            proc = subprocess.run(
                [sys.executable, "-m", "benchmarks.control_flow", "--memory-child", impl,
                 "--memory-size", str(size), "--memory-out", str(out), "--threads", str(threads)],
                cwd=ROOT, env=env, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                rows.append(MemoryRow(impl, None, None, None, note=f"child failed: {last}"))
                continue
            data = json.loads(proc.stdout.strip().splitlines()[-1])
            with np.load(out) as saved:
                grads[impl] = tuple(saved[k] for k in saved.files)
            rows.append(MemoryRow(impl, data["traced_peak"], data["rss_rise"], data["seconds"]))
    for row in rows:
        if row.impl in grads and "hand" in grads:
            row.max_rel_diff = max_rel_diff(grads[row.impl], grads["hand"])
            tol = SRCGRAD_RTOL if row.impl in ("hand", "srcgrad") else PEER_RTOL
            row.grads_agree = row.max_rel_diff <= tol
        if row.impl == "torch":
            row.note = row.note or "n/a: PyTorch's CPU allocator does not report to tracemalloc"
    return rows


# ---------------------------------------------------------------------------
# The report.


@dataclass
class Result:
    """What :func:`main` measured (returned for the smoke test and for other scripts)."""

    rows: list[Row]
    memory: list[MemoryRow]
    peer_versions: dict[str, str]
    peer_notes: list[str]
    threads: int
    threads_applied: bool
    machine: str
    seconds: float
    load: tuple[float, float] | None = None  # 1-minute load average at the start and the end


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"


def _spread_ms(s: Stats) -> str:
    return f"{_ms(s.median)} ({_ms(s.min)}–{_ms(s.max)})"


def step_table(result: Result) -> str:
    """The per-workload Markdown table of times and ratios."""
    peer_names = list(result.peer_versions)
    lines = [
        "| workload | hand-written NumPy, ms | srcgrad, ms | srcgrad / hand | paired ratio | target | "
        + "".join(f"{p} / hand | " for p in peer_names) + "grads agree (max rel. diff) |",
        "|---|---|---|---|---|---|" + "---|" * len(peer_names) + "---|",
    ]
    for row in result.rows:
        agree = f"{'yes' if row.grads_agree else 'NO'} ({row.max_rel_diff:.1e})"
        peers = []
        for p in peer_names:
            if p in row.peers:
                peers.append(f"{row.peer_ratio(p):.2f}x")
                agree += f"; {p} {row.peer_diffs[p]:.1e}"
            else:
                peers.append("n/a" if p in row.peer_notes else "–")
        if row.hand is None:
            lines.append(f"| {row.title} | – | – | – | – | ≤ {row.target:g}x | "
                         + "".join(f"{p} | " for p in peers) + f"{agree} |")
            continue
        lines.append(f"| {row.title} | {_spread_ms(row.hand)} | {_spread_ms(row.srcgrad)} | "
                     f"**{row.ratio:.3f}x** | {row.paired_ratio:.3f}x | ≤ {row.target:g}x | "
                     + "".join(f"{p} | " for p in peers) + f"{agree} |")
    return "\n".join(lines)


def _mib(n: int | None) -> str:
    return "–" if n is None else f"{n / 2**20:.1f}"


def memory_table(result: Result) -> str:
    """The peak-memory Markdown table."""
    by_impl = {row.impl: row for row in result.memory}
    hand = by_impl.get("hand")
    lines = ["| implementation | tracemalloc peak, MiB | / hand | peak RSS rise, MiB | / hand | time, s "
             "| grads agree (max rel. diff) |",
             "|---|---|---|---|---|---|---|"]
    for row in result.memory:
        traced = "n/a" if row.note else _mib(row.traced_peak)
        t_ratio = ("–" if row.note or row.traced_peak is None or hand is None or not hand.traced_peak
                   else f"{row.traced_peak / hand.traced_peak:.3f}x")
        r_ratio = ("–" if row.rss_rise is None or hand is None or not hand.rss_rise
                   else f"{row.rss_rise / hand.rss_rise:.3f}x")
        if row.impl == "srcgrad" and t_ratio != "–":
            t_ratio = f"**{t_ratio}**"
        seconds = "–" if row.seconds is None else f"{row.seconds:.2f}"
        agree = ("–" if row.grads_agree is None
                 else f"{'yes' if row.grads_agree else 'NO'} ({row.max_rel_diff:.1e})")
        lines.append(f"| {row.impl} | {traced} | {t_ratio} | {_mib(row.rss_rise)} | {r_ratio} | {seconds} "
                     f"| {agree} |")
    notes = [f"- {row.impl}: {row.note}" for row in result.memory if row.note]
    return "\n".join(lines + ([""] + notes if notes else []))


def verdicts(result: Result) -> list[str]:
    """One line per target: met or not, with the number."""
    lines = []
    for row in result.rows:
        if row.hand is None:
            lines.append(f"- {row.title}: gradients disagree, not timed")
            continue
        ok = "meets" if row.ratio <= row.target else "misses"
        lines.append(f"- {row.title}: srcgrad / hand-written = {row.ratio:.3f}x, "
                     f"{ok} the ≤ {row.target:g}x target")
    by_impl = {row.impl: row for row in result.memory}
    ours, hand = by_impl.get("srcgrad"), by_impl.get("hand")
    if ours and hand and ours.traced_peak and hand.traced_peak:
        ratio = ours.traced_peak / hand.traced_peak
        ok = "meets" if ratio <= MEMORY_TARGET else "misses"
        lines.append(f"- memory (tanh chain): srcgrad / hand-written tracemalloc peak = {ratio:.3f}x, "
                     f"{ok} the ≤ {MEMORY_TARGET:.1f}x target")
    return lines


def report(result: Result, quick: bool, sizes: dict) -> str:
    """The benchmark's section of ``docs/benchmarks.md`` (also what is printed)."""
    d, r = sizes["dynamic"], sizes["rnn"]
    m = sizes["memory"]
    peers = ", ".join(f"{name} {v}" for name, v in result.peer_versions.items()) or "none installed"
    batches = "; ".join(f"{row.title}: {len(row.hand.samples)} × {row.number}"
                        for row in result.rows if row.hand is not None)
    parts = [
        "## Control flow: loops, a random depth, a shared layer",
        "",
        "One gradient step (forward + backward) of each workload, float64: `srcgrad.grad(f, wrt=...)` "
        "called as a user calls it, against a hand-written NumPy adjoint of the same forward pass, "
        "and against HIPS autograd and PyTorch eager (CPU) where installed "
        "(`pip install '.[bench]'`). Every implementation's gradients are first checked against the "
        f"hand-written ones (max |g − r| / max |r| ≤ {SRCGRAD_RTOL:g} for srcgrad, ≤ {PEER_RTOL:g} "
        "for peers, "
        "over depths 0–3 for the dynamic net).",
        "",
        f"- **dynamic net**: N={d['n']}, D_in={d['d_in']}, H={d['h']}, D_out={d['d_out']}; "
        "`Linear+ReLU`, the shared middle `Linear+ReLU` applied `random.randint(0, 3)` times "
        "(*called*: `h = middle_layer(h, w_mid, b_mid)`; *inline*: the layer written in the loop body), "
        "`Linear`, squared error; gradients of all six weights and biases. `random` is seeded "
        "identically before each implementation's batch, so all see the same depths; "
        "the reference keeps each layer's output for its ReLU mask and the next layer's `w_bar`.",
        f"- **RNN**: `h = np.tanh(xs[t] @ wx + h @ wh + b)`, T={r['t']}, batch {r['batch']}, "
        f"input {r['d_in']}, hidden {r['hidden']}, loss `np.sum(h ** 2)`; the reference is "
        "backpropagation through time accumulating `wx_bar`, `wh_bar`, `b_bar` with `+=` each step.",
        "- **scalar loop**: `x = x - 0.001 * np.sin(x) * x` 1000 times on a Python float; the "
        "reference stores `x` and `np.sin(x)` and multiplies the local derivatives "
        "`1 - 0.001 (cos(x) x + sin(x))` backwards (both call NumPy's ufuncs on scalars, "
        "about a microsecond each).",
        f"- **memory**: 100 steps of `h = np.tanh(h @ w)` on {m}×{m} matrices, gradients of `h` and `w`; "
        "the reference pushes each step's input and pops it backwards. Each implementation runs once "
        "in a fresh process after a warm-up on tiny inputs; tracemalloc peak (NumPy reports its buffers "
        "to it) and the rise of the peak resident set (`VmHWM`, reset first) over the resident set before "
        "the step.",
        "",
        f"Times are the median per step with the min–max spread over interleaved repeats (repeats × "
        f"calls per batch: {batches}), after warm-up, garbage collector off while timing. "
        "*paired ratio* is the median of per-repeat srcgrad/hand ratios.",
        "",
        "```bash",
        COMMAND.replace("--write", "--quick") if quick else COMMAND,
        "```",
        "",
        f"Machine: {result.machine}"
        + ("" if result.load is None else
           f" · load average (1 min) {result.load[0]:.2f} at the start, {result.load[1]:.2f} at the end"),
        "",
        f"Peers: {peers}" + (f"; PyTorch pinned with `torch.set_num_threads({result.threads})`"
                             if "torch" in result.peer_versions else ""),
        *[f"- note: {note}" for note in result.peer_notes],
        *[f"- note: {row.title}, {p}: {note}" for row in result.rows for p, note in row.peer_notes.items()],
        "",
        step_table(result),
        "",
        memory_table(result),
        "",
        *verdicts(result),
        "",
        f"Whole run: {result.seconds:.0f} s.",
    ]
    if quick:
        parts += ["", "_Quick mode: tiny sizes and few repeats; these numbers mean nothing._"]
    return "\n".join(parts) + "\n"


def _load_average() -> float | None:
    """The 1-minute load average: other work on the machine shows up as noise in the times."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def main(argv: list[str] | None = None) -> Result | None:
    """Run the benchmark, print its tables, and optionally write ``docs/benchmarks.md``.

    Args:
        argv: command-line arguments (``--quick``, ``--write``, ``--threads N``,
            ``--no-peers``); ``sys.argv[1:]`` when None.

    Returns:
        The measurements, as a :class:`Result` (None in the internal
        ``--memory-child`` mode, which prints one JSON line instead).
    """
    parser = argparse.ArgumentParser(prog="python -m benchmarks.control_flow",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes and few repeats (smoke test)")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--threads", type=int, default=_env.DEFAULT_THREADS,
                        help="BLAS/OpenMP/PyTorch threads (default 1); must be given on the command line "
                             "to take effect for NumPy, since it is applied before NumPy loads")
    parser.add_argument("--no-peers", action="store_true", help="skip autograd and PyTorch")
    parser.add_argument("--memory-child", choices=("hand", "srcgrad", *PEERS), help=argparse.SUPPRESS)
    parser.add_argument("--memory-size", type=int, default=FULL["memory"], help=argparse.SUPPRESS)
    parser.add_argument("--memory-out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    applied = _PINNED_AT_IMPORT == args.threads
    if not applied:
        # Inside another program (pytest) NumPy is already loaded: the variables
        # are set for consistency in child processes, but cannot take effect here.
        _env.pin_threads(args.threads)
    if args.memory_child:
        print(json.dumps(memory_child(args.memory_child, args.memory_size, args.threads, args.memory_out)))
        return None

    started = time.perf_counter()
    load_before = _load_average()
    sizes = QUICK if args.quick else FULL
    peers, notes = ({}, ["peers skipped (--no-peers)"]) if args.no_peers else load_peers(args.threads)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    rows = [measure(work, peers, warmup=2 if args.quick else 10) for work in workloads(sizes, args.quick)]
    memory = measure_memory(sizes["memory"], args.threads, peers)
    result = Result(rows, memory, {name: p.version for name, p in peers.items()}, notes, args.threads,
                    applied, _env.machine_line(args.threads, applied), time.perf_counter() - started,
                    None if load_before is None else (load_before, _load_average()))
    text = report(result, args.quick, sizes)
    print(text, end="")
    if args.write:
        path = _env.write_section(SECTION, text)
        print(f"\nwrote {path}")
    return result


if __name__ == "__main__":
    main()
