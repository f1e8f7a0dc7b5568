"""Checking gradients: srcgrad's against central finite differences."""
from __future__ import annotations

import numpy as np

from . import tree
from .api import grad


def check_grads(f, args=None, wrt=0, eps: float = 1e-6, rtol: float = 1e-5, atol: float = 1e-7, *,
                modes=("rev",), order: int = 1):
    """Assert that ``srcgrad.grad(f, wrt)`` matches central finite differences.

    Use it on your own functions and on rules you register with
    ``@srcgrad.custom_adjoint`` / ``srcgrad.defadjoint``.  Without ``args`` it
    returns the check as a function of them: ``check_grads(f)(x)`` (HIPS autograd's
    ``check_grads(f, modes=["rev"], order=...)(x)`` form, which checks
    ``grad(f)`` against differences of ``f``; with ``order=2`` also the gradient
    of ``v . grad(f)`` along a random ``v``, reverse over reverse).

    Args:
        f: a function with a scalar output.
        args: a tuple of arguments; the ``wrt`` ones are float arrays, floats or
            structures of them (dicts, lists, objects with array attributes).
        wrt: an index into ``args`` (``*args`` elements included) or the
            name of a positional parameter, or a tuple of them.
        eps: the finite-difference step (run in float64).
        rtol, atol: tolerances of the comparison.

    Raises:
        AssertionError: naming the argument and parameter path, with the largest error.

    Formula: ``(f(x + eps e_i) - f(x - eps e_i)) / (2 eps)`` per element, error
    O(eps^2) (Nocedal & Wright, *Numerical Optimization*, 2nd ed., §8.1).
    """
    if args is None:
        def check(*given):
            check_grads(f, given, wrt, eps, rtol, atol, modes=modes, order=order)
        return check
    if not set(modes) <= {"rev", "fwd"} or order not in (1, 2):
        raise ValueError("check_grads checks modes 'rev' and 'fwd' (both by reverse mode here) to order 1 or 2")
    if order == 2:
        index = wrt if isinstance(wrt, int) else 0
        direction = np.random.default_rng(0).standard_normal(np.shape(args[index]))
        first = grad(f, wrt=index)

        def along(*given):
            return np.sum(first(*given) * direction)
        check_grads(along, args, index, eps, rtol, atol)
    indices = wrt if isinstance(wrt, (tuple, list)) else (wrt,)
    grads = grad(f, wrt=tuple(indices))(*args)
    names = _positional_names(f)
    for position, g in zip(indices, grads):
        if isinstance(position, str) and position not in names:
            raise TypeError(f"check_grads perturbs positional arguments: give `{position}` by its "
                            "position in `args` (for *args, the positions of its elements)")
        index = position if isinstance(position, int) else names.index(position)
        paths, leaves, spec = tree.flatten(args[index]) if tree.is_structure(args[index]) else \
            ([()], [args[index]], None)
        # (by path: a field the call itself filled, a cache, is an input now but not in `g`)
        got_at = dict(zip(*tree.flatten(g)[:2])) if spec is not None else {(): g}
        for path, leaf in zip(paths, leaves):
            expected = _central_differences(f, args, index, path, paths, leaves, spec, eps)
            got = got_at.get(path)
            got = np.zeros_like(expected) if got is None else got
            label = f"argument {names[index] if index < len(names) else index}" + \
                (f", {tree.path_name(path)}" if path else "")
            np.testing.assert_allclose(np.asarray(got, dtype=np.float64), expected, rtol=rtol, atol=atol,
                                       err_msg=f"gradient of {getattr(f, '__name__', f)} w.r.t. {label}")


def _positional_names(f):
    import inspect

    return [p.name for p in inspect.signature(f).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _central_differences(f, args, index, path, paths, leaves, spec, eps):
    # (C order: `base.reshape(-1)` below must be a view of it, for an argument of any layout)
    base = np.array(leaves[paths.index(path)], dtype=np.float64, order="C")
    out = np.zeros_like(base)
    flat, out_flat = base.reshape(-1), out.reshape(-1)

    def value(at):
        new_leaf = at.copy() if at.ndim else float(at)
        if spec is None:
            replaced = new_leaf
        else:
            replaced = tree.unflatten(spec, [new_leaf if p == path else leaf for p, leaf in zip(paths, leaves)])
        call = list(args)
        call[index] = replaced
        return float(np.reshape(f(*call), ()))  # (an output of one element, as grad takes)

    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        plus = value(base)
        flat[i] = old - eps
        minus = value(base)
        flat[i] = old
        out_flat[i] = (plus - minus) / (2 * eps)
    return out
