"""``grad(f, check=True)`` and ``SRCGRAD_CHECK=1``: every call checks itself.

Each call of a gradient function with checking on also

1. runs the user's original function on copies of the arguments and compares
   its value with the value the generated forward sweep computed;
2. picks one random direction ``v`` over the differentiated arguments (every
   float leaf of a structure too) and compares the directional derivative the
   gradient gives, ``<g, v>``, with the central difference
   ``(f(x + h v) - f(x - h v)) / 2h`` (Nocedal & Wright, *Numerical
   Optimization*, 2nd ed., §8.1; error O(h²) plus rounding O(eps |f| / h));
3. for ``vjp``, does the same with the cotangent ``u`` the pullback is given:
   ``<pullback(u), v>`` against ``<u, (f(x + h v) - f(x - h v)) / 2h>``.

A mismatch raises :class:`srcgrad.errors.GradientCheckError` with both numbers,
the function's name and its ``file:line``.  The result returned is the one the
call would have returned without checking.

What the checks call, and how side effects are kept apart:

* ``f`` runs three more times (value, ``x + h v``, ``x - h v``) and the
  generated code once more, each on fresh copies of the arguments (arrays
  copied, structures and other objects deep-copied where they can be), so a
  function that writes into its arguments sees the same inputs every time.
* NumPy's global random state (``np.random.*``) and Python's ``random`` are
  put back to the state before the call for each of these runs, so a function
  that draws random numbers draws the same ones; afterwards they are left as the
  user's call left them.  A ``np.random.Generator`` passed as an argument is
  copied with the arguments.
* Other side effects (a global counter, printing, a file written) happen once
  per run.  The direction comes from a generator of its own, seeded by the
  call count, so checking never changes the user's random numbers.

Tolerances (relative to the sizes of the terms compared): values 1e-9 in
float64, 1e-4 in float32; directional derivatives 1e-5 in float64 (the
difference is taken in float64 also for float32 arguments, with 1e-3), plus
rounding, and an absolute 1e-8 (1e-5) times ``max(1, |f|)``.  Where
``f`` is not differentiable at the point (``abs`` at 0, a ReLU at exactly 0,
``maximum`` of equal values) the central difference is not a derivative
(srcgrad's subgradient follows its documented convention there): where the
one-sided differences disagree with each other too (a kink along the
direction drawn), the check warns (:class:`srcgrad.errors.GradientCheckWarning`)
instead of raising.
"""
from __future__ import annotations

import copy
import inspect
import random
import warnings

import numpy as np

from . import anno, errors, tree
from .rules import registry

_CALLS = [0]


def checked_call(gf, args, kwargs):
    """``gf(*args, **kwargs)`` with the checks above (``gf``: a ``GradientFunction``)."""
    bound = gf._arguments(args, kwargs)
    saved = _copy(bound)
    state = _random_state()
    result = gf._call(bound)
    after = _random_state()
    try:
        _Check(gf, saved, state).run(result)
    finally:
        _set_random_state(after)
    if gf.options.mode == "vjp":
        value, pullback, *aux = result
        return (value, _checked_pullback(gf, saved, state, value, pullback), *aux)
    return result


class _Check:
    """One call's checks: ``saved`` are copies of the arguments (every parameter in
    order) taken before the call, ``state`` the random state then."""

    def __init__(self, gf, saved, state):
        self.gf, self.saved, self.state = gf, saved, state
        self.name = getattr(gf.fn, "__qualname__", getattr(gf.fn, "__name__", repr(gf.fn)))
        code = getattr(gf.fn, "__code__", None)
        self.where = f"{code.co_filename}:{code.co_firstlineno}" if code else self.name
        _CALLS[0] += 1
        self.rng = np.random.default_rng(_CALLS[0])

    # ---- running the user's function and the generated code on fresh copies ----
    def original(self, bound):
        _set_random_state(self.state)
        out = _call_with(self.gf, self.gf.fn, _copy(bound))
        return out[0] if self.gf.options.has_aux else out

    def generated_value(self):
        """The value the generated forward sweep computes."""
        mode = self.gf.options.mode
        if mode == "value_and_grad":
            return None  # the call returned it
        if mode == "vjp":
            return None
        sibling = self.gf.__dict__.get("_value_sibling")
        if sibling is None:
            sibling = self.gf.__dict__["_value_sibling"] = type(self.gf)(
                self.gf.fn, "value_and_grad", self.gf._wrt_spec, self.gf.options.backend,
                self.gf.options.optimize, self.gf.options.has_aux, check=False)
        _set_random_state(self.state)
        value, _ = sibling._call(_copy(self.saved))
        return value[0] if self.gf.options.has_aux else value

    # ---- the checks ----------------------------------------------------------
    def run(self, result):
        mode, options = self.gf.options.mode, self.gf.options
        if mode == "vjp":
            value = result[0]
        elif mode == "value_and_grad":
            value = result[0][0] if options.has_aux else result[0]
        else:
            value = self.generated_value()
        expected = self.original(self.saved)
        self.compare_values(value, expected)
        if mode == "vjp":
            return  # the gradient is checked when the pullback is called
        grads = (result[0] if options.has_aux else result) if mode == "grad" else result[1]
        if options.intermediates:
            grads = grads[0]  # (gradients, {"h": h_bar})
        self.compare_direction(grads, lambda out: float(np.real(np.sum(out))))

    def compare_values(self, got, expected):
        got_leaves, expected_leaves = _numbers(got), _numbers(expected)
        if len(got_leaves) != len(expected_leaves):
            raise self.error(f"the value of {self.name} computed by srcgrad's generated code has "
                             f"{len(got_leaves)} parts, the original function's {len(expected_leaves)}",
                             got, expected)
        for g, e in zip(got_leaves, expected_leaves):
            g, e = np.asarray(g), np.asarray(e)
            rtol = 1e-4 if _low_precision(g, e) else 1e-9
            if np.shape(g) != np.shape(e) or not np.allclose(g, e, rtol=rtol, atol=rtol * 1e-3,
                                                             equal_nan=True):
                raise self.error(f"srcgrad's generated code computes a different value of {self.name} "
                                 f"than the function itself (srcgrad: {g!r}, the function: {e!r})", g, e)

    def compare_direction(self, grads, project, what="gradient"):
        """``project(f's output)`` is the scalar whose derivative ``grads`` are."""
        entries = self.gf._entries
        grads = grads if self.gf._as_tuple else (grads,)
        points, directions, predicted, scale, low = [], [], 0.0, 0.0, False
        for (name, key), g in zip(entries, grads):
            x = self.gf._wrt_value(self.saved, name, key)
            x_leaves, g_leaves, spec = _float_leaves(x), _float_leaves(g, like=x), None
            if tree.is_structure(x):
                spec = tree.flatten(x)[2]
            v_leaves = []
            for xl, gl in zip(x_leaves, g_leaves):
                v = self.rng.standard_normal(np.shape(xl))
                low |= _low_precision(np.asarray(xl))
                v_leaves.append(v)
                if gl is None:
                    continue
                term = np.asarray(gl, dtype=np.float64) * v
                predicted += float(np.sum(term))
                scale += float(np.sum(np.abs(term)))
            points.append((name, key, x, spec, x_leaves))
            directions.append(v_leaves)
        size = max([1.0] + [float(np.max(np.abs(xl))) for _, _, _, _, leaves in points for xl in leaves
                            if np.size(xl)])
        h = 1e-6 * size if not low else 1e-4 * size

        def at(sign):
            bound = list(_copy(self.saved))
            for (name, key, x, spec, x_leaves), v_leaves in zip(points, directions):
                moved = [_moved(xl, sign * h, v) for xl, v in zip(x_leaves, v_leaves)]
                value = tree.unflatten(spec, _with_leaves(x, moved)) if spec is not None else moved[0]
                i = self.gf._params.index(name)
                if key is None:
                    bound[i] = value
                else:
                    container = bound[i]
                    if isinstance(container, tuple):
                        bound[i] = container[:key] + (value,) + container[key + 1:]
                    else:
                        container = dict(container)
                        container[key] = value
                        bound[i] = container
            return project(self.original(tuple(bound)))

        plus, minus = at(1.0), at(-1.0)
        difference = (plus - minus) / (2 * h)
        rtol = 1e-3 if low else 1e-5
        rounding = 1e2 * np.finfo(np.float64).eps * max(abs(plus), abs(minus)) / h
        # An absolute floor: intermediate values larger than f's (0.7 - b - 0.7) round too.
        floor = (1e-8 if not low else 1e-5) * max(1.0, abs(plus), abs(minus))
        tolerance = rtol * max(scale, abs(difference)) + rounding + floor
        if not np.isfinite(predicted) and not np.isfinite(difference):
            return
        if not abs(predicted - difference) <= tolerance:
            base = project(self.original(self.saved))
            right, left = (plus - base) / h, (base - minus) / h
            if abs(right - left) > 1e-3 * max(scale, abs(right), abs(left)) + 4 * rounding + 1e-9:
                # One-sided differences that disagree: f has a kink here (a ReLU at 0), where
                # no difference is a derivative and srcgrad's subgradient convention holds.
                warnings.warn(errors.GradientCheckWarning(
                    f"check=True could not check the {what} of {self.name} ({self.where}) at this point: "
                    f"f is not smooth here along a random direction (one-sided differences {right!r} and "
                    f"{left!r})"), stacklevel=4)
                return
            raise self.error(
                f"srcgrad's {what} of {self.name} disagrees with a central difference along a random "
                f"direction v: <{what}, v> = {predicted!r} from srcgrad, {difference!r} from "
                f"(f(x + h v) - f(x - h v)) / 2h with h = {h:.3g}", predicted, difference)

    def error(self, problem, got, expected):
        rules = _user_rules(self.gf._last)
        wrong = next(((primal, rule, why) for primal, rule in rules
                      for why in [_disagreement(primal, rule)] if why), None)
        if wrong is not None:  # the user's own rule fails the same check on its own
            primal, rule, why = wrong
            return errors.GradientCheckError(
                f"{problem}: the derivative rule you wrote for `{primal.__name__}` ({_where(rule.adjoint)}), "
                f"used here, disagrees with central differences of `{primal.__name__}` itself ({why})",
                _origin(self.gf.fn), got, expected,
                f"fix the rule (it takes (ans_bar, ans, *{primal.__name__}'s parameters) and returns "
                f"ans_bar times the derivative); srcgrad.testing.check_grads checks it")
        if rules:
            names = ", ".join(f"`{primal.__name__}` ({_where(rule.adjoint)})" for primal, rule in rules)
            advice = (f"this gradient uses derivative rules you wrote, for {names}: check them first with "
                      "srcgrad.testing.check_grads; otherwise ")
        else:
            advice = ""
        return errors.GradientCheckError(
            problem, _origin(self.gf.fn), got, expected,
            advice + "this is a defect in srcgrad unless the function is not smooth at this point (a kink "
            "of abs/maximum/ReLU): please report it with the function and its arguments; meanwhile "
            "grad(..., optimize=False) may avoid it")


def _user_rules(program) -> list:
    """``(primal, rule)`` for each derivative rule of the user's (``@custom_adjoint``,
    ``srcgrad.defadjoint``) the code of ``program`` was compiled with."""
    found, pending = {}, [getattr(program, "free", None)]
    while pending:
        free = pending.pop()
        if free is None:
            continue
        pending.extend(part for part, _ in getattr(free, "parts", ()))
        for _, _, value in free.guards:
            rule = registry.lookup(value)
            module = getattr(getattr(rule, "adjoint", None), "__module__", None) or ""
            if rule is not None and rule.adjoint is not None and not module.startswith("srcgrad."):
                found.setdefault(id(value), (value, rule))
    return list(found.values())


def _disagreement(primal, rule, h=1e-6) -> str:
    """Where ``rule`` disagrees with central differences of ``primal`` at a few scalar
    points ("" where it agrees, or where it cannot be run on scalars)."""
    rng = np.random.default_rng(0)
    for _ in range(3):
        args = {name: float(rng.uniform(0.3, 1.2)) for name in rule.signature.parameters
                if rule.signature.parameters[name].default is inspect.Parameter.empty}
        try:
            adjoints = rule.adjoint(1.0, primal(**args), **args)
            adjoints = adjoints if isinstance(adjoints, tuple) else (adjoints,)
            for name, adjoint in zip(rule.diff_params, adjoints):
                plus, minus = dict(args, **{name: args[name] + h}), dict(args, **{name: args[name] - h})
                difference = (float(primal(**plus)) - float(primal(**minus))) / (2 * h)
                given = 0.0 if adjoint is None else float(np.asarray(adjoint))
                if abs(given - difference) > 1e-4 * max(1.0, abs(difference)):
                    shown = ", ".join(f"{k}={v:.3g}" for k, v in args.items())
                    return (f"at {shown} its adjoint of {name} for ans_bar=1 is {given!r}, "
                            f"the difference {difference!r}")
        except Exception:  # noqa: BLE001 - a rule for arrays of given shapes: not judged here
            return ""
    return ""


def _where(fn) -> str:
    code = getattr(fn, "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code else repr(fn)


def _checked_pullback(gf, saved, state, value, pullback):
    def pull(ans_bar):
        out = pullback(ans_bar)
        after = _random_state()
        try:
            check = _Check(gf, saved, state)
            cotangents = _numbers(ans_bar)

            def project(output):
                parts = _numbers(output)
                return float(sum(np.sum(np.asarray(u, dtype=np.float64) * np.asarray(p, dtype=np.float64))
                                 for u, p in zip(cotangents, parts)))
            check.compare_direction(out, project, "vector-Jacobian product")
        finally:
            _set_random_state(after)
        return out
    pull.__name__ = getattr(pullback, "__name__", "pullback")
    return pull


# ---- helpers ------------------------------------------------------------------------
def _origin(fn):
    return anno.origin_of(fn)


def _call_with(gf, fn, bound):
    """Call the user's ``fn`` with every parameter's value in order (as ``_arguments``
    gives them): positional, then ``*args`` spread, keyword-only and ``**kwargs``."""
    positional, keywords = [], {}
    for parameter, value in zip(gf._signature.parameters.values(), bound):
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            positional.append(value)
        elif parameter.kind is parameter.VAR_POSITIONAL:
            positional.extend(value)
        elif parameter.kind is parameter.KEYWORD_ONLY:
            keywords[parameter.name] = value
        else:
            keywords.update(value)
    return fn(*positional, **keywords)


def _copy(bound):
    """Fresh copies of the arguments: arrays copied, anything else deep-copied where it
    can be (an object that cannot be copied is shared)."""
    out = []
    for value in bound:
        if isinstance(value, np.ndarray):
            out.append(value.copy())
        elif isinstance(value, (int, float, complex, str, bool, type(None))) or inspect.isroutine(value) \
                or inspect.ismodule(value) or isinstance(value, type):
            out.append(value)
        else:
            try:
                out.append(copy.deepcopy(value))
            except Exception:  # noqa: BLE001 - a lock, a file: shared as it is
                out.append(value)
    return tuple(out)


def _float_leaves(value, like=None):
    """The float leaves of a value (one for an array or number), in ``like``'s order."""
    if tree.is_structure(like if like is not None else value):
        if like is not None and not tree.is_structure(value):
            return [None] * len(_float_leaves(like))
        return [leaf for leaf in tree.flatten(value)[1] if _is_float(leaf)]
    return [value]


def _is_float(leaf):
    return isinstance(leaf, (float, np.floating)) and not isinstance(leaf, bool) or \
        isinstance(leaf, np.ndarray) and leaf.dtype.kind == "f"


def _with_leaves(x, moved):
    """All leaves of the structure ``x`` with its float leaves replaced by ``moved``."""
    moved = iter(moved)
    return [next(moved) if _is_float(leaf) else leaf for leaf in tree.flatten(x)[1]]


def _moved(x, step, v):
    """``x + step v`` in float64 (a Python float stays a float)."""
    if isinstance(x, np.ndarray):
        return np.asarray(x, dtype=np.float64) + step * v
    return float(x) + step * float(v)


def _numbers(value):
    """The numeric leaves of a function's output (a number, an array, a tuple of them)."""
    if isinstance(value, (tuple, list)):
        return [leaf for part in value for leaf in _numbers(part)]
    if isinstance(value, dict):
        return [leaf for part in value.values() for leaf in _numbers(part)]
    if value is None:
        return []
    return [value]


def _low_precision(*values) -> bool:
    return any(getattr(getattr(v, "dtype", None), "itemsize", 8) < 8
               and getattr(v, "dtype", np.dtype(float)).kind == "f" for v in values)


def _random_state():
    return np.random.get_state(), random.getstate()


def _set_random_state(state):
    np.random.set_state(state[0])
    random.setstate(state[1])
