"""Shared test helpers: central finite differences in float64."""
from __future__ import annotations

import tempfile

import numpy as np

try:  # the suite is deterministic: property tests draw the same examples on every run
    from hypothesis import configuration as _hypothesis_configuration
    from hypothesis import settings as _hypothesis_settings
except ImportError:  # hypothesis comes with the test extra
    pass
else:
    # and writes nothing into the checkout (hypothesis caches the constants it collects)
    _hypothesis_configuration.set_hypothesis_home_dir(tempfile.mkdtemp(prefix="srcgrad_hypothesis_"))
    _hypothesis_settings.register_profile("srcgrad", derandomize=True, database=None, print_blob=True)
    _hypothesis_settings.load_profile("srcgrad")


def numerical_grad(f, args, index, eps=1e-6):
    """Central finite-difference gradient of scalar ``f(*args)`` w.r.t. ``args[index]``.

    Source: central difference (f(x+h) - f(x-h)) / 2h, error O(h^2)
    (Nocedal & Wright, Numerical Optimization, 2nd ed., §8.1).
    """
    args = list(args)
    x = np.array(args[index], dtype=np.float64, order="C")  # reshape(-1) below must be a view
    grad = np.zeros_like(x)
    flat = x.reshape(-1)
    gflat = grad.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        args[index] = x.copy() if x.ndim else float(x)
        plus = float(f(*args))
        flat[i] = old - eps
        args[index] = x.copy() if x.ndim else float(x)
        minus = float(f(*args))
        flat[i] = old
        gflat[i] = (plus - minus) / (2 * eps)
    return grad


def pytest_addoption(parser):
    parser.addoption("--record-generated", metavar="DIR", default=None,
                     help="write every program srcgrad generates into DIR, one file per distinct text "
                          "(tools/compare_generated.py compares two such runs: a refactoring keeps them equal)")


def pytest_configure(config):
    folder = config.getoption("--record-generated", default=None)
    if folder:
        import hashlib
        import pathlib

        from srcgrad.transforms import emit

        out = pathlib.Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        load = emit.load

        def recorded(text, filename, namespace):
            (out / f"{hashlib.sha1(text.encode()).hexdigest()[:16]}.py").write_text(text)
            return load(text, filename, namespace)

        emit.load = recorded
