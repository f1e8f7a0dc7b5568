"""The settings of every test run: the hypothesis profile and ``--record-generated``.

The helpers tests share are modules of the ``tests`` package (``tests/finite_differences.py``)."""
from __future__ import annotations

import tempfile

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
