"""Mini-batches of arrays: what ``torch.utils.data.DataLoader`` over a ``TensorDataset`` gives.

::

    rng = np.random.default_rng(0)
    for epoch in range(10):
        for xb, yb in srcgrad.data.batches(x, y, batch_size=32, seed=rng):
            opt.step(dloss(model, xb, yb))
"""
from __future__ import annotations

import numbers
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["batches"]


def batches(*arrays: Any, batch_size: int = 1, shuffle: bool = True, drop_last: bool = False,
            seed: int | np.random.Generator | None = None) -> Iterator[Any]:
    """Yield mini-batches of rows taken together from each array, as a ``DataLoader`` over a
    ``TensorDataset(*arrays)`` with the same ``batch_size``, ``shuffle`` and ``drop_last``.

    Each pass draws a fresh order: call it once per epoch.  The batches are copies
    (NumPy's fancy indexing) when shuffled, views of the arrays otherwise.

    Args:
        *arrays: one or more arrays (or anything ``np.asarray`` takes) with the same
            first dimension N, the examples; any dtypes and trailing shapes.
        batch_size: the number of rows per batch, a positive int (default 1, as
            ``DataLoader``); the last batch holds the N mod batch_size left over.
        shuffle: visit the rows in a random order (default True); False keeps their order.
        drop_last: leave out a last batch smaller than ``batch_size`` (default False).
        seed: an int or None for ``np.random.default_rng(seed)``, or a
            ``np.random.Generator`` to draw from (successive epochs then differ).

    Yields:
        ``(batch_0, batch_1, ...)``, one per array, each of shape
        ``(b,) + array.shape[1:]`` with b ≤ batch_size; with a single array, the batch
        itself rather than a tuple of one.

    Raises:
        ValueError: no arrays, an array of rank 0, arrays whose first dimensions differ,
            or a ``batch_size`` that is not a positive integer.
    """
    if not arrays:
        raise ValueError("batches: give at least one array (batches(x, y, batch_size=32))")
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
        raise ValueError(f"batches: batch_size must be a positive integer, got {batch_size!r}")
    arrays = tuple(a if isinstance(a, np.ndarray) else np.asarray(a) for a in arrays)
    for i, a in enumerate(arrays):
        if a.ndim == 0:
            raise ValueError(f"batches: array {i} is a scalar; each array needs a first dimension of "
                             "examples")
    n = len(arrays[0])
    lengths = [len(a) for a in arrays]
    if any(length != n for length in lengths):
        raise ValueError(f"batches: the arrays' first dimensions differ ({', '.join(map(str, lengths))}); "
                         "each row of one goes with the same row of the others")
    return _batches(arrays, n, int(batch_size), shuffle, drop_last, seed)


def _batches(arrays: tuple, n: int, size: int, shuffle: bool, drop_last: bool, seed: Any) -> Iterator[Any]:
    # (a generator of its own, so that the checks above raise where batches() is called)
    order = np.random.default_rng(seed).permutation(n) if shuffle else None
    stop = n - n % size if drop_last else n
    for first in range(0, stop, size):
        if order is None:
            parts = tuple(a[first:first + size] for a in arrays)
        else:
            rows = order[first:first + size]
            parts = tuple(a[rows] for a in arrays)
        yield parts[0] if len(parts) == 1 else parts
