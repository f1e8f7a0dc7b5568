"""Array backends: what differs between array libraries lives here, in one place."""
from . import cupy as cupy_backend
from . import numba as numba_backend
from . import numpy as numpy_backend

BACKENDS = {"numpy": numpy_backend, "cupy": cupy_backend, "numba": numba_backend}
_default = ["numpy"]


def get(name: str | None):
    """The backend module for ``name`` (None: the default, see :func:`set_default_backend`)."""
    name = name or _default[0]
    try:
        return BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; choose one of {sorted(BACKENDS)}") from None


def set_default_backend(name: str) -> None:
    """Choose the backend once for a whole program (``"numpy"``, ``"cupy"`` or ``"numba"``).

    Gradient functions made afterwards without ``backend=`` use it.

    Raises:
        ValueError: an unknown backend name.
    """
    get(name)
    _default[0] = name


def default_backend() -> str:
    return _default[0]
