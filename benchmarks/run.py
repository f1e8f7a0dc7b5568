"""Every workload against every peer: one command, one table, one chart.

Runs the harnesses' workloads (``benchmarks/two_layer.py``,
``benchmarks/control_flow.py``) and the gallery's digits CNN
(``benchmarks/cnn.py``) with hand-written NumPy (the reference), srcgrad, and
each installed peer: HIPS autograd, PyTorch eager (CPU), JAX (``jax.grad``
eager and under ``jax.jit``) and tangent-ad.  A peer that is not installed, or
cannot express a workload, is skipped with a note saying why.  Every
implementation's gradients are checked against the hand-written ones before
it is timed.

Run from the repository root::

    python -m benchmarks.run                # print the table
    python -m benchmarks.run --write        # ... and update docs/benchmarks.md (sections "peers"
                                            #     and "compile_time") and docs/benchmarks.png
    python -m benchmarks.run --quick        # tiny sizes, a few repeats (the smoke test)
    python -m benchmarks.run --threads 2
"""
from __future__ import annotations

import os
import sys

from benchmarks import _env


def pin_all(threads: int) -> bool:
    """Pin BLAS/OpenMP (via ``_env``) and XLA's CPU threads; True when NumPy was not loaded yet."""
    applied = _env.pin_threads(threads)
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split()
             if not f.startswith(("--xla_cpu_multi_thread_eigen", "intra_op_parallelism_threads"))]
    flags += ["--xla_cpu_multi_thread_eigen=false", f"intra_op_parallelism_threads={threads}"]
    os.environ["XLA_FLAGS"] = " ".join(flags)
    return applied


# Thread counts are read once, when NumPy / JAX load their libraries: pin first.
_PINNED_AT_IMPORT = None
if __name__ == "__main__":
    _PINNED_AT_IMPORT = _env.threads_from_argv(sys.argv[1:])
    pin_all(_PINNED_AT_IMPORT)

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import srcgrad  # noqa: E402
from benchmarks import cnn, compile_time, two_layer  # noqa: E402
from benchmarks import control_flow as cf  # noqa: E402
from benchmarks.two_layer import Stats  # noqa: E402

SECTION = "peers"
COMMAND = "python -m benchmarks.run --write"
ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "docs" / "benchmarks.png"
LIBRARIES = ("hand", "srcgrad", "autograd", "torch", "jax", "jax.jit", "tangent")
PEERS = LIBRARIES[2:]
# max|g - r| / max|r| allowed before timing; float32 allows for other summation orders.
RTOL = {"float64": {"srcgrad": cf.SRCGRAD_RTOL, "peer": cf.PEER_RTOL},
        "float32": {"srcgrad": 1e-5, "peer": 1e-4}}


class Unsupported(Exception):
    """A peer cannot express a workload (the message says why)."""


# ---------------------------------------------------------------------------
# The one workload the harnesses do not have: the scalar loop as a `while`.


def scalar_while(x):
    """``control_flow.scalar_loop`` written as a ``while`` loop with a counter."""
    i = 0
    while i < 1000:
        x = x - 0.001 * np.sin(x) * x
        i = i + 1
    return x


# tangent-ad's spellings (it must read them from this file's source): no method
# calls (`x.dot`) and no attributes (`wh.shape`), which it does not differentiate.


def tangent_two_layer(w1, w2, x, y):
    h = np.dot(x, w1)
    h_relu = np.maximum(h, 0.0)
    y_pred = np.dot(h_relu, w2)
    return np.sum((y_pred - y) ** 2)


def tangent_dynamic_net(x, w_in, b_in, w_mid, b_mid, w_out, b_out, y):
    h = np.maximum(np.dot(x, w_in) + b_in, 0.0)
    for _ in range(random.randint(0, 3)):
        h = np.maximum(np.dot(h, w_mid) + b_mid, 0.0)
    y_pred = np.dot(h, w_out) + b_out
    return np.sum((y_pred - y) ** 2)


def tangent_rnn(xs, wx, wh, b):
    # h starts at zero, so the first step is tanh(xs[0] @ wx + b): no np.zeros(shape) needed
    h = np.tanh(np.dot(xs[0], wx) + b)
    for t in range(1, len(xs)):
        h = np.tanh(np.dot(xs[t], wx) + np.dot(h, wh) + b)
    return np.sum(h * h)


def tangent_tanh_chain(h, w):
    for i in range(100):
        h = np.tanh(np.dot(h, w))
    return np.sum(h)


def tangent_cnn(conv_w, conv_b, fc_w, fc_b, x, labels):
    # autograd's spelling with NumPy, the nine shifted slices written out (tangent does not
    # parse the list comprehension) and sizes as constants (it does not differentiate attributes)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.stack((padded[:, 0, 0:8, 0:8], padded[:, 0, 0:8, 1:9], padded[:, 0, 0:8, 2:10],
                     padded[:, 0, 1:9, 0:8], padded[:, 0, 1:9, 1:9], padded[:, 0, 1:9, 2:10],
                     padded[:, 0, 2:10, 0:8], padded[:, 0, 2:10, 1:9], padded[:, 0, 2:10, 2:10]), axis=-1)
    z = np.dot(cols, np.transpose(np.reshape(conv_w, (16, 9)))) + conv_b
    r = np.maximum(z, 0.0)
    pooled = np.max(np.reshape(r, (32, 4, 2, 4, 2, 16)), axis=(2, 4))
    feats = np.reshape(np.transpose(pooled, (0, 3, 1, 2)), (32, 256))
    logits = np.dot(feats, np.transpose(fc_w)) + fc_b
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    logp = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return -np.mean(logp[np.arange(32), labels])


# ---------------------------------------------------------------------------
# Workloads.


@dataclass
class Workload:
    key: str
    title: str
    dtype: str
    fn: Callable | None  # what srcgrad differentiates (None: built specially, the CNN)
    hand: Callable
    wrt: tuple
    args: tuple
    seeds: tuple = (0,)
    hand_args: tuple | None = None  # when the reference takes other arguments (the CNN)
    srcgrad_args: tuple | None = None
    target: float | None = None  # srcgrad / hand at most this (issue 12's targets)


def workloads(quick: bool) -> list[Workload]:
    tl = two_layer.QUICK_SIZES if quick else two_layer.FULL_SIZES
    sizes = cf.QUICK if quick else cf.FULL
    r = sizes["rnn"]
    short = dict(r, t=10) if not quick else r  # the RNN the issue targets at T=10 (quick: T=5 already)
    batch = 4 if quick else cnn.BATCH
    model, x, labels, params = cnn.make_inputs(batch=batch)
    return [
        Workload("two_layer_f64", "two-layer net, float64", "float64", two_layer.two_layer_loss,
                 two_layer.hand_written_grad, (0, 1), two_layer.make_data(np.float64, **tl), target=1.05),
        Workload("two_layer_f32", "two-layer net, float32", "float32", two_layer.two_layer_loss,
                 two_layer.hand_written_grad, (0, 1), two_layer.make_data(np.float32, **tl), target=1.05),
        Workload("dynamic_net", "dynamic net, depth 0-3", "float64", cf.dynamic_net, cf.hand_dynamic_net,
                 (1, 2, 3, 4, 5, 6), cf.dynamic_args(**sizes["dynamic"]), seeds=cf.DEPTH_SEEDS,
                 target=1.05),
        *([] if quick else [Workload("rnn", f"RNN, T={short['t']}", "float64", cf.rnn, cf.hand_rnn, (1, 2, 3),
                                     cf.rnn_args(**short), target=1.15)]),
        Workload("rnn", f"RNN, T={r['t']}", "float64", cf.rnn, cf.hand_rnn, (1, 2, 3), cf.rnn_args(**r)),
        Workload("scalar_loop", "scalar `for` loop, 1000 steps", "float64", cf.scalar_loop,
                 cf.hand_scalar_loop, (0,), cf.scalar_args()),
        Workload("scalar_while", "scalar `while` loop, 1000 steps", "float64", scalar_while,
                 cf.hand_scalar_loop, (0,), cf.scalar_args()),
        Workload("cnn", f"digits CNN training step, batch {batch}", "float32", None, cnn.hand_step,
                 (0, 1, 2, 3), (*params, x, labels), srcgrad_args=(model, x, labels), target=1.0),
    ]


# ---------------------------------------------------------------------------
# Peers: each builds (callable, its arguments, gradients -> NumPy) for a workload.


def _autograd_lib(threads):
    import autograd
    import autograd.numpy as anp
    from importlib.metadata import version

    fns = cf._autograd_versions(anp)

    def two(w1, w2, x, y):
        return anp.sum(anp.square(anp.dot(anp.maximum(anp.dot(x, w1), 0), w2) - y))

    def while_(x):
        i = 0
        while i < 1000:
            x = x - 0.001 * anp.sin(x) * x
            i = i + 1
        return x

    fns.update(two_layer_f64=two, two_layer_f32=two, scalar_while=while_, cnn=cnn.autograd_loss(anp))

    def make(work):
        wrt = work.wrt if len(work.wrt) > 1 else work.wrt[0]
        return autograd.grad(fns[work.key], argnum=wrt), work.args

    def to_numpy(g):
        return tuple(np.asarray(a) for a in cf._as_tuple(g))

    return version("autograd"), "NumPy's BLAS (autograd calls NumPy)", make, to_numpy


def _torch_lib(threads):
    import torch

    peer = cf._torch_peer(threads)  # sets torch.set_num_threads(threads)
    cnn_loss = cnn.torch_loss(torch)

    def two(w1, w2, x, y):
        loss = ((x @ w1).clamp(min=0) @ w2 - y).square().sum()
        return torch.autograd.grad(loss, (w1, w2))

    def while_(x):
        x0, i = x, 0
        while i < 1000:
            x = x - 0.001 * torch.sin(x) * x
            i = i + 1
        return torch.autograd.grad(x, (x0,))

    def cnn_step(*a):
        return torch.autograd.grad(cnn_loss(*a), a[:4])

    own = {"two_layer_f64": two, "two_layer_f32": two, "scalar_while": while_, "cnn": cnn_step}

    def make(work):
        key = "scalar_loop" if work.key == "scalar_while" else work.key
        if work.key not in own:
            return peer.make(key, work.wrt, work.args)
        tensors = [torch.tensor(a, dtype=torch.float64) if isinstance(a, float) else torch.from_numpy(a)
                   for a in work.args]
        for i in work.wrt:
            tensors[i].requires_grad_()
        return own[work.key], tuple(tensors)

    config = torch.__config__.show()
    blas = next((part.split("=", 1)[1] for part in config.replace(",", " ").split()
                 if part.startswith("BLAS_INFO=")), "unknown")
    desc = f"PyTorch's own: BLAS_INFO={blas}, MKL {'yes' if torch.backends.mkl.is_available() else 'no'}, " \
           f"torch.get_num_threads()={torch.get_num_threads()}"
    return torch.__version__, desc, make, peer.to_numpy


def _jax_versions(jax, jnp):
    def two(w1, w2, x, y):
        return jnp.sum(jnp.square(jnp.maximum(x @ w1, 0) @ w2 - y))

    def dyn_depth(x, w_in, b_in, w_mid, b_mid, w_out, b_out, y, depth):
        h = jnp.maximum(x @ w_in + b_in, 0)
        for _ in range(depth):
            h = jnp.maximum(h @ w_mid + b_mid, 0)
        return jnp.sum((h @ w_out + b_out - y) ** 2)

    def dyn(*a):
        return dyn_depth(*a, random.randint(0, 3))

    def rnn_(xs, wx, wh, b):
        h = jnp.zeros((xs.shape[1], wh.shape[0]), dtype=xs.dtype)
        for t in range(xs.shape[0]):
            h = jnp.tanh(xs[t] @ wx + h @ wh + b)
        return jnp.sum(h**2)

    def scalar(x):
        for i in range(1000):
            x = x - 0.001 * jnp.sin(x) * x
        return x

    def while_(x):
        i = 0
        while i < 1000:
            x = x - 0.001 * jnp.sin(x) * x
            i = i + 1
        return x

    def fori(x):  # under jit: a Python loop would unroll 1000 steps into the XLA program
        return jax.lax.fori_loop(0, 1000, lambda i, x: x - 0.001 * jnp.sin(x) * x, x)

    def chain(h, w):
        for i in range(100):
            h = jnp.tanh(h @ w)
        return jnp.sum(h)

    eager = dict(two_layer_f64=two, two_layer_f32=two, dynamic_net=dyn, rnn=rnn_, scalar_loop=scalar,
                 scalar_while=while_, cnn=cnn.jax_loss(jax, jnp), memory=chain)
    return eager, dyn_depth, fori


def _jax_lib(threads, jit: bool):
    import jax

    jax.config.update("jax_enable_x64", True)  # the float64 workloads stay float64
    jax.config.update("jax_platforms", "cpu")
    import jax.numpy as jnp

    eager, dyn_depth, fori = _jax_versions(jax, jnp)

    def convert(work):
        return tuple(jnp.asarray(a) for a in work.args)

    def blocked(g):
        # JAX returns before its work is done (asynchronous dispatch): time until every
        # gradient is computed, not the dispatch.
        return lambda *a: jax.block_until_ready(g(*a))

    def make(work):
        args = convert(work)
        if not jit:
            return blocked(jax.grad(eager[work.key], argnums=work.wrt)), args
        if work.key == "dynamic_net":
            # a depth drawn inside a jitted function would be frozen at trace time: draw it
            # outside and make it static (one compiled program per depth)
            g = jax.jit(jax.grad(dyn_depth, argnums=work.wrt), static_argnums=(8,))
            return blocked(lambda *a: g(*a, random.randint(0, 3))), args
        if work.key in ("scalar_loop", "scalar_while"):
            # lax.while_loop has no reverse-mode rule; fori_loop with static bounds is a scan
            return blocked(jax.jit(jax.grad(fori))), args
        return blocked(jax.jit(jax.grad(eager[work.key], argnums=work.wrt))), args

    def to_numpy(g):
        return tuple(np.asarray(a) for a in cf._as_tuple(g))

    flags = os.environ.get("XLA_FLAGS", "")
    return jax.__version__, f"XLA's own CPU kernels (Eigen; no system BLAS), XLA_FLAGS='{flags}'", make, \
        to_numpy


_TANGENT = {"two_layer_f64": tangent_two_layer, "two_layer_f32": tangent_two_layer,
            "dynamic_net": tangent_dynamic_net, "rnn": tangent_rnn, "scalar_loop": cf.scalar_loop,
            "scalar_while": scalar_while, "cnn": tangent_cnn, "memory": tangent_tanh_chain}


def _tangent_lib(threads):
    import tangent
    from importlib.metadata import version

    def make(work):
        if work.key == "cnn" and len(work.args[-1]) != cnn.BATCH:
            raise Unsupported(f"tangent's CNN has the batch size ({cnn.BATCH}) written in as a constant")
        try:
            g = tangent.grad(_TANGENT[work.key], wrt=work.wrt)
        except Exception as exc:  # tangent's errors are long banners: keep the first informative line
            raise Unsupported(f"tangent.grad failed: {type(exc).__name__}: {_first_line(exc)}") from exc
        return g, work.args

    def to_numpy(g):
        return tuple(np.asarray(a) for a in cf._as_tuple(g))

    return version("tangent-ad"), "NumPy's BLAS (tangent generates NumPy code)", make, to_numpy


def _first_line(exc) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines()
             if ln.strip() and not set(ln.strip()) <= set("=-") and "Tangent Error" not in ln]
    return (lines[0] if lines else repr(exc))[:300]


@dataclass
class Library:
    name: str
    version: str
    blas: str
    make: Callable
    to_numpy: Callable


LOADERS = {"autograd": _autograd_lib, "torch": _torch_lib, "jax": lambda t: _jax_lib(t, jit=False),
           "jax.jit": lambda t: _jax_lib(t, jit=True), "tangent": _tangent_lib}
INSTALL = {"autograd": "autograd", "torch": "torch==2.13.0 (CPU)", "jax": "'jax[cpu]'",
           "jax.jit": "'jax[cpu]'", "tangent": "tangent-ad"}


def load_libraries(threads: int, only=PEERS) -> tuple[dict[str, Library], list[str]]:
    libs, notes = {}, []
    for name in only:
        try:
            libs[name] = Library(name, *LOADERS[name](threads))
        except ImportError as exc:
            notes.append(f"{name} is not installed ({exc}): skipped (pip install {INSTALL[name]})")
    return libs, notes


# ---------------------------------------------------------------------------
# Checking and timing.


def time_interleaved(impls: dict, budget_s: float, min_repeats: int, max_repeats: int, warmup: int):
    """Time each ``(callable, args)``, round-robin, each with its own batch size and repeat count.

    Each implementation gets about ``budget_s`` of timed calls (between
    ``min_repeats`` and ``max_repeats`` batches of about a millisecond or one
    call), so a 100x slower peer does not force 100x fewer repeats on the
    others.  Each round runs the implementations in its own shuffled order
    (seeded), and each timed batch follows an untimed batch of the same
    implementation: every one is timed warm, in the steady state of a training
    loop, whichever ran before it.  (Rounds that alternated direction ran the first
    and the last implementation twice in a row at each turn, warm from itself,
    while the others followed a peer: the reference, first, read up to 15% fast.
    And a step right after PyTorch's runs slower for a few calls — the digits CNN
    through srcgrad by 27% on the first call, 10% on the second, 4% on the fifth,
    the hand-written one by 8% on the first; measured.)  ``random`` is seeded with
    the round's index before each batch (every implementation sees the same
    depths); the garbage collector is off while timing.
    """
    est, number, repeats = {}, {}, {}
    for name, (fn, args) in impls.items():
        random.seed(0)
        start = time.perf_counter()
        fn(*args)
        first = time.perf_counter() - start
        if first < 0.05:  # fast: warm up, then estimate again; slow: the warm first call will do
            for _ in range(warmup):
                fn(*args)
            random.seed(0)
            start = time.perf_counter()
            fn(*args)
            first = time.perf_counter() - start
        est[name] = max(first, 1e-7)
        number[name] = max(1, round(1e-3 / est[name]))
        repeats[name] = int(min(max_repeats, max(min_repeats, budget_s / (est[name] * number[name]))))
    names = list(impls)
    samples = {name: [] for name in names}
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        order = random.Random(0)
        for i in range(max(repeats.values())):
            for name in order.sample(names, len(names)):
                if len(samples[name]) >= repeats[name]:
                    continue
                fn, args = impls[name]
                random.seed(i)
                for _ in range(number[name]):
                    fn(*args)
                random.seed(i)
                start = time.perf_counter()
                for _ in range(number[name]):
                    fn(*args)
                samples[name].append((time.perf_counter() - start) / number[name])
    finally:
        if was_enabled:
            gc.enable()
    return {name: Stats(s) for name, s in samples.items()}, number


@dataclass
class Cell:
    """One library on one workload."""

    stats: Stats | None = None
    diff: float | None = None
    agree: bool | None = None
    first_s: float | None = None  # the gradient check: first call(s), i.e. compile + len(seeds) steps
    build_s: float | None = None  # making the gradient function (tangent compiles here)
    number: int = 0
    note: str = ""


@dataclass
class Row:
    work: Workload
    cells: dict[str, Cell] = field(default_factory=dict)

    def ratio(self, lib: str) -> float | None:
        hand, cell = self.cells.get("hand"), self.cells.get(lib)
        if not hand or not hand.stats or not cell or not cell.stats:
            return None
        return cell.stats.median / hand.stats.median


def measure(work: Workload, libs: dict[str, Library], budget_s, min_repeats, max_repeats, warmup) -> Row:
    row = Row(work)
    hand_args = work.hand_args or work.args
    impls = {"hand": (work.hand, hand_args)}
    row.cells["hand"] = Cell(diff=0.0, agree=True)
    # srcgrad: cold = a fresh gradient object's first calls (the check)
    start = time.perf_counter()
    if work.key == "cnn":
        fn, _ = cnn.srcgrad_step(cnn.load_gallery())
        args = work.srcgrad_args
    else:
        fn, args = srcgrad.grad(work.fn, wrt=work.wrt), work.args
    build = time.perf_counter() - start
    candidates = {"srcgrad": (fn, args, cf._as_tuple, build)}
    for name, lib in libs.items():
        try:
            start = time.perf_counter()
            fn, args = lib.make(work)
            candidates[name] = (fn, args, lib.to_numpy, time.perf_counter() - start)
        except Unsupported as exc:
            row.cells[name] = Cell(note=str(exc))
        except Exception as exc:
            row.cells[name] = Cell(note=f"{type(exc).__name__}: {_first_line(exc)}")
    for name, (fn, args, to_numpy, build) in candidates.items():
        cell = Cell(build_s=build)
        row.cells[name] = cell
        try:
            start = time.perf_counter()
            cell.diff = cf.check(fn, to_numpy, work.hand, args, hand_args, work.seeds)
            cell.first_s = time.perf_counter() - start
        except Exception as exc:  # the library cannot run this program: say where, do not fail
            cell.note = f"{type(exc).__name__}: {_first_line(exc)}"
            continue
        tol = RTOL[work.dtype]["srcgrad" if name == "srcgrad" else "peer"]
        cell.agree = cell.diff <= tol
        if cell.agree:
            impls[name] = (fn, args)
        else:
            cell.note = f"gradients differ from the reference (max rel. diff {cell.diff:.1e}), not timed"
    stats, number = time_interleaved(impls, budget_s, min_repeats, max_repeats, warmup)
    for name, s in stats.items():
        row.cells[name].stats, row.cells[name].number = s, number[name]
    return row


# ---------------------------------------------------------------------------
# Memory: control_flow's tanh chain, each implementation in a fresh process.


def _memory_peer(name: str, threads: int) -> cf.Peer:
    """A ``control_flow.Peer`` for jax / tangent on the tanh chain (autograd, torch: control_flow's own)."""
    lib = load_libraries(threads, only=(name,))[0][name]

    def make(key, wrt, args):
        work = Workload("memory", "memory", "float64", None, None, wrt, tuple(args))
        return lib.make(work)

    return cf.Peer(name, lib.version, make, lib.to_numpy)


def measure_memory(size: int, threads: int, libs: dict) -> list[cf.MemoryRow]:
    """control_flow's memory rows (hand, srcgrad, autograd, torch), plus jax and tangent children of this module."""
    installed_cf = {n: None for n in ("autograd", "torch") if n in libs}
    rows = cf.measure_memory(size, threads, installed_cf)
    extra = [n for n in ("jax", "tangent") if n in libs]
    if not extra:
        return rows
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path)
    with tempfile.TemporaryDirectory() as tmp:
        hand_out = Path(tmp) / "hand.npz"
        np.savez(hand_out, *cf.hand_tanh_chain(*cf.memory_args(size)))
        with np.load(hand_out) as saved:
            reference = tuple(saved[k] for k in saved.files)
        for impl in extra:
            out = Path(tmp) / f"{impl}.npz"
            proc = subprocess.run([sys.executable, "-m", "benchmarks.run", "--memory-child", impl,
                                   "--memory-size", str(size), "--memory-out", str(out),
                                   "--threads", str(threads)],
                                  cwd=ROOT, env=env, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                rows.append(cf.MemoryRow(impl, None, None, None, note=f"child failed: {last[:200]}"))
                continue
            data = json.loads(proc.stdout.strip().splitlines()[-1])
            with np.load(out) as saved:
                grads = tuple(saved[k] for k in saved.files)
            row = cf.MemoryRow(impl, data["traced_peak"], data["rss_rise"], data["seconds"])
            row.max_rel_diff = cf.max_rel_diff(grads, reference)
            row.grads_agree = row.max_rel_diff <= cf.PEER_RTOL
            if impl == "jax":
                row.note = "n/a: XLA's CPU allocator does not report to tracemalloc"
            rows.append(row)
    return rows


# ---------------------------------------------------------------------------
# The report.


@dataclass
class Result:
    rows: list[Row]
    memory: list[cf.MemoryRow]
    libraries: dict[str, Library]
    notes: list[str]
    threads: int
    threads_applied: bool
    machine: str
    seconds: float
    compile_time: list = field(default_factory=list)  # compile_time.Row per shape and length


def _ms(s: float) -> str:
    return f"{s * 1e3:.3f}" if s < 10 else f"{s * 1e3:.0f}"


def _spread(s: Stats) -> str:
    return f"{_ms(s.median)} ({_ms(s.min)}–{_ms(s.max)})"


def full_table(result: Result) -> str:
    lines = ["| workload | library | ms per step: median (min–max) | / hand | repeats × calls "
             "| first call(s) incl. compile, ms | grads agree (max rel. diff) |",
             "|---|---|---|---|---|---|---|"]
    for row in result.rows:
        for lib in LIBRARIES:
            cell = row.cells.get(lib)
            if cell is None:
                continue
            ratio = row.ratio(lib)
            ratio_s = "–" if ratio is None else (f"**{ratio:.2f}x**" if lib == "srcgrad" else f"{ratio:.2f}x")
            if cell.stats is None:
                lines.append(f"| {row.work.title} | {lib} | – | – | – | – | not timed: {cell.note} |")
                continue
            first = "–" if cell.first_s is None else _ms(cell.first_s + (cell.build_s or 0))
            nseeds = len(row.work.seeds)
            if nseeds > 1 and cell.first_s is not None:
                first += f" ({nseeds} calls)"
            agree = "reference" if lib == "hand" else f"yes ({cell.diff:.1e})"
            lines.append(f"| {row.work.title} | {lib} | {_spread(cell.stats)} | {ratio_s} | "
                         f"{len(cell.stats.samples)} × {cell.number} | {first} | {agree} |")
    return "\n".join(lines)


def ratio_table(result: Result) -> str:
    libs = [lib for lib in LIBRARIES[1:] if any(lib in r.cells for r in result.rows)]
    lines = ["| workload | hand-written NumPy, ms | " + " | ".join(f"{lib} / hand" for lib in libs) + " |",
             "|---|---|" + "---|" * len(libs)]
    for row in result.rows:
        hand = row.cells["hand"].stats
        cells = []
        for lib in libs:
            ratio = row.ratio(lib)
            cells.append("–" if lib not in row.cells else ("n/a" if ratio is None else f"{ratio:.2f}x"))
        lines.append(f"| {row.work.title} | {_ms(hand.median)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def targets(result: Result) -> list[str]:
    """One line per workload with a target (issue 12): srcgrad / hand-written against it, and
    for the CNN whether srcgrad is faster than PyTorch eager."""
    lines = []
    for row in result.rows:
        ratio = row.ratio("srcgrad")
        if row.work.target is None or ratio is None:
            continue
        met = "meets" if ratio <= row.work.target else "**misses**"
        line = f"- {row.work.title}: srcgrad / hand-written = {ratio:.3f}x, {met} the ≤ {row.work.target}x target"
        torch = row.ratio("torch")
        if row.work.key == "cnn" and torch is not None:
            line += f"; PyTorch eager {torch:.3f}x: srcgrad is {'faster' if ratio < torch else '**not faster**'}"
        lines.append(line)
    return lines


def compile_table(result: Result) -> str:
    lines = ["| workload | srcgrad cold: `grad(f)` + first call, ms | srcgrad cached call, ms "
             "| jax.jit first call (trace + compile), ms | jax.jit steady, ms | tangent `grad(f)`, ms |",
             "|---|---|---|---|---|---|"]
    for row in result.rows:
        out = [row.work.title]
        s = row.cells.get("srcgrad")
        n = len(row.work.seeds)
        if s and s.first_s is not None and s.stats:
            # the check made len(seeds) calls; the first pays the compile (later depths may compile too)
            cold = s.build_s + s.first_s - (n - 1) * s.stats.median
            out += [_ms(cold), _ms(s.stats.median)]
        else:
            out += ["–", "–"]
        j = row.cells.get("jax.jit")
        if j and j.first_s is not None and j.stats:
            out += [_ms(j.first_s - (n - 1) * j.stats.median) + (f" ({n} depths)" if n > 1 else ""),
                    _ms(j.stats.median)]
        else:
            out += ["–", "–"]
        t = row.cells.get("tangent")
        out.append(_ms(t.build_s) if t and t.build_s is not None and t.stats else "–")
        lines.append("| " + " | ".join(out) + " |")
    return "\n".join(lines)


def memory_table(result: Result) -> str:
    wrapped = cf.Result([], result.memory, {}, [], result.threads, result.threads_applied, "", 0.0)
    return cf.memory_table(wrapped)


def peer_notes(result: Result) -> list[str]:
    lines = [f"- {note}" for note in result.notes]
    for row in result.rows:
        for lib, cell in row.cells.items():
            if cell.stats is None and cell.note:
                lines.append(f"- {lib}, {row.work.title}: {cell.note}")
    return lines


def report(result: Result, quick: bool) -> str:
    libs = result.libraries
    versions = ", ".join(f"{lib.name} {lib.version}" for lib in libs.values() if lib.name != "jax.jit")
    blas = [f"- NumPy (hand, srcgrad): {_env.blas_description()}"]
    blas += [f"- {lib.name}: {lib.blas}" for lib in libs.values() if lib.name != "jax.jit"]
    parts = [
        "## All workloads against the peers",
        "",
        "One gradient step (forward + backward) per workload for hand-written NumPy (the reference), "
        "srcgrad, and each installed peer: HIPS autograd, PyTorch eager (CPU), JAX's `jax.grad` "
        "eagerly and under `jax.jit`, and tangent-ad (the maintained fork of Google's Tangent). "
        "Workloads: the tutorial's two-layer net (float64, float32; `benchmarks/two_layer.py`), the "
        "dynamic net (depth `random.randint(0, 3)`), the RNN and the 1000-step scalar loop as a `for` "
        "(`benchmarks/control_flow.py`) and as a `while`, and one training step of the gallery's digits "
        "CNN (`examples/digits_cnn.py`: batch 32 of 8×8 images, conv 1→16 3×3 padding 1, ReLU, 2×2 "
        "max pool, linear to 10, cross-entropy, float32; the reference is an im2col convolution with "
        "its weight gradient as one matrix product, `benchmarks/cnn.py`). Each peer is written as "
        "that library expresses it (PyTorch: `F.conv2d`/`F.max_pool2d`; JAX: `lax.conv_general_dilated`/"
        "`lax.reduce_window`; autograd: nine shifted slices). Every gradient is checked against the "
        "reference first (max |g − r| / max |r| ≤ 1e-10 srcgrad, 1e-8 peers in float64; 1e-5 / 1e-4 "
        "in float32). Times: median per step and min–max over interleaved repeats (each library "
        "gets about the same timed budget, in batches of about 1 ms, each after an untimed batch of "
        "its own, the libraries in a shuffled order each round), garbage collector off. "
        "*first call(s)* is the gradient check: a fresh gradient function's first calls (one per "
        "depth for the dynamic net), i.e. compilation plus the step(s).",
        "",
        "```bash",
        COMMAND.replace("--write", "--quick") if quick else COMMAND,
        "```",
        "",
        f"Machine: {result.machine}",
        "",
        f"Peers: {versions or 'none installed'}; threads pinned to {result.threads} for every library "
        "(OMP/OpenBLAS/MKL variables before any import, `torch.set_num_threads`, XLA_FLAGS for JAX). BLAS:",
        *blas,
        "",
        ratio_table(result),
        "",
        *targets(result),
        "",
        "![srcgrad and peers, time per step / hand-written NumPy](benchmarks.png)",
        "",
        "Full table:",
        "",
        full_table(result),
        "",
        "Compile times:",
        "",
        compile_table(result),
        "",
        f"Peak memory, 100 steps of `h = np.tanh(h @ w)` on {cf.QUICK['memory'] if quick else cf.FULL['memory']}²"
        " matrices, each implementation in a fresh process (as in the control-flow section):",
        "",
        memory_table(result),
        "",
        "What each peer could not do, and why:",
        "",
        *(peer_notes(result) or ["- nothing: every installed peer ran every workload"]),
        "- jax.jit, dynamic net: the depth is drawn outside the jitted function and passed as a static "
        "argument (a depth drawn inside would be frozen at trace time): one compiled program per depth.",
        "- jax.jit, scalar loops: written as `lax.fori_loop` (a Python loop under `jit` unrolls 1000 steps "
        "into the program; `lax.while_loop` has no reverse-mode derivative), so `for` and `while` are the "
        "same program; eager `jax.grad` runs the Python `for`/`while` as written.",
        "- tangent: needs `np.dot(x, w)` instead of `x.dot(w)` (it finds no gradient for method calls) and "
        "no attribute reads (`wh.shape[0]`: 'attributes are not yet supported for gradients'), so its RNN "
        "starts from `tanh(xs[0] @ wx + b)` instead of `np.zeros(shape)`, and its CNN has the sizes as "
        "constants and the nine im2col slices written out (it does not parse the list comprehension).",
        "",
        f"Whole run: {result.seconds:.0f} s.",
    ]
    if quick:
        parts += ["", "_Quick mode: tiny sizes and few repeats; these numbers mean nothing._"]
    return "\n".join(parts) + "\n"


def chart(result: Result, path: Path = CHART) -> Path | None:
    """Grouped bars: time / hand-written NumPy per workload per library, log scale."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    libs = [lib for lib in LIBRARIES[1:] if any(r.ratio(lib) for r in result.rows)]
    fig, ax = plt.subplots(figsize=(12, 5))
    width = 0.8 / max(1, len(libs))
    for k, lib in enumerate(libs):
        xs, ys = [], []
        for i, row in enumerate(result.rows):
            ratio = row.ratio(lib)
            if ratio:
                xs.append(i + (k - (len(libs) - 1) / 2) * width)
                ys.append(ratio)
        ax.bar(xs, ys, width, label=lib)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(result.rows)))
    ax.set_xticklabels([r.work.title.replace(", ", ",\n") for r in result.rows], fontsize=8)
    ax.set_ylabel("time per step / hand-written NumPy (log)")
    ax.set_title(f"Gradient step vs hand-written NumPy ({result.threads} thread(s); lower is better)")
    ax.legend(fontsize=8, ncol=len(libs))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> Result | None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes and few repeats (smoke test)")
    parser.add_argument("--write", action="store_true",
                        help="update docs/benchmarks.md (sections 'peers' and 'compile_time') and "
                             "docs/benchmarks.png")
    parser.add_argument("--threads", type=int, default=_env.DEFAULT_THREADS,
                        help="threads for every library (default 1); give it on the command line so it "
                             "is applied before NumPy loads")
    parser.add_argument("--peers", default=",".join(PEERS),
                        help=f"comma-separated subset of {','.join(PEERS)} (default: all installed)")
    parser.add_argument("--memory-child", choices=("jax", "tangent"), help=argparse.SUPPRESS)
    parser.add_argument("--memory-size", type=int, default=cf.FULL["memory"], help=argparse.SUPPRESS)
    parser.add_argument("--memory-out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    applied = _PINNED_AT_IMPORT == args.threads
    if not applied:
        pin_all(args.threads)  # inside pytest: too late for NumPy, still in time for JAX if not loaded
    if args.memory_child:
        peer = _memory_peer(args.memory_child, args.threads)
        cf.load_peers = lambda threads, only: ({peer.name: peer}, [])  # memory_child looks peers up here
        print(json.dumps(cf.memory_child(args.memory_child, args.memory_size, args.threads, args.memory_out)))
        return None

    started = time.perf_counter()
    only = tuple(p for p in args.peers.split(",") if p)
    unknown = set(only) - set(PEERS)
    if unknown:
        parser.error(f"unknown peers {sorted(unknown)}")
    libs, notes = load_libraries(args.threads, only)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    timing = dict(budget_s=0.02, min_repeats=1, max_repeats=3, warmup=1) if args.quick else \
        dict(budget_s=1.0, min_repeats=4, max_repeats=300, warmup=5)
    rows = []
    for work in workloads(args.quick):
        print(f"… {work.title}", file=sys.stderr, flush=True)
        rows.append(measure(work, libs, **timing))
    print("… memory", file=sys.stderr, flush=True)
    memory = measure_memory(cf.QUICK["memory"] if args.quick else cf.FULL["memory"], args.threads, libs)
    result = Result(rows, memory, libs, notes, args.threads, applied, _env.machine_line(args.threads, applied),
                    time.perf_counter() - started)
    text = report(result, args.quick)
    print(text, end="")
    if args.write:
        print(f"\nwrote {_env.write_section(SECTION, text)}")
        png = chart(result)
        print(f"wrote {png}" if png else "matplotlib is not installed: no chart")
    # Compile time against function length: its own section (python -m benchmarks.compile_time).
    print(file=sys.stderr)
    result.compile_time = compile_time.main(["--quick"] * args.quick + ["--write"] * args.write)
    return result


if __name__ == "__main__":
    main()
