"""The CuPy backend: the same program, with every NumPy call retargeted to CuPy.

Generated code imports ``cupy as cp`` and calls ``cp.<name>`` where the user
wrote NumPy; rule templates and zero/scatter helpers follow (``cp.add.at`` is
CuPy's scatter-add).  Runtime helpers work on CuPy arrays unchanged: NumPy
functions dispatch to CuPy through ``__array_function__`` (NEP 18).
"""
from __future__ import annotations

from .. import errors
from . import numpy as numpy_backend

MODULE_NAME = "cp"
IMPORTS = ("import cupy as cp", "from srcgrad import runtime as rt")
_stand_in = None  # tests run emitted CuPy programs with NumPy standing in (no GPU needed)


def module():
    """The ``cupy`` module (or the stand-in set by tests).

    Raises:
        srcgrad.errors.BackendError: CuPy is not installed.
    """
    if _stand_in is not None:
        return _stand_in
    try:
        import cupy
    except ImportError:
        raise errors.BackendError(
            "backend='cupy' needs CuPy, which is not installed",
            None, "install it with the GPU extra: pip install 'srcgrad[gpu]' (CUDA 12), or use "
                  "backend='numpy'") from None
    return cupy


def check_device() -> None:
    """Raise a clear error when no CUDA GPU can be used."""
    if _stand_in is not None:
        return
    cupy = module()
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - CUDA reports missing drivers in several ways
        count, why = 0, f" ({type(exc).__name__}: {exc})"
    else:
        why = ""
    if count == 0:
        raise errors.BackendError(
            f"backend='cupy' needs a CUDA GPU, and none is present{why}", None,
            "run on a machine with an NVIDIA GPU and its driver, or use backend='numpy'")


def spelling(obj) -> str | None:
    """``cp.<name>`` for a NumPy object that CuPy has too, else None."""
    spelled = numpy_backend.spelling(obj)
    if spelled is None:
        return None
    target = module()
    for part in spelled.split(".")[1:]:
        target = getattr(target, part, None)
        if target is None:
            return None
    return "cp" + spelled[2:]


def __getattr__(name):  # MODULE is looked up when code is loaded: importing srcgrad never needs CuPy
    if name == "MODULE":
        return module()
    raise AttributeError(name)


def compiled(function, name: str):
    """The loaded program as it runs: the function itself (the numba backend compiles it)."""
    return function
