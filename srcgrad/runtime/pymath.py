"""The mathematics of the rules of the ``math`` module and the builtins on lists
(``rules/pymath.py``): ``math.prod``, ``math.dist``, the digamma and ``erf`` functions."""
from __future__ import annotations

import math


def items_prod_adjoint(ans_bar, items, start=1):
    """Adjoint of ``math.prod(items, start=start)``: each item gets ``ans_bar`` times the
    product of the others and ``start`` (exact at zeros, no division); ``start`` gets
    ``ans_bar`` times the items' product."""
    out = []
    for i in range(len(items)):
        others = start
        for j in range(len(items)):
            if j != i:
                others = others * items[j]
        out.append(ans_bar * others)
    return out, ans_bar * math.prod(items)


def items_prod_tangent(ans, items, start=1, items_dot=None, start_dot=None):
    """Tangent of ``math.prod(items, start=start)``: the product rule, item by item."""
    others, whole = items_prod_adjoint(1.0, items, start)
    total = sum(d * o for d, o in zip(items_dot, others)) if items_dot is not None else 0.0
    return total + (start_dot * whole if start_dot is not None else 0.0)


def items_dist_adjoint(ans_bar, ans, p, q):
    """Adjoint of ``math.dist(p, q)``: ``(p_i - q_i) / ans`` for ``p``, its negative for
    ``q``; 0 where the points coincide (as ``math.hypot``'s)."""
    scale = ans_bar / ans if ans != 0 else 0.0 * ans_bar
    dp = [scale * (p[i] - q[i]) for i in range(len(p))]
    return dp, [-d for d in dp]


def items_dist_tangent(ans, p, q, p_dot=None, q_dot=None):
    """Tangent of ``math.dist(p, q)``: ``sum((p_i - q_i)(dp_i - dq_i)) / ans``; 0 where the
    points coincide."""
    total = 0.0 * ans
    for i in range(len(p)):
        d = (p_dot[i] if p_dot is not None else 0.0) - (q_dot[i] if q_dot is not None else 0.0)
        total = total + (p[i] - q[i]) * d
    return total / ans if ans != 0 else total


def digamma(x):
    """The digamma function ``psi(x) = Gamma'(x) / Gamma(x)`` of a float (``math`` has none):
    the recurrence ``psi(x) = psi(x + 1) - 1 / x`` up to ``x >= 10``, then the asymptotic
    series (Abramowitz & Stegun 6.3.5, 6.3.18; error below 1e-13); for ``x < 0`` the
    reflection ``psi(1 - x) - pi / tan(pi x)`` (A&S 6.3.7).

    Raises:
        ZeroDivisionError: at 0 and the negative integers (the poles).
    """
    x = float(x)
    if x < 0:
        return digamma(1 - x) - math.pi / math.tan(math.pi * x)
    shift = 0.0
    while x < 10:
        shift -= 1 / x
        x += 1
    inv2 = 1 / (x * x)
    return shift + math.log(x) - 0.5 / x - inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (
        1 / 240 - inv2 / 132))))


def erf(x):
    """The error function, elementwise: SciPy's (``scipy.special.erf``), imported when first
    called, so that srcgrad (and its ``nn`` library's exact GELU) imports without SciPy.

    Raises:
        ImportError: SciPy is not installed.
    """
    try:
        from scipy import special
    except ImportError as missing:
        raise ImportError("the error function (the exact GELU) needs SciPy: pip install scipy, "
                          "or use approximate='tanh'") from missing
    return special.erf(x)
