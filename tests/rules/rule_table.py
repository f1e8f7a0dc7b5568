"""The table of derivative rules: one row per primitive, the expressions that reach it, their
input shapes and domain (``test_rules.py`` checks each row's rule directly and through the
compiler; ``test_forward_rules.py``, ``test_higher_rules.py`` and ``test_rules_coverage.py``
read the same rows).

A row holds everything about one primitive: the primitive, the expressions
that reach it (spellings and options) with the input shapes for each, and the
input domain.  Inputs are named ``x``, ``y``, ``z`` in order.  Adding a rule
means adding a row here.
"""
from __future__ import annotations

import builtins
import dataclasses
import functools
import linecache
import math
import operator
import zlib

import numpy as np

import srcgrad
from srcgrad import runtime as rt
from srcgrad.rules import registry

try:  # SciPy is optional: without it its rules are not registered and their rows are left out
    from scipy import linalg, signal, special, stats
except ImportError:
    linalg = signal = special = stats = None
else:
    registry.register_optional()

INPUTS = ("x", "y", "z")

REAL = (-2.0, 2.0)
POSITIVE = (0.5, 2.0)
UNIT = (-0.9, 0.9)

UNARY = [((3, 4),), ((),)]
BINARY = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((), (3, 4)), ((3, 4), ())]
MATRIX = [((3, 4),)]
CUBE = [((2, 3, 4),)]
CONVOLVE = [((5,), (3,)), ((3,), (5,)), ((4,), (4,)), ((6,), (1,)), ((2,), (5,))]


@dataclasses.dataclass(frozen=True)
class Row:
    """One primitive.

    Attributes:
        primitive: the function whose registered rule is under test (``np.exp``).
        cases: user expression → the input shapes to try it on (one tuple of
            shapes per try).  Each expression applies ``primitive`` once to the
            inputs and constants, so the rule alone accounts for its Jacobian.
        domain: ``(low, high)`` for every input, or one pair per input.
        prepare: applied to each input drawn (``spd``: a positive definite matrix), or a
            tuple of one per input (None: as drawn).
        float32: whether float32 inputs give float32 adjoints (False where the primitive
            itself computes in float64, as SciPy's distributions do: the gradient is still
            float32, cast back at the end).

    A primitive that returns a tuple (``np.linalg.svd``) is checked on every item.
    """

    primitive: object
    cases: dict
    domain: tuple = REAL
    prepare: object = None
    float32: bool = True


def spd(x):
    """``x x^T + n I`` over the last two axes: symmetric positive definite, in ``x``'s dtype."""
    return (x @ np.swapaxes(x, -1, -2) + x.shape[-1] * np.eye(x.shape[-1])).astype(x.dtype)


def triangular(x):
    """``x``'s lower triangle with ``n`` added to the diagonal: well conditioned, in ``x``'s dtype."""
    return (np.tril(x) + x.shape[-1] * np.eye(x.shape[-1])).astype(x.dtype)


def upper_triangular(x):
    return np.swapaxes(triangular(x), -1, -2)


def like(value, rng):
    """Standard normal draws of ``value``'s shape; item by item for a tuple output."""
    if isinstance(value, tuple):
        return tuple(like(v, rng) for v in value)
    return np.asarray(rng.standard_normal(np.shape(value)))


def inner(u, v):
    """``<u, v>``, summed over the items of a tuple output."""
    if isinstance(u, tuple):
        return sum(inner(a, b) for a, b in zip(u, v))
    return np.sum(u * np.asarray(v))


def astype(u, dtype):
    return tuple(astype(a, dtype) for a in u) if isinstance(u, tuple) else np.asarray(u, dtype)


def assert_close(actual, expected, **tolerances):
    if isinstance(expected, tuple):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_close(a, e, **tolerances)
    else:
        assert np.shape(actual) == np.shape(expected), (np.shape(actual), np.shape(expected))
        np.testing.assert_allclose(actual, expected, **tolerances)


def difference(plus, minus):
    if isinstance(plus, tuple):
        return tuple(difference(p, m) for p, m in zip(plus, minus))
    return np.asarray(plus) - np.asarray(minus)


def _reduction(name, domain=REAL, methods=True, **extra):
    """A reduction with ``axis`` (int, negative, tuple) and ``keepdims``, as a function
    and (``methods``) as a method, on a 3-d input; ``extra`` adds cases of its own."""
    cases = {
        f"np.{name}(x)": CUBE + [((5,),), ((),)],
        f"np.{name}(x, 1)": CUBE,
        f"np.{name}(x, axis=None)": CUBE,
        f"np.{name}(x, axis=0)": CUBE,
        f"np.{name}(x, axis=-1)": CUBE,
        f"np.{name}(x, axis=1, keepdims=True)": CUBE,
        f"np.{name}(x, axis=(0, -1))": CUBE,
        f"np.{name}(x, axis=(0, 2), keepdims=True)": CUBE,
        f"np.{name}(x, keepdims=True)": CUBE,
    }
    if methods:
        cases.update({
            f"x.{name}()": CUBE,
            f"x.{name}(1)": CUBE,
            f"x.{name}(axis=1)": MATRIX,
            f"x.{name}(axis=(0, -1), keepdims=True)": CUBE,
        })
    return Row(getattr(np, name), {**cases, **extra}, domain)


ROWS = [
    # ---- operators ---------------------------------------------------------
    Row(operator.add, {"x + y": BINARY, "np.add(x, y)": BINARY[:2], "x + 1.0": UNARY}),
    Row(operator.sub, {"x - y": BINARY, "np.subtract(x, y)": BINARY[:2], "1.0 - x": UNARY}),
    Row(operator.mul, {"x * y": BINARY, "np.multiply(x, y)": BINARY[:2], "x * 3": UNARY}),
    # "2.0 / y" and "2.0 ** y" leave x unused: its gradient must be zeros.
    Row(operator.mod, {"x % y": BINARY[:2], "np.mod(x, y)": BINARY[:1], "np.remainder(x, y)": BINARY[:1], "x % 0.7": UNARY},
        (REAL, POSITIVE)),
    Row(builtins.float, {"float(x)": [((),)], "np.float64(x)": UNARY}),
    Row(srcgrad.runtime.item, {"x.item()": [((1,),), ((1, 1),)]}),
    Row(np.astype, {"x.astype(np.float64)": MATRIX}),
    Row(operator.truediv, {"x / y": BINARY, "np.divide(x, y)": BINARY[:2], "x / 4": UNARY,
                           "np.true_divide(x, y)": BINARY[:1],
                           "2.0 / y": [((3, 4), (3, 4))]},
        (REAL, POSITIVE)),
    Row(operator.pow, {"x ** y": BINARY, "np.power(x, y)": BINARY, "x ** 0.5": UNARY,
                       "x ** 2": UNARY, "x ** 3": UNARY, "x ** -1": UNARY, "x ** 0": UNARY,
                       "2.0 ** y": [((3, 4), (3, 4))], "pow(x, y)": BINARY[:1] + [((), ())],
                       "pow(x, 2)": UNARY},
        (POSITIVE, REAL)),
    Row(builtins.divmod, {"divmod(x, y)": [((3, 4), (3, 4)), ((), ())], "np.divmod(x, y)": BINARY[:1],
                          "divmod(x, 0.7)": UNARY}, (REAL, POSITIVE)),
    Row(operator.neg, {"-x": UNARY, "np.negative(x)": UNARY}),
    Row(operator.pos, {"+x": UNARY, "np.positive(x)": UNARY}),
    Row(operator.matmul, {
        "x @ y": [((3, 4), (4, 2)), ((4,), (4, 2)), ((3, 4), (4,)), ((4,), (4,)),
                  ((2, 3, 4), (4, 2)), ((4,), (2, 4, 3)), ((2, 3, 4), (4,)),
                  ((2, 3, 4), (2, 4, 5)), ((1, 3, 4), (2, 4, 2))],
        "np.matmul(x, y)": [((3, 4), (4, 2)), ((2, 3, 4), (4, 2))],
    }),
    # ---- elementwise functions ---------------------------------------------
    Row(np.exp, {"np.exp(x)": UNARY}),
    Row(np.log, {"np.log(x)": UNARY}, POSITIVE),
    Row(np.log1p, {"np.log1p(x)": UNARY}, (-0.5, 2.0)),
    Row(np.expm1, {"np.expm1(x)": UNARY}),
    Row(np.sqrt, {"np.sqrt(x)": UNARY}, POSITIVE),
    Row(np.square, {"np.square(x)": UNARY}),
    Row(np.reciprocal, {"np.reciprocal(x)": UNARY}, POSITIVE),
    Row(np.sin, {"np.sin(x)": UNARY}),
    Row(np.cos, {"np.cos(x)": UNARY}),
    Row(np.tan, {"np.tan(x)": UNARY}, (-1.2, 1.2)),
    Row(np.tanh, {"np.tanh(x)": UNARY}),
    Row(srcgrad.runtime.erf, {"rt.erf(x)": UNARY}),  # (the exact GELU's: SciPy's, imported when called)
    Row(np.sinh, {"np.sinh(x)": UNARY}),
    Row(np.cosh, {"np.cosh(x)": UNARY}),
    Row(np.arcsin, {"np.arcsin(x)": UNARY}, UNIT),
    Row(np.arccos, {"np.arccos(x)": UNARY}, UNIT),
    Row(np.arctan, {"np.arctan(x)": UNARY}),
    Row(np.abs, {"np.abs(x)": UNARY, "abs(x)": UNARY, "np.fabs(x)": UNARY}),
    Row(np.logaddexp, {"np.logaddexp(x, y)": BINARY}),
    Row(np.maximum, {"np.maximum(x, y)": BINARY, "np.maximum(x, 0)": UNARY,
                     "np.maximum(0.5, x)": UNARY}),
    Row(np.minimum, {"np.minimum(x, y)": BINARY, "np.minimum(x, 0)": UNARY,
                     "np.minimum(0.5, x)": UNARY}),
    Row(np.where, {"np.where(x > 0, x, y)": BINARY, "np.where(x > 0, x, 0.0)": UNARY,
                   "np.where(x > 0, 1.0, x)": UNARY}),
    Row(np.clip, {"np.clip(x, -0.5, 0.5)": UNARY, "np.clip(x, None, 0.5)": UNARY,
                  "np.clip(x, -0.5, None)": UNARY, "x.clip(-0.5, 0.5)": MATRIX,
                  "np.clip(x, a_min=-0.5, a_max=0.5)": UNARY,
                  "np.clip(x, y, z)": [((3, 4), (4,), (3, 1)), ((3, 4), (), ())]},
        (REAL, (-1.5, -0.2), (0.2, 1.5))),
    # ---- reductions --------------------------------------------------------
    _reduction("sum"),
    _reduction("mean"),
    _reduction("max"),
    _reduction("min"),
    _reduction("prod", (0.5, 1.5)),
    _reduction("var", **{"np.var(x, axis=1, ddof=1)": MATRIX}),
    _reduction("std", **{"np.std(x, ddof=1)": MATRIX}),
    _reduction("nansum", methods=False),
    _reduction("nanmean", methods=False),
    _reduction("median", methods=False, **{"np.median(x, axis=0)": [((4, 3),), ((5, 2),)]}),
    Row(np.quantile, {"np.quantile(x, 0.3)": CUBE + [((5,),)], "np.quantile(x, 0.5, axis=0)": [((4, 3),)],
                      "np.quantile(x, [0.25, 0.5, 1.0], axis=1)": CUBE,
                      "np.quantile(x, 0.9, axis=(0, 2), keepdims=True)": CUBE,
                      "np.quantile(x, [[0.1], [0.6]], axis=-1, keepdims=True)": MATRIX,
                      "np.quantile(x, 0.0, axis=1)": MATRIX}),
    _reduction("nanvar", methods=False, **{"np.nanvar(x, axis=1, ddof=1)": MATRIX}),
    _reduction("nanstd", methods=False, **{"np.nanstd(x, ddof=1)": MATRIX}),
    _reduction("nanprod", (0.5, 1.5), methods=False),
    Row(np.nancumsum, {"np.nancumsum(x)": MATRIX + [((5,),)], "np.nancumsum(x, axis=1)": CUBE}),
    Row(np.broadcast_arrays, {"np.broadcast_arrays(x, y)": [((3, 1), (4,)), ((3, 4), ()), ((2, 3, 4), (3, 1))],
                              "np.broadcast_arrays(x, y, z)": [((3, 1), (4,), ())]}),
    Row(np.meshgrid, {"np.meshgrid(x, y)": [((3,), (4,))], "np.meshgrid(x, y, indexing='ij')": [((3,), (4,))],
                      "np.meshgrid(x, y, z)": [((3,), (4,), (2,))], "np.meshgrid(x)": [((3,),)],
                      "np.meshgrid(x, y, sparse=True)": [((3,), (4,))],
                      "np.meshgrid(x, y, z, indexing='ij', sparse=True)": [((3,), (4,), (2,))]}),
    Row(np.unique, {"np.unique(x)": MATRIX + [((5,),)], "np.unique(x, return_counts=True)": MATRIX,
                    "np.unique(x, return_index=True, return_inverse=True)": [((6,),)]}),
    Row(np.rollaxis, {"np.rollaxis(x, 2)": CUBE, "np.rollaxis(x, 0, 3)": CUBE, "np.rollaxis(x, -1, 1)": CUBE,
                      "np.rollaxis(x, 1, -1)": CUBE}),
    Row(np.polyval, {"np.polyval(x, y)": [((4,), (3, 2)), ((1,), (3,)), ((3,), ())],
                     "np.polyval([1.0, -2.0, 0.5], x)": UNARY, "np.polyval(x, 0.7)": [((4,),)]}),
    Row(np.trapezoid, {"np.trapezoid(x)": [((5,),)] + MATRIX, "np.trapezoid(x, dx=0.5, axis=0)": CUBE,
                       "np.trapezoid(x, [0.0, 0.5, 1.5, 1.75])": MATRIX + CUBE,
                       "np.trapezoid(x, np.arange(12.0).reshape(3, 4) ** 1.5, axis=1)": MATRIX}),
    Row(np.gradient, {"np.gradient(x)": [((5,),), ((2,),)] + MATRIX + CUBE, "np.gradient(x, axis=1)": CUBE,
                      "np.gradient(x, axis=(0, -1))": CUBE}),
    Row(np.ediff1d, {"np.ediff1d(x)": [((5,),)] + MATRIX, "np.ediff1d(x, to_end=[1.0, 2.0], to_begin=3.0)": MATRIX,
                     "np.ediff1d(x, to_begin=[0.0])": [((5,),)]}),
    Row(np.interp, {"np.interp(x, y, z)": [((3, 4), (6,), (6,)), ((), (4,), (4,))],
                    "np.interp(x, y, z, left=0.0, right=1.0)": [((7,), (5,), (5,))]},
        ((-1.5, 1.5), REAL, REAL), prepare=(None, np.sort, None)),
    Row(np.interp, {"np.interp(0.3, x, y)": [((5,), (5,))], "np.interp(np.linspace(-2.5, 2.5, 9), x, y)": [((5,), (5,))]},
        prepare=(np.sort, None)),
    Row(np.nan_to_num, {"np.nan_to_num(x)": UNARY,
                        "np.nan_to_num(x, nan=1.0, posinf=2.0)": UNARY}),
    Row(np.heaviside, {"np.heaviside(x, y)": BINARY,
                       "np.heaviside(x, 0.5)": UNARY}),
    Row(np.convolve, {"np.convolve(x, y)": CONVOLVE, "np.convolve(x, y, 'same')": CONVOLVE,
                      "np.convolve(x, y, mode='valid')": CONVOLVE}),
    Row(np.correlate, {"np.correlate(x, y)": CONVOLVE, "np.correlate(x, y, 'same')": CONVOLVE,
                       "np.correlate(x, y, mode='full')": CONVOLVE}),
    Row(np.interp, {"np.interp(x, np.linspace(-1.5, 1.5, 6), y)": [((3, 4), (6,)), ((), (6,)), ((7,), (6,))],
                    "np.interp(x, [-1.0, 0.0, 0.5, 1.0], y, left=0.0, right=2.0)": [((3, 4), (4,))],
                    "np.interp(x, [-1.0, 0.0, 1.0], [1.0, -1.0, 3.0])": UNARY}),
    Row(np.percentile, {"np.percentile(x, 30)": CUBE, "np.percentile(x, [10, 75], axis=-1)": CUBE,
                        "np.percentile(x, 50, axis=(0, 1), keepdims=True)": CUBE}),
    _reduction("ptp", methods=False),
    Row(np.sum, {"np.sum(x, initial=0)": CUBE, "np.sum(x, axis=1, where=np.arange(4) > 1, initial=0.0)": CUBE,
                 "np.sum(x, where=x > 0, keepdims=True)": MATRIX}),
    Row(np.max, {"np.max(x, initial=1.5)": CUBE, "np.max(x, axis=1, where=np.arange(4) > 1, initial=-9.0)": CUBE,
                 "np.amax(x, axis=0)": CUBE, "np.nanmax(x, axis=1)": CUBE, "np.nanmax(x)": MATRIX}),
    Row(np.min, {"np.amin(x, axis=(0, 2))": CUBE, "np.nanmin(x, 0, keepdims=True)": CUBE,
                 "np.min(x, axis=-1, where=np.arange(4) < 3, initial=9.0)": CUBE}),
    Row(np.average, {"np.average(x)": CUBE, "np.average(x, axis=1)": CUBE,
                     "np.average(x, axis=(0, 2), keepdims=True)": CUBE,
                     "np.average(x, weights=y)": [((3, 4), (3, 4))],
                     "np.average(x, axis=1, weights=y)": [((3, 4), (4,)), ((2, 3, 4), (2, 3, 4))],
                     "np.average(x, axis=0, weights=y, keepdims=True)": [((3, 4), (3,))]},
        (REAL, POSITIVE)),
    Row(np.cumprod, {"np.cumprod(x)": MATRIX + [((5,),)], "np.cumprod(x, axis=1)": CUBE,
                     "np.cumprod(x, -1)": MATRIX, "x.cumprod(axis=0)": CUBE}),
    # Python's builtins: `max(x, y)` is compiled (and its rule called) as `max((x, y))`.
    Row(builtins.max, {"max(x, y)": [((), ())], "max(x, y, 0.5)": [((), ())], "max([x, y, x])": [((), ())],
                       "max((x, 1.5))": [((),)], "max(x)": [((5,),)], "min(x, y)": [((), ())],
                       "min([x, -0.5, y])": [((), ())], "min(x)": [((5,),)]}),
    Row(builtins.sorted, {"sorted([x, y, 0.5])": [((), ())], "sorted((y, x), reverse=True)": [((), ())],
                          "sorted(x)": [((5,),)], "sorted(x, reverse=True)": [((5,),)]}),
    Row(builtins.sum, {"sum([x, y])": [((3, 4), (4,)), ((), ()), ((), (3, 4))], "sum((x, y, x))": [((3, 4), (3, 4))],
                       "sum(x)": [((3, 4),), ((5,),)], "sum([x, x], 1.0)": UNARY, "sum([x], y)": [((3, 4), (4,))]}),
    # ---- math.* on floats (the compiled tests pass Python floats) -----------
    *[Row(getattr(math, name), {f"math.{name}(x)": [((),)]}, domain) for name, domain in (
        ("sin", REAL), ("cos", REAL), ("tan", (-1.2, 1.2)), ("asin", UNIT), ("acos", UNIT), ("atan", REAL),
        ("sinh", REAL), ("cosh", REAL), ("tanh", REAL), ("exp", REAL), ("expm1", REAL), ("log", POSITIVE),
        ("log1p", (-0.5, 2.0)), ("log2", POSITIVE), ("log10", POSITIVE), ("sqrt", POSITIVE), ("fabs", REAL),
        ("erf", REAL), ("erfc", REAL), ("lgamma", (0.2, 4.0)), ("gamma", (0.2, 4.0)), ("asinh", REAL),
        ("acosh", (1.2, 3.0)), ("atanh", UNIT), ("exp2", REAL), ("cbrt", POSITIVE), ("degrees", REAL),
        ("radians", REAL))],
    Row(math.lgamma, {"math.lgamma(x)": [((),)]}, (-2.9, -2.1)),
    Row(math.log, {"math.log(x, y)": [((), ())], "math.log(x, 2.0)": [((),)]}, (POSITIVE, (1.5, 4.0))),
    Row(math.log, {"math.log(3.0, x)": [((),)], "math.log(0.5, x)": [((),)]}, (1.5, 4.0)),
    Row(math.atan2, {"math.atan2(x, y)": [((), ())]}, (REAL, POSITIVE)),
    Row(math.hypot, {"math.hypot(x, y)": [((), ())]}),
    Row(math.copysign, {"math.copysign(x, y)": [((), ())], "math.copysign(x, -2.0)": [((),)]},
        ((0.5, 2.0), (-2.0, -0.5))),
    Row(math.fmod, {"math.fmod(x, y)": [((), ())], "math.fmod(x, 0.7)": [((),)]}, ((1.1, 1.3), (0.5, 0.6))),
    Row(math.remainder, {"math.remainder(x, y)": [((), ())]}, ((1.1, 1.3), (0.5, 0.6))),
    Row(math.nextafter, {"math.nextafter(x, y)": [((), ())], "math.nextafter(x, -3.0)": [((),)]}),
    Row(math.ldexp, {"math.ldexp(x, 3)": [((),)], "math.ldexp(x, -2)": [((),)]}),
    Row(math.fsum, {"math.fsum([x, y, x])": [((), ())], "math.fsum((x, 0.5))": [((),)]}),
    Row(math.prod, {"math.prod([x, y, x])": [((), ())], "math.prod((x, 0.5))": [((),)],
                    "math.prod([x], start=y)": [((), ())]}),
    Row(math.dist, {"math.dist([x, y], [0.5, x])": [((), ())], "math.dist((x,), (y,))": [((), ())]}),
    Row(math.modf, {"math.modf(x)": [((),)]}, (0.1, 0.9)),
    Row(math.frexp, {"math.frexp(x)": [((),)]}, (0.6, 0.9)),
    Row(math.pow, {"math.pow(x, y)": [((), ())], "math.pow(x, 3)": [((),)], "math.pow(x, 0.5)": [((),)]},
        (POSITIVE, REAL)),
    # ---- linear algebra ----------------------------------------------------
    Row(np.dot, {
        "np.dot(x, y)": [((3, 4), (4, 2)), ((4,), (4, 2)), ((3, 4), (4,)), ((4,), (4,)),
                         ((), (3, 4)), ((3, 4), ()), ((2, 3, 4), (4, 2)), ((3, 4), (2, 4, 5))],
        "x.dot(y)": [((3, 4), (4, 2))],
    }),
    Row(np.vdot, {"np.vdot(x, y)": [((3, 4), (3, 4)), ((3, 4), (12,)), ((4,), (4,))]}),
    Row(np.inner, {"np.inner(x, y)": [((4,), (4,)), ((3, 4), (4,)), ((3, 4), (2, 4)), ((2, 3, 4), (5, 4)),
                                      ((), (3, 4)), ((3, 4), ())]}),
    Row(np.kron, {"np.kron(x, y)": [((2, 3), (3, 2)), ((3,), (2,)), ((2, 3), (2,)), ((2,), (2, 3, 2)),
                                    ((), (2, 3))]}),
    Row(np.cross, {"np.cross(x, y)": [((3,), (3,)), ((4, 3), (4, 3)), ((4, 3), (3,)), ((2, 1, 3), (4, 3))],
                   "np.cross(x, y, axis=0)": [((3, 4), (3, 4))],
                   "np.cross(x, y, axisa=0, axisb=1, axisc=0)": [((3, 4), (4, 3))]}),
    Row(np.outer, {"np.outer(x, y)": [((3,), (4,)), ((2, 3), (4,))]}),
    Row(np.tensordot, {
        "np.tensordot(x, y, axes=1)": [((3, 4), (4, 2))],
        "np.tensordot(x, y)": [((2, 3, 4), (3, 4, 2))],
        "np.tensordot(x, y, axes=0)": [((3,), (2, 2))],
        "np.tensordot(x, y, axes=(1, 0))": [((2, 3, 4), (3, 5))],
        "np.tensordot(x, y, axes=([1], [0]))": [((2, 3, 4), (3, 5))],
        "np.tensordot(x, y, axes=([0, 2], [2, 0]))": [((2, 3, 4), (4, 5, 2))],
    }),
    Row(np.einsum, {
        "np.einsum('ij,jk->ik', x, y)": [((3, 4), (4, 2))],
        "np.einsum('ij,ij->', x, y)": [((3, 4), (3, 4))],
        "np.einsum('bij,bjk->bik', x, y)": [((2, 3, 4), (2, 4, 5))],
        "np.einsum('i,j->ij', x, y)": [((3,), (4,))],
        "np.einsum('ij,j->i', x, y)": [((3, 4), (4,))],
        "np.einsum('ij,jk', x, y)": [((3, 4), (4, 2))],
        "np.einsum('ij,k->ik', x, y)": [((3, 4), (2,))],
        "np.einsum('i,i,i->', x, y, z)": [((3,), (3,), (3,))],
        "np.einsum('ij,jk,kl->il', x, y, z)": [((2, 3), (3, 4), (4, 2))],
        "np.einsum('i,j,k->ijk', x, y, z)": [((2,), (3,), (4,))],
        "np.einsum('ij,ij,ij->i', x, y, z)": [((2, 3), (2, 3), (2, 3))],
        "np.einsum('ij,jk,k', x, y, z)": [((2, 3), (3, 4), (4,))],
        "np.einsum('...ij,...jk->...ik', x, y)": [((2, 3, 4), (2, 4, 5)), ((3, 4), (2, 4, 5)),
                                                  ((1, 3, 4), (2, 4, 5))],
        "np.einsum('i...->...', x)": CUBE,
        "np.einsum('...i,i', x, y)": [((2, 3, 4), (4,))],
        "np.einsum('ii,i->', x, y)": [((3, 3), (3,))],
        "np.einsum('ii->i', x)": [((3, 3),)],
        "np.einsum('ii', x)": [((3, 3),)],
        "np.einsum('iij->j', x)": [((3, 3, 2),)],
        "np.einsum('ij->ji', x)": MATRIX,
        "np.einsum('ji', x)": MATRIX,
        "np.einsum('ij,kj', x, y)": [((2, 3), (4, 3))],
        "np.einsum('ij,jk->ik', x, y, optimize=True)": [((3, 4), (4, 2))],
        "np.einsum('ijk,ikl,k->il', x, y, z, optimize='greedy')": [((2, 3, 4), (2, 4, 5), (4,))],
    }),
    Row(np.linalg.norm, {
        "np.linalg.norm(x)": [((5,),), ((3, 4),)],
        "np.linalg.norm(x, axis=1)": MATRIX,
        "np.linalg.norm(x, axis=-1, keepdims=True)": MATRIX,
        "np.linalg.norm(x, 'fro')": MATRIX,
        "np.linalg.norm(x, ord=1)": [((5,),)],
        "np.linalg.norm(x, ord=np.inf)": [((5,),)],
        "np.linalg.norm(x, ord=2, axis=0)": MATRIX,
        "np.linalg.norm(x, axis=(0, 1))": MATRIX,
        "np.linalg.norm(x, ord=2)": MATRIX + [((4,),)],
        "np.linalg.norm(x, ord=-2)": MATRIX,
        "np.linalg.norm(x, 'nuc')": MATRIX + [((4, 3),)],
        "np.linalg.norm(x, ord=1)": MATRIX,
        "np.linalg.norm(x, ord=-1)": MATRIX + [((4,),)],
        "np.linalg.norm(x, ord=np.inf)": MATRIX,
        "np.linalg.norm(x, ord=-np.inf)": MATRIX + [((4,),)],
        "np.linalg.norm(x, ord=3)": [((5,),)],
        "np.linalg.norm(x, ord=0.5)": [((5,),)],
        "np.linalg.norm(x, ord=-3, axis=1)": MATRIX,
        "np.linalg.norm(x, ord=0)": [((5,),)],
        "np.linalg.norm(x, ord=2, axis=(1, 2))": CUBE,
        "np.linalg.norm(x, ord='nuc', axis=(2, 0), keepdims=True)": CUBE,
        "np.linalg.norm(x, ord=1, axis=(0, 2))": CUBE,
        "np.linalg.norm(x, ord=np.inf, axis=(-1, 0))": CUBE,
        "np.linalg.norm(x, ord=-2, axis=(0, 1))": CUBE,
    }),
    Row(np.real, {"np.real(x)": UNARY, "x.real": UNARY}),
    Row(np.imag, {"np.imag(x)": UNARY, "x.imag": UNARY}),
    Row(np.transpose, {"np.transpose(x)": MATRIX + CUBE, "np.transpose(x, (1, 0, 2))": CUBE,
                       "np.transpose(x, (2, 0, 1))": CUBE, "x.T": MATRIX + CUBE + [((4,),)],
                       "x.transpose(1, 2, 0)": CUBE, "np.transpose(x, axes=(1, 0))": MATRIX}),
    # ---- shapes and indexing -----------------------------------------------
    Row(np.reshape, {"np.reshape(x, (4, 3))": MATRIX, "np.reshape(x, (2, -1, 2))": MATRIX,
                     "np.reshape(x, -1)": MATRIX, "x.reshape(4, 3)": MATRIX,
                     "x.reshape((2, 6))": MATRIX, "np.reshape(x, shape=(4, 3))": MATRIX}),
    Row(np.ravel, {"np.ravel(x)": MATRIX + CUBE, "x.ravel()": MATRIX, "x.flatten()": MATRIX}),
    Row(np.expand_dims, {"np.expand_dims(x, 0)": MATRIX, "np.expand_dims(x, -1)": MATRIX,
                         "np.expand_dims(x, (0, 2))": MATRIX}),
    Row(np.squeeze, {"np.squeeze(x)": [((3, 1, 4),), ((1, 4),)],
                     "np.squeeze(x, axis=1)": [((3, 1, 4),)], "x.squeeze()": [((1, 4),)]}),
    Row(np.broadcast_to, {"np.broadcast_to(x, (2, 3, 4))": [((4,),), ((3, 1),), ((),)]}),
    Row(np.lib.stride_tricks.sliding_window_view, {
        "np.lib.stride_tricks.sliding_window_view(x, 2)": [((5,),)],
        "np.lib.stride_tricks.sliding_window_view(x, (2, 3), axis=(1, 2))": [((2, 4, 5),)]}),
    Row(np.concatenate, {
        "np.concatenate([x, y])": [((2, 4), (3, 4))],
        "np.concatenate([x, y], axis=1)": [((3, 2), (3, 4))],
        "np.concatenate([x, y], axis=-1)": [((3, 2), (3, 4))],
        "np.concatenate((x, y, x), axis=0)": [((2, 4), (3, 4))],
        "np.concatenate([x, y], axis=None)": [((2, 4), (3,))],
        "np.concatenate([x, y], 1)": [((3, 2), (3, 4))],
        "np.concatenate([x, np.zeros((1, 4)), y])": [((2, 4), (3, 4))],
    }),
    Row(np.stack, {
        "np.stack([x, y])": [((3, 4), (3, 4))],
        "np.stack([x, y], axis=1)": [((3, 4), (3, 4))],
        "np.stack([x, y], axis=-1)": [((3, 4), (3, 4))],
        "np.stack((x, y, x))": [((3, 4), (3, 4))],
        "np.stack([x, np.ones((3, 4)), y], axis=1)": [((3, 4), (3, 4))],
    }),
    Row(np.copy, {"np.copy(x)": UNARY, "x.copy()": MATRIX}),
    Row(np.array, {
        "np.array(x)": UNARY,
        "np.array(x, copy=True)": MATRIX,
        "np.array([x, y])": [((3, 4), (3, 4)), ((), ())],
        "np.array([[x, y], [y, x]])": [((), ())],
        "np.array((x, y, x))": [((4,), (4,))],
    }),
    Row(np.asarray, {"np.asarray(x)": UNARY, "np.asarray([x, y])": [((3, 4), (3, 4))]}),
    Row(np.hstack, {"np.hstack([x, y])": [((2,), (3,)), ((2, 3), (2, 1)), ((), (3,))],
                    "np.hstack((x, y, x))": [((3, 2), (3, 4))]}),
    Row(np.vstack, {"np.vstack([x, y])": [((3,), (3,)), ((2, 3), (1, 3)), ((2, 3), (3,))]}),
    Row(np.column_stack, {"np.column_stack([x, y])": [((3,), (3,)), ((3, 2), (3,))]}),
    Row(np.flip, {"np.flip(x)": MATRIX, "np.flip(x, 1)": CUBE, "np.flip(x, axis=(0, 2))": CUBE}),
    Row(np.roll, {"np.roll(x, 2)": MATRIX, "np.roll(x, -1, axis=1)": CUBE,
                  "np.roll(x, (1, 2), axis=(0, 2))": CUBE}),
    Row(np.moveaxis, {"np.moveaxis(x, 0, -1)": CUBE, "np.moveaxis(x, (0, 1), (2, 0))": CUBE}),
    Row(np.swapaxes, {"np.swapaxes(x, 0, 2)": CUBE, "np.swapaxes(x, -1, 0)": MATRIX}),
    Row(np.cumsum, {"np.cumsum(x)": MATRIX + [((5,),)], "np.cumsum(x, axis=1)": CUBE,
                    "np.cumsum(x, -1)": MATRIX}),
    Row(np.diff, {"np.diff(x)": [((5,),)] + MATRIX, "np.diff(x, axis=0)": MATRIX, "np.diff(x, n=2, axis=1)": CUBE}),
    Row(np.sort, {"np.sort(x)": MATRIX, "np.sort(x, axis=0)": CUBE, "np.sort(x, axis=None)": MATRIX}),
    Row(np.fliplr, {"np.fliplr(x)": MATRIX + CUBE}),
    Row(np.flipud, {"np.flipud(x)": MATRIX + [((4,),)]}),
    Row(np.rot90, {"np.rot90(x)": MATRIX, "np.rot90(x, 2)": MATRIX, "np.rot90(x, -1, axes=(1, 2))": CUBE,
                   "np.rot90(x, k=3, axes=(2, 0))": CUBE}),
    Row(np.tril, {"np.tril(x)": MATRIX + CUBE, "np.tril(x, -1)": MATRIX, "np.tril(x, k=1)": [((4,),)]}),
    Row(np.triu, {"np.triu(x)": MATRIX + CUBE, "np.triu(x, 1)": MATRIX, "np.triu(x, k=-1)": [((4,),)]}),
    Row(np.atleast_1d, {"np.atleast_1d(x)": [((),), ((4,),)]}),
    Row(np.atleast_2d, {"np.atleast_2d(x)": [((),), ((4,),)] + MATRIX}),
    Row(np.atleast_3d, {"np.atleast_3d(x)": [((),), ((4,),)] + MATRIX + CUBE}),
    Row(np.dstack, {"np.dstack([x, y])": [((3,), (3,)), ((3, 2), (3, 2)), ((2, 3, 1), (2, 3, 2))],
                    "np.dstack((x, y, x))": [((2, 3, 2), (2, 3, 1))]}),
    Row(np.partition, {"np.partition(x, 2)": MATRIX + [((5,),)], "np.partition(x, 1, axis=0)": CUBE,
                       "np.partition(x, (0, 3), axis=None)": MATRIX, "np.partition(x, kth=-1)": MATRIX}),
    Row(np.tile, {"np.tile(x, 2)": MATRIX, "np.tile(x, (2, 1, 3))": MATRIX + [((4,),)],
                  "np.tile(x, (2, 1))": CUBE + [((),)]}),
    Row(np.repeat, {"np.repeat(x, 2)": MATRIX, "np.repeat(x, 3, axis=1)": CUBE,
                    "np.repeat(x, [1, 0, 2], axis=0)": MATRIX, "np.repeat(x, 2, -1)": [((4,),)], "x.repeat(2, axis=0)": MATRIX}),
    Row(np.diagonal, {"np.diagonal(x)": MATRIX + CUBE, "np.diagonal(x, 1)": MATRIX,
                      "np.diagonal(x, -1, 2, 0)": CUBE, "np.diagonal(x, offset=1, axis1=1, axis2=2)": CUBE, "x.diagonal(1)": MATRIX}),
    Row(np.take, {"np.take(x, [0, 2, 2, -1])": MATRIX, "np.take(x, [[1, 0], [1, 1]], axis=1)": CUBE,
                  "np.take(x, 2, axis=0)": MATRIX, "np.take(x, [5, -7], axis=1, mode='wrap')": MATRIX,
                  "np.take(x, [9, -1], mode='clip')": [((5,),)], "x.take([0, 0, 5])": MATRIX}),
    Row(rt.added_at, {"rt.added_at(x, [0, 2, 2], y)": [((4,), (3,)), ((4, 2), (3, 2)), ((4, 2), (2,))],
                      "rt.added_at(x, [[1, 1], [0, 3]], y)": [((4,), (2, 2))]}),
    Row(np.take_along_axis, {
        "np.take_along_axis(x, np.argsort(x, axis=1), axis=1)": MATRIX,
        "np.take_along_axis(x, np.array([[0, 0, 3]]), axis=1)": MATRIX,
        "np.take_along_axis(x, np.array([[[1]], [[0]]]), -1)": CUBE,
        "np.take_along_axis(x, np.array([2, 0, 2]), None)": MATRIX}),
    Row(np.delete, {"np.delete(x, 1)": MATRIX, "np.delete(x, [0, 2], axis=1)": MATRIX,
                    "np.delete(x, slice(0, 2), -1)": CUBE}),
    Row(np.pad, {"np.pad(x, 1)": MATRIX, "np.pad(x, ((1, 0), (2, 3)))": MATRIX,
                 "np.pad(x, (1, 2), constant_values=5.0)": MATRIX,
                 "np.pad(x, 2, mode='edge')": MATRIX, "np.pad(x, (3, 1), 'reflect')": [((4,),)] + MATRIX,
                 "np.pad(x, 2, 'symmetric')": MATRIX, "np.pad(x, 2, 'reflect', reflect_type='even')": MATRIX,
                 "np.pad(x, ((0, 0), (5, 1)), mode='wrap')": MATRIX}),
    Row(np.append, {"np.append(x, y)": [((3, 4), (2,)), ((), (3, 2))],
                    "np.append(x, y, axis=0)": [((3, 4), (2, 4))], "np.append(x, y, 1)": [((3, 4), (3, 1))],
                    "np.append(x, [1.0, 2.0])": MATRIX}),
    Row(np.insert, {"np.insert(x, 1, y)": [((3, 4), ()), ((3, 4), (2,))],
                    "np.insert(x, [0, 2, 2], y, axis=1)": [((3, 4), (3, 1)), ((3, 4), (3,))],
                    "np.insert(x, 1, y, axis=0)": [((3, 4), (4,)), ((3, 4), ())],
                    "np.insert(x, slice(0, 2), 7.0)": MATRIX}),
    # A list of pieces: rows whose pieces have one shape, so the list is an array here; pieces
    # of different shapes, read in part, in loops and helpers: test_rules_calls.py.
    Row(np.split, {"np.split(x, 2)": [((4, 3),)], "np.split(x, [2], axis=1)": MATRIX}),
    Row(np.array_split, {"np.array_split(x, 3, axis=-1)": [((2, 6),)]}),
    Row(np.hsplit, {"np.hsplit(x, 2)": MATRIX + [((6,),)]}),
    Row(np.vsplit, {"np.vsplit(x, [2])": [((4, 3),)], "np.vsplit(x, 2)": CUBE}),
    Row(np.trace, {"np.trace(x)": MATRIX + [((4, 4),)], "np.trace(x, 1)": MATRIX,
                   "np.trace(x, -1, 2, 0)": CUBE}),
    Row(np.diag, {"np.diag(x)": [((4,),), ((3, 4),)], "np.diag(x, 1)": [((3,),), ((3, 4),)],
                  "np.diag(x, k=-1)": [((4, 3),)]}),
    Row(np.linalg.eigvalsh, {"np.linalg.eigvalsh(x)": [((3, 3),), ((2, 3, 3),)],
                             "np.linalg.eigvalsh(x, 'U')": [((3, 3),)]}, prepare=spd),
    Row(np.linalg.multi_dot, {"np.linalg.multi_dot([x, y, z])": [((2, 3), (3, 4), (4, 2)), ((3,), (3, 4), (4,)),
                                                                  ((3,), (3, 4), (4, 2))],
                              "np.linalg.multi_dot([x, y])": [((2, 3), (3, 4))],
                              "np.linalg.multi_dot([x, y, z, np.ones((2, 3), np.float32)])": [((2, 3), (3, 4), (4, 2))]}),
    Row(np.linalg.lstsq, {"np.linalg.lstsq(x, y)": [((5, 3), (5,)), ((5, 3), (5, 2)), ((3, 3), (3,)), ((2, 4), (2,))],
                          "np.linalg.lstsq(x, y, rcond=None)": [((4, 2), (4, 3))]}),
    Row(np.cov, {"np.cov(x)": [((3, 6),), ((5,),), ((1, 4),)], "np.cov(x, rowvar=False)": [((6, 3),), ((5,),)],
                 "np.cov(x, bias=True)": MATRIX, "np.cov(x, ddof=2)": MATRIX}),
    Row(np.corrcoef, {"np.corrcoef(x)": [((3, 6),), ((2, 5),)], "np.corrcoef(x, rowvar=False)": [((6, 3),)]}),
    Row(np.linalg.inv, {"np.linalg.inv(x)": [((3, 3),), ((2, 3, 3),)]}),
    Row(np.linalg.solve, {"np.linalg.solve(x, y)": [((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (3,)),
                                                    ((2, 3, 3), (2, 3, 1)), ((2, 3, 3), (3, 1))]}),
    Row(np.linalg.det, {"np.linalg.det(x)": [((3, 3),), ((2, 3, 3),)]}),
    Row(np.linalg.slogdet, {"np.linalg.slogdet(x)": [((3, 3),), ((2, 3, 3),)]}),
    Row(np.linalg.cholesky, {"np.linalg.cholesky(x)": [((3, 3),), ((2, 3, 3),)],
                             "np.linalg.cholesky(x, upper=True)": [((3, 3),)]}, prepare=spd),
    Row(np.linalg.eigh, {"np.linalg.eigh(x)": [((3, 3),), ((2, 3, 3),)], "np.linalg.eigh(x, 'U')": [((3, 3),)],
                         "np.linalg.eigh(x, UPLO='L')": [((4, 4),)]}),
    Row(np.linalg.svd, {"np.linalg.svd(x)": [((3, 3),), ((2, 3, 3),)],
                        "np.linalg.svd(x, full_matrices=False)": [((4, 3),), ((3, 4),), ((2, 4, 3),)],
                        "np.linalg.svd(x, compute_uv=False)": [((4, 3),), ((3, 4),), ((2, 3, 3),)]}),
    Row(np.linalg.qr, {"np.linalg.qr(x)": [((3, 3),), ((4, 3),), ((3, 4),), ((2, 4, 3),), ((2, 3, 5),)],
                       "np.linalg.qr(x, mode='r')": [((4, 3),), ((3, 4),)]}),
    Row(np.linalg.pinv, {"np.linalg.pinv(x)": [((4, 3),), ((3, 4),), ((3, 3),), ((2, 4, 3),)]}),
    Row(np.linalg.matrix_power, {"np.linalg.matrix_power(x, 3)": [((3, 3),), ((2, 3, 3),)],
                                 "np.linalg.matrix_power(x, 1)": [((3, 3),)],
                                 "np.linalg.matrix_power(x, 0)": [((3, 3),)],
                                 "np.linalg.matrix_power(x, -2)": [((3, 3),)]}),
    Row(np.exp2, {"np.exp2(x)": UNARY}),
    Row(np.log2, {"np.log2(x)": UNARY}, POSITIVE),
    Row(np.log10, {"np.log10(x)": UNARY}, POSITIVE),
    Row(np.arctan2, {"np.arctan2(x, y)": BINARY}, (REAL, POSITIVE)),
    Row(np.hypot, {"np.hypot(x, y)": BINARY}),
    Row(np.nextafter, {"np.nextafter(x, y)": BINARY, "np.nextafter(x, 0.0)": UNARY}),
    Row(np.arcsinh, {"np.arcsinh(x)": UNARY}),
    Row(np.arccosh, {"np.arccosh(x)": UNARY}, (1.2, 3.0)),
    Row(np.arctanh, {"np.arctanh(x)": UNARY}, UNIT),
    Row(np.cbrt, {"np.cbrt(x)": UNARY}, POSITIVE),
    Row(np.deg2rad, {"np.deg2rad(x)": UNARY, "np.radians(x)": UNARY}),
    Row(np.rad2deg, {"np.rad2deg(x)": UNARY, "np.degrees(x)": UNARY}),
    Row(np.sinc, {"np.sinc(x)": UNARY}),
    Row(np.logaddexp2, {"np.logaddexp2(x, y)": BINARY}),
    Row(np.fmax, {"np.fmax(x, y)": BINARY, "np.fmax(x, 0)": UNARY, "np.fmax(0.5, x)": UNARY}),
    Row(np.fmin, {"np.fmin(x, y)": BINARY, "np.fmin(x, 0)": UNARY, "np.fmin(0.5, x)": UNARY}),
    Row(np.fmod, {"np.fmod(x, y)": BINARY[:2], "np.fmod(x, 0.7)": UNARY}, (REAL, POSITIVE)),
    # ---- creation from a value ---------------------------------------------
    Row(np.full, {"np.full((3, 4), x)": [((),), ((4,),)], "np.full(3, x)": [((),)]}),
    Row(np.full_like, {"np.full_like(y, x)": [((), (3, 4)), ((4,), (3, 4))]}),
    Row(np.linspace, {"np.linspace(x, y, 5)": [((), ()), ((3,), (3,)), ((3,), ())],
                      "np.linspace(x, y, 4, endpoint=False)": [((), ())],
                      "np.linspace(x, y, 3, axis=1)": [((2,), (2,))],
                      "np.linspace(x, y, 1)": [((), ())]}),
    Row(np.arange, {"np.arange(x, 4.0)": [((),)], "np.arange(x, 4.0, 0.5)": [((),)],
                    "np.arange(x)": [((),)]}, POSITIVE),
    Row(operator.getitem, {
        "x[1]": MATRIX, "x[-1]": MATRIX, "x[1:3]": MATRIX, "x[::2]": MATRIX,
        "x[1, :]": MATRIX, "x[:, 1:3]": MATRIX, "x[1:, ::-2]": MATRIX, "x[-1, 2]": MATRIX,
        "x[None]": MATRIX, "x[:, np.newaxis]": MATRIX, "x[..., 0]": CUBE,
        "x[np.array([0, 0, 1])]": MATRIX,
        "x[[0, 0, 1]]": MATRIX, "x[[0, 0, 1], [1, 1, 2]]": MATRIX,
        "x[x > 0]": MATRIX, "x[y > 0]": [((3, 4), (3, 4))],
    }),
]

if special is not None:
    SIGNAL = [((5,), (3,)), ((3,), (5,)), ((5,), (4,)), ((4, 5), (2, 3)), ((2, 3), (4, 5)),
              ((2, 3, 4), (2, 2, 3))]
    ROWS += [
        # ---- scipy.special -------------------------------------------------------
        Row(special.expit, {"special.expit(x)": UNARY}),
        Row(special.logit, {"special.logit(x)": UNARY}, (0.1, 0.9)),
        Row(special.erf, {"special.erf(x)": UNARY}),
        Row(special.erfc, {"special.erfc(x)": UNARY}),
        Row(special.erfinv, {"special.erfinv(x)": UNARY}, UNIT),
        Row(special.gammaln, {"special.gammaln(x)": UNARY}, POSITIVE),
        Row(special.gammaln, {"special.gammaln(x)": UNARY}, (-2.9, -2.1)),
        Row(special.digamma, {"special.digamma(x)": UNARY, "special.psi(x)": UNARY}, POSITIVE),
        Row(special.digamma, {"special.digamma(x)": UNARY}, (-1.9, -1.1)),
        Row(special.polygamma, {"special.polygamma(0, x)": UNARY, "special.polygamma(1, x)": UNARY,
                                "special.polygamma(3, x)": UNARY}, POSITIVE),
        Row(special.zeta, {"special.zeta(2, x)": UNARY, "special.zeta(3.5, x)": UNARY}, POSITIVE),
        Row(special.multigammaln, {"special.multigammaln(x, 3)": UNARY, "special.multigammaln(x, 1)": UNARY},
            (1.5, 3.0)),
        Row(special.beta, {"special.beta(x, y)": BINARY}, POSITIVE),
        Row(special.betaln, {"special.betaln(x, y)": BINARY}, POSITIVE),
        Row(special.xlogy, {"special.xlogy(x, y)": BINARY, "special.xlogy(2.0, y)": [((3, 4), (3, 4))]},
            (REAL, POSITIVE)),
        Row(special.i0, {"special.i0(x)": UNARY}),
        Row(special.i1, {"special.i1(x)": UNARY}),
        Row(special.iv, {"special.iv(2, x)": UNARY, "special.iv(0.5, x)": UNARY}, POSITIVE),
        Row(special.ive, {"special.ive(1, x)": UNARY, "special.ive(0, x)": UNARY}),
        Row(special.jv, {"special.jv(1.5, x)": UNARY, "special.jn(2, x)": UNARY}, POSITIVE),
        Row(special.jv, {"special.jn(0, x)": UNARY}),
        Row(special.yv, {"special.yv(0.5, x)": UNARY}, POSITIVE),
        Row(special.yn, {"special.yn(1, x)": UNARY, "special.yn(0, x)": UNARY}, POSITIVE),
        Row(special.logsumexp, {
            "special.logsumexp(x)": CUBE + [((5,),), ((),)], "special.logsumexp(x, 1)": CUBE,
            "special.logsumexp(x, axis=-1)": MATRIX, "special.logsumexp(x, axis=(0, 2), keepdims=True)": CUBE,
            "special.logsumexp(x, keepdims=True)": MATRIX,
            "special.logsumexp(x, b=y)": [((3, 4), (3, 4)), ((3, 4), (4,))],
            "special.logsumexp(x, axis=0, b=y)": [((3, 4), (3, 4)), ((4,), (3, 4))],
            "special.logsumexp(x, axis=1, b=y, keepdims=True)": [((3, 4), (3, 1))],
            "special.logsumexp(x, b=2.0)": MATRIX}, (REAL, POSITIVE)),
        Row(special.softmax, {"special.softmax(x)": MATRIX + [((5,),)], "special.softmax(x, axis=1)": CUBE,
                              "special.softmax(x, -1)": MATRIX, "special.softmax(x, axis=(0, 2))": CUBE}),
        Row(special.log_softmax, {"special.log_softmax(x)": MATRIX + [((5,),)],
                                  "special.log_softmax(x, axis=1)": CUBE,
                                  "special.log_softmax(x, -1)": MATRIX,
                                  "special.log_softmax(x, axis=(0, 2))": CUBE}),
        # ---- scipy.linalg --------------------------------------------------------
        Row(linalg.cholesky, {"linalg.cholesky(x)": [((3, 3),)], "linalg.cholesky(x, lower=True)": [((3, 3),)]},
            prepare=spd),
        Row(linalg.solve_triangular, {"linalg.solve_triangular(x, y, lower=True)": [((3, 3), (3,)), ((3, 3), (3, 2))],
                                      "linalg.solve_triangular(x, y, lower=True, trans=1)": [((3, 3), (3, 2))],
                                      "linalg.solve_triangular(x, y, lower=True, unit_diagonal=True)":
                                          [((3, 3), (3,))]},
            prepare=(triangular, None)),
        Row(linalg.solve_triangular, {"linalg.solve_triangular(x, y)": [((3, 3), (3,))],
                                      "linalg.solve_triangular(x, y, trans='T')": [((3, 3), (3, 2))]},
            prepare=(upper_triangular, None)),
        # ---- scipy.signal --------------------------------------------------------
        Row(signal.convolve, {"signal.convolve(x, y)": SIGNAL, "signal.convolve(x, y, 'same')": SIGNAL,
                              "signal.convolve(x, y, mode='valid')": SIGNAL[:2] + SIGNAL[3:5],
                              "signal.convolve(x, y, method='direct')": SIGNAL[:1],
                              "signal.convolve(x, y, 'valid', method='fft')": SIGNAL[3:4]}),
        Row(signal.correlate, {"signal.correlate(x, y)": SIGNAL, "signal.correlate(x, y, 'same')": SIGNAL,
                               "signal.correlate(x, y, mode='valid')": SIGNAL[:2] + SIGNAL[3:5],
                               "signal.correlate(x, y, method='direct')": SIGNAL[:1],
                               "signal.correlate(x, y, 'valid', method='fft')": SIGNAL[3:4]}),
    ]
    # ---- scipy.stats (float64 whatever the input) -----------------------------------
    SPREAD = (REAL, REAL, POSITIVE)  # x, loc, scale
    LOCATION_SCALE = [((3, 4), (4,), ()), ((3, 4), (3, 4), (3, 4)), ((), (), ())]
    ROWS += [Row(getattr(stats.norm, m), {f"stats.norm.{m}(x)": UNARY,
                                          f"stats.norm.{m}(x, y, z)": LOCATION_SCALE,
                                          f"stats.norm.{m}(x, loc=y, scale=z)": LOCATION_SCALE[:1]},
                 SPREAD, float32=False) for m in ("pdf", "logpdf", "cdf", "logcdf")]
    for name, shapes, domain, x_domain in (("t", "3.5", (1.5, 4.0), REAL),
                                           ("chi2", "2.5", (1.5, 4.0), POSITIVE),
                                           ("gamma", "2.5", (1.5, 3.0), POSITIVE),
                                           ("beta", "2.5, 3.0", (1.5, 3.0), (0.1, 0.9))):
        for m in ("pdf", "logpdf", "cdf", "logcdf"):
            method = getattr(getattr(stats, name), m)
            cases = {f"stats.{name}.{m}(x, {shapes})": UNARY}
            if m.endswith("pdf"):  # a shape's derivative (the pdfs only): every shape given y
                cases[f"stats.{name}.{m}(x, {', '.join(['y'] * (shapes.count(',') + 1))})"] = [((3, 4), (4,))]
            ROWS.append(Row(method, cases, (x_domain, domain), float32=False))
            # loc and scale: inside the support wherever loc and scale are drawn
            ROWS.append(Row(method, {f"stats.{name}.{m}(x, {shapes}, y, z)": LOCATION_SCALE},
                            ((0.45, 0.55), (-0.1, 0.1), (1.0, 1.5)) if name == "beta" else
                            (REAL, REAL, POSITIVE) if name == "t" else ((2.5, 3.0), (-1.0, 1.0), POSITIVE),
                            float32=False))
    ROWS += [Row(getattr(stats.poisson, m), {f"stats.poisson.{m}(3, x)": UNARY,
                                             f"stats.poisson.{m}(np.arange(4), x)": [((4,),), ((3, 1),)],
                                             f"stats.poisson.{m}(4, x, 1)": UNARY}, POSITIVE, float32=False)
             for m in ("pmf", "logpmf", "cdf", "logcdf")]
    # multivariate_normal: points along x's last axis; cov a matrix (its lower triangle read), a
    # diagonal or a number; mean None, a vector or (one dimension) a number.
    for m in ("pdf", "logpdf"):
        method = getattr(stats.multivariate_normal, m)
        ROWS += [
            Row(method, {f"stats.multivariate_normal.{m}(x, y, z)": [
                             ((5, 3), (3,), (3, 3)), ((3,), (3,), (3, 3)), ((2, 4, 3), (3,), (3, 3))],
                         f"stats.multivariate_normal.{m}(x, mean=y, cov=z, allow_singular=False)": [
                             ((1, 3), (3,), (3, 3))]},
                prepare=(None, None, spd), float32=False),
            Row(method, {f"stats.multivariate_normal.{m}(x, cov=y)": [((4, 2), (2, 2))]},
                prepare=(None, spd), float32=False),
            Row(method, {f"stats.multivariate_normal.{m}(x, y, z)": [((4, 3), (3,), (3,)), ((4, 3), (3,), ()),
                                                                     ((4,), (), ()), ((), (), ())],
                         f"stats.multivariate_normal.{m}(x, 0.5, y)": [((4,), ())],
                         f"stats.multivariate_normal.{m}(x)": [((5,),), ((),)]},
                (REAL, REAL, POSITIVE), float32=False),
        ]
        # cdf/logcdf, in d <= 2 where SciPy's cdf is exact (d = 3, a matrix cov, its triangle and
        # random draws: test_rules_scipy.py): the inner probabilities are Phi_1 and Phi_0 = 1.
        method = getattr(stats.multivariate_normal, m.replace("pdf", "cdf"))
        name = f"stats.multivariate_normal.{m.replace('pdf', 'cdf')}"
        ROWS += [
            Row(method, {f"{name}(x, y, np.array([[2.0, 0.5], [0.5, 1.0]]))": [
                             ((5, 2), (2,)), ((2,), (2,)), ((2, 3, 2), (2,))],
                         f"{name}(x, mean=y, cov=np.array([[1.0, -0.7], [-0.7, 1.5]]), maxpts=1000)": [
                             ((1, 2), (2,))]},
                float32=False),
            Row(method, {f"{name}(x, y, z)": [((4, 2), (2,), (2,)), ((4, 2), (2,), ()), ((4,), (), ()),
                                              ((), (), ())],
                         f"{name}(x, 0.5, y)": [((4,), ())],
                         f"{name}(x)": [((5,),), ((),)]},
                (REAL, REAL, POSITIVE), float32=False),
        ]
        # dirichlet: components along x's first axis, the last one left out (it is one minus the
        # others: x free to vary); given all of them, x must stay on the simplex
        # (test_rules_scipy.py differentiates it through a softmax).
        method = getattr(stats.dirichlet, m)
        ROWS += [
            Row(method, {f"stats.dirichlet.{m}(x, y)": [((2,), (3,)), ((3, 4), (4,)), ((1, 1), (2,))]},
                ((0.05, 0.3), POSITIVE), float32=False),
            Row(method, {f"stats.dirichlet.{m}(np.array([0.2, 0.3, 0.5]), x)": [((3,),)],
                         f"stats.dirichlet.{m}(np.array([[0.2, 0.6], [0.3, 0.1], [0.5, 0.3]]), x)":
                             [((3,),)]},
                POSITIVE, float32=False),
        ]

@dataclasses.dataclass(frozen=True)
class Case:
    primitive: object
    expr: str
    shapes: tuple
    domain: tuple
    prepare: object = None
    float32: bool = True

    @property
    def id(self) -> str:
        shapes = ",".join("x".join(map(str, s)) or "scalar" for s in self.shapes)
        return f"{self.expr.replace(' ', '')}|{shapes}"

    @property
    def names(self) -> tuple:
        return INPUTS[: len(self.shapes)]

    def inputs(self, dtype, scalar=np.asarray):
        """Random inputs in the row's domain; 0-d inputs go through ``scalar``."""
        rng = np.random.default_rng(zlib.crc32(self.id.encode()))
        domains = self.domain if isinstance(self.domain[0], tuple) else (self.domain,) * len(self.shapes)
        out = []
        prepares = self.prepare if isinstance(self.prepare, tuple) else (self.prepare,) * len(self.shapes)
        for shape, (low, high), prepare in zip(self.shapes, domains, prepares):
            value = rng.uniform(low, high, shape).astype(dtype)
            if prepare is not None:
                value = prepare(value)
            out.append(scalar(value) if shape == () else value)
        return out

    def evaluate(self, *values):
        return eval(self.expr, {"np": np, "math": math, "special": special, "signal": signal, "stats": stats,
                                "linalg": linalg, "rt": srcgrad.runtime},
                    dict(zip(self.names, values)))


CASES = [Case(row.primitive, expr, tuple(shapes), row.domain, row.prepare, row.float32)
         for row in ROWS for expr, tries in row.cases.items() for shapes in tries]


@functools.cache
def user_function(expr: str, names: tuple):
    """``def f(x, y): return <expr>``, with its source where ``inspect`` finds it."""
    source = f"def f({', '.join(names)}):\n    return {expr}\n"
    filename = f"<test_rules: {expr}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": "test_rules_generated", "np": np, "math": math, "special": special,
                 "signal": signal, "stats": stats, "linalg": linalg, "rt": srcgrad.runtime}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - a test fixture
    return namespace["f"]
