"""What every benchmark does before and around its measurements.

Thread pinning has to happen before NumPy is imported: OpenBLAS, MKL and
OpenMP read their thread counts from the environment once, when the library
loads.  That is why this module must not import NumPy at import time.
"""
from __future__ import annotations

import os
import platform
import re
import sys
from pathlib import Path

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
DEFAULT_THREADS = 1
DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


def threads_from_argv(argv: list[str]) -> int:
    """The value of ``--threads N`` / ``--threads=N`` in ``argv``, else the default (1).

    Read by hand, not with argparse, because it runs before NumPy is imported,
    ahead of each benchmark's real argument parsing.
    """
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if arg.startswith("--threads="):
            return int(arg.split("=", 1)[1])
    return DEFAULT_THREADS


def pin_threads(n: int) -> bool:
    """Set every BLAS/OpenMP thread-count variable to ``n``.

    All three are set to the same value (overriding the caller's environment)
    so that hand-written NumPy and srcgrad's generated code run on identical
    BLAS settings.  ``OPENBLAS_CORETYPE`` is deliberately left untouched: the
    machine may set it to pick a kernel, and that choice is part of the
    machine, not of the benchmark.

    Returns:
        True when the setting takes effect (NumPy not imported yet); False when
        NumPy is already loaded, e.g. when the harness runs inside pytest.
    """
    for name in THREAD_VARIABLES:
        os.environ[name] = str(n)
    return "numpy" not in sys.modules


def blas_description() -> str:
    """Which BLAS NumPy uses, with its live thread count when threadpoolctl is installed.

    threadpoolctl is optional (not a dependency of srcgrad); without it the
    build-time configuration from ``np.show_config`` is summarised instead.
    """
    try:
        import threadpoolctl
    except ImportError:
        threadpoolctl = None
    if threadpoolctl is not None:
        import numpy  # noqa: F401  (load the BLAS so threadpoolctl can see it)

        pools = [p for p in threadpoolctl.threadpool_info() if p.get("user_api") == "blas"]
        if pools:
            return "; ".join(
                f"{p.get('internal_api')} {p.get('version')} ({p.get('architecture')}, "
                f"{p.get('num_threads')} threads)" for p in pools)
    import numpy as np

    try:
        config = np.show_config(mode="dicts")
        blas = config["Build Dependencies"]["blas"]
        return f"{blas.get('name')} {blas.get('version')}"
    except Exception:  # older NumPy: no dict mode; the name is still worth printing
        return "unknown (see numpy.show_config())"


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what ``platform`` knows."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else (platform.processor() or platform.machine())


def machine_line(threads: int, applied: bool = True) -> str:
    """One line describing where the numbers came from.

    Args:
        threads: the thread count the benchmark asked for.
        applied: whether it was set before NumPy loaded (else it is only a request).
    """
    import numpy as np

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    parts = [
        f"CPU: {cpu_model()}",
        f"{cores} cores available",
        f"Python {platform.python_version()}",
        f"NumPy {np.__version__}",
        f"BLAS: {blas_description()}",
        f"threads pinned to {threads}" if applied else f"{threads} threads requested, too late to pin",
    ]
    coretype = os.environ.get("OPENBLAS_CORETYPE")
    if coretype:
        parts.append(f"OPENBLAS_CORETYPE={coretype} (set by the machine)")
    return " · ".join(parts)


INTRO = """\
# Benchmarks

srcgrad's generated gradient code measured against the backward pass a careful
person writes by hand in NumPy, in the same process, on the same arrays, with
the BLAS thread count pinned identically for both.  Each section is produced by
one module in `benchmarks/` and rewritten by its `--write` flag; the numbers are
from one run on the machine named in the section, so compare ratios, not
absolute times, across machines.

These are not tests: CI runs each harness only in `--quick` mode
(`tests/examples/test_benchmarks_smoke.py`), which checks that it runs and that the
gradients agree, never how fast anything is.
"""


def write_section(name: str, body: str, path: Path = DOCS) -> Path:
    """Replace (or append) the section ``name`` of ``docs/benchmarks.md``.

    Each benchmark owns the text between ``<!-- begin NAME -->`` and
    ``<!-- end NAME -->``, so later benchmarks (control flow, RNN, ...) add
    their own sections without disturbing this one.
    """
    begin, end = f"<!-- begin {name} -->", f"<!-- end {name} -->"
    block = f"{begin}\n{body.strip()}\n{end}\n"
    text = path.read_text() if path.exists() else INTRO
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        tail = rest.split(end, 1)[1].lstrip("\n")
        text = head + block + ("\n" + tail if tail else "")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
