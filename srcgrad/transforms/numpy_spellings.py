"""NumPy's spellings: an array's method as its NumPy function (``x.sum()`` is ``np.sum(x)``), a
NumPy object under the generated code's name for it (``cp.exp`` for CuPy), and the forms of
arguments NumPy accepts that a rule reads spelled out (``np.clip``'s one bound, ``np.einsum``'s
sublists).

Used by normalize (``anf``) and, for the method of a receiver known to be an array only when
the code runs, by ``dispatch`` (:func:`array_method`).  Relies on nothing of the walk: each
function takes what it reads.
"""
from __future__ import annotations

import gast
import numpy as np

from .. import errors, nodes, runtime
from ..backends import numpy as numpy_backend
from ..rules import registry

METHODS = {
    "sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod,
    "var": np.var, "std": np.std, "dot": np.dot, "reshape": np.reshape,
    "transpose": np.transpose, "ravel": np.ravel, "flatten": np.ravel, "squeeze": np.squeeze,
    "clip": np.clip, "copy": np.copy, "argmax": np.argmax, "argmin": np.argmin,
    "any": np.any, "all": np.all, "round": np.round, "item": runtime.item,
    "cumsum": np.cumsum, "swapaxes": np.swapaxes, "trace": np.trace, "cumprod": np.cumprod,
    "take": np.take, "repeat": np.repeat, "diagonal": np.diagonal, "argsort": np.argsort,
    "nonzero": np.nonzero, "tolist": runtime.tolist, "searchsorted": np.searchsorted,
}  # (not `sort`, `partition`, `resize`, `put`: the method changes the array, the function copies)
if hasattr(np, "astype"):  # NumPy >= 2.1
    METHODS["astype"] = np.astype
# x.reshape(2, 3) means np.reshape(x, (2, 3)); x.transpose(1, 0) means np.transpose(x, (1, 0)).
VARARG_METHODS = {"reshape", "transpose"}
ARRAY_ATTRIBUTES = {"shape", "ndim", "size", "dtype", "itemsize", "nbytes"}
SHAPE_ATTRIBUTES = {"shape", "ndim", "size", "dtype"}  # never differentiated, whatever holds them


def spell(obj, node, backend):
    """The generated code's name for a NumPy object under ``backend`` (``cp.exp``);
    ``rt.stop_gradient`` for srcgrad's own (the printed code then needs no name of the
    user's module to run)."""
    if obj is runtime.stop_gradient:
        return "rt.stop_gradient"
    if not registry.is_numpy(obj):
        return None
    spelled = backend.spelling(obj)
    numpy_name = numpy_backend.spelling(obj)
    if spelled is None and numpy_name is not None and backend is not numpy_backend:
        raise errors.at(node, f"`{numpy_name}` has no counterpart in the "
                        f"{backend.__name__.rsplit('.', 1)[-1]} backend",
                        "compute it another way (or on the host with srcgrad.to_host, and "
                        "back with srcgrad.to_device), or use backend='numpy'")
    return spelled


def method_function(name, backend):
    """``(function, its name in the generated code)`` of the array method ``name`` (one of
    ``METHODS``): ``x.sum()`` is ``np.sum`` (``cp.sum`` under CuPy), ``x.item()`` ``rt.item``."""
    prim = METHODS[name]
    return prim, backend.spelling(prim) or (
        f"rt.{prim.__name__}" if prim.__module__ == runtime.__name__ else prim.__name__)


def array_method(name, receiver, args):
    """``(function, arguments)`` of NumPy's spelling of ``receiver.name(*args)``:
    ``x.reshape(2, 3)`` is ``np.reshape(x, (2, 3))``.

    Raises:
        NoDerivativeRuleError: a method srcgrad has no rule for (on a receiver known to
            be an array only when it runs: ``xs[0].cumprod()`` of a list ``xs``).
    """
    if name not in METHODS:
        raise errors.NoDerivativeRuleError(
            f"srcgrad has no derivative rule for the array method `.{name}()`", None,
            f"call the NumPy function instead (`np.{name}(x, ...)`), or register a rule with "
            "srcgrad.defadjoint")
    if name in VARARG_METHODS and len(args) > 1:
        args = (tuple(args),)
    return METHODS[name], (receiver,) + tuple(args)


def clip_arguments(args, kwargs):
    """``np.clip``'s arguments with both bounds given, as ``a_min``/``a_max``:
    ``x.clip(lo)``, ``np.clip(x, min=0)`` and ``x.clip(max=hi)`` (NumPy 2) omit one,
    which the function form (and the rule) needs spelled ``None``."""
    kwargs = dict(kwargs)
    for short, full in (("min", "a_min"), ("max", "a_max")):
        if short in kwargs and full not in kwargs:
            kwargs[full] = kwargs.pop(short)
    for position, full in ((1, "a_min"), (2, "a_max")):
        if len(args) <= position and full not in kwargs:
            kwargs[full] = nodes.const(None)
    return args, kwargs


def einsum_sublists(args):
    """``np.einsum(x, [0, 1], y, [1, 2], [0, 2])`` → ``np.einsum('ab,bc->ac', x, y)``: the
    sublist form as subscripts, when its lists are literal (otherwise the rule's
    ``subscripts`` parameter gets an array, refused if it is being differentiated)."""
    if not args or isinstance(args[0], gast.Constant) and isinstance(args[0].value, str):
        return args

    def letters(sub):
        if not isinstance(sub, (gast.List, gast.Tuple)):
            return None
        out = ""
        for e in sub.elts:
            if isinstance(e, gast.Constant) and e.value is Ellipsis or isinstance(e, gast.Name) \
                    and e.id == "Ellipsis":
                out += "..."
            elif isinstance(e, gast.Constant) and type(e.value) is int and 0 <= e.value < 52:
                out += "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[e.value]
            else:
                return None
        return out
    pairs, operands = [], []
    for i in range(0, len(args) - 1, 2):
        sub = letters(args[i + 1])
        if sub is None:
            return args
        operands.append(args[i])
        pairs.append(sub)
    spec = ",".join(pairs)
    if len(args) % 2:
        out = letters(args[-1])
        if out is None:
            return args
        spec += "->" + out
    return [nodes.const(spec)] + operands
