"""What generated code calls (imported there as ``rt``).

Kept small and fast: generated code spends its time in NumPy, not here.  The
helpers marked :func:`static` are also evaluated by the compiler when all
their arguments are known at compile time (``einsum`` subscripts, axes).
"""
from __future__ import annotations

import math
import types

import numpy as np

from . import errors


def array_module(*values):
    """NumPy, or CuPy when any value is a CuPy array: helpers run on either.

    (NumPy functions called on CuPy arrays dispatch to CuPy through
    ``__array_function__``; only creation functions and ``asarray`` need this.)
    """
    for value in values:
        if type(value).__module__.split(".")[0] == "cupy":
            import cupy

            return cupy
    return np


def _as_array(value):
    return value if hasattr(value, "ndim") else np.asarray(value)


def static(fn):
    """Mark a pure helper the compiler may evaluate on compile-time constants."""
    fn.__srcgrad_static__ = True
    return fn


def is_constant(value) -> bool:
    """True for a Python number, None or a tuple of them.

    In a rule template this is decided at compile time: ``x2`` is constant
    when the user wrote a literal there (``x ** 2``).
    """
    return value is None or isinstance(value, (int, float, str, tuple))


def to_device(x):
    """Copy an array to the GPU (a CuPy array).  Its adjoint is the copy back.

    Raises:
        srcgrad.errors.BackendError: CuPy is not installed or no GPU is present.
    """
    from .backends import cupy as cupy_backend

    cupy_backend.check_device()
    return cupy_backend.module().asarray(x)


def to_host(x):
    """Copy an array to host memory (a NumPy array); NumPy arrays pass through.
    Its adjoint is the copy to the device."""
    if type(x).__module__.split(".")[0] == "cupy":
        return x.get()
    return x


def stop_gradient(x):
    """``x`` itself, through which no adjoint flows (its derivative is taken as 0).

    Use it to treat a value as a constant: a target computed from the model,
    a baseline, a detached statistic.  Works on arrays and numbers.
    """
    return x


def is_array(value) -> bool:
    """True for an array or a number; False for a structure of parameters.

    In a rule template this is decided at compile time when the rank is known.
    """
    return not isinstance(value, (list, tuple, dict)) and not hasattr(value, "__dict__")


def is_structure(value) -> bool:
    """The opposite of :func:`is_array` (decided at compile time when known)."""
    return not is_array(value)


def unbroadcast(g, x):
    """Sum ``g`` down to ``np.shape(x)``: the adjoint of NumPy broadcasting.

    Args:
        g: an adjoint of the broadcast result, any shape that ``x`` broadcasts to.
        x: the primal input (only its shape is read).

    Returns:
        ``g`` summed over the broadcast axes, with ``x``'s shape.

    Source: NumPy's broadcasting rules (numpy.org/doc/stable/user/basics.broadcasting.html).
    """
    shape = x.shape if hasattr(x, "shape") else np.shape(x)
    if getattr(g, "shape", ()) == shape:  # the common case, checked without a NumPy call
        return g
    return unbroadcast_to(g, shape)


def unbroadcast_to(g, shape):
    """:func:`unbroadcast` given the primal's shape rather than the primal
    (what a loop saves when the backward sweep needs only the shape)."""
    have = getattr(g, "shape", ())
    if have == shape:
        return g
    if len(have) == len(shape) + 1 and 1 not in shape:
        return g.sum(axis=0)  # a bias: the one shape worth a shortcut (a tuple axis costs 2x)
    g = _as_array(g)
    lead = g.ndim - len(shape)
    if lead:
        g = g.sum(axis=tuple(range(lead)))
    keep = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if keep:
        g = g.sum(axis=keep, keepdims=True)
    return g.reshape(shape)


@static
def counts_from_the_end(index) -> bool:
    """A constant index into a list or tuple that is not already one of its keys:
    negative (``xs[-1]``) or a slice."""
    return isinstance(index, slice) or isinstance(index, int) and index < 0


@static
def log_of_base(base) -> float:
    """``log(base)`` of a constant base of ``base ** x``, as a Python float (so it keeps
    float32 float32); 0.0 at ``base == 0`` (the power rule's convention there), NaN below."""
    if base == 0:
        return 0.0
    return math.log(base) if base > 0 else math.nan


def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, tuple) else (axis,)
    return tuple(sorted(a % ndim for a in axes))


def broadcast_reduced(g, x, axis=None, keepdims=False):
    """Broadcast the adjoint ``g`` of a reduction of ``x`` over ``axis`` back to ``x``'s shape."""
    ndim = np.ndim(x)
    if not keepdims:
        g = np.expand_dims(g, _axes(axis, ndim)) if ndim else g
    return np.broadcast_to(g, np.shape(x))


def count_reduced(x, axis=None) -> int:
    """How many elements of ``x`` each output of a reduction over ``axis`` combines."""
    shape = np.shape(x)
    return int(np.prod([shape[a] for a in _axes(axis, len(shape))], dtype=np.int64))


def _with_kept_dims(value, x, axis, keepdims):
    """A reduction's result given back its reduced axes as size 1 (it then broadcasts)."""
    ndim = np.ndim(x)
    if keepdims or not ndim:
        return value
    return np.expand_dims(value, _axes(axis, ndim))


def max_adjoint(ans_bar, ans, x, axis=None, keepdims=False):
    """Adjoint of ``np.max``/``np.min``: the adjoint is split evenly among ties.

    Convention as PyTorch's ``amax``/``amin`` and JAX: every element equal to
    the extremum receives ``ans_bar / (number of ties)``.  (The division is done
    on the reduced array, then broadcast once.)
    """
    mask = x == _with_kept_dims(ans, x, axis, keepdims)
    counts = np.sum(mask, axis=axis, keepdims=True, dtype=getattr(x, "dtype", None) or np.result_type(x))
    return mask * (_with_kept_dims(ans_bar, x, axis, keepdims) / counts)


def prod_adjoint(ans_bar, x, axis=None, keepdims=False):
    """Adjoint of ``np.prod``: the product of all *other* elements, exact at zeros.

    Computed from exclusive cumulative products from the left and the right,
    so no division by ``x`` (which would fail where ``x`` is 0).
    """
    x = _as_array(x)
    axes = _axes(axis, x.ndim)
    rest = [a for a in range(x.ndim) if a not in axes]
    moved = np.transpose(x, rest + list(axes))
    flat = moved.reshape(moved.shape[: len(rest)] + (-1,))
    ones = np.ones_like(flat[..., :1])
    left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    right = np.cumprod(np.concatenate([ones, flat[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    others = (left * right).reshape(moved.shape)
    others = np.transpose(others, np.argsort(rest + list(axes)))
    return others * broadcast_reduced(ans_bar, x, axis, keepdims)


def var_adjoint(ans_bar, x, axis=None, ddof=0, keepdims=False):
    """Adjoint of ``np.var``: ``2 (x - mean) / (N - ddof)`` times the broadcast adjoint."""
    centred = x - np.mean(x, axis=axis, keepdims=True)
    scale = 2.0 / (count_reduced(x, axis) - ddof)
    return broadcast_reduced(ans_bar, x, axis, keepdims) * centred * scale


def std_adjoint(ans_bar, ans, x, axis=None, ddof=0, keepdims=False):
    """Adjoint of ``np.std = sqrt(var)``: ``var_bar = ans_bar / (2 ans)``; 0 where ``ans`` is 0."""
    var_bar = np.where(ans == 0, 0, ans_bar / np.where(ans == 0, 1, 2 * ans))
    return var_adjoint(var_bar, x, axis, ddof, keepdims)


def norm_adjoint(ans_bar, ans, x, ord=None, axis=None, keepdims=False):
    """Adjoint of ``np.linalg.norm`` for the 2-norm/Frobenius (default), 1 and inf norms.

    At a zero norm the 2-norm's adjoint is 0 (a subgradient). Raises
    ``NotImplementedError`` for matrix norms other than Frobenius.
    """
    x = _as_array(x)
    vector = axis is not None and not isinstance(axis, tuple) or (axis is None and x.ndim == 1)
    g = broadcast_reduced(ans_bar, x, axis if axis is not None else None, keepdims)
    full = broadcast_reduced(ans, x, axis, keepdims)
    if ord is None or ord == "fro" or (ord == 2 and vector):
        return g * x / np.where(full == 0, 1, full)
    if ord == 1 and vector:
        return g * np.sign(x)
    if ord == np.inf and vector:
        mask = np.abs(x) == full
        return g * np.sign(x) * mask / np.sum(mask, axis=axis, keepdims=True, dtype=x.dtype)
    raise NotImplementedError(f"srcgrad has no adjoint for np.linalg.norm(ord={ord!r}) of this input")


def matmul_lhs(ans_bar, x1, x2):
    """Adjoint of ``x1 @ x2`` with respect to ``x1``, for any ranks (NumPy matmul semantics)."""
    if np.ndim(x2) == 1:
        g = np.multiply.outer(ans_bar, x2) if np.ndim(x1) > 1 else ans_bar * x2
    elif np.ndim(x1) == 1:
        g = (x2 @ ans_bar[..., None])[..., 0]
    else:
        g = ans_bar @ np.swapaxes(x2, -1, -2)
    return unbroadcast(g, x1)


def matmul_rhs(ans_bar, x1, x2):
    """Adjoint of ``x1 @ x2`` with respect to ``x2``, for any ranks (NumPy matmul semantics)."""
    if np.ndim(x1) == 1:
        g = x1[:, None] * ans_bar[..., None, :] if np.ndim(x2) > 1 else ans_bar * x1
    elif np.ndim(x2) == 1:
        g = (np.swapaxes(x1, -1, -2) @ ans_bar[..., None])[..., 0]
    else:
        g = np.swapaxes(x1, -1, -2) @ ans_bar
    return unbroadcast(g, x2)


def dot_lhs(ans_bar, a, b):
    """Adjoint of ``np.dot(a, b)`` with respect to ``a``."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return unbroadcast(ans_bar * b, a) if np.ndim(a) == 0 else ans_bar * b
    if np.ndim(b) <= 2:
        return matmul_lhs(ans_bar, a, b)
    # dot sums over a's last axis and b's second-to-last: ans = tensordot(a, b, ([-1], [-2])).
    return tensordot_adjoint(ans_bar, a, b, ([-1], [np.ndim(b) - 2]), 0)


def dot_rhs(ans_bar, a, b):
    """Adjoint of ``np.dot(a, b)`` with respect to ``b``."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return unbroadcast(ans_bar * a, b) if np.ndim(b) == 0 else ans_bar * a
    if np.ndim(b) <= 2:
        return matmul_rhs(ans_bar, a, b)
    return tensordot_adjoint(ans_bar, a, b, ([-1], [np.ndim(b) - 2]), 1)


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _tensordot_subscripts(ndim_a, ndim_b, axes):
    if isinstance(axes, int):
        axes = (list(range(ndim_a - axes, ndim_a)), list(range(axes)))
    axes_a, axes_b = ([axes[0]] if isinstance(axes[0], int) else list(axes[0]),
                      [axes[1]] if isinstance(axes[1], int) else list(axes[1]))
    axes_a = [a % ndim_a for a in axes_a]
    axes_b = [b % ndim_b for b in axes_b]
    sub_a = list(_LETTERS[:ndim_a])
    sub_b = list(_LETTERS[ndim_a: ndim_a + ndim_b])
    for i, j in zip(axes_a, axes_b):
        sub_b[j] = sub_a[i]
    out = [c for i, c in enumerate(sub_a) if i not in axes_a] + \
          [c for j, c in enumerate(sub_b) if j not in axes_b]
    return f"{''.join(sub_a)},{''.join(sub_b)}->{''.join(out)}"


def tensordot_adjoint(ans_bar, a, b, axes, which):
    """Adjoint of ``np.tensordot(a, b, axes)`` w.r.t. operand ``which`` (0 or 1)."""
    spec = _tensordot_subscripts(np.ndim(a), np.ndim(b), axes)
    return einsum_adjoint(spec, which, ans_bar, a, b)


def _parse_einsum(subscripts: str):
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        inputs, out = subscripts.split("->")
    else:
        inputs = subscripts
        letters = inputs.replace(",", "")
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    return inputs.split(","), out


@static
def einsum_adjoint_subscripts(subscripts: str, which: int):
    """Subscripts of the adjoint einsum of a two-operand einsum, or None.

    For ``"ij,jk->ik"`` and operand 0: ``"ik,jk->ij"`` (``ans_bar``, the other
    operand → this operand).  None when a plain einsum cannot express it
    (ellipsis, a letter repeated within one operand, or a letter of this
    operand that appears nowhere else): then :func:`einsum_adjoint` does it.
    """
    ins, out = _parse_einsum(subscripts)
    if "." in subscripts or len(ins) != 2:
        return None
    mine, other = ins[which], ins[1 - which]
    if any(s.count(c) > 1 for s in (mine, other, out) for c in s):
        return None
    if any(c not in out and c not in other for c in mine):
        return None
    return f"{out},{other}->{mine}" if which == 0 else f"{other},{out}->{mine}"


def einsum_adjoint(subscripts, which, ans_bar, x, y):
    """Adjoint of ``np.einsum(subscripts, x, y)`` w.r.t. operand ``which`` (0 or 1).

    Handles letters summed out of one operand alone by broadcasting. Raises
    NotImplementedError for ellipses and repeated letters within an operand.
    """
    ins, out = _parse_einsum(subscripts)
    if "." in subscripts or any(s.count(c) > 1 for s in ins + [out] for c in s):
        raise NotImplementedError(f"srcgrad has no adjoint for einsum {subscripts!r}")
    mine, other = ins[which], ins[1 - which]
    operand, other_operand = (x, y) if which == 0 else (y, x)
    known = "".join(c for c in mine if c in out or c in other)
    g = np.einsum(f"{out},{other}->{known}", ans_bar, other_operand)
    shape = np.shape(operand)
    expanded = np.reshape(g, [shape[i] if c in known else 1 for i, c in enumerate(mine)])
    return np.broadcast_to(expanded, shape)


@static
def inverse_permutation(axes):
    """The axes that undo ``np.transpose(x, axes)``."""
    return tuple(int(i) for i in np.argsort(axes))


def is_basic_index(index) -> bool:
    """True when ``x[index]`` is NumPy basic indexing (ints, slices, None, Ellipsis)."""
    parts = index if isinstance(index, tuple) else (index,)
    return all(isinstance(p, (int, slice, type(None), type(Ellipsis))) and not isinstance(p, bool)
               for p in parts)


def basic_index(index) -> bool:
    """Whether ``x[index]`` reads each element at most once (basic indexing).

    In a rule template this is decided at compile time from the index's syntax:
    slices (whatever their bounds), literal ints, ``None``, ``...`` and names
    of integer scalars (loop indices) are basic; lists and arrays are not.
    """
    return is_basic_index(index)


def unconcatenate(ans_bar, arrays, axis=0):
    """Split the adjoint of ``np.concatenate(arrays, axis)`` into one adjoint per input."""
    if axis is None:
        sizes = [np.size(a) for a in arrays]
        pieces = np.split(np.ravel(ans_bar), np.cumsum(sizes)[:-1])
        return [np.reshape(p, np.shape(a)) for p, a in zip(pieces, arrays)]
    sizes = [np.shape(a)[axis] for a in arrays]
    return np.split(ans_bar, np.cumsum(sizes)[:-1], axis=axis)


def keeping_fields(obj, name, where, *args, **kwargs):
    """``obj.name(*args, **kwargs)`` for its effects, on an object being differentiated:
    refused if it replaced a float field of ``obj`` (see :func:`stored`)."""
    fields = getattr(obj, "__dict__", None)
    before = dict(fields) if fields is not None else None
    # (A float array field changed in place, `self.w[0] = 0`, is refused too.)
    arrays = {k: v.copy() for k, v in (before or {}).items()
              if isinstance(v, np.ndarray) and v.dtype.kind in "fc"}
    result = getattr(obj, name)(*args, **kwargs)
    if before is not None:
        for key, value in vars(obj).items():
            if before.get(key, _ABSENT) is not value:
                for old_or_new in (before.get(key), value):
                    stored(old_or_new, key, f"{where}, in `.{name}()`")
            elif key in arrays and not np.array_equal(arrays[key], value, equal_nan=True):
                stored(value, key, f"{where}, in `.{name}()`, which changed it in place")
    return result


_ABSENT = object()


def stored(value, name: str, where: str):
    """``value``, about to be stored as ``obj.name`` of an object being differentiated:
    a counter, flag or label is fine; a float (or float array, or structure) is refused,
    as a later read would send its adjoint to the parameter it replaced."""
    from . import tree

    if isinstance(value, (bool, int, str, type(None))) or isinstance(value, np.ndarray) \
            and value.dtype.kind not in "fc":
        return value
    if isinstance(value, (float, complex, np.number, np.ndarray)) or tree.is_structure(value) \
            or hasattr(value, "dtype"):
        raise errors.UnsupportedSyntaxError(
            f"storing a float value in the attribute `.{name}` of an object being differentiated is "
            f"not supported (at {where}): a later read of `.{name}` would send its adjoint to the "
            "parameter it replaced", None,
            "keep the value in a local name (or return it with has_aux=True), or make a new object")
    return value


def check_scalar_output(value, where: str):
    """Raise a clear error when ``grad`` is given a function with a non-scalar output."""
    if np.ndim(value) != 0:
        raise errors.NonScalarOutputError(
            f"grad needs a scalar output, but the function returned shape {np.shape(value)} "
            f"(at {where})",
            None,
            "reduce it to a scalar (np.sum, np.mean), or use srcgrad.vjp(f) to pull back "
            "an adjoint of the output's shape",
        )
    return value


def zip_length(*sequences) -> int:
    """How many items ``zip(*sequences)`` yields: the shortest length."""
    return min(len(s) for s in sequences)


_VJPS: dict = {}


def vjp_call(fn, wrt, *args, **kwargs):
    """Call ``fn(*args, **kwargs)`` and return ``(value, pullback)``.

    How generated code calls the user's own functions (and callables known only
    at run time).  ``wrt`` lists the positions/keywords of the arguments that
    need adjoints, and ``"self"`` for the callable object itself (a model whose
    parameters are differentiated); ``pullback(value_bar)`` returns their
    adjoints (one value for one entry, else a tuple).  A function or method is
    differentiated by srcgrad itself (compiled on first use, cached); a
    primitive with a derivative rule is applied through the rule.
    """
    if kwargs == {} and type(fn) is types.FunctionType:  # the common case, kept short
        transformed = _VJPS.get((fn, wrt, None))
        # (A function with *args/**kwargs is called with its arguments packed: not here.)
        if transformed is not None and not transformed._variadic and array_module(*args) is np:
            program = transformed._cache.get(tuple(map(_rank_key, args)))
            if program is not None:
                value, pullback = program(*args)
                return (value, _tuple_pullback(pullback, value)) if isinstance(value, tuple) \
                    else (value, pullback)
    from .rules import registry  # here, not at import: the rules import this module

    receiver = ()
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, np.ndarray) or type(owner).__module__.split(".")[0] == "cupy" \
            and hasattr(owner, "ndim"):
        # x.sum(...) on an array whose kind was unknown at compile time: NumPy's sum.
        from .transforms.anf import array_method
        fn, args = array_method(fn.__name__, owner, args)
        wrt = tuple(0 if w == "self" else w + 1 if isinstance(w, int) else w for w in wrt)
    from .api import GradientFunction

    if isinstance(fn, GradientFunction):
        from .api import _origin_of
        raise errors.UnsupportedSyntaxError(
            f"srcgrad cannot differentiate the gradient function of `{fn.fn.__qualname__}` yet "
            "(higher-order derivatives), here called from a function being differentiated",
            _origin_of(fn.fn), "compute the derivative you need by hand inside the function")
    if isinstance(fn, types.MethodType):
        fn, receiver = fn.__func__, (fn.__self__,)
    elif not isinstance(fn, types.FunctionType) and isinstance(getattr(type(fn), "__call__", None),
                                                               types.FunctionType):
        fn, receiver = _call_method(type(fn)), (fn,)
    if receiver and fn in _parameter_lists():  # model.parameters(): the model's own arrays
        return _parameters_vjp(fn, receiver[0], wrt, args, kwargs)
    rule = registry.lookup(fn)
    if rule is not None and rule.differentiable:
        return _rule_vjp(rule, fn, wrt, args, kwargs)
    if rule is not None:  # no derivative (a random draw, a constructor): zero adjoints
        value = fn(*receiver, *args, **kwargs)
        zeros = tuple({} if w == "self" else zeros_like(args[w] if isinstance(w, int) else kwargs[w])
                      for w in wrt)
        return value, lambda value_bar: zeros if len(zeros) > 1 else zeros[0]
    if "self" in wrt and not receiver:
        raise TypeError(f"{fn!r} has no parameters of its own to differentiate")
    names = tuple(0 if w == "self" else w + len(receiver) if isinstance(w, int) else w for w in wrt)
    # The callee runs where its data lives: CuPy arrays in, the CuPy backend.
    backend = "cupy" if array_module(*args, *kwargs.values()) is not np else None
    transformed = _vjp_function(fn, names if receiver else wrt, backend)
    value, pullback = transformed(*receiver, *args, **kwargs)
    if isinstance(value, tuple):
        return value, _tuple_pullback(pullback, value)
    return value, pullback


def _parameter_lists():
    from .nn.module import Module

    return {Module.parameters: False, Module.named_parameters: True}


def _parameters_vjp(fn, model, wrt, args, kwargs):
    """``model.parameters()`` / ``model.named_parameters()`` with its pullback: the
    adjoint of the list (of arrays, or of ``(name, array)`` pairs) goes back to the
    model's parameters by path (a sparse adjoint of the model)."""
    from . import tree

    if wrt != ("self",):
        raise TypeError(f"srcgrad differentiates {fn.__name__}() with respect to the model only")
    value = fn(model, *args, **kwargs)
    named = _parameter_lists()[fn]
    paths = tree.flatten(model)[0]

    def pullback(value_bar):
        sparse: dict = {}
        for i, path in enumerate(paths):
            g = item_of(value_bar, i)
            g = item_of(g, 1) if named else g
            if g is None or not path:
                continue
            node = sparse
            for entry in path[:-1]:
                node = node.setdefault(entry, {})
            node[path[-1]] = add(node.get(path[-1]), g)
        return sparse
    return value, pullback


def _vjp_function(fn, wrt, backend=None):
    """The cached ``GradientFunction`` that ``vjp_call`` uses for ``fn`` and ``wrt``."""
    key = (fn, wrt, backend)
    transformed = _VJPS.get(key)
    if transformed is None:
        from .api import GradientFunction

        transformed = _VJPS[key] = GradientFunction(fn, "vjp", wrt if len(wrt) > 1 else wrt[0],
                                                    backend=backend, internal=True)
    return transformed


def bind_vjp(namespace, name, fn, wrt, ranks):
    """Put ``fn``'s vjp for arguments of these ranks into ``namespace[name]``:
    what generated code calls for a function known at compile time
    (``h, h_pullback = layer_vjp(h, w)``), without ``vjp_call``'s dispatch.

    It is compiled at its first call (not now: a recursive function binds its
    own vjp while being compiled); until then ``namespace[name]`` is a stub."""
    def first_call(*args):
        program = _vjp_function(fn, wrt).program_for(ranks)

        def several_outputs(*args):
            value, pullback = program(*args)
            return value, _tuple_pullback(pullback, value)
        value, pullback = program(*args)
        several = isinstance(value, tuple)  # whether fn returns a tuple is fixed by its source
        namespace[name] = several_outputs if several else program
        return value, _tuple_pullback(pullback, value) if several else pullback
    namespace[name] = first_call


def _call_method(cls):
    """What calling an instance of ``cls`` runs: ``forward`` for an ``nn.Module``."""
    call = cls.__call__
    if getattr(call, "__srcgrad_calls_forward__", False):
        forward = getattr(cls, "forward", None)
        if forward is None or getattr(forward, "__srcgrad_abstract__", False):
            raise TypeError(f"{cls.__name__} has no forward method: define "
                            f"`def forward(self, x): ...` in class {cls.__name__}")
        return forward
    return call


def vjp_method(obj, name, wrt, *args, **kwargs):
    """``obj.name(*args)`` with ``(value, pullback)``; ``"self"`` in ``wrt`` asks for
    ``obj``'s adjoint, whether ``name`` is a method of ``obj`` or a callable
    stored in it (a layer of a model)."""
    attr = getattr(obj, name)
    if "self" not in wrt:
        return vjp_call(attr, wrt, *args, **kwargs)
    value, pullback = vjp_call(attr, wrt, *args, **kwargs)
    if getattr(attr, "__self__", None) is obj:
        return value, pullback  # a method: its own receiver is obj
    position = wrt.index("self")

    def pull(value_bar):
        adjoints = pullback(value_bar)
        if len(wrt) == 1:
            return {name: adjoints}
        return tuple({name: a} if i == position else a for i, a in enumerate(adjoints))
    return value, pull


def super_method(cls, obj, name):
    """What ``super(cls, obj).name`` finds, as a plain function of ``obj``: the first
    class after ``cls`` in ``type(obj)``'s MRO that defines ``name``.

    Raises:
        AttributeError: no class after ``cls`` defines it (as Python's ``super`` does).
        TypeError: it is not a plain method (a property, staticmethod or classmethod).
    """
    mro = type(obj).__mro__
    for klass in mro[mro.index(cls) + 1:]:
        if name in vars(klass):
            found = vars(klass)[name]
            if not isinstance(found, types.FunctionType):
                raise TypeError(f"srcgrad differentiates `super().{name}(...)` for plain methods only; "
                                f"{klass.__name__}.{name} is a {type(found).__name__}")
            return found
    raise AttributeError(f"'super' object has no attribute {name!r}")


def vjp_field(obj, name, where="?"):
    """``obj.name`` with ``(value, pullback)``, ``pullback`` giving ``obj``'s adjoint:
    for a property (or ``functools.cached_property``), its getter's own reverse mode;
    for a plain field, ``{name: value_bar}``; for a method read as a value, the method's
    adjoint is its receiver's; for an attribute ``__getattr__`` finds, that method's.

    Raises:
        srcgrad.errors.UnsupportedSyntaxError: another kind of descriptor, or a class
            with its own ``__getattribute__`` (``where``: the user's file and line).
    """
    import functools

    attribute = None
    for klass in type(obj).__mro__:
        if name in vars(klass):
            attribute = vars(klass)[name]
            break
    getter = attribute.fget if isinstance(attribute, property) else \
        attribute.func if isinstance(attribute, functools.cached_property) else None
    if getter is not None:
        value, pullback = vjp_call(getter, (0,), obj)
        return getattr(obj, name) if isinstance(attribute, functools.cached_property) else value, pullback
    if type(obj).__getattribute__ is not object.__getattribute__ and not isinstance(obj, tuple):
        raise errors.UnsupportedSyntaxError(
            f"srcgrad cannot differentiate reading `{name}` of a {type(obj).__name__} (at {where}): its "
            "class defines __getattribute__, which srcgrad does not follow", None,
            "read the value through a @property or a method, or pass it in as an argument")
    fields = getattr(obj, "__dict__", {})
    if attribute is None and name not in fields and hasattr(type(obj), "__getattr__"):
        return vjp_call(type(obj).__getattr__, (0,), obj, name)  # a delegating wrapper: its own code
    value = getattr(obj, name)
    if isinstance(obj, tuple) and name in getattr(type(obj), "_fields", ()):
        return value, lambda value_bar: {name: value_bar}  # a named tuple's field (by name)
    if isinstance(attribute, types.FunctionType) and name not in getattr(obj, "__dict__", ()):
        return value, lambda value_bar: value_bar  # a bound method: its adjoint is obj's
    if attribute is not None and hasattr(attribute, "__get__") and name not in getattr(obj, "__dict__", ()) \
            and not isinstance(attribute, (staticmethod, classmethod, type)):
        raise errors.UnsupportedSyntaxError(
            f"srcgrad cannot differentiate reading `{name}` of a {type(obj).__name__} (at {where}): it is "
            f"computed by a {type(attribute).__name__} descriptor, which srcgrad does not follow", None,
            "write it as a @property or a method")
    return value, lambda value_bar: {name: value_bar}


def _rank_key(value):
    from .pipeline import rank_of_argument

    return rank_of_argument(value)


def _tuple_pullback(pullback, value):
    """A function with several outputs: an output nobody used has adjoint zero."""
    def pull(value_bar):
        if isinstance(value_bar, dict):  # sparse: the outputs the caller read, by position
            if hasattr(type(value), "_fields"):  # a named tuple's fields read by name too
                from .tree import by_position
                value_bar = by_position(value_bar, value)
            value_bar = [value_bar.get(i) for i in range(len(value))]
        value_bar = list(value_bar) + [None] * (len(value) - len(value_bar))  # `a, _ = f(x)`
        return pullback(tuple(zeros_like(v) if g is None else g for g, v in zip(value_bar, value)))
    return pull


def _rule_vjp(rule, fn, wrt, args, kwargs):
    value = fn(*args, **kwargs)
    bound = rule.signature.bind(*args, **kwargs)
    bound.apply_defaults()
    params = list(rule.signature.parameters)
    wanted = [params[w] if isinstance(w, int) else w for w in wrt]

    def pullback(value_bar):
        adjoints = rule.adjoint(value_bar, value, **bound.arguments)
        adjoints = adjoints if len(rule.diff_params) > 1 else (adjoints,)
        by_name = dict(zip(rule.diff_params, adjoints))
        out = tuple(0.0 if by_name.get(n) is None else by_name[n] for n in wanted)
        return out if len(out) > 1 else out[0]

    return value, pullback


def written_adjoint(g, index, value):
    """Adjoint of ``value`` in the write ``y[index] = value``, given ``y``'s adjoint ``g``.

    Where an integer-array index repeats, only the last write lands (NumPy's
    assignment semantics), so only that element of ``value`` gets an adjoint.
    """
    picked = g[index]
    if is_basic_index(index):
        return unbroadcast(picked, value)
    xp = array_module(g)
    order = xp.arange(np.size(picked)).reshape(np.shape(picked))
    winner = xp.full(np.shape(g), -1)
    winner[index] = order
    return unbroadcast(picked * (winner[index] == order), value)


def add_each(adjoints, more):
    """Add two sequences of adjoints element by element (a list used twice); a
    sparse adjoint (``{0: g}``, from ``xs[0]``) takes the other's by index."""
    if isinstance(adjoints, dict):
        return add(adjoints, dict(enumerate(more)))
    return [a + b for a, b in zip(adjoints, more)]


def unpop(items, index, value):
    """Undo ``value = items.pop(index)``: put ``value`` back where it was (a negative
    ``index`` counted from the end of the list before the pop)."""
    items.insert(index if index >= 0 else len(items) + 1 + index, value)


def zeros_each(items):
    """A zero adjoint for each item of a list: the adjoint of a list no later code reads."""
    return [zeros_like(v) for v in items]


def add(a, b):
    """Accumulate two adjoints that may be structures (sparse nested dicts) or arrays."""
    if isinstance(a, dict) != isinstance(b, dict) and isinstance(a if isinstance(b, dict) else b, list):
        # One a list from a sequence rule (np.stack(xs)), the other sparse: both sparse.
        a, b = (dict(enumerate(v)) if isinstance(v, list) else v for v in (a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for key, value in b.items():
            out[key] = add(out[key], value) if key in out else value
        return out
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def zeros_like(x):
    """A zero adjoint for ``x``: an empty sparse structure, or an array of zeros
    (``0.0`` for ``None``: a name the path taken never assigned)."""
    from . import tree

    if x is None:
        return 0.0
    return {} if tree.is_structure(x) else np.zeros_like(x)


def unpacked_adjoint(parts, source):
    """Adjoint of ``source`` in ``a, b = source`` from ``{0: a_bar, 1: b_bar}``: that
    (sparse) for a tuple, list or dict; for an array, its rows filled in."""
    if isinstance(source, (list, tuple, dict)) or not hasattr(source, "shape"):
        return parts
    source_bar = zeros_like(source)
    for i, g in parts.items():
        source_bar[i] += g
    return source_bar


def item_of(g, key):
    """Item ``key`` of the adjoint ``g`` of a tuple, list or dict: ``g`` is sparse
    (``{0: a_bar}``, only the items something read) or a sequence; None where
    nothing reached that item (or ``g`` is a plain zero)."""
    if isinstance(g, dict):
        return g.get(key)
    if isinstance(key, str):  # a named tuple's field by name: a sequence's items are by position
        return None
    return g[key] if isinstance(g, (list, tuple, np.ndarray)) else None


def entry(g, key, like):
    """:func:`item_of`, with zeros shaped like ``like`` where nothing reached the item."""
    part = item_of(g, key)
    return zeros_like(like) if part is None else part


def getitem_adjoint(ans_bar, a, index):
    """Adjoint of ``a[index]`` for any ``a``: an array, or a list/tuple/dict of parameters.

    Arrays: ``ans_bar`` scattered into zeros, repeated integer indices
    accumulating (``np.add.at``).  Structures: a sparse adjoint ``{index: ans_bar}``.
    """
    if isinstance(a, (list, tuple)) and isinstance(index, slice):
        positions = range(len(a))[index]
        parts = [ans_bar.get(j) for j in range(len(positions))] if isinstance(ans_bar, dict) else ans_bar
        return {i: g for i, g in zip(positions, parts) if g is not None}
    if isinstance(a, (list, tuple)):
        return {index % len(a): ans_bar}  # xs[-1] is xs[len(xs) - 1]: one key per item
    if isinstance(a, dict):
        return {index: ans_bar}
    a_bar = np.zeros_like(a)
    np.add.at(a_bar, index, ans_bar)
    return a_bar


def window_adjoint(g, x, window_shape, axis=None):
    """Adjoint of ``np.lib.stride_tricks.sliding_window_view(x, window_shape, axis)``.

    Each window offset is one strided slice of ``x``; their adjoints add up
    (windows overlap).  One vectorised add per offset, e.g. 9 for a 3x3 kernel.
    """
    x_bar = array_module(g).zeros(np.shape(x), dtype=getattr(g, "dtype", None) or np.result_type(g))
    window_shape = (window_shape,) if isinstance(window_shape, int) else tuple(window_shape)
    axes = tuple(range(np.ndim(x))) if axis is None else (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(a % np.ndim(x) for a in axes)
    for offsets in np.ndindex(*window_shape):
        where = [slice(None)] * np.ndim(x)
        for a, offset, width in zip(axes, offsets, window_shape):
            where[a] = slice(offset, offset + np.shape(x)[a] - width + 1)
        x_bar[tuple(where)] += g[(Ellipsis,) + offsets]
    return x_bar
