"""The mathematics of the rules of linear algebra (``rules/linalg.py``, and
``rules/scipy_linalg.py``): products (``np.dot``, ``np.tensordot``, ``np.einsum``), norms,
and the adjoints and tangents of ``np.linalg`` on stacks of matrices."""
from __future__ import annotations

import functools
import operator

import numpy as np

from .. import errors
from .core import _as_array, array_module, item_of, static, unbroadcast, zeros_like
from .operators import matmul_lhs, matmul_rhs
from .reductions import _axes_as_given, broadcast_reduced


def norm_adjoint(ans_bar, ans, x, ord=None, axis=None, keepdims=False):
    """Adjoint of ``np.linalg.norm`` for every order NumPy accepts.

    Vectors (one axis): ``2`` → ``x / ans``; ``1`` → ``sign(x)``; ``inf``/``-inf``
    → ``sign(x)`` on the entries of largest/smallest magnitude (ties share);
    ``0`` (a count) → 0; any other ``p`` → ``sign(x) |x|^(p-1) ans^(1-p)``.
    Matrices (two axes, stacked over the others): ``'fro'`` → ``x / ans``;
    ``2``/``-2`` → ``u v^T`` of the largest/smallest singular value; ``'nuc'`` →
    ``U V^T`` (Giles 2008, "Collected matrix derivative results", §3.3: the
    adjoint of ``s = svd(A)`` is ``U diag(s_bar) V^T``); ``1``/``-1`` and
    ``inf``/``-inf`` → ``sign(x)`` on the column/row of largest/smallest absolute
    sum (ties share).  Where the norm is 0 (or a singular value repeats) this is
    one subgradient.  (NumPy's functions serve CuPy arrays too, through
    ``__array_function__``; forward mode follows this source for second derivatives.)
    """
    x = _as_array(x)
    ndim = np.ndim(x)
    axes = _axes_as_given(axis, ndim)  # (rows, columns) as given
    g = broadcast_reduced(ans_bar, x, axes, keepdims)
    full = broadcast_reduced(ans, x, axes, keepdims)
    safe = np.where(full == 0, 1, full)
    if ord is None or ord == "fro" or (ord == 2 and len(axes) == 1):
        return g * x / safe
    if len(axes) == 1:
        a = axes[0]
        if ord == 1:
            return g * np.sign(x)
        if ord == 0:
            return np.zeros_like(g * x)
        if ord in (np.inf, -np.inf):
            mask = np.abs(x) == full
            return g * np.sign(x) * mask / np.sum(mask, axis=a, keepdims=True, dtype=x.dtype)
        p = ord
        return np.where(full == 0, 0, g * np.sign(x) * np.abs(x) ** (p - 1) * safe ** (1 - p))
    rows, cols = axes
    if ord in ("nuc", 2, -2):
        xm = np.moveaxis(x, (rows, cols), (-2, -1))
        gm = np.moveaxis(g, (rows, cols), (-2, -1))[..., :1, :1]
        u, _, vt = np.linalg.svd(xm, full_matrices=False)
        if ord == "nuc":
            bar = u @ vt
        else:
            i = slice(0, 1) if ord == 2 else slice(-1, None)  # singular values are sorted
            bar = u[..., :, i] @ vt[..., i, :]
        return np.moveaxis(gm * bar, (-2, -1), (rows, cols))
    if ord in (1, -1):
        summed, across = rows, cols  # column sums, the largest (smallest) column
    elif ord in (np.inf, -np.inf):
        summed, across = cols, rows
    else:
        raise ValueError(f"Invalid norm order {ord!r} for matrices")
    sums = np.sum(np.abs(x), axis=summed, keepdims=True)
    mask = sums == full
    return g * np.sign(x) * mask / np.sum(mask, axis=across, keepdims=True, dtype=x.dtype)


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
    """``(inputs, output)`` of subscripts without ellipses; implicit output: the letters
    that appear once, in alphabetical order (NumPy's rule)."""
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        inputs, out = subscripts.split("->")
    else:
        inputs = subscripts
        letters = inputs.replace(",", "").replace(".", "")
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
        if "." in inputs:
            out = "..." + out
    return inputs.split(","), out


def _explicit_einsum(subscripts: str, ndims) -> tuple:
    """``(inputs, output)`` with each ``...`` replaced by letters of its own, one per
    broadcast axis (right-aligned, as NumPy broadcasts them)."""
    ins, out = _parse_einsum(subscripts)
    used = set(subscripts)
    spare = [c for c in _LETTERS if c not in used]
    widths = [ndim - (len(s) - 3) for s, ndim in zip(ins, ndims) if "..." in s]
    width = max(widths, default=0)
    dots = "".join(spare[:width])
    ins = [s.replace("...", dots[width - (ndim - (len(s) - 3)):]) if "..." in s else s
           for s, ndim in zip(ins, ndims)]
    return ins, out.replace("...", dots)


@static
def einsum_adjoint_subscripts(subscripts: str, which: int, count: int = 2):
    """Subscripts of the one einsum that gives operand ``which``'s adjoint, or None.

    The adjoint of operand k contracts ``ans_bar`` with the other operands: for
    ``"ij,jk->ik"`` and k = 0, ``"ik,jk->ij"`` (``ans_bar`` takes operand k's
    place).  None when one plain einsum cannot express it (an ellipsis, a letter
    repeated within operand k, or one found in operand k alone, ``count``
    operands not as written): then :func:`einsum_adjoints` does it.
    """
    if not isinstance(subscripts, str) or "." in subscripts:
        return None
    ins, out = _parse_einsum(subscripts)
    if len(ins) != count:
        return None
    mine = ins[which]
    others = ins[:which] + ins[which + 1:]
    if any(mine.count(c) > 1 for c in mine):
        return None
    if any(c not in out and all(c not in o for o in others) for c in mine):
        return None
    return ",".join(ins[:which] + [out] + ins[which + 1:]) + "->" + mine


def einsum_adjoint(subscripts, which, ans_bar, x, y):
    """Adjoint of ``np.einsum(subscripts, x, y)`` w.r.t. operand ``which`` (0 or 1)."""
    return einsum_adjoints(subscripts, ans_bar, (x, y), which=which)[which]


def einsum_adjoints(subscripts, ans_bar, operands, optimize=False, which=None):
    """Adjoints of every operand of ``np.einsum(subscripts, *operands)``, any form NumPy
    accepts (subscripts as a string; the sublist form is rewritten to one when compiling).

    Operand k's adjoint is an einsum of ``ans_bar`` with the other operands onto
    operand k's distinct letters (Giles 2008, §2.3: the adjoint of a multilinear
    map in one argument); then

    * a letter found in operand k alone was summed there: broadcast back;
    * a letter repeated within operand k (``'ii->i'``, ``'ii,i->'``) reads a
      diagonal: the adjoint is scattered onto that diagonal, zero elsewhere;
    * an axis of length 1 that NumPy broadcast (in an ellipsis) is summed back.

    Returns:
        A list, one adjoint per operand (None for the others when ``which`` names one).
    """
    xp = array_module(ans_bar, *operands)
    operands = [_as_array(o) for o in operands]
    ins, out = _explicit_einsum(subscripts, [o.ndim for o in operands])
    size = {}
    for sub, operand in zip(ins, operands):
        for c, n in zip(sub, operand.shape):
            if n != 1 or c not in size:
                size[c] = n
    g = xp.asarray(ans_bar)
    adjoints = []
    for k, (mine, operand) in enumerate(zip(ins, operands)):
        if which is not None and k != which:
            adjoints.append(None)
            continue
        others = [(s, o) for i, (s, o) in enumerate(zip(ins, operands)) if i != k]
        letters = "".join(dict.fromkeys(mine))  # distinct, in order of first appearance
        known = "".join(c for c in letters if c in out or any(c in s for s, _ in others))
        spec = ",".join([out] + [s for s, _ in others]) + "->" + known
        part = xp.einsum(spec, g, *[o for _, o in others], optimize=optimize)
        full = [size[c] for c in letters]
        part = xp.reshape(part, [size[c] if c in known else 1 for c in letters])
        part = xp.broadcast_to(part, full)
        shrink = tuple(i for i, c in enumerate(letters) if operand.shape[mine.index(c)] == 1 and full[i] != 1)
        if shrink:  # broadcast from length 1
            part = xp.sum(part, axis=shrink, keepdims=True)
        if letters == mine:
            adjoints.append(part)
            continue
        bar = xp.zeros(operand.shape, dtype=part.dtype)  # a diagonal: scatter onto it
        grids = xp.ix_(*[xp.arange(n) for n in part.shape])
        bar[tuple(grids[letters.index(c)] for c in mine)] = part
        adjoints.append(bar)
    return adjoints


def einsum_adjoints_transposed_rule(u, adjoints, subscripts, ans_bar, operands, optimize=False, which=None):
    """Each operand's adjoint is the transpose of the einsum in that operand: transposed back,
    the einsum itself (``rt.einsum_adjoints_transposed``)."""
    ans_bar_bar, operands_bar = einsum_adjoints_transposed(u, subscripts, ans_bar, operands, optimize)
    return ans_bar_bar, operands_bar


def einsum_adjoints_dot(ans, subscripts, ans_bar, operands, optimize=False, which=None, ans_bar_dot=None,
                        operands_dot=None):
    """Multilinear in ``ans_bar`` and the operands other than its own (``rt.einsum_adjoints_tangent``)."""
    return einsum_adjoints_tangent(subscripts, ans_bar, operands, optimize, which, ans_bar_dot, operands_dot)


def _replaced(items, index, value) -> list:
    items = list(items)
    items[index] = value
    return items


def _summed_parts(parts, count) -> list:
    """Per place, the sum of the parts' non-None entries there (None where all are)."""
    out = []
    for k in range(count):
        here = [p[k] for p in parts if p[k] is not None]
        out.append(functools.reduce(operator.add, here) if here else None)
    return out


def einsum_adjoints_tangent(subscripts, ans_bar, operands, optimize, which, ans_bar_dot, operands_dot):
    """Tangent of :func:`einsum_adjoints`: operand k's adjoint is multilinear in ``ans_bar``
    and the other operands (it reads operand k's shape only), so its tangent is the sum of
    the adjoint with one of them at a time replaced by its tangent (None: a constant)."""
    count = len(operands)
    parts = [] if ans_bar_dot is None else \
        [einsum_adjoints(subscripts, ans_bar_dot, operands, optimize, which)]
    for j, dot in enumerate(operands_dot if operands_dot is not None else [None] * count):
        if dot is not None:
            part = einsum_adjoints(subscripts, ans_bar, _replaced(operands, j, dot), optimize, which)
            parts.append(_replaced(part, j, None))
    summed = _summed_parts(parts, count)
    return [zeros_like(a) if t is None and (which is None or k == which) else t
            for k, (t, a) in enumerate(zip(summed, operands))]


def einsum_adjoints_transposed(u, subscripts, ans_bar, operands, optimize=False):
    """Transpose of :func:`einsum_adjoints` in ``ans_bar`` and in the operands, given ``u``, one
    cotangent per operand (None: zero).  Operand k's adjoint ``E_k^T g`` is the transpose of
    ``E_k``, the einsum as a linear map of operand k, so ``<u_k, E_k^T g> = <E_k u_k, g>``:
    ``ans_bar`` gets ``sum_k E_k u_k`` (the einsum with ``u_k`` in operand k's place), and
    operand j gets ``sum_(k != j)`` of operand j's adjoint of that einsum, given ``ans_bar``."""
    count = len(operands)
    g_bar, parts = None, []
    for k in range(count):
        if u[k] is None:
            continue
        moved = _replaced(operands, k, u[k])
        term = np.einsum(subscripts, *moved, optimize=optimize)
        g_bar = term if g_bar is None else g_bar + term
        parts.append(_replaced(einsum_adjoints(subscripts, ans_bar, moved, optimize), k, None))
    summed = _summed_parts(parts, count)
    return (zeros_like(ans_bar) if g_bar is None else unbroadcast(g_bar, ans_bar),
            [zeros_like(o) if t is None else t for t, o in zip(summed, operands)])


def trace_adjoint(ans_bar, a, offset=0, axis1=0, axis2=1):
    """Adjoint of ``np.trace``: ``ans_bar`` on the diagonal ``offset``, 0 elsewhere."""
    shape = np.shape(a)
    ndim = len(shape)
    axis1, axis2 = axis1 % ndim, axis2 % ndim
    eye = array_module(ans_bar).eye(shape[axis1], shape[axis2], k=offset, dtype=np.result_type(ans_bar, 1.0))
    if axis1 > axis2:
        eye = eye.T
    eye = np.reshape(eye, [shape[d] if d in (axis1, axis2) else 1 for d in range(ndim)])
    return np.expand_dims(ans_bar, (min(axis1, axis2), max(axis1, axis2))) * eye


def diag_adjoint(ans_bar, v, k=0):
    """Adjoint of ``np.diag(v, k)``: of a vector (a matrix built), the diagonal
    ``k`` read back; of a matrix (its diagonal read), scattered onto it."""
    if np.ndim(v) == 1:
        return np.diagonal(ans_bar, k).copy()
    bar = array_module(ans_bar).zeros(np.shape(v), dtype=np.result_type(ans_bar, 1.0))
    n = np.shape(ans_bar)[0]
    rows = np.arange(n) + max(-k, 0)
    bar[rows, rows + k] = ans_bar
    return bar


def diag_adjoint_transposed(u, ans, ans_bar, v, k=0):
    """A matrix's diagonal ``k`` read back, or a vector scattered onto it: each is the other's
    transpose, and ``np.diag(u, k)`` does whichever ``u`` (of ``v``'s shape) asks for."""
    return np.diag(u, k)


def kron_adjoint(g, a, b, which):
    """Adjoint of ``np.kron(a, b)`` for ``a`` (``which=0``) or ``b``: with both shapes padded
    to one rank ``d``, ``g`` reshaped to ``(a0, b0, a1, b1, ...)`` holds ``a[i] b[j]`` at
    ``(i0, j0, i1, j1, ...)``, so each factor's adjoint sums ``g`` times the other over its axes.
    (The shapes are interleaved by ``np.stack``, which forward mode follows: second derivatives.)"""
    d = max(np.ndim(a), np.ndim(b))
    sa = np.array((1,) * (d - np.ndim(a)) + np.shape(a), dtype=int)
    sb = np.array((1,) * (d - np.ndim(b)) + np.shape(b), dtype=int)
    ones = np.ones(d, dtype=int)
    g = np.reshape(g, np.ravel(np.stack([sa, sb], axis=1)))
    if which == 0:
        other = np.reshape(b, np.ravel(np.stack([ones, sb], axis=1)))
        return np.reshape(np.sum(g * other, axis=tuple(range(1, 2 * d, 2))), np.shape(a))
    other = np.reshape(a, np.ravel(np.stack([sa, ones], axis=1)))
    return np.reshape(np.sum(g * other, axis=tuple(range(0, 2 * d, 2))), np.shape(b))


def inner_adjoint(g, a, b, which):
    """Adjoint of ``np.inner(a, b)`` (a sum over the last axes; a product when one is a
    scalar) for ``a`` (``which=0``) or ``b``."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        other, this = (b, a) if which == 0 else (a, b)
        return unbroadcast(g * other, this)
    na, nb = np.ndim(a), np.ndim(b)
    if which == 0:  # g: a.shape[:-1] + b.shape[:-1]; sum over b's leading axes
        return np.tensordot(g, b, axes=(list(range(na - 1, na + nb - 2)), list(range(nb - 1))))
    return np.tensordot(g, a, axes=(list(range(na - 1)), list(range(na - 1))))


# ---- linear algebra: adjoints and tangents of np.linalg (stacked matrices throughout) ----
def _mT(a):
    return np.swapaxes(a, -1, -2)


def _diag_embed(d):
    return d[..., :, None] * np.eye(d.shape[-1], dtype=d.dtype)


def _or_zeros(g, like):
    return zeros_like(like) if g is None else g


def from_triangle(g, upper=False):
    """Adjoint of reading a symmetric matrix from one triangle of ``a`` (``eigh``,
    ``cholesky``): ``S = tril(a) + tril(a, -1)^T``, so ``a_bar = tril(G) + tril(G^T, -1)``
    for ``G`` the adjoint of ``S``; with ``upper``, the upper triangle."""
    if upper:
        return np.triu(g) + np.triu(_mT(g), 1)
    return np.tril(g) + np.tril(_mT(g), -1)


def to_symmetric(a_dot, upper=False):
    """The tangent of the symmetric matrix read from one triangle of ``a``."""
    if upper:
        return np.triu(a_dot) + _mT(np.triu(a_dot, 1))
    return np.tril(a_dot) + _mT(np.tril(a_dot, -1))


def inverse_gaps(w, what, refuse=True):
    """``F[..., i, j] = 1 / (w_j - w_i)`` off the diagonal, 0 on it (Giles 2008, §3.1).

    A repeated value (an exact tie) leaves the vectors of its eigenspace without a
    derivative: raised as NoDerivativeRuleError (``refuse``), else NaN there (tangents).
    """
    gaps = w[..., None, :] - w[..., :, None]
    off = ~np.eye(w.shape[-1], dtype=bool)
    tied = (gaps == 0) & off
    if refuse and np.any(tied):
        raise errors.NoDerivativeRuleError(
            f"the {what} of a matrix with a repeated value have no derivative (they are any basis "
            "of its eigenspace)", None,
            f"differentiate only functions of the values, or of the {what} of a matrix whose values are distinct")
    safe = np.where(tied | ~off, 1, gaps)
    return np.where(off, np.where(tied, np.nan, 1 / safe), 0).astype(w.dtype)


def solve_adjoint(ans_bar, ans, a, b, which):
    """``x = A^-1 b``: ``b_bar = A^-T x_bar`` (``which`` 1), ``A_bar = -b_bar x^T`` (``which`` 0)
    (Giles 2008, §2.3); a 1-D ``b`` is one vector for every stacked matrix (NumPy 2), summed back."""
    vector = np.ndim(b) == 1
    x, g = (ans[..., None], ans_bar[..., None]) if vector else (ans, ans_bar)
    b_bar = np.linalg.solve(_mT(a), g)
    if which == 0:
        return unbroadcast(-b_bar @ _mT(x), a)
    return unbroadcast(b_bar[..., 0] if vector else b_bar, b)


def solve_tangent(ans, a, b, a_dot=None, b_dot=None):
    """``dx = A^-1 (db - dA x)``."""
    vector = np.ndim(b) == 1
    x = ans[..., None] if vector else ans
    rhs = 0 if b_dot is None else (b_dot[..., None] if vector else b_dot)
    if a_dot is not None:
        rhs = rhs - a_dot @ x
    rhs = np.broadcast_to(rhs, x.shape)
    out = np.linalg.solve(a, rhs)
    return out[..., 0] if vector else out


def logdet_adjoint(g, a):
    """``d log|det A| = tr(A^-1 dA)``: ``A_bar = g A^-T`` (Giles 2008, §2.2)."""
    return g[..., None, None] * _mT(np.linalg.inv(a))


def logdet_tangent(a, a_dot):
    return np.trace(np.linalg.solve(a, a_dot), axis1=-2, axis2=-1)


def slogdet_adjoint(ans_bar, a):
    """The sign is piecewise constant: only ``logabsdet``'s adjoint reaches ``a``."""
    g = item_of(ans_bar, 1)
    return zeros_like(a) if g is None else logdet_adjoint(np.asarray(g, a.dtype), a)


def cholesky_adjoint(ans_bar, ans, a, upper=False):
    """``dL = L Phi(L^-1 dS L^-T)`` (``Phi``: the lower triangle, diagonal halved), so
    ``S_bar = L^-T Phi(L^T L_bar) L^-1`` (Murray 2016, "Differentiation of the Cholesky
    decomposition", §3), read back into the triangle NumPy reads."""
    low, g = (_mT(ans), _mT(ans_bar)) if upper else (ans, ans_bar)
    inv = np.linalg.inv(low)
    p = _mT(low) @ g
    phi = np.tril(p) - 0.5 * _diag_embed(np.diagonal(p, axis1=-2, axis2=-1))
    return from_triangle(_mT(inv) @ phi @ inv, upper)


def cholesky_tangent(ans, a, upper=False, a_dot=None):
    low = _mT(ans) if upper else ans
    inv = np.linalg.inv(low)
    p = inv @ to_symmetric(a_dot, upper) @ _mT(inv)
    dl = low @ (np.tril(p) - 0.5 * _diag_embed(np.diagonal(p, axis1=-2, axis2=-1)))
    return _mT(dl) if upper else dl


def eigh_adjoint(ans_bar, ans, a, UPLO="L"):  # noqa: N803 - NumPy's name
    """``A = V diag(w) V^T``: ``S_bar = V (diag(w_bar) + F o (V^T V_bar)) V^T``, ``F_ij =
    1 / (w_j - w_i)`` (Giles 2008, §3.1), read back into the triangle ``UPLO`` names.
    Eigenvectors' adjoints need distinct eigenvalues: a tie is refused (``inverse_gaps``)."""
    w, v = ans
    w_bar, v_bar = item_of(ans_bar, 0), item_of(ans_bar, 1)
    inner = _diag_embed(_or_zeros(w_bar, w).astype(w.dtype))
    if v_bar is not None:
        inner = inner + inverse_gaps(w, "eigenvectors") * (_mT(v) @ v_bar)
    return from_triangle(v @ inner @ _mT(v), UPLO == "U")


def eigh_tangent(ans, a, UPLO="L", a_dot=None):  # noqa: N803
    """``dw = diag(V^T dS V)``, ``dV = V (F o (V^T dS V))``; NaN for the eigenvectors of a tie."""
    w, v = ans
    m = _mT(v) @ to_symmetric(a_dot, UPLO == "U") @ v
    return np.diagonal(m, axis1=-2, axis2=-1), v @ (inverse_gaps(w, "eigenvectors", refuse=False) * m)


def _svd_reduced(ans, a, full_matrices, compute_uv):
    """(U, s, Vh) of the reduced SVD, and ``k = min(m, n)``."""
    m, n = a.shape[-2:]
    k = min(m, n)
    if not compute_uv:
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        return u, s, vh, k
    u, s, vh = ans
    return u[..., :k], s, vh[..., :k, :], k


def svd_values_adjoint(s_bar, a):
    """``A_bar = U diag(s_bar) V^T`` (Giles 2008, §3.3), for ``svd(a, compute_uv=False)``: a
    helper of its own, which forward mode follows (second derivatives: through ``svd``'s
    tangent, Townsend 2016)."""
    u, _, vh = np.linalg.svd(a, full_matrices=False)
    return u @ (s_bar[..., :, None] * vh)


def svd_adjoint(ans_bar, ans, a, full_matrices=True, compute_uv=True):
    """Townsend 2016, "Differentiating the singular value decomposition", eq. 30:
    ``A_bar = U [diag(s_bar) + (F o (U^T U_bar - U_bar^T U)) S + S (F o (V^T V_bar - V_bar^T V))] V^T
    + (I - U U^T) U_bar S^-1 V^T + U S^-1 V_bar^T (I - V V^T)``, ``F_ij = 1 / (s_j^2 - s_i^2)``.
    The singular vectors' adjoints need distinct (and, beyond a square matrix's, nonzero)
    singular values; ``full_matrices=True`` columns of ``U`` (rows of ``Vh``) beyond
    ``min(m, n)`` are any basis of a complement and have none: refused when read."""
    if not compute_uv:
        return svd_values_adjoint(ans_bar, a)
    u, s, vh, k = _svd_reduced(ans, a, full_matrices, compute_uv)
    u_bar, s_bar, vh_bar = item_of(ans_bar, 0), item_of(ans_bar, 1), item_of(ans_bar, 2)
    if (u_bar is not None and np.any(u_bar[..., k:])) or (vh_bar is not None and np.any(vh_bar[..., k:, :])):
        raise errors.NoDerivativeRuleError(
            "the columns of U (rows of Vh) of `np.linalg.svd` beyond min(m, n), with full_matrices=True, "
            "have no derivative: they are any orthonormal basis of a complement", None,
            "pass full_matrices=False, or read only the first min(m, n) columns of U and rows of Vh")
    inner = _diag_embed(_or_zeros(s_bar, s).astype(s.dtype))
    if u_bar is None and vh_bar is None:
        return u @ inner @ vh
    m, n = a.shape[-2:]
    if (m != n) and np.any(s == 0):
        raise errors.NoDerivativeRuleError(
            "the singular vectors of a rank-deficient non-square matrix have no derivative", None,
            "differentiate only functions of the singular values")
    f = inverse_gaps(s * s, "singular vectors")
    out = 0
    if u_bar is not None:
        u_bar = u_bar[..., :k]
        j = _mT(u) @ u_bar
        inner = inner + f * (j - _mT(j)) * s[..., None, :]
        if m > k:
            out = ((u_bar - u @ j) / s[..., None, :]) @ vh
    if vh_bar is not None:
        vh_bar = vh_bar[..., :k, :]
        j = vh @ _mT(vh_bar)  # V^T V_bar
        inner = inner + s[..., :, None] * (f * (j - _mT(j)))
        if n > k:
            out = out + (u / s[..., None, :]) @ (vh_bar - (vh_bar @ _mT(vh)) @ vh)
    return u @ inner @ vh + out


def svd_tangent(ans, a, full_matrices=True, compute_uv=True, a_dot=None):
    """``dP = U^T dA V``: ``ds = diag(dP)``, ``dU = U (F o (dP S + S dP^T)) + (I - U U^T) dA V S^-1``,
    ``dV = V (F o (S dP + dP^T S)) + (I - V V^T) dA^T U S^-1`` (Townsend 2016); NaN where
    undefined (ties; the complement's columns with ``full_matrices=True``)."""
    u, s, vh, k = _svd_reduced(ans, a, full_matrices, compute_uv)
    v = _mT(vh)
    dp = _mT(u) @ a_dot @ v
    ds = np.diagonal(dp, axis1=-2, axis2=-1)
    if not compute_uv:
        return ds
    f = inverse_gaps(s * s, "singular vectors", refuse=False)
    du = u @ (f * (dp * s[..., None, :] + s[..., :, None] * _mT(dp)))
    dv = v @ (f * (s[..., :, None] * dp + _mT(dp) * s[..., None, :]))
    m, n = a.shape[-2:]
    if m > k:
        du = du + (a_dot @ v - u @ dp) / s[..., None, :]
    if n > k:
        dv = dv + (_mT(a_dot) @ u - v @ _mT(dp)) / s[..., None, :]
    if full_matrices and m != n:
        nan = np.full(ans[0].shape[:-1] + (ans[0].shape[-1] - k,), np.nan, du.dtype)
        du = np.concatenate([du, nan], axis=-1)
        nan = np.full(ans[2].shape[:-2] + (ans[2].shape[-2] - k, n), np.nan, du.dtype)
        dv = np.concatenate([dv, _mT(nan)], axis=-1)
    return du, ds, _mT(dv)


def _copyltu(m):
    return np.tril(m) + _mT(np.tril(m, -1))


def _qr_square_adjoint(q, r, q_bar, r_bar):
    """``m >= n``: ``A_bar = (Q_bar + Q copyltu(M)) R^-T``, ``M = R R_bar^T - Q_bar^T Q``
    (Walter & Lehmann 2018, "Algorithmic differentiation of linear algebra functions
    with application in optimum experimental design", §3.4; Seeger et al. 2017)."""
    m = r @ _mT(r_bar) - _mT(q_bar) @ q
    b = q_bar + q @ _copyltu(m)
    return _mT(np.linalg.solve(r, _mT(b)))


def qr_adjoint(ans_bar, ans, a, mode="reduced"):
    """``mode='reduced'`` (``Q, R``) or ``'r'`` (``R``).  A wide ``A = [X | Y]`` has
    ``R = [U | Q^T Y]`` with ``Q, U = qr(X)`` (Roberts et al. / Liao et al. 2019, §B):
    ``Y_bar = Q V_bar``, and ``X``'s adjoint is the square one with ``Q_bar + Y V_bar^T``."""
    if mode == "r":
        return qr_r_adjoint(ans_bar, a)
    q, r = ans
    return _qr_adjoint(q, r, _or_zeros(item_of(ans_bar, 0), q), _or_zeros(item_of(ans_bar, 1), r), a)


def qr_r_adjoint(r_bar, a):
    """:func:`qr_adjoint` of ``mode='r'`` (``Q`` computed again, its adjoint zero): a helper of
    its own, which forward mode follows (second derivatives)."""
    q, r = np.linalg.qr(a)
    return _qr_adjoint(q, r, zeros_like(q), r_bar, a)


def _qr_adjoint(q, r, q_bar, r_bar, a):
    m, n = a.shape[-2:]
    if m >= n:
        return _qr_square_adjoint(q, r, q_bar, r_bar)
    y, v_bar = a[..., m:], r_bar[..., m:]
    x_bar = _qr_square_adjoint(q, r[..., :m], q_bar + y @ _mT(v_bar), r_bar[..., :m])
    return np.concatenate([x_bar, q @ v_bar], axis=-1)


def _qr_square_tangent(q, r, a_dot):
    """``C = Q^T dA R^-1``, ``Omega = tril(C, -1) - tril(C, -1)^T``: ``dR = (C - Omega) R``,
    ``dQ = dA R^-1 - Q (C - Omega)`` (Walter & Lehmann 2018)."""
    ar = _mT(np.linalg.solve(_mT(r), _mT(a_dot)))
    c = _mT(q) @ ar
    low = np.tril(c, -1)
    upper = c - low + _mT(low)
    return ar - q @ upper, upper @ r


def qr_tangent(ans, a, mode="reduced", a_dot=None):
    q, r = np.linalg.qr(a) if mode == "r" else ans
    m, n = a.shape[-2:]
    if m >= n:
        dq, dr = _qr_square_tangent(q, r, a_dot)
    else:
        dq, du = _qr_square_tangent(q, r[..., :m], a_dot[..., :m])
        dr = np.concatenate([du, _mT(dq) @ a[..., m:] + _mT(q) @ a_dot[..., m:]], axis=-1)
    return dr if mode == "r" else (dq, dr)


def _full_rank(a):
    if np.any(np.linalg.matrix_rank(a) < min(a.shape[-2:])):
        raise errors.NoDerivativeRuleError(
            "`np.linalg.pinv` of a rank-deficient matrix has no derivative (it jumps where the rank changes)",
            None, "regularise: `np.linalg.solve(a.T @ a + lam * np.eye(n), a.T)`")


def pinv_adjoint(ans_bar, ans, a):
    """``dX = -X dA X + X X^T dA^T (I - A X) + (I - X A) dA^T X^T X`` for ``X = A^+`` of
    full rank (Golub & Pereyra 1973, Thm 4.3), transposed:
    ``A_bar = -X^T G X^T + (I - A X) G^T X X^T + X^T X G^T (I - X A)``."""
    _full_rank(a)
    x, g = ans, ans_bar
    out = -_mT(x) @ g @ _mT(x)
    gt = _mT(g)
    out = out + (gt - a @ (x @ gt)) @ (x @ _mT(x)) + (_mT(x) @ x) @ (gt - (gt @ x) @ a)
    return out


def pinv_tangent(ans, a, a_dot):
    _full_rank(a)
    x, dt = ans, _mT(a_dot)
    return -x @ a_dot @ x + (x @ _mT(x)) @ (dt - (dt @ a) @ x) + (dt - x @ (a @ dt)) @ (_mT(x) @ x)


def _powers(a, n):
    powers = [np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape)]
    for _ in range(n - 1):
        powers.append(powers[-1] @ a)
    return powers


def matrix_power_adjoint(g, a, n):
    """``d(A^n) = sum_k A^k dA A^(n-1-k)``, transposed term by term; a negative ``n`` is
    the power of ``B = A^-1``, whose adjoint is ``-B^T B_bar B^T`` (Giles 2008, §2.2)."""
    if n < 0:
        b = np.linalg.inv(a)
        return -_mT(b) @ matrix_power_adjoint(g, b, -n) @ _mT(b)
    if n == 0:
        return zeros_like(a)
    p = [_mT(x) for x in _powers(a, n)]
    return sum(p[k] @ g @ p[n - 1 - k] for k in range(n))


def matrix_power_tangent(ans, a, n, a_dot=None):
    if n < 0:
        b = np.linalg.inv(a)
        return matrix_power_tangent(ans, b, -n, -b @ a_dot @ b)
    if n == 0:
        return np.zeros_like(ans)
    p = _powers(a, n)
    return sum(p[k] @ a_dot @ p[n - 1 - k] for k in range(n))


def _cov_rows(m, rowvar):
    """The variables as rows, as ``np.cov`` reads ``m``; whether that transposed it."""
    x = np.atleast_2d(m)
    flipped = not rowvar and x.shape[0] != 1
    return (x.T if flipped else x), flipped


def _cov_count(n, bias, ddof):
    return n - (ddof if ddof is not None else 0 if bias else 1)


def cov_adjoint(ans_bar, m, rowvar=True, bias=False, ddof=None):
    """Adjoint of ``np.cov``: ``C = X_c X_c^T / (N - ddof)`` with ``X_c = X (I - 11^T / N)``, so
    ``X_bar = (G + G^T) X_c / (N - ddof)`` (the centring projection leaves ``X_c`` as it is;
    Giles 2008, §2.2's product rule)."""
    x, flipped = _cov_rows(m, rowvar)
    centred = x - np.mean(x, axis=1, keepdims=True)
    g = np.reshape(ans_bar, (x.shape[0], x.shape[0]))
    bar = (g + g.T) @ centred / _cov_count(x.shape[1], bias, ddof)
    # (np.cov computes in float64 at least: the adjoint in m's floating dtype)
    return np.reshape(bar.T if flipped else bar, np.shape(m)).astype(np.result_type(np.asarray(m), np.float32))


def cov_tangent(m_dot, m, rowvar=True, bias=False, ddof=None):
    x, _ = _cov_rows(m, rowvar)
    x_dot, _ = _cov_rows(m_dot, rowvar)
    centred = x - np.mean(x, axis=1, keepdims=True)
    centred_dot = x_dot - np.mean(x_dot, axis=1, keepdims=True)
    product = centred_dot @ centred.T
    return np.squeeze((product + product.T) / _cov_count(x.shape[1], bias, ddof))


def corrcoef_adjoint(ans_bar, ans, m, rowvar=True):
    """Adjoint of ``np.corrcoef``: ``R_ij = C_ij / (s_i s_j)``, ``s = sqrt(diag C)``, so
    ``C_bar = G / (s s^T) - diag((rowsum(G o R) + colsum(G o R)) / (2 diag C))``, then
    ``np.cov``'s adjoint (NumPy's clipping of ``R`` to [-1, 1] is not differentiated)."""
    c = np.atleast_2d(np.cov(m, rowvar=rowvar))
    d = np.diagonal(c)
    r = np.reshape(ans, np.shape(c))
    g = np.reshape(ans_bar, np.shape(c))
    s = np.sqrt(d)
    weighted = g * r
    c_bar = g / np.outer(s, s) - np.diag((np.sum(weighted, axis=0) + np.sum(weighted, axis=1)) / (2 * d))
    return cov_adjoint(c_bar, m, rowvar)


def corrcoef_tangent(m_dot, ans, m, rowvar=True):
    c = np.atleast_2d(np.cov(m, rowvar=rowvar))
    c_dot = np.reshape(cov_tangent(m_dot, m, rowvar), np.shape(c))
    d = np.diagonal(c)
    r = np.reshape(ans, np.shape(c))
    half = np.diagonal(c_dot) / (2 * d)
    return np.reshape(c_dot / np.sqrt(np.outer(d, d)) - r * (half[:, None] + half[None, :]), np.shape(ans))


def multi_dot_adjoint(ans_bar, arrays):
    """Adjoint of ``np.linalg.multi_dot``: ``A_k_bar = (A_0 ... A_{k-1})^T G (A_{k+1} ... A_n)^T``,
    the first (last) array taken as a row (column) when it is a vector (Giles 2008, §2.2)."""
    mats = [np.reshape(arrays[0], (1, -1)) if np.ndim(arrays[0]) == 1 else arrays[0]]
    mats += list(arrays[1:-1])
    mats.append(np.reshape(arrays[-1], (-1, 1)) if np.ndim(arrays[-1]) == 1 else arrays[-1])
    g = np.reshape(ans_bar, (mats[0].shape[0], mats[-1].shape[1]))
    lefts, acc = [], g  # (A_0 ... A_{k-1})^T G
    for mat in mats:
        lefts, acc = lefts + [acc], mat.T @ acc
    rights, acc = [], np.eye(mats[-1].shape[1], dtype=g.dtype)  # A_{k+1} ... A_n
    for mat in mats[::-1]:
        rights, acc = [acc] + rights, mat @ acc
    return [np.reshape(left @ right.T, np.shape(array)) for left, right, array in zip(lefts, rights, arrays)]


def _lstsq_full_rank(a):
    if np.linalg.matrix_rank(a) < min(np.shape(a)):
        raise errors.NoDerivativeRuleError(
            "`np.linalg.lstsq` of a rank-deficient matrix has no derivative (its solution jumps where "
            "the rank changes)", None, "regularise: `np.linalg.solve(a.T @ a + lam * np.eye(n), a.T @ b)`")


def lstsq_adjoint(ans_bar, ans, a, b, which):
    """Adjoint of ``np.linalg.lstsq`` of a full-rank ``a`` (a rank-deficient one is refused here),
    in ``a`` (``which == 0``) or ``b``.  ``x = A^+ b``: through ``pinv``'s adjoint (Golub &
    Pereyra 1973) with ``A^+_bar = x_bar b^T``, and ``b_bar = A^+^T x_bar``; the residuals
    ``|b - A x|^2`` (tall ``a``, where ``A^T r = 0``): ``b_bar = 2 r``, ``A_bar = -2 r x^T``; the
    singular values: ``U diag(s_bar) V^T`` (Townsend 2016); the rank: none."""
    _lstsq_full_rank(a)
    x, residuals = ans[0], ans[1]
    x_bar, residuals_bar, s_bar = item_of(ans_bar, 0), item_of(ans_bar, 1), item_of(ans_bar, 3)
    b2 = np.reshape(b, (np.shape(b)[0], -1))
    x2 = np.reshape(x, (np.shape(x)[0], -1))
    out = np.zeros(np.shape(a) if which == 0 else np.shape(b2), dtype=np.result_type(a, b, np.float32))
    if x_bar is not None:
        pinv = np.linalg.pinv(a)
        x_bar2 = np.reshape(x_bar, np.shape(x2))
        out = out + (pinv_adjoint(x_bar2 @ b2.T, pinv, a) if which == 0 else pinv.T @ x_bar2)
    if residuals_bar is not None and np.size(residuals) > 0:
        r2 = 2 * (b2 - a @ x2) * residuals_bar
        out = out + (-(r2 @ x2.T) if which == 0 else r2)
    if s_bar is not None and which == 0:
        u, _, vh = np.linalg.svd(a, full_matrices=False)
        out = out + (u * s_bar) @ vh
    return out if which == 0 else np.reshape(out, np.shape(b))


def lstsq_tangent(ans, a, b, a_dot=None, b_dot=None):
    """Tangent of ``np.linalg.lstsq`` (full rank): ``x_dot = A^+_dot b + A^+ b_dot``, the
    residuals' ``2 sum(r (b_dot - A_dot x))``, ``s_dot = diag(U^T A_dot V)``, the rank's 0."""
    _lstsq_full_rank(a)
    x, residuals, rank, s = ans
    a_dot = np.zeros_like(a) if a_dot is None else a_dot
    b_dot = np.zeros(np.shape(b), dtype=np.result_type(a_dot, 1.0)) if b_dot is None else b_dot
    pinv = np.linalg.pinv(a)
    x_dot = pinv_tangent(pinv, a, a_dot) @ b + pinv @ b_dot
    residuals_dot = np.zeros_like(residuals)
    if np.size(residuals) > 0:
        residuals_dot = np.reshape(np.sum(2 * (b - a @ x) * (b_dot - a_dot @ x), axis=0), np.shape(residuals))
    u, _, vh = np.linalg.svd(a, full_matrices=False)
    s_dot = np.sum(u * (a_dot @ vh.T), axis=0)
    return x_dot, residuals_dot, np.zeros_like(rank), s_dot
