"""``torch.nn.utils``'s gradient clipping, on gradients held as values.

srcgrad keeps no ``.grad`` on the parameters: a gradient is the value
``srcgrad.grad`` returns, shaped like the parameters (a model-like object, a
dict, a list).  The clipping functions take that value, where PyTorch takes
``model.parameters()``, and change its arrays in place, so the usual loop
reads::

    grads = dloss(model, x, y)
    total = nn.utils.clip_grad_norm_(grads, max_norm=1.0)
    opt.step(grads)

The leaves are those an optimizer steps (:func:`srcgrad.tree.flatten`): float
arrays; None (a frozen parameter, an integer field) and an object's float
attributes (which optimizers do not train) are left out.  An array held under
two paths is counted and scaled under each path, as each is a separate
gradient; one array object appearing twice is changed once.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import tree
from .module import Parameters


def _gradient_arrays(grads: Any, caller: str) -> list[tuple[str, np.ndarray]]:
    """``[(path name, array)]`` of the gradient's leaves, each writeable; TypeError otherwise."""
    if isinstance(grads, Parameters):
        raise TypeError(f"{caller}: srcgrad keeps no .grad on the parameters, so model.parameters() has "
                        "no gradients to clip; pass the gradient itself: "
                        f"`grads = srcgrad.grad(loss)(model, x, y); {caller}(grads, ...); opt.step(grads)`")
    if isinstance(grads, np.ndarray):
        paths, leaves = [()], [grads]
    else:
        paths, leaves, _ = tree.flatten(grads)
    out = []
    for path, leaf in zip(paths, leaves):
        name = tree.path_name(path)
        if not (isinstance(leaf, np.ndarray) and np.issubdtype(leaf.dtype, np.floating)):
            kind = type(leaf).__name__ + (f" of dtype {leaf.dtype}" if isinstance(leaf, np.ndarray) else "")
            raise TypeError(f"{caller}: gradient '{name}' is a {kind}, not a float array that can be changed "
                            "in place (hold a trainable number as a 0-d array, np.array(0.5))")
        if not leaf.flags.writeable:
            raise ValueError(f"{caller}: gradient '{name}' is a read-only array: pass a writeable copy")
        out.append((name, leaf))
    return out


def clip_grad_norm_(grads: Any, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False) -> np.floating:
    r"""Scale a gradient in place so that its total norm is at most ``max_norm``, as
    ``torch.nn.utils.clip_grad_norm_`` (Pascanu, Mikolov & Bengio, "On the difficulty of
    training recurrent neural networks", ICML 2013, Algorithm 1; PyTorch's documented form).

    The total norm is the ``norm_type``-norm of all the gradient's entries taken together
    (the norm of the vector of each array's norm; for ``inf``, the largest |entry|)::

        total = ‖(‖g_1‖_p, ..., ‖g_n‖_p)‖_p
        g_i ← g_i · min(1, max_norm / (total + 1e-6))

    Args:
        grads: the gradient, as ``srcgrad.grad`` returns it: a float array, or a model-like
            object, dict, list or tuple nesting of float arrays (any shapes; float32 or
            float64).  Its arrays are changed in place.
        max_norm: the largest total norm allowed.
        norm_type: p ≥ 0, a float or ``inf`` (default 2.0, the Euclidean norm).
        error_if_nonfinite: raise if the total norm is nan or ±inf (default False: the
            gradient is then scaled by nan or 0, as PyTorch does).

    Returns:
        the total norm before clipping, a NumPy scalar of the gradient's (promoted) dtype.

    Raises:
        TypeError: ``model.parameters()`` given (it holds no gradients), or a leaf that is
            not a float array (names its path).
        ValueError: a read-only gradient array.
        RuntimeError: ``error_if_nonfinite`` and the total norm is not finite.
    """
    arrays = _gradient_arrays(grads, "clip_grad_norm_")
    max_norm, p = float(max_norm), float(norm_type)
    if not arrays:
        return np.float64(0.0)
    dtype = np.result_type(*[a for _, a in arrays])
    norms = np.array([_norm(a.reshape(-1), p) for _, a in arrays], dtype=dtype)
    total = dtype.type(_norm(norms, p))
    if error_if_nonfinite and not np.isfinite(total):
        raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} of the gradient is "
                           f"{total}, so it cannot be clipped; pass error_if_nonfinite=False to scale it "
                           "anyway")
    coef = min(max_norm / (float(total) + 1e-6), 1.0)   # (nan stays nan, as PyTorch's clamp)
    done: set[int] = set()
    for _, a in arrays:
        if id(a) not in done:
            done.add(id(a))
            a *= a.dtype.type(coef)
    return total


def _norm(v: np.ndarray, p: float) -> float:
    """The p-norm of a vector (0 for an empty one)."""
    return float(np.linalg.norm(v, ord=p)) if v.size else 0.0


def clip_grad_value_(grads: Any, clip_value: float) -> None:
    """Clamp every entry of a gradient in place to [-clip_value, clip_value], as
    ``torch.nn.utils.clip_grad_value_``.

    Args:
        grads: the gradient (see :func:`clip_grad_norm_`); its arrays are changed in place.
        clip_value: the bound, a number ≥ 0.

    Raises:
        TypeError: ``model.parameters()`` given, or a leaf that is not a float array.
        ValueError: a negative ``clip_value``, or a read-only gradient array.
    """
    clip_value = float(clip_value)
    if not clip_value >= 0:
        raise ValueError(f"clip_grad_value_: clip_value must be >= 0, got {clip_value!r}")
    for _, a in _gradient_arrays(grads, "clip_grad_value_"):
        np.clip(a, -clip_value, clip_value, out=a)
