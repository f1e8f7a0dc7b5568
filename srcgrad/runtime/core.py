"""What generated code itself calls: broadcasting (``unbroadcast``), zeros, casts, an
adjoint's items, a user rule's checked adjoint, hooks, ``with`` blocks, transfers to and
from the GPU, the seeds of a gradient, and the helpers of forward mode's tangents.

The helpers marked :func:`static` are also evaluated by the compiler when all their
arguments are known at compile time (``einsum`` subscripts, axes).  Their transposes (for
higher order) are registered in ``rules/adjoints.py``."""
from __future__ import annotations

import numpy as np

from .. import errors, tree
from ..tree import add


_add_reduce = np.add.reduce


_HOST_TYPES = frozenset({np.ndarray, float, int, bool, np.float64, np.float32})  # answered without a look


def array_module(*values):
    """NumPy, or CuPy when any value is a CuPy array: helpers run on either.

    (NumPy functions called on CuPy arrays dispatch to CuPy through
    ``__array_function__``; only creation functions and ``asarray`` need this.)
    """
    for value in values:
        if type(value) not in _HOST_TYPES and type(value).__module__.split(".")[0] == "cupy":
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
    from ..backends import cupy as cupy_backend

    cupy_backend.check_device()
    return cupy_backend.module().asarray(x)


def to_host(x):
    """Copy an array to host memory (a NumPy array); NumPy arrays pass through.
    Its adjoint is the copy to the device."""
    if type(x).__module__.split(".")[0] == "cupy":
        return x.get()
    return x


def enter(manager):
    """``with manager as value:`` in normalized code: its ``__enter__``, looked up on the
    class as Python does; ``leave(manager)`` closes it.  The emitter turns each pair
    back into ``with rt.managed(manager) as value:`` around what lies between
    (``emit.with_blocks``), so an exception reaches ``__exit__`` too."""
    return type(manager).__enter__(manager)


def leave(manager) -> None:
    type(manager).__exit__(manager, None, None, None)


class managed:
    """``manager`` as a ``with`` statement of generated code runs it: ``__enter__`` and
    ``__exit__`` (with the exception, if one was raised) looked up on the class as
    Python does; but an exception is never swallowed.

    Raises:
        UnsupportedSyntaxError: ``__exit__`` asked to suppress an exception
            (``contextlib.suppress``): the code after the block would run on values the
            block never computed, and the backward sweep on a record of half a block.
    """

    __slots__ = ("manager", "where")

    def __init__(self, manager, where: str = ""):
        self.manager, self.where = manager, where

    def __enter__(self):
        return type(self.manager).__enter__(self.manager)

    def __exit__(self, kind, value, traceback):
        if type(self.manager).__exit__(self.manager, kind, value, traceback) and kind is not None:
            raise errors.UnsupportedSyntaxError(
                f"the context manager of the `with` block at {self.where} suppressed "
                f"{kind.__name__}, which srcgrad does not differentiate through (the rest of the "
                "block would be skipped)", None,
                "catch the exception outside the differentiated function, or avoid raising it")
        return False


def added_at(a, index, values):
    """``np.add.at(a, index, values)`` as a new array: ``a`` with ``values`` added at ``index``,
    repeated indices each adding (what ``np.add.at`` writes into ``a`` in place; the compiler
    writes this result back into ``a``)."""
    out = array_module(a).array(a, copy=True)
    array_module(a).add.at(out, index, values)
    return out


def added_at_tangent(a, index, values, a_dot=None, values_dot=None):
    """The tangent of :func:`added_at`: ``a_dot`` with ``values_dot`` added at ``index``
    (zeros for a constant)."""
    out = zeros_tangent(a) if a_dot is None else array_module(a_dot).array(a_dot, copy=True)
    if values_dot is not None:
        array_module(out).add.at(out, index, values_dot)
    return out


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
    if type(g) is np.ndarray and type(x) is np.ndarray:  # the common cases first, without NumPy calls
        have, shape = g.shape, x.shape
        if have == shape:
            return g
        if len(have) == 2 and len(shape) == 1 and have[1] == shape[0] and have[0] < 32 and g.dtype.kind == "f":
            return _add_reduce(g, 0)  # a bias of a few rows (see _summed_to)
        return _summed_to(g, have, shape)
    shape = getattr(x, "shape", None)
    if shape is None:
        shape = np.shape(x)
    have = getattr(g, "shape", ())
    if have == shape:
        return g
    return _summed_to(g, have, shape)


def unbroadcast_transposed(ans_bar, ans, g, x):
    """Summing down to ``x``'s shape, transposed: broadcasting back to ``g``'s."""
    return ans_bar + np.zeros_like(g)


def unbroadcast_to(g, shape):
    """:func:`unbroadcast` given the primal's shape rather than the primal
    (what a loop saves when the backward sweep needs only the shape)."""
    have = getattr(g, "shape", ())
    if have == shape:
        return g
    return _summed_to(g, have, shape)


def unbroadcast_to_transposed(ans_bar, ans, g, shape):
    return ans_bar + np.zeros_like(g)


def add_transposed(ans_bar, ans, a, b):
    """Accumulation (``x_bar = rt.add(x_bar, contribution)``): each addend gets it all."""
    return unbroadcast(ans_bar, a), unbroadcast(ans_bar, b)


def add_tangent(ans, a, b, a_dot=None, b_dot=None):
    """Linear in the two addends together: their tangents accumulated alike."""
    if is_constant(a_dot):
        return broadcast_tangent(b_dot, ans)
    if is_constant(b_dot):
        return broadcast_tangent(a_dot, ans)
    return add(a_dot, b_dot)


def _summed_to(g, have, shape):
    if len(have) == len(shape) + 1 and 1 not in shape:
        # A bias, the one shape worth a shortcut (a tuple axis costs 2x): the rows summed,
        # as a product with ones when there are many rows, one BLAS call; NumPy's sum over
        # axis 0 walks the rows (a (2048, 16) float32 adjoint: 85 us against 3 us), but
        # wins on a few rows (an RNN's (8, 32): 1.0 us against 1.8 us; measured), called
        # as the ufunc's reduce where it is NumPy's (ndarray.sum's wrapper is 15% of that).
        kind = g.dtype.kind
        if len(have) < 2 or have[0] < 32 or kind not in "fc":
            return _add_reduce(g, 0) if kind == "f" and type(g) is np.ndarray else g.sum(axis=0)
        total = array_module(g).ones(have[0], g.dtype) @ (g if len(have) == 2 else g.reshape(have[0], -1))
        return total if len(have) == 2 else total.reshape(shape)
    g = _as_array(g)
    lead = g.ndim - len(shape)
    if lead:
        g = g.sum(axis=tuple(range(lead)))
    keep = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if keep:
        g = g.sum(axis=keep, keepdims=True)
    return g.reshape(shape)


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


def cast_adjoint(g, like):
    """``g``, or zeros where ``like`` has an integer or boolean dtype (a creation function
    given ``dtype=int``, a cast to int) or is an integer: a value rounded to integers has
    zero derivative.  A list or dict (``xs[1] = v`` into ``[0] * n``), or an array of
    objects, keeps what is written in it as it is: ``g``."""
    dtype = getattr(like, "dtype", None)
    if dtype.kind in "fcO" if dtype is not None else not isinstance(like, (int, np.integer, np.bool_)):
        return g
    return array_module(g).zeros_like(g)


def cast_adjoint_transposed(ans_bar, ans, g, like):
    """The identity or zero (by ``like``'s dtype): its own transpose."""
    return cast_adjoint(ans_bar, like)


def fill_like(a, value):
    """``np.full_like(a, value)`` with a floating dtype: an adjoint's fill (``value``, the
    adjoint of a full reduction) keeps ``a``'s float dtype, and an integer or boolean
    ``a`` gets ``value``'s, so that ``1 / n`` is not truncated to 0."""
    if a.dtype.kind in "fc" if hasattr(a, "dtype") else isinstance(a, float):
        return array_module(a).full_like(a, value)
    kind = getattr(value, "dtype", value)  # (a CuPy value: its dtype, never the array)
    return array_module(a).full_like(a, value, dtype=np.result_type(kind, 1.0))


def fill_like_transposed(ans_bar, ans, a, value):
    return unbroadcast(ans_bar, value)


def check_scalar_output(value, where: str):
    """Raise a clear error when ``grad`` is given a function with a non-scalar output,
    or one that returned None on the path taken (whose gradient would silently be 0)."""
    if value is None:
        raise errors.UserCodeError(
            f"the function returned None on the path this call took (at {where}), so it has no "
            "gradient", None, "return the value to differentiate on every path (a function that "
            "ends without `return` returns None)")
    if isinstance(value, complex) or getattr(getattr(value, "dtype", None), "kind", "") == "c":
        raise errors.UnsupportedSyntaxError(
            f"the function returned a complex value (at {where}); srcgrad does not differentiate "
            "complex numbers yet", None, "return a real value (np.abs(z) ** 2, z.real, z.imag)")
    if isinstance(value, (dict, list, tuple)):  # (np.ndim of a dict is 0)
        raise errors.NonScalarOutputError(
            f"grad needs a scalar output, but the function returned a {type(value).__name__} (at {where})",
            None, "return the loss alone, pass has_aux=True for `return loss, aux` (aux may be a dict), "
            "or use srcgrad.vjp to pull back an adjoint of the same structure")
    if np.ndim(value) != 0:
        raise errors.NonScalarOutputError(
            f"grad needs a scalar output, but the function returned shape {np.shape(value)} "
            f"(at {where})",
            None,
            "reduce it to a scalar (np.sum, np.mean), or use srcgrad.vjp(f) to pull back "
            "an adjoint of the output's shape",
        )
    return value


def scalar_seed(value, seed, where: str):
    """The seed of ``grad`` for an output ``value`` whose rank is known only when the code
    runs: ``seed`` for a scalar, ``seed`` in ``value``'s shape for an array of one element
    (shape ``(1,)``, ``(1, 1)``, as autograd takes); anything else is refused, as
    :func:`check_scalar_output` says."""
    if isinstance(value, (dict, list, tuple)) or np.ndim(value) == 0 or np.size(value) != 1:
        check_scalar_output(value, where)
        return seed
    check_scalar_output(value.reshape(()), where)  # (a complex value is refused)
    return np.full(np.shape(value), seed, dtype=np.result_type(value, 1.0))


def size_one_seed(value, seed, where: str):
    """The seed of ``grad`` for an array output ``value`` of one element (shape ``(1,)``,
    ``(1, 1)``): ``seed`` in its shape.  Any other size is refused (NonScalarOutputError)."""
    if np.size(value) != 1:
        raise errors.NonScalarOutputError(
            f"grad needs a scalar output, but the function returned shape {np.shape(value)} (at {where})",
            None, "reduce it to a scalar (np.sum, np.mean), or use srcgrad.vjp(f) to pull back an adjoint "
            "of the output's shape")
    return np.full(np.shape(value), seed, dtype=np.result_type(value, 1.0))


def zip_length(*sequences) -> int:
    """How many items ``zip(*sequences)`` yields: the shortest length."""
    return min(len(s) for s in sequences)


def checked_adjoint(g, x, rule, param, where=""):
    """``g``, the adjoint a user's rule ``rule`` returned for its argument ``param``
    (value ``x``), when its shape is ``x``'s (or either is not an array or number).

    Raises:
        NoDerivativeRuleError: another shape (a rule of a function that broadcasts, not
            registered ``elementwise=True``): the gradient would be wrong.
    """
    at = f"{where}: " if where else ""
    if isinstance(g, (list, tuple, dict)) and (hasattr(x, "shape") or isinstance(x, (int, float))):
        raise errors.NoDerivativeRuleError(
            f"{at}the rule for `{rule}` returned a {type(g).__name__} as the adjoint of `{param}`, an "
            f"{'array' if hasattr(x, 'shape') else 'number'}", None,
            f"return one array of `{param}`'s shape (a rule of several arguments returns a tuple "
            "of them, one per argument)")
    if g is None or not hasattr(g, "shape") or not (hasattr(x, "shape") or isinstance(x, (int, float))):
        return g
    shape = x.shape if hasattr(x, "shape") else ()
    if g.shape == shape:
        return g
    raise errors.NoDerivativeRuleError(
        f"{at}the rule for `{rule}` returned an adjoint of shape {g.shape} for `{param}`, of shape "
        f"{shape}", None,
        "return one adjoint of each argument's shape; for a function that broadcasts its "
        "arguments elementwise, register the rule with elementwise=True (srcgrad then sums "
        "each adjoint back to its argument's shape)")


def hooked(hook):
    """``hook`` as the generated code calls it: its result replaces the adjoint it is
    given; ``None`` leaves that as it is (as PyTorch's ``register_hook`` does)."""
    import functools

    @functools.wraps(hook)
    def call(g):
        # Given read-only: the adjoint may be another name's too (`a + b`: one array for
        # both), which a change in place would change with it (PyTorch: a hook "should not
        # modify its argument").
        shown = g.view() if isinstance(g, np.ndarray) else g
        if shown is not g:
            shown.flags.writeable = False
        changed = hook(shown)
        return g if changed is None or changed is shown else changed
    return call


class Unbound:
    """What a name the path taken never assigned holds in generated code (``z = rt.Unbound('z')``
    first thing, where it is bound on some paths only): any use of it raises Python's own
    ``UnboundLocalError``, as the user's function would, rather than computing with a stand-in."""

    __slots__ = ("name",)
    __array_ufunc__ = None

    def __init__(self, name):
        object.__setattr__(self, "name", name)

    def _unbound(self, *args, **kwargs):
        raise UnboundLocalError(f"cannot access local variable '{self.name}' where it is not associated "
                                "with a value")

    __array__ = __getattr__ = __iter__ = __len__ = __bool__ = __getitem__ = __call__ = _unbound
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _unbound
    __pow__ = __rpow__ = __matmul__ = __rmatmul__ = __neg__ = __lt__ = __le__ = __gt__ = __ge__ = _unbound
    __float__ = __int__ = __index__ = _unbound


def zeros_like(x):
    """A zero adjoint for ``x``: an empty sparse structure, or an array of zeros
    (``0.0`` for ``None`` or ``Unbound``: a name the path taken never assigned)."""
    if x is None or type(x) is Unbound:
        return 0.0
    return {} if tree.is_structure(x) else np.zeros_like(x)


def item_of(g, key):
    """Item ``key`` of the adjoint ``g`` of a tuple, list or dict: ``g`` is sparse
    (``{0: a_bar}``, only the items something read) or a sequence; None where
    nothing reached that item (or ``g`` is a plain zero)."""
    if isinstance(g, dict):
        return g.get(key)
    if isinstance(key, str):  # a named tuple's field by name: a sequence's items are by position
        return None
    if isinstance(g, (list, tuple)) and isinstance(key, int) and not -len(g) <= key < len(g):
        return None  # a tuple adjoint that stops before the items nothing read
    return g[key] if isinstance(g, (list, tuple, np.ndarray)) else None


def entry(g, key, like):
    """:func:`item_of`, with zeros shaped like ``like`` where nothing reached the item."""
    part = item_of(g, key)
    return zeros_like(like) if part is None else part


def item(x):
    """``x.item()``: the one element of an array of size 1 (any shape) as a Python number."""
    return x.item() if hasattr(x, "item") else x


# ---- forward mode (tangents) ------------------------------------------------
def broadcast_tangent(t, ans):
    """A tangent with its output's shape: an elementwise function whose varying inputs
    are smaller than its output (``x + b`` with only ``b`` varying) gives a tangent of
    their shape, which broadcasting spreads over the output (a new, writable array)."""
    shape = np.shape(ans)
    if np.shape(t) == shape:
        return t
    module = array_module(t)
    return module.array(module.broadcast_to(t, shape))


def broadcast_tangent_transposed(u, out, t, ans):
    """Spreading a tangent over its output's shape, transposed: summed back to its own."""
    return unbroadcast(u, t)


def reduction_tangent(g, a_dot, axis=None, keepdims=False):
    """``J a_dot`` of a reduction along ``axis`` from its gradient ``g`` (the adjoint of
    ones): each output element depends on its own slice only, so its tangent is the
    sum over that slice of gradient times tangent.  An element the reduction leaves out
    (``g`` zero there: a NaN of ``nansum``, not the maximum of ``max``) adds nothing, even
    where its tangent is not finite (``0 * nan``), as in reverse mode, whose adjoint stops there."""
    return np.sum(_skipping(g, a_dot), axis=axis, keepdims=keepdims)


def _skipping(g, a_dot):
    """``g * a_dot``, zero where ``g`` is zero."""
    return array_module(g).where(g == 0, 0.0, g * a_dot)


def cast_tangent(t, ans, lead=()):
    """``t`` in ``ans``'s floating dtype, or zeros where ``ans`` is an integer or
    boolean value (a cast to int, an integer ``dtype=``): rounded values have zero
    derivative.  ``lead``: the shape of ``t``'s leading column axes (batched, ``(1,)``)."""
    dtype = getattr(ans, "dtype", None)
    if dtype is None:
        if isinstance(ans, dict) and isinstance(t, dict):  # getitem_adjoint's sparse {index: adjoint}
            return {key: cast_tangent(t[key], value) for key, value in ans.items()}
        if isinstance(ans, (list, tuple)) and isinstance(t, (list, tuple)) and len(t) == len(ans):
            return type(ans)(cast_tangent(ti, a) for ti, a in zip(t, ans))
        return t if isinstance(ans, (float, complex)) else 0.0 * t
    if dtype.kind in "fc":
        return t if getattr(t, "dtype", None) == dtype else array_module(t).asarray(t, dtype=dtype)
    return array_module(t).zeros(lead + np.shape(ans), dtype=np.result_type(t, 1.0))


def cast_tangent_transposed(u, out, t, ans, lead=()):
    """A cast to the output's floating dtype (the identity) or zeros (an integer output),
    transposed: the same, back in ``t``'s dtype."""
    return cast_tangent(cast_tangent(u, ans, lead), t)


def zeros_tangent(x):
    """The tangent of a value that does not (yet) depend on the inputs: zeros of its
    shape in a floating dtype (an integer array written with a varying value later
    still has a zero tangent there, ``cast_tangent``), a structure of them, ``0.0``
    for ``None`` (a name the path taken never assigned) and for Python numbers."""
    if x is None or isinstance(x, (int, float, bool)):
        return 0.0
    if tree.is_structure(x):
        _, leaves, spec = tree.flatten(x, tree.TANGENTS)
        return tree.unflatten(spec, [zeros_tangent(leaf) for leaf in leaves])
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return 0.0
    if dtype.kind == "O":  # an array of objects (arrays written into it): one of their tangents
        return np.array([zeros_tangent(v) for v in x.ravel()] + [None], dtype=object)[:-1].reshape(x.shape)
    module = array_module(x)
    return module.zeros(np.shape(x), dtype=dtype if dtype.kind in "fc" else np.float64)


def own_tangent(t):
    """A copy of a tangent array (scalars as they are): where the primal made a new array
    and the tangent is another name's, a later write into one must not reach the other."""
    return array_module(t).array(t) if hasattr(t, "ndim") and np.ndim(t) > 0 else t


def written_tangent(v_dot, y):
    """What ``y_dot[i] = v_dot`` stores: ``v_dot``, or zeros where ``y`` is an integer or
    boolean array (the written values are rounded: zero derivative)."""
    dtype = getattr(y, "dtype", None)
    return v_dot if dtype is None or dtype.kind in "fcO" else 0.0 * v_dot


def array_operand(value, where: str):
    """Forward mode's check, when it runs, that an operand whose kind was unknown when
    compiling (what a function of yours returned) is an array or a number: an object's
    own operator (``__mul__``) has no tangent rule there."""
    if isinstance(value, (np.ndarray, np.generic, float, int)) or hasattr(value, "__cuda_array_interface__"):
        return value
    raise errors.UnsupportedSyntaxError(
        f"forward mode met a {type(value).__name__} as an operand at {where}: an operator of a class of "
        "yours, which it does not differentiate yet", None,
        "use srcgrad.vjp, or call NumPy on the arrays the object holds")
