"""The numba backend: the NumPy program, emitted in the subset numba compiles and run
under ``numba.njit``.

Generated code names NumPy ``np`` as the NumPy backend does; its ``rt.*`` helpers are
their numba forms (``backends/numba_runtime.py``, imported there as ``rt``), and
``transforms/numba_subset.py`` rewrites what numba does not compile
(``reversed(range(n))``) and refuses, at the user's line, what it cannot
(``np.einsum``, a ``with`` block, a global read).  The loaded function is compiled by
``numba.njit(cache=False)`` at its first call for each set of argument types (numba
keeps one machine-code version per type signature).  numba is an optional dependency:
``pip install numba``; nothing here imports it before this backend is used.
"""
from __future__ import annotations

import functools
import re

import numpy as np

from .. import errors
from . import numpy as numpy_backend

MODULE_NAME = "np"
IMPORTS = ("import numpy as np", "from srcgrad.backends import numba_runtime as rt")
MODULE = np
_typing = []  # numba's typing context, loaded once (what it can compile: ``supports``)


def numba():
    """The ``numba`` module.

    Raises:
        srcgrad.errors.BackendError: numba is not installed.
    """
    try:
        import numba
    except ImportError:
        raise errors.BackendError(
            "backend='numba' needs numba, which is not installed", None,
            "install it: pip install numba (or pip install 'srcgrad[numba]'), or use backend='numpy'"
        ) from None
    return numba


def module():
    return np


def check_device() -> None:
    """The backend runs on the host; it needs numba installed (a clear error if not)."""
    numba()


def supports(obj) -> bool:
    """Whether numba's nopython mode has an implementation of the function ``obj``
    (``np.tanh``: yes; ``np.einsum``: no).  Its arguments' types are checked when the
    program is first called."""
    if not _typing:
        numba().njit(lambda x: x + 1)(1.0)  # (numba registers NumPy's implementations at its first compile)
        from numba.core.registry import cpu_target
        _typing.append(cpu_target.typing_context)
    try:
        _typing[0].resolve_value_type(obj)
    except Exception:  # noqa: BLE001 - numba says "cannot determine Numba type" in several ways
        return False
    return True


def spelling(obj) -> str | None:
    """``np.<name>`` for a NumPy function numba compiles, else None (refused at the user's line)."""
    spelled = numpy_backend.spelling(obj)
    return spelled if spelled is not None and supports(obj) else None


def compiled(function, name: str):
    """``function`` (the loaded generated code) compiled by ``numba.njit`` when first called
    with each set of argument types.  A typing error numba still finds then (a method of an
    array numba lacks, types that do not unify) is raised as a ``BackendError`` naming
    ``name``, with numba's first line, rather than numba's traceback."""
    nb = numba()
    jitted = nb.njit(cache=False)(function)
    failures = (nb.core.errors.TypingError, nb.core.errors.UnsupportedError)

    @functools.wraps(function)
    def run(*args):
        try:
            return jitted(*args)
        except failures as error:
            first, line = _first_line(str(error))
            raise errors.BackendError(
                f"numba could not compile {name}'s gradient for arguments of types "
                f"({', '.join(_type_name(a) for a in args)}): {first}",
                errors.user_origin(function.__code__.co_filename, line) if line else None,
                "use backend='numpy' for this function "
                "(srcgrad.source(g, *args) shows the code numba was given)"
            ) from None

    run.jitted = jitted
    return run


def _first_line(message: str) -> tuple:
    """numba's first line that says what failed (not which of its passes did), and the
    line of the generated code it names (0 where none)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    said = next((line for line in lines if not line.startswith("Failed in")), lines[0] if lines else "")
    number = re.search(r"line (\d+)|\((\d+)\)", message)
    return said, int(number.group(1) or number.group(2)) if number else 0


def _type_name(value) -> str:
    dtype = getattr(value, "dtype", None)
    return f"{dtype}[{','.join(':' * np.ndim(value))}]" if np.ndim(value) else type(value).__name__
