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
    layout = _Layout(spec, leaves)
    vector = np.concatenate([np.ravel(leaf) for leaf in leaves]) if leaves else np.zeros(0)
    return vector, layout.unflatten


class _Layout:
    """Where each leaf of a flattened structure sits in its vector.  Its ``unflatten``
    is a bound method, so one rule (in ``rules/shape.py``) covers every structure's."""

    def __init__(self, spec, leaves):
        self.spec = spec
        self.shapes = [np.shape(leaf) for leaf in leaves]
        self.scalars = [np.ndim(leaf) == 0 and not isinstance(leaf, np.ndarray) for leaf in leaves]
        self.ends = np.cumsum([int(np.size(leaf)) for leaf in leaves])
        self.size = int(self.ends[-1]) if len(self.ends) else 0

    def unflatten(self, vector):
        """A structure like the flattened one from a vector of its length (ValueError if not)."""
        vector = np.asarray(vector)
        if vector.shape != (self.size,):
            raise ValueError(f"unflatten expects a vector of {self.size} numbers, got shape {vector.shape}")
        parts = np.split(vector, self.ends[:-1])
        leaves = [p.reshape(s)[()] if scalar else p.reshape(s)
                  for p, s, scalar in zip(parts, self.shapes, self.scalars)]
        return optree.tree_unflatten(self.spec, leaves)


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
