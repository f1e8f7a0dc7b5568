"""Array backends: what differs between array libraries lives here, in one place."""
from . import numpy as numpy_backend

BACKENDS = {"numpy": numpy_backend}


def get(name: str):
    try:
        return BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; choose one of {sorted(BACKENDS)}") from None
