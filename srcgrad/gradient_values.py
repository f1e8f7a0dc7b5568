"""Gradients as handed out: each with its primal's type, shape and structure.

Requires: the adjoints a compiled program returns (raw: sparse for structures, maybe sharing an
argument's array), and for ``FinalizedGradients`` the attributes ``GradientFunction.__init__`` sets.
Guarantees: a gradient of a float array is a writable array of its shape and dtype, of a float a
float, of a structure a value of that structure (``_match``); no gradient handed out is an argument
or another gradient (``_unshared``: changing one in place changes nothing else); a pullback given
to the user checks its cotangent's shape (``_check_cotangent``), ``None`` standing for zeros.
"""
from __future__ import annotations

import functools

import numpy as np

from . import anno, errors, runtime, tree


class FinalizedGradients:
    """A mixin of ``GradientFunction``: the adjoints its program returns, as the call hands them out."""

    def _plain_gradients(self, grads, args, layouts):
        """:meth:`_plain_call`'s gradients given their primals' types (``layouts``: the
        models' layouts by argument index, or None)."""
        if layouts is not None:
            if not self._as_tuple:
                return layouts[self._wrt_index[0]].gradient(grads, args[self._wrt_index[0]])
            return tuple(layouts[i].gradient(g, args[i]) if i in layouts else _plain_gradient(g, args[i])
                         for g, i in zip(grads, self._wrt_index))
        if not self._as_tuple:
            return _unshared(_plain_gradient(grads, args[self._wrt_index[0]]), args)
        for g, i in zip(grads, self._wrt_index):  # (a loop, not all(...): this runs every step)
            x = args[i]
            if not (type(g) is np.ndarray and type(x) is np.ndarray and g.shape == x.shape
                    and (g.dtype is x.dtype or g.dtype == x.dtype) and g.flags.writeable):
                return _unshared(tuple(_plain_gradient(g, args[i]) for g, i in zip(grads, self._wrt_index)),
                                 args)
        return _unshared(grads, args)

    def _finalize_watched(self, grads, args):
        if self.options.intermediates:
            return self._finalize(grads[0], args), grads[1]
        return self._finalize(grads, args)

    def _finalizing(self, pullback, args, value=None):
        """The pullback handed out: for the user (``value`` given), it checks the
        cotangent's shape; inside generated code it is used as it is."""
        if value is None:
            @functools.wraps(pullback)
            def finalized_pullback(ans_bar):
                return self._finalize(pullback(ans_bar), args)
            return finalized_pullback

        @functools.wraps(pullback)
        def checked_pullback(ans_bar):
            _check_cotangent(ans_bar, value, self.fn.__name__)
            try:
                return _unshared(self._finalize(pullback(_zeros_for_none(ans_bar, value)), args),
                                 ans_bar if isinstance(ans_bar, tuple) else (ans_bar,))
            except errors.UserCodeError as error:
                raise errors.shown_to_user(error, anno.origin_of(self.fn)) from None
            except Exception as error:
                errors.note_user_lines(error)
                raise
        return checked_pullback

    def _finalize(self, grads, args):
        """The adjoints the program returns (one per parameter in ``options.wrt``) as
        asked for: one per ``wrt`` entry; raw inside generated code, else each with
        its primal's type, shape and structure."""
        if self._whole:  # the common case, kept short: this runs on every call
            if self._internal:
                return grads
            if not self._as_tuple:
                return _unshared(_match(grads, args[self._wrt_index[0]]), args)
            return _unshared(tuple(_match(g, args[i]) for g, i in zip(grads, self._wrt_index)), args)
        by_name = dict(zip(self.options.wrt, grads if self.options.wrt_tuple else (grads,)))
        out = []
        for name, key in self._entries:
            g, value = by_name[name], self._wrt_value(args, name, key)
            if key is not None:
                g = runtime.item_of(g, key)
            if self._internal:
                out.append(runtime.zeros_like(value) if g is None else g)
            else:
                out.append(_match(g, value))
        if self._internal:
            return tuple(out) if self._as_tuple else out[0]
        return _unshared(tuple(out), args) if self._as_tuple else _unshared(out[0], args)


def _zeros_for_none(ans_bar, value):
    """``None`` for an output's adjoint means zero (as ``torch.autograd.grad`` takes it):
    the generated code computes with arrays, so each ``None`` becomes zeros of its output."""
    if ans_bar is None:
        return runtime.zeros_like(value)
    if isinstance(value, tuple) and isinstance(ans_bar, (tuple, list)):
        return type(ans_bar)(_zeros_for_none(g, v) for g, v in zip(ans_bar, value))
    return ans_bar


def _check_cotangent(ans_bar, value, name, path="value"):
    """``vjp``'s pullback is given an adjoint of its output's shape (a tuple for a tuple)."""
    if ans_bar is None:
        return  # zero
    if isinstance(value, tuple):
        if not isinstance(ans_bar, (tuple, list)) or len(ans_bar) != len(value):
            raise ValueError(f"the pullback of {name} takes a tuple of {len(value)} adjoints, one per "
                             f"output, got {type(ans_bar).__name__}"
                             + (f" of {len(ans_bar)}" if isinstance(ans_bar, (tuple, list)) else ""))
        for i, (g, v) in enumerate(zip(ans_bar, value)):
            if g is not None:
                _check_cotangent(g, v, name, f"{path}[{i}]")
        return
    if isinstance(value, list) and not isinstance(ans_bar, (list, tuple)) and np.ndim(ans_bar) \
            and _shape_or_none(value) == np.shape(ans_bar):
        return  # (a list of arrays NumPy takes for one array: its adjoint may be one array)
    if isinstance(value, (list, dict)):
        # (An array or a list given for a dict would reach no output: zeros, silently.)
        kind = (list, tuple) if isinstance(value, list) else dict
        if not isinstance(ans_bar, kind) or isinstance(value, list) and len(ans_bar) != len(value) \
                or isinstance(value, dict) and not set(ans_bar) <= set(value):
            what = f"a list of {len(value)}" if isinstance(value, list) else f"a dict with keys among {list(value)}"
            raise ValueError(f"the pullback of {name} takes an adjoint of its output's structure "
                             f"{'' if path == 'value' else '(' + path + ') '}{what}, one per entry (a missing "
                             f"key or None: zero), got {type(ans_bar).__name__}"
                             + (f" {list(ans_bar)}" if isinstance(ans_bar, (dict, list, tuple)) else ""))
        for key, g in (ans_bar.items() if isinstance(value, dict) else enumerate(ans_bar)):
            if g is not None:
                _check_cotangent(g, value[key], name, f"{path}[{key!r}]")
        return
    if tree.is_structure(value) or tree.is_structure(ans_bar):
        return
    expected, given = np.shape(value), np.shape(ans_bar)
    if expected != given:
        raise ValueError(f"the pullback of {name} takes an adjoint of the shape of its output "
                         f"{'' if path == 'value' else path + ' '}{expected}, but was given one of shape "
                         f"{given}")
    if isinstance(ans_bar, complex) or getattr(getattr(ans_bar, "dtype", None), "kind", "") == "c":
        raise ValueError(f"the pullback of {name} was given a complex adjoint; srcgrad does not "
                         "differentiate complex numbers yet")


def _tangent_of_structure(dot, primal):
    """A tangent given for a structure, with zeros for its leaves without gradient (an
    int, a flag: None in ``grad``'s): a tangent made as a copy of the parameters holds
    their counts, which are no tangents (``dispatch.jvp_field`` does the same for an
    object's integer attributes)."""
    _, leaves, spec = tree.flatten(primal, tree.TANGENTS)
    _, dots, dot_spec = tree.flatten(dot, tree.TANGENTS)
    kept = [tree._is_float(x) or tree._is_float_array(x) for x in leaves]
    if dot_spec != spec or all(kept):
        return dot
    return tree.unflatten(spec, [d if k else runtime.zeros_tangent(x) for d, k, x in zip(dots, kept, leaves)])


def _matches(g, x) -> bool:
    """``g`` is already a gradient for the array ``x``: its own writable array, same shape and dtype."""
    return type(g) is np.ndarray and type(x) is np.ndarray and g.dtype == x.dtype and g.shape == x.shape \
        and g.flags.writeable


def _unshared(out, inputs):
    """``out`` (an array, or a tuple of arrays) with each array that is one of ``inputs`` or an
    earlier item of ``out`` copied: a gradient changed in place (``g *= 0.5``) must change no
    other gradient and no argument (``sum(x + y)``'s two gradients are one adjoint; a vjp of
    the identity hands back its cotangent)."""
    if type(out) is tuple:
        seen = {id(a) for a in inputs if type(a) is np.ndarray}
        copied = None
        for k, g in enumerate(out):
            if type(g) is np.ndarray:
                if id(g) in seen:
                    copied = copied or list(out)
                    copied[k] = g.copy()
                else:
                    seen.add(id(g))
        return out if copied is None else tuple(copied)
    if type(out) is np.ndarray and any(out is a for a in inputs):
        return out.copy()
    return out


def _plain_gradient(g, x):
    """:func:`_match` for a float array or a Python float ``x``, the float case first."""
    if type(x) is float and isinstance(g, float):  # (np.float64 is a float: a scalar adjoint)
        return float(g)
    return _match(g, x)


def _match(g, x):
    """Give a gradient its primal's type, shape and dtype (float32 in, float32 out);
    for a structure, a value of the same structure (``g.linear1.weight``)."""
    if _matches(g, x):
        return g  # the common case, checked first: this runs on every gradient
    if g is None:
        g = {} if tree.is_structure(x) else np.zeros_like(x)
    if isinstance(g, (list, tuple, dict)) and not tree.is_structure(x):
        raise errors.NoDerivativeRuleError(
            f"the gradient of an argument that is {'an array' if hasattr(x, 'shape') else 'a number'} came "
            f"out as a {type(g).__name__}: a derivative rule of yours (srcgrad.custom_adjoint, "
            "defadjoint, defvjp) returned one as the adjoint of an array", None,
            "return one array of the argument's shape from the rule (a rule of several arguments "
            "returns a tuple of them, one per argument)")
    if (isinstance(g, complex) or getattr(getattr(g, "dtype", None), "kind", "") == "c") \
            and not (isinstance(x, complex) or getattr(getattr(x, "dtype", None), "kind", "") == "c"):
        raise errors.UnsupportedSyntaxError(
            "a complex value reached the gradient of a real argument (a complex output, or a complex "
            "value on the way to it); srcgrad does not differentiate complex numbers yet", None,
            "keep the computation real (np.abs(z) ** 2, z.real, z.imag) or split it into real and "
            "imaginary parts")
    if tree.is_structure(x):
        if isinstance(g, (np.ndarray, np.generic, float, int)):  # NumPy took a list for an array
            if np.ndim(g) == 0 and g == 0:
                g = {}
            else:
                shape = _shape_or_none(x) if isinstance(x, (list, tuple)) else None
                if shape is None or np.ndim(g) and np.shape(g) != shape:
                    raise errors.SrcgradError(
                        f"srcgrad computed an adjoint of shape {np.shape(g)} for the {type(x).__name__} "
                        "argument and cannot lay it out in it (a defect in srcgrad: please report it); "
                        "pass the argument as a NumPy array (np.asarray(...)) meanwhile")
                g = np.broadcast_to(g, shape)
        if tree._is_object(g):  # (laid out as an object already: a gradient function's own result)
            g = tree.sparse_of(g)
        if not isinstance(g, (dict, np.ndarray, list, tuple)):
            raise errors.SrcgradError(
                f"srcgrad computed an adjoint of the {type(x).__name__} argument that is a {type(g).__name__}, "
                "not one of its structure (a defect in srcgrad: please report it)")
        sparse = g if isinstance(g, (dict, np.ndarray)) else dict(enumerate(g))
        return tree.materialize(sparse, x)
    if isinstance(x, np.ndarray):
        if type(g) is np.ndarray and g.dtype == x.dtype and g.shape == x.shape and g.flags.writeable:
            return g
        try:
            return np.array(np.broadcast_to(g, x.shape), dtype=x.dtype)
        except ValueError:
            raise errors.NoDerivativeRuleError(
                f"the gradient of an argument of shape {x.shape} came out of shape {np.shape(g)}: a "
                "derivative rule of yours (srcgrad.custom_adjoint, defadjoint, defvjp) returned an "
                "adjoint of another shape than its argument (or a list)", None,
                "return one array of each argument's shape from the rule; for a function that "
                "broadcasts its arguments, register the rule with elementwise=True") from None
    if isinstance(x, float):
        return float(g)
    if isinstance(x, np.generic):
        return x.dtype.type(g)
    return g


def _shape_or_none(x):
    """``np.shape`` of a list or tuple NumPy can take for an array, else None."""
    try:
        return np.shape(x)
    except ValueError:  # ragged
        return None
