"""A structure of arrays as one flat vector, and back (optree does the walking)."""
from __future__ import annotations

import numpy as np
import optree


def flatten(value):
    """``value``'s numbers in one vector, and the function that rebuilds ``value``.

    Args:
        value: an array, a number, or tuples, lists and dicts of them, nested (a
            dict's entries in sorted key order, as optree orders them).

    Returns:
        ``(vector, unflatten)``: a 1-D float array holding every leaf raveled
        in order (``float64`` unless every leaf has one dtype), and
        ``unflatten(vector)`` giving a structure like ``value``, each leaf of its
        original shape (a number leaf comes back as a 0-d array's value).

    Raises:
        ValueError: from ``unflatten``, a vector of another length.
    """
    leaves, spec = optree.tree_flatten(value)
    arrays = [np.asarray(leaf) for leaf in leaves]
    shapes = [a.shape for a in arrays]
    sizes = [a.size for a in arrays]
    scalars = [np.ndim(leaf) == 0 and not isinstance(leaf, np.ndarray) for leaf in leaves]
    vector = np.concatenate([a.ravel() for a in arrays]) if arrays else np.zeros(0)
    ends = np.cumsum(sizes)

    def unflatten(vector):
        vector = np.asarray(vector)
        if vector.shape != (int(ends[-1]) if len(ends) else 0,):
            raise ValueError(f"unflatten expects a vector of {int(ends[-1]) if len(ends) else 0} numbers, "
                             f"got shape {vector.shape}")
        parts = np.split(vector, ends[:-1])
        leaves = [p.reshape(s)[()] if scalar else p.reshape(s) for p, s, scalar in zip(parts, shapes, scalars)]
        return optree.tree_unflatten(spec, leaves)

    return vector, unflatten


def flatten_func(func, example):
    """``func(structure, *args)`` as a function of the flat vector of the structure.

    Returns:
        ``(flat_func, unflatten, flat_example)``: ``flat_func(vector, *args) =
        func(unflatten(vector), *args)``, with ``unflatten`` and the vector from
        :func:`flatten` of ``example``.
    """
    flat_example, unflatten = flatten(example)

    def flat_func(vector, *args, **kwargs):
        return func(unflatten(vector), *args, **kwargs)

    return flat_func, unflatten, flat_example
