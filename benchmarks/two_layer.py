"""The tutorial's two-layer network: srcgrad against the hand-written NumPy backward.

One gradient step (forward and backward, returning ``grad_w1, grad_w2``) of
the loss ``sum((relu(x @ w1) @ w2 - y) ** 2)`` with N=64, D_in=1000, H=100,
D_out=10, in float64 and float32.  Both implementations run in the same
process on the same arrays, interleaved repeat by repeat, after their
gradients have been checked to agree.  Also measured: srcgrad's compile time
(a fresh ``srcgrad.grad`` object and its first call) and the per-call
overhead of the cached gradient function.

Run from the repository root::

    python -m benchmarks.two_layer            # print the tables
    python -m benchmarks.two_layer --write    # ... and update docs/benchmarks.md
    python -m benchmarks.two_layer --quick    # tiny sizes, a few repeats (the smoke test)
    python -m benchmarks.two_layer --threads 2
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
import statistics  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import numpy as np  # noqa: E402

import srcgrad  # noqa: E402

SECTION = "two_layer"
COMMAND = "python -m benchmarks.two_layer --write"
FULL_SIZES = dict(n=64, d_in=1000, h=100, d_out=10)
QUICK_SIZES = dict(n=8, d_in=20, h=10, d_out=3)
# The sizes compile times are measured on: same ranks as the real arrays (the
# compile cache is keyed on ranks), so the first call compiles the same
# program, and the run itself costs microseconds next to the compile.
TINY_SIZES = dict(n=2, d_in=3, h=4, d_out=2)
TARGET_RATIO = 1.05
TARGET_COLD_COMPILE_S = 20e-3
# Gradient agreement before timing: the two programs do the same floating-point
# operations in float64; float32 allows for BLAS blocking differences.
TOLERANCES = {np.float64: dict(rtol=1e-12, atol_scale=0.0),
              np.float32: dict(rtol=1e-4, atol_scale=1e-5)}


def two_layer_loss(w1, w2, x, y):
    """The tutorial's loss, exactly as it writes the forward pass."""
    h = x.dot(w1)
    h_relu = np.maximum(h, 0)
    y_pred = h_relu.dot(w2)
    return np.square(y_pred - y).sum()


def hand_written_grad(w1, w2, x, y):
    """The tutorial's NumPy warm-up: forward pass and hand-written backward pass."""
    h = x.dot(w1)
    h_relu = np.maximum(h, 0)
    y_pred = h_relu.dot(w2)
    grad_y_pred = 2.0 * (y_pred - y)
    grad_w2 = h_relu.T.dot(grad_y_pred)
    grad_h_relu = grad_y_pred.dot(w2.T)
    grad_h = grad_h_relu.copy()
    grad_h[h < 0] = 0
    grad_w1 = x.T.dot(grad_h)
    return grad_w1, grad_w2


def make_data(dtype, n, d_in, h, d_out, seed=0):
    """``(w1, w2, x, y)`` drawn from a standard normal, cast to ``dtype``."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d_in)).astype(dtype)
    y = rng.standard_normal((n, d_out)).astype(dtype)
    w1 = rng.standard_normal((d_in, h)).astype(dtype)
    w2 = rng.standard_normal((h, d_out)).astype(dtype)
    return w1, w2, x, y


@dataclass
class Stats:
    """Seconds per call over the repeats: median and the min–max spread."""

    samples: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def max(self) -> float:
        return max(self.samples)


@dataclass
class Row:
    """One dtype's result."""

    dtype: str
    grads_agree: bool
    max_rel_diff: float
    hand: Stats | None = None
    srcgrad: Stats | None = None
    number: int = 0

    @property
    def ratio(self) -> float:
        """srcgrad's median over the hand-written median: the headline number."""
        return self.srcgrad.median / self.hand.median

    @property
    def paired_ratio(self) -> float:
        """Median of the per-repeat ratios: each srcgrad batch over the hand-written
        batch timed next to it, which cancels drift slower than one repeat."""
        return statistics.median(s / h for s, h in zip(self.srcgrad.samples, self.hand.samples))


@dataclass
class Result:
    """What :func:`main` measured (returned for the smoke test and for other scripts)."""

    rows: list[Row]
    cold_compile: Stats
    first_compile_s: float
    wrapper_overhead_s: float
    cached_tiny: Stats
    raw_tiny: Stats
    sizes: dict
    threads: int
    threads_applied: bool
    machine: str


def _time_batch(fn, args, number) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn(*args)
    return (time.perf_counter() - start) / number


def interleaved(impls: dict, args, repeats: int, warmup: int) -> tuple[dict[str, Stats], int]:
    """Time each callable on ``args``, alternating between them repeat by repeat.

    Interleaving (and reversing the order every other repeat) spreads clock
    drift, turbo and cache effects evenly over the implementations instead of
    charging them to whichever ran second.  The garbage collector is off while
    timing, as in :mod:`timeit`, so that a collection triggered by one
    implementation's allocations is not billed to the other.

    Returns:
        Per-implementation :class:`Stats` in seconds per call, and the number
        of calls per timed batch (chosen so a batch lasts about a millisecond,
        keeping timer resolution out of the result).
    """
    for fn in impls.values():
        for _ in range(warmup):
            fn(*args)
    slowest = max(_time_batch(fn, args, 3) for fn in impls.values())
    number = max(1, round(1e-3 / slowest)) if slowest > 0 else 1000
    names = list(impls)
    samples = {name: [] for name in names}
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for i in range(repeats):
            order = names if i % 2 == 0 else names[::-1]
            for name in order:
                samples[name].append(_time_batch(impls[name], args, number))
    finally:
        if was_enabled:
            gc.enable()
    return {name: Stats(s) for name, s in samples.items()}, number


def check_agreement(dtype, ours, reference) -> tuple[bool, float]:
    """Whether srcgrad's gradients match the hand-written ones, and the largest relative difference.

    The relative difference is ``max|g - r| / max|r|`` per gradient, the worst of the two.
    """
    tol = TOLERANCES[dtype]
    agree, worst = True, 0.0
    for g, r in zip(ours, reference):
        scale = float(np.max(np.abs(r))) or 1.0
        worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - r))) / scale)
        agree &= g.dtype == r.dtype and g.shape == r.shape and bool(
            np.allclose(g, r, rtol=tol["rtol"], atol=tol["atol_scale"] * scale))
    return agree, worst


def measure_step(dtype, sizes, repeats, warmup) -> Row:
    """Check, then time, one gradient step of both implementations in ``dtype``."""
    args = make_data(dtype, **sizes)
    dloss = srcgrad.grad(two_layer_loss, wrt=(0, 1))
    agree, diff = check_agreement(dtype, dloss(*args), hand_written_grad(*args))
    row = Row(np.dtype(dtype).name, agree, diff)
    if not agree:  # timing a wrong gradient would be meaningless
        return row
    stats, row.number = interleaved({"hand": hand_written_grad, "srcgrad": dloss}, args, repeats, warmup)
    row.hand, row.srcgrad = stats["hand"], stats["srcgrad"]
    return row


def measure_compile(fresh: int) -> tuple[Stats, float]:
    """Cold compile: a fresh ``srcgrad.grad`` object and its first call, ``fresh`` times.

    The first compile in the process is returned separately: it also pays for
    one-time work (lazy imports, parsing and caching the rule templates) that
    later compiles reuse.
    """
    args = make_data(np.float64, **TINY_SIZES)
    times = []
    for _ in range(fresh + 1):
        start = time.perf_counter()
        srcgrad.grad(two_layer_loss, wrt=(0, 1))(*args)
        times.append(time.perf_counter() - start)
    return Stats(times[1:]), times[0]


def measure_overhead(repeats: int) -> tuple[float, Stats, Stats]:
    """Per-call cost of the cached gradient function on top of its generated code.

    On tiny arrays the NumPy work is a few microseconds, so the difference
    between calling the ``srcgrad.grad`` object and calling the generated
    Python function it holds directly is the wrapper's own cost: argument
    binding, the wrt dtype check, the cache key, refreshing the free names and
    matching each gradient's dtype and shape.
    """
    args = make_data(np.float64, **TINY_SIZES)
    dloss = srcgrad.grad(two_layer_loss, wrt=(0, 1))
    generated = dloss.compiled(args).function
    stats, _ = interleaved({"wrapper": dloss, "generated": generated}, args, repeats, warmup=200)
    return stats["wrapper"].median - stats["generated"].median, stats["wrapper"], stats["generated"]


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f}"


def _spread_ms(s: Stats) -> str:
    return f"{_ms(s.median)} ({_ms(s.min)}–{_ms(s.max)})"


def step_table(result: Result) -> str:
    """The per-step Markdown table."""
    lines = [
        "| dtype | hand-written NumPy, ms | srcgrad, ms | srcgrad / hand | paired ratio "
        "| grads agree (max rel. diff) |",
        "|---|---|---|---|---|---|",
    ]
    for row in result.rows:
        agree = f"{'yes' if row.grads_agree else 'NO'} ({row.max_rel_diff:.1e})"
        if row.hand is None:
            lines.append(f"| {row.dtype} | – | – | – | – | {agree} |")
            continue
        lines.append(f"| {row.dtype} | {_spread_ms(row.hand)} | {_spread_ms(row.srcgrad)} | "
                     f"{row.ratio:.3f}x | {row.paired_ratio:.3f}x | {agree} |")
    return "\n".join(lines)


def compile_table(result: Result) -> str:
    """The compile-time Markdown table."""
    c = result.cold_compile
    return "\n".join([
        "| srcgrad compile | time |",
        "|---|---|",
        f"| cold: fresh `srcgrad.grad(...)` + first call, median of {len(c.samples)} | "
        f"{_ms(c.median)} ms ({_ms(c.min)}–{_ms(c.max)}) |",
        f"| first compile in the process (includes one-time template parsing) | "
        f"{_ms(result.first_compile_s)} ms |",
        f"| cached: wrapper overhead per call (call − generated function, tiny arrays) | "
        f"{_us(result.wrapper_overhead_s)} µs |",
        f"| cached call on tiny arrays / generated function alone | "
        f"{_us(result.cached_tiny.median)} µs / {_us(result.raw_tiny.median)} µs |",
    ])


def verdicts(result: Result) -> list[str]:
    """One line per target: met or not, with the number."""
    lines = []
    for row in result.rows:
        if row.hand is None:
            lines.append(f"- {row.dtype}: gradients disagree, not timed")
            continue
        ok = "meets" if row.ratio <= TARGET_RATIO else "misses"
        lines.append(f"- {row.dtype}: srcgrad / hand-written = {row.ratio:.3f}x, "
                     f"{ok} the ≤ {TARGET_RATIO:.2f}x target")
    cold = result.cold_compile.median
    ok = "meets" if cold < TARGET_COLD_COMPILE_S else "misses"
    lines.append(f"- cold compile {_ms(cold)} ms, {ok} the < {TARGET_COLD_COMPILE_S * 1e3:.0f} ms target")
    return lines


def report(result: Result, quick: bool) -> str:
    """The benchmark's section of ``docs/benchmarks.md`` (also what is printed)."""
    s = result.sizes
    rows = result.rows
    number = ", ".join(f"{r.dtype}: {r.number}" for r in rows if r.hand is not None)
    repeats = len(rows[0].hand.samples) if rows and rows[0].hand is not None else 0
    parts = [
        "## Two-layer network (the tutorial's warm-up)",
        "",
        "One gradient step (forward + backward, returning `grad_w1, grad_w2`) of "
        "`np.square(np.maximum(x.dot(w1), 0).dot(w2) - y).sum()` "
        f"with N={s['n']}, D_in={s['d_in']}, H={s['h']}, D_out={s['d_out']}: "
        "`srcgrad.grad(two_layer_loss, wrt=(0, 1))` against the tutorial's hand-written NumPy backward "
        "(`grad_h = grad_h_relu.copy(); grad_h[h < 0] = 0`, ...). "
        "Gradients are checked to agree first (rtol 1e-12 in float64, 1e-4 in float32). "
        f"Times are the median per step with the min–max spread over {repeats} interleaved repeats "
        f"(calls per timed batch: {number}), after warm-up, garbage collector off while timing.",
        "",
        "```bash",
        COMMAND + (" --quick" if quick else ""),
        "```",
        "",
        f"Machine: {result.machine}",
        "",
        step_table(result),
        "",
        compile_table(result),
        "",
        *verdicts(result),
    ]
    if quick:
        parts += ["", "_Quick mode: tiny sizes and few repeats; these numbers mean nothing._"]
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> Result:
    """Run the benchmark, print its tables, and optionally write ``docs/benchmarks.md``.

    Args:
        argv: command-line arguments (``--quick``, ``--write``, ``--threads N``,
            ``--repeats N``); ``sys.argv[1:]`` when None.

    Returns:
        The measurements, as a :class:`Result`.
    """
    parser = argparse.ArgumentParser(prog="python -m benchmarks.two_layer", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes and few repeats (smoke test)")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--threads", type=int, default=_env.DEFAULT_THREADS,
                        help="BLAS/OpenMP threads (default 1); must be given on the command line "
                             "to take effect, since it is applied before NumPy loads")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats per implementation")
    args = parser.parse_args(argv)

    applied = _PINNED_AT_IMPORT == args.threads
    if not applied:
        # Inside another program (pytest) NumPy is already loaded: the variables
        # are set for consistency in child processes, but cannot take effect here.
        _env.pin_threads(args.threads)
    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    repeats = args.repeats or (5 if args.quick else 1000)
    fresh = 3 if args.quick else 15

    cold, first = measure_compile(fresh)
    rows = [measure_step(dtype, sizes, repeats, warmup=2 if args.quick else 20)
            for dtype in (np.float64, np.float32)]
    overhead, cached_tiny, raw_tiny = measure_overhead(repeats)
    result = Result(rows, cold, first, overhead, cached_tiny, raw_tiny, sizes, args.threads, applied,
                    _env.machine_line(args.threads, applied))
    text = report(result, args.quick)
    print(text, end="")
    if args.write:
        path = _env.write_section(SECTION, text)
        print(f"\nwrote {path}")
    return result


if __name__ == "__main__":
    main()
