"""The NumPy backend: how generated code names the array module and its functions."""
from __future__ import annotations

import numpy as np

MODULE_NAME = "np"
IMPORTS = ("import numpy as np", "from srcgrad import runtime as rt")
MODULE = np

_NAMESPACES = (("np", np), ("np.linalg", np.linalg), ("np.random", np.random), ("np.fft", np.fft),
               ("np.lib.stride_tricks", np.lib.stride_tricks))


def spelling(obj) -> str | None:
    """The generated code's spelling of a NumPy object (``np.exp``), or None."""
    name = getattr(obj, "__name__", None)
    if not isinstance(name, str):
        return None
    for prefix, namespace in _NAMESPACES:
        if getattr(namespace, name, None) is obj:
            return f"{prefix}.{name}"
    return None


def module():
    return np


def check_device() -> None:
    """NumPy runs on the host: nothing to check."""


def compiled(function, name: str):
    """The loaded program as it runs: the function itself (the numba backend compiles it)."""
    return function
