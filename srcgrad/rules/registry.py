"""The derivative-rule registry: one entry per primitive.

A rule is an ordinary Python function ``(ans_bar, ans, *primal_params) ->
adjoints``: ``ans`` is the primal output, ``ans_bar`` its adjoint, and the
primal parameters carry NumPy's own names and order so that a user's call
binds to them exactly as it binds to NumPy.  It returns one adjoint per
differentiable parameter (a tuple when there are several; ``None`` for "no
contribution").  The same function is

* run directly on arrays by the tests (dot-product and finite-difference
  checks, no compiler involved), and
* the template the compiler inlines: ``srcgrad.templates`` substitutes the
  call's variables for the parameters and partially evaluates it, so an
  ``if`` whose test is known at compile time (``axis is None``,
  ``is_constant(x2)``, ``np.ndim(x1) == 2``) keeps just one branch.  A test
  that is *not* known at compile time is taken as false: such an ``if`` only
  ever guards a specialisation, and the code after it must be general.

Registering a rule::

    @defadjoint(np.arctan, elementwise=True)
    def arctan(ans_bar, ans, x):
        return ans_bar / (1 + x**2)

Functions whose output carries no derivative (``np.argmax``, ``len``,
``np.random.randn``) are one line: ``nondifferentiable(np.argmax, len)``.
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import itertools
import sys
import types
from typing import Callable

import numpy as np


@dataclasses.dataclass(eq=False)
class Rule:
    """Everything srcgrad knows about one primitive.

    Attributes:
        name: a label for messages (``numpy.exp``).
        adjoint: the rule function, or None for non-differentiable primitives.
        signature: the primal parameters, for binding a call's arguments.
        diff_params: names of the differentiable parameters, in the order the
            rule returns their adjoints.
        elementwise: the output has the broadcast shape of the inputs and each
            output element depends only on the matching input elements.
        ndim: ``(ndims, statics) -> int | None``: the output's rank, given the
            bound parameters' ranks and compile-time values (None: unknown).
        sequence_params: parameters that take a list of arrays (``concatenate``).
        zero_derivative: for a primitive without an adjoint, whether that is
            because its output's derivative is zero with respect to every
            argument (``np.argmax``, ``len``: declared with
            :func:`nondifferentiable`).  False for a primitive srcgrad merely has
            no rule for (a random draw, a class): the reverse pass refuses one
            given a value being differentiated.
        impure: calling it has an effect (a random draw): never dropped or repeated.
        refuse: ``(statics) -> (problem, advice) | None``, given the compile-time
            values of the bound parameters (``UNKNOWN`` where not known): a form of
            the call the rule does not cover, refused at the user's line.
        tangent: how forward mode gets the tangent of the output (see
            :data:`TANGENTS`): a tangent rule function, or the name of the way it is
            derived from the primitive or from ``adjoint``.  None: forward mode
            refuses the primitive given a value with a tangent.

    A parameter outside ``diff_params`` has no adjoint.  Those of srcgrad's own rules named in
    :data:`DISCRETE` take integers, booleans, strings or dtypes only (an axis, a
    shape, an index, ``np.where``'s condition), so their derivative is zero
    whatever is passed, and so do those in ``zero_params`` (``np.full_like``'s
    ``a``, of which only the shape is read); a value being differentiated that
    reaches any other
    (``np.linalg.norm(x, ord=p)``, ``np.var(x, ddof=d)``) is refused at compile
    time by the reverse pass.
    """

    name: str
    adjoint: Callable | None
    signature: inspect.Signature | None
    diff_params: tuple = ()
    elementwise: bool = False
    ndim: Callable | None = None
    sequence_params: frozenset = frozenset()
    zero_derivative: bool = False
    impure: bool = False
    zero_params: frozenset = frozenset()
    refuse: Callable | None = None
    tangent: Callable | str | None = None

    @property
    def differentiable(self) -> bool:
        return self.adjoint is not None

    @property
    def discrete_params(self) -> frozenset:
        """:data:`DISCRETE` for srcgrad's own rules, whose parameters of those names are
        NumPy's and SciPy's; none for a user's (``custom_adjoint``'s ``k=2.0`` is a float)."""
        return DISCRETE if getattr(self.adjoint, "__module__", "").startswith("srcgrad.") else frozenset()


# Parameters that take only discrete values (integers, booleans, strings, dtypes, index
# expressions): a value that depends on the inputs passed there has zero derivative.
DISCRETE = frozenset({"axis", "axes", "shape", "dtype", "keepdims", "order", "index", "name", "copy",
                      "out", "subok", "writeable", "window_shape", "optimize", "condition", "casting",
                      "size", "num", "endpoint", "retstep", "shift", "source", "destination", "axis1",
                      "axis2", "offset", "k", "n", "kind", "stable", "where", "repeats", "reps", "indices", "kth",
                      "obj", "pad_width", "mode", "reflect_type", "indices_or_sections", "axisa", "axisb",
                      "axisc"})

# How forward mode derives a primitive's tangent where no tangent rule is written
# (``transforms/forward.py`` applies them):
#   "pointwise"  each output element depends on the matching (broadcast) elements of the
#                inputs, so the Jacobian is diagonal: the tangent is the adjoint formula
#                applied to each input's tangent in place of ``ans_bar``, without
#                ``unbroadcast``, summed over the inputs (every ``elementwise`` rule);
#   "linear"     linear in its one differentiable parameter (or in all the items of its
#                sequence parameter together): the primitive applied to the tangent;
#   "bilinear"   linear in each differentiable parameter apart (``@``, ``einsum``): the
#                sum over the inputs of the primitive with that input's tangent;
#   "reduction"  each output element is a function of its own slice of ``a`` along
#                ``axis``: the tangent is ``sum(adjoint(ones) * a_dot, axis)``.
TANGENTS = ("pointwise", "linear", "bilinear", "reduction")

_RULES: dict[int, tuple[object, Rule]] = {}  # id(primal) -> (primal, rule); ufuncs are not all hashable alike
_METHOD_RULES: dict[tuple, Rule] = {}  # (class, method name) -> rule, for bound methods (rng.normal)


def label(obj) -> str:
    """``module.name`` for messages (``numpy.exp``, ``scipy.special.erf``)."""
    name = getattr(obj, "__name__", repr(obj))
    mod = getattr(obj, "__module__", None)
    if mod is None and isinstance(obj, np.ufunc):  # a ufunc names no module: NumPy's or scipy.special's
        mod = "numpy" if getattr(np, name, None) is obj else "scipy.special"
    return f"{mod or ''}.{name}".lstrip(".")


_VERSION = [0]  # bumped by every registration: compiled code made before it is compiled again


def version() -> int:
    """How many times rules were registered: a program compiled under another count may
    have inlined a rule since replaced (``@f.defadjoint`` given again)."""
    return _VERSION[0]


def elementwise_ndim(ndims, statics):
    ranks = list(ndims.values())
    return None if any(r is None for r in ranks) else max(ranks, default=0)


def defadjoint(*primals, elementwise: bool = False, ndim=None, diff: tuple | None = None,
               sequence: tuple = (), methods: tuple = (), zero: tuple = (), refuse=None, tangent=None):
    """Register ``fn`` as the adjoint rule of each of ``primals``.

    Args:
        *primals: the functions (``np.exp``, ``operator.mul``) the rule covers.
        elementwise: see :class:`Rule`; elementwise rules get rank inference
            for free and ``unbroadcast`` removed where shapes provably agree.
        ndim: output-rank function, see :class:`Rule`.
        diff: names of the differentiable parameters; default: those without
            a default value.
        sequence: parameters that take a list of arrays.
        zero: parameters, besides those of :data:`DISCRETE`, whose derivative
            is zero (the rule reads only their shape or dtype).
        refuse: see :class:`Rule`.
        methods: ``(class, name)`` pairs: the rule also covers ``obj.name`` for
            every instance ``obj`` of ``class`` (``rng.normal`` of a Generator,
            ``stats.norm.pdf``), whose bound methods are new objects at each access.
        tangent: forward mode's rule: one of :data:`TANGENTS`, or a function
            ``(ans, *primal_params, <param>_dot=None, ...) -> tangent`` given the
            tangent of each differentiable parameter (``None``: a constant);
            default ``"pointwise"`` for an elementwise rule, else none.

    Returns:
        The decorator; it returns ``fn`` unchanged so the rule stays callable.
    """

    def register(fn):
        for primal in primals:
            _check_named_like(primal, fn)
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())[2:]  # drop ans_bar, ans
        primal_sig = sig.replace(parameters=params)
        diff_params = tuple(diff) if diff is not None else tuple(
            p.name for p in params if p.default is inspect.Parameter.empty)
        rule_ndim = ndim if ndim is not None else (elementwise_ndim if elementwise else None)
        how = tangent if tangent is not None else "pointwise" if elementwise else None
        if isinstance(how, str) and how not in TANGENTS:
            raise ValueError(f"tangent={how!r}: expected one of {TANGENTS} or a function")
        if how == "linear" and len(diff_params) > 1 and not set(diff_params) <= set(sequence):
            # (applied to the varying one's tangent, the others kept: right for one parameter only)
            raise ValueError(f"tangent='linear' is for a rule of one differentiable parameter; "
                             f"{fn.__name__} has {diff_params}: give a tangent function")
        for primal in primals:
            _VERSION[0] += 1
            _RULES[id(primal)] = (primal, Rule(label(primal), fn, primal_sig, diff_params,
                                               elementwise, rule_ndim, frozenset(sequence),
                                               impure=is_random(primal), zero_params=frozenset(zero),
                                               refuse=refuse, tangent=how))
        for cls, name in methods:
            _VERSION[0] += 1
            _METHOD_RULES[cls, name] = Rule(f"{cls.__module__}.{cls.__name__}.{name}", fn, primal_sig,
                                            diff_params, elementwise, rule_ndim, frozenset(sequence),
                                            impure=is_random(cls), zero_params=frozenset(zero), refuse=refuse,
                                            tangent=how)
        return fn

    return register


def _check_named_like(primal, adjoint):
    """An adjoint rule of the user's takes ``(ans_bar, ans, <the primal's parameters>)``, bound by
    position: one whose parameters are named otherwise (``(x, ans, ans_bar)``) would run with its
    arguments in the wrong slots and give another function's gradient, silently.  So the names
    after the first two must be the primal's, and the first two not one of them.  Checked for
    functions of the user's own (NumPy's and SciPy's signatures are not the rules' names)."""
    if not isinstance(primal, types.FunctionType) or _is_library(primal):
        return
    wanted = list(inspect.signature(primal).parameters)
    got = list(inspect.signature(adjoint).parameters)
    if got[2:] == wanted and len(got) >= 2 and not set(got[:2]) & set(wanted):
        return
    _refuse_names(primal, adjoint, "adjoint", got, ["ans_bar", "ans"] + wanted,
                  "the output's adjoint, the output, then", "the first two")


def _check_tangent_named_like(primal, tangent):
    """The same for a tangent rule, ``(ans, <the primal's parameters>, <parameter>_dot=None, ...)``:
    its first parameter is the output whatever its name, the others are bound by name, so
    each must name one of the primal's parameters or their tangents (``**kwargs`` takes any)."""
    if not isinstance(primal, types.FunctionType) or _is_library(primal):
        return
    wanted = list(inspect.signature(primal).parameters)
    parameters = inspect.signature(tangent).parameters
    got = list(parameters)
    named = set(wanted) | {f"{p}_dot" for p in wanted}
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()) or \
            got and got[0] not in named and set(got[1:]) <= named:
        return
    _refuse_names(primal, tangent, "tangent", got, ["ans"] + wanted + [f"{p}_dot=None" for p in wanted],
                  "the output, then", "the first")


def _refuse_names(primal, rule, what, got, expected, leading, first):
    from .. import anno, errors  # (leaf modules)

    code = getattr(rule, "__code__", None)
    origin = None
    if code is not None:
        import linecache

        text = linecache.getline(code.co_filename, code.co_firstlineno).rstrip("\n")
        origin = anno.Origin(code.co_filename, code.co_firstlineno, len(text) - len(text.lstrip()), text)
    name, primal_name = getattr(rule, "__name__", "the rule"), primal.__name__
    expected = ", ".join(expected)
    raise errors.NoDerivativeRuleError(
        f"`{name}`, the {what} rule of `{primal_name}`, takes ({', '.join(got)}), but a {what} rule takes "
        f"{leading} `{primal_name}`'s parameters, in this order: ({expected}); its arguments are given "
        "by position, so other names would put them in the wrong places",
        origin, f"write `def {name}({expected}):` ({first} may have other names, not those of "
                f"`{primal_name}`'s parameters)")


def _is_library(fn) -> bool:
    module = (getattr(fn, "__module__", "") or "").split(".")[0]
    return module in ("numpy", "scipy", "srcgrad")


def custom_adjoint(primal):
    """Mark a function of yours as a primitive whose adjoint you write yourself.

    Usage (the tutorial's custom ReLU)::

        @srcgrad.custom_adjoint
        def my_relu(x):
            return np.maximum(x, 0)

        @my_relu.defadjoint
        def my_relu_adjoint(ans_bar, ans, x):
            return ans_bar * (x > 0)

    The compiler then uses ``my_relu_adjoint`` wherever ``my_relu`` is called,
    instead of differentiating its body.  Forward mode (:func:`srcgrad.jvp`) needs
    a tangent rule too, ``(ans, <my_relu's parameters>, <param>_dot=None, ...)``
    (each ``_dot`` is that argument's tangent, ``None`` for a constant)::

        @my_relu.defjvp
        def my_relu_tangent(ans, x, x_dot=None):
            return x_dot * (x > 0)

    Without one, forward mode over ``my_relu`` is refused by name.  The adjoint function takes the
    output's adjoint, the output, then ``my_relu``'s parameters, and returns
    one adjoint per parameter without a default value (a tuple when several).
    Check it with :func:`srcgrad.testing.check_grads`.

    Returns:
        ``primal`` itself, with a ``defadjoint`` decorator attached.
    """
    def register(adjoint=None, **options):
        if adjoint is None:
            return lambda fn: register(fn, **options)
        defadjoint(primal, **options)(adjoint)
        return adjoint

    def register_tangent(tangent):
        deftangent(primal)(tangent)
        return tangent

    primal.defadjoint = register
    primal.defjvp = register_tangent
    return primal


def deftangent(*primals):
    """Register ``fn`` as forward mode's tangent rule of each of ``primals``, which
    must have an adjoint rule already (the two live side by side).

    ``fn(ans, *primal_params, **tangents)`` takes the output, the primal
    parameters as the adjoint rule names them, then ``<param>_dot`` for each
    differentiable parameter (``None`` where that argument is a constant), and
    returns the output's tangent: the directional derivative ``J v``.
    """
    def register(fn):
        for primal in primals:
            _check_tangent_named_like(primal, fn)
            rule = lookup(primal)
            if rule is None or not rule.differentiable:
                raise ValueError(f"{label(primal)} has no adjoint rule: register it first")
            rule.tangent = fn
            _VERSION[0] += 1
        return fn
    return register


def adjoint_count_problem(rule: Rule, returned: int) -> tuple[str, str]:
    """``(problem, advice)`` for a rule of yours that returned ``returned`` adjoints where it
    must return one per differentiable parameter (those without a default value)."""
    fn = rule.adjoint
    which = "the lambda given as the adjoint rule" if fn.__name__ == "<lambda>" else \
        f"`{fn.__qualname__}`, the adjoint rule"
    wanted = ", ".join(f"{name}_bar" for name in rule.diff_params)
    return (f"{which} of `{rule.name}` returns {returned} value{'s' * (returned != 1)}, but must return "
            f"one adjoint per parameter without a default value ({len(rule.diff_params)} here): `{wanted}`",
            "return them as a tuple in that order, None for one without a derivative; "
            "a parameter given a default value (`*, p=1.0`) takes no adjoint")


def diff_params(adjoint) -> tuple:
    """The differentiable parameters of a registered rule function."""
    for rule in itertools.chain((rule for _, rule in _RULES.values()), _METHOD_RULES.values()):
        if rule.adjoint is adjoint:
            return rule.diff_params
    raise KeyError(adjoint)


def nondifferentiable(*primals, ndim=None, methods=(), impure=False) -> None:
    """Declare that the outputs of ``primals`` have zero derivative with respect to
    every argument, wherever they are defined (``np.argmax``, ``np.floor``, ``len``);
    ``methods``: ``(class, name)`` pairs, ``obj.name`` of each instance too, ``impure``
    for those (a check with an effect: never dropped or repeated).

    Not for "no rule yet": a function with one differentiable argument needs a
    rule (``defadjoint(..., diff=(...))``), else its gradient is silently wrong.  A
    function of the user's own (not NumPy's, SciPy's or srcgrad's) may have effects (a
    logger, a statistics update): it is never dropped as dead code or repeated.
    """
    for primal in primals:
        _VERSION[0] += 1
        own = isinstance(primal, types.FunctionType) and not _is_library(primal)
        _RULES[id(primal)] = (primal, Rule(label(primal), None, None, ndim=ndim, zero_derivative=True,
                                           impure=impure or own or is_random(primal)))
    for cls, name in methods:
        _METHOD_RULES[cls, name] = Rule(f"{cls.__module__}.{cls.__name__}.{name}", None, None, ndim=ndim,
                                        zero_derivative=True, impure=impure)


def is_random(obj) -> bool:
    """Random draws: no derivative, and never dropped or repeated by the optimizer."""
    mod = getattr(obj, "__module__", "") or ""
    owner = getattr(obj, "__self__", None)
    if isinstance(owner, (np.random.Generator, np.random.RandomState)):
        return True
    return mod in ("random", "numpy.random", "numpy.random.mtrand") or mod.startswith("numpy.random.")


# The rules of optional libraries (library -> module of rules), registered at the first lookup
# that misses once the library is imported: srcgrad neither needs SciPy nor makes every user
# pay for importing it (scipy.signal alone takes half a second).
_OPTIONAL = {"scipy.special": "scipy_special", "scipy.signal": "scipy_signal", "scipy.stats": "scipy_stats",
             "scipy.linalg": "scipy_linalg"}


def register_optional() -> None:
    """Register the rules of the optional libraries imported so far (``_OPTIONAL``)."""
    for library in [name for name in _OPTIONAL if name in sys.modules]:
        module = _OPTIONAL.pop(library, None)  # (None: registered meanwhile, by an import this one made)
        if module is not None:
            importlib.import_module(f"{__package__}.{module}")


def lookup(obj) -> Rule | None:
    """The rule for ``obj``, or None when srcgrad has none."""
    found = _RULES.get(id(obj))
    if found is None and _OPTIONAL:
        register_optional()
        found = _RULES.get(id(obj))
    if found is not None and found[0] is obj:
        return found[1]
    owner = getattr(obj, "__self__", None)
    if owner is not None and not isinstance(owner, types.ModuleType):
        for cls in type(owner).__mro__:
            rule = _METHOD_RULES.get((cls, getattr(obj, "__name__", None)))
            if rule is not None:
                return rule
    if is_random(obj) or isinstance(obj, (type, types.ModuleType)):
        return Rule(label(obj), None, None, impure=is_random(obj))  # no rule: refused if given an active value
    return None


def is_numpy(obj) -> bool:
    mod = getattr(obj, "__module__", None)
    return isinstance(obj, np.ufunc) or (isinstance(mod, str) and mod.split(".")[0] == "numpy")
