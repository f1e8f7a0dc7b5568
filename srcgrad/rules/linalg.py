"""Linear algebra: ``dot vdot inner outer kron cross tensordot einsum linalg.norm trace
diag``, and ``np.linalg``'s ``inv solve det slogdet cholesky eigh svd qr pinv matrix_power``
on matrices stacked over leading axes, ``eigvalsh multi_dot lstsq``, and ``cov corrcoef`` (the formulas, with their sources, are in the
``rt`` helpers each rule calls).

Matrix-product adjoints follow Giles (2008), "Collected matrix derivative
results for forward and reverse mode AD": for ``C = A B``,
``A_bar = C_bar B^T`` and ``B_bar = A^T C_bar``.
"""
from __future__ import annotations

import functools

import numpy as np

from ..runtime import (corrcoef_adjoint, corrcoef_tangent, cov_adjoint, cov_tangent, from_triangle,
                       lstsq_adjoint, lstsq_tangent, multi_dot_adjoint, to_symmetric, cholesky_adjoint, cholesky_tangent, diag_adjoint, dot_lhs, dot_rhs, einsum_adjoint_subscripts, einsum_adjoints,
                       eigh_adjoint, eigh_tangent,
                       inner_adjoint, is_constant, kron_adjoint, logdet_adjoint, logdet_tangent,
                       matrix_power_adjoint, matrix_power_tangent, norm_adjoint, pinv_adjoint, pinv_tangent,
                       qr_adjoint, qr_tangent, slogdet_adjoint, solve_adjoint, solve_tangent, svd_adjoint,
                       svd_tangent, tensordot_adjoint, trace_adjoint, unbroadcast)
from . import _ndim
# the helpers' transposes (beside them in runtime/), for higher order: srcgrad.hvp
from ..runtime import (diag_adjoint_transposed, einsum_adjoints_dot, einsum_adjoints_transposed_rule)
from .registry import defadjoint, deftangent


@defadjoint(np.dot, ndim=_ndim.dot, tangent="bilinear")
def dot(ans_bar, ans, a, b):
    if np.ndim(a) == 2 and np.ndim(b) == 2:
        return ans_bar @ b.T, a.T @ ans_bar
    return dot_lhs(ans_bar, a, b), dot_rhs(ans_bar, a, b)


@defadjoint(np.outer, ndim=_ndim.fixed(2), tangent="bilinear")
def outer(ans_bar, ans, a, b):
    if np.ndim(a) == 1 and np.ndim(b) == 1:
        return ans_bar @ b, a @ ans_bar
    return (np.reshape(ans_bar @ np.ravel(b), np.shape(a)),
            np.reshape(np.ravel(a) @ ans_bar, np.shape(b)))


@defadjoint(np.vdot, ndim=_ndim.fixed(0), tangent="bilinear")
def vdot(ans_bar, ans, a, b):
    """``sum(ravel(a) * ravel(b))`` (real arrays): each gets the other, in its own shape."""
    return ans_bar * np.reshape(b, np.shape(a)), ans_bar * np.reshape(a, np.shape(b))


@defadjoint(np.inner, tangent="bilinear")
def inner(ans_bar, ans, a, b):
    """A sum over the last axes (``rt.inner_adjoint``); of vectors, ``dot``."""
    if np.ndim(a) == 1 and np.ndim(b) == 1:
        return ans_bar * b, ans_bar * a
    return inner_adjoint(ans_bar, a, b, 0), inner_adjoint(ans_bar, a, b, 1)


@defadjoint(np.kron, tangent="bilinear")
def kron(ans_bar, ans, a, b):
    """``g`` reshaped so that each element is ``a[i] b[j]``, summed against the other factor
    (``rt.kron_adjoint``)."""
    return kron_adjoint(ans_bar, a, b, 0), kron_adjoint(ans_bar, a, b, 1)


@defadjoint(np.cross, diff=("a", "b"), tangent="bilinear")
def cross(ans_bar, ans, a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """3-vectors: ``<g, a x b> = <a, b x g> = <b, g x a>`` (the scalar triple product), with
    each vector axis where its array has it; summed back over broadcasting."""
    if is_constant(axis) and axis is None:
        return (unbroadcast(np.cross(b, ans_bar, axisa=axisb, axisb=axisc, axisc=axisa), a),
                unbroadcast(np.cross(ans_bar, a, axisa=axisc, axisb=axisa, axisc=axisb), b))
    return unbroadcast(np.cross(b, ans_bar, axis=axis), a), unbroadcast(np.cross(ans_bar, a, axis=axis), b)


@defadjoint(np.tensordot, tangent="bilinear")
def tensordot(ans_bar, ans, a, b, axes=2):
    return tensordot_adjoint(ans_bar, a, b, axes, 0), tensordot_adjoint(ans_bar, a, b, axes, 1)


@defadjoint(np.einsum, diff=("operands",), sequence=("operands",), tangent="bilinear")
def einsum(ans_bar, ans, subscripts, *operands, out=None, dtype=None, order="K", casting="safe",
           optimize=False):
    """Any number of operands, ellipses, repeated letters, implicit output
    (``rt.einsum_adjoints``).  With literal subscripts and two or three operands
    each adjoint that one einsum expresses is that einsum, with the same ``optimize``,
    summed back over any length-1 axis of the operand that NumPy broadcast
    (``'ij,ij->i'`` with a ``(1, n)`` operand)."""
    if is_constant(subscripts) and len(operands) == 2 \
            and einsum_adjoint_subscripts(subscripts, 0, 2) is not None \
            and einsum_adjoint_subscripts(subscripts, 1, 2) is not None:
        return (unbroadcast(np.einsum(einsum_adjoint_subscripts(subscripts, 0, 2), ans_bar, operands[1],
                                      optimize=optimize), operands[0]),
                unbroadcast(np.einsum(einsum_adjoint_subscripts(subscripts, 1, 2), operands[0], ans_bar,
                                      optimize=optimize), operands[1]))
    if is_constant(subscripts) and len(operands) == 3 \
            and einsum_adjoint_subscripts(subscripts, 0, 3) is not None \
            and einsum_adjoint_subscripts(subscripts, 1, 3) is not None \
            and einsum_adjoint_subscripts(subscripts, 2, 3) is not None:
        return (unbroadcast(np.einsum(einsum_adjoint_subscripts(subscripts, 0, 3), ans_bar, operands[1],
                                      operands[2], optimize=optimize), operands[0]),
                unbroadcast(np.einsum(einsum_adjoint_subscripts(subscripts, 1, 3), operands[0], ans_bar,
                                      operands[2], optimize=optimize), operands[1]),
                unbroadcast(np.einsum(einsum_adjoint_subscripts(subscripts, 2, 3), operands[0], operands[1],
                                      ans_bar, optimize=optimize), operands[2]))
    return einsum_adjoints(subscripts, ans_bar, operands, optimize)


defadjoint(einsum_adjoints, diff=("ans_bar", "operands"), sequence=("operands",))(
    einsum_adjoints_transposed_rule)
deftangent(einsum_adjoints)(einsum_adjoints_dot)


@defadjoint(np.linalg.norm, ndim=functools.partial(_ndim.reduced, array="x"), tangent="reduction")
def norm(ans_bar, ans, x, ord=None, axis=None, keepdims=False):  # noqa: A002
    """2-norm/Frobenius by default: ``x_bar = ans_bar * x / ans``; 0 at a zero norm."""
    if ord is None and axis is None and is_constant(keepdims) and not keepdims:
        return x * (ans_bar / np.where(ans == 0, 1, ans))
    return norm_adjoint(ans_bar, ans, x, ord, axis, keepdims)


@defadjoint(np.trace, diff=("a",), tangent="linear")
def trace(ans_bar, ans, a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """``ans_bar`` on the diagonal (``rt.trace_adjoint``)."""
    if np.ndim(a) == 2 and is_constant(offset) and offset == 0:
        return ans_bar * np.eye(np.shape(a)[0], np.shape(a)[1], dtype=np.result_type(ans_bar, 1.0))
    return trace_adjoint(ans_bar, a, offset, axis1, axis2)


@defadjoint(np.diag, diff=("v",), tangent="linear",
            ndim=lambda ndims, statics: {1: 2, 2: 1}.get(ndims.get("v")))
def diag(ans_bar, ans, v, k=0):
    """A vector's matrix: its diagonal read back; a matrix's diagonal: scattered onto it."""
    return diag_adjoint(ans_bar, v, k)


defadjoint(diag_adjoint, diff=("ans_bar",), zero=("v",), tangent="linear")(diag_adjoint_transposed)


@defadjoint(np.linalg.inv, ndim=_ndim.same_as("a"))
def inv(ans_bar, ans, a):
    """``d(A^-1) = -A^-1 dA A^-1``, so ``A_bar = -A^-T ans_bar A^-T`` (Giles 2008, §2.2)."""
    return -np.swapaxes(ans, -1, -2) @ ans_bar @ np.swapaxes(ans, -1, -2)


@deftangent(np.linalg.inv)
def inv_tangent(ans, a, a_dot=None):
    """``d(A^-1) = -A^-1 dA A^-1`` (Giles 2008, §2.2)."""
    return -ans @ a_dot @ ans


def _decomposition_ndim(ndims, statics):
    return None


@defadjoint(np.linalg.solve, diff=("a", "b"))
def solve(ans_bar, ans, a, b):
    """``b_bar = A^-T x_bar``, ``A_bar = -b_bar x^T`` (Giles 2008, §2.3)."""
    if np.ndim(a) == 2 and np.ndim(b) == 2:
        b_bar = np.linalg.solve(a.T, ans_bar)
        return -b_bar @ ans.T, b_bar
    return solve_adjoint(ans_bar, ans, a, b, 0), solve_adjoint(ans_bar, ans, a, b, 1)


@deftangent(np.linalg.solve)
def solve_dot(ans, a, b, a_dot=None, b_dot=None):
    return solve_tangent(ans, a, b, a_dot, b_dot)


@defadjoint(np.linalg.det, ndim=lambda ndims, statics: None if ndims.get("a") is None else ndims["a"] - 2)
def det(ans_bar, ans, a):
    """``A_bar = ans_bar det(A) A^-T`` (Giles 2008, §2.2); a singular ``A`` raises NumPy's LinAlgError."""
    return logdet_adjoint(ans_bar * ans, a)


@deftangent(np.linalg.det)
def det_tangent(ans, a, a_dot=None):
    return ans * logdet_tangent(a, a_dot)


@defadjoint(np.linalg.slogdet)
def slogdet(ans_bar, ans, a):
    """``logabsdet_bar A^-T``; the sign is piecewise constant (no derivative)."""
    return slogdet_adjoint(ans_bar, a)


@deftangent(np.linalg.slogdet)
def slogdet_tangent(ans, a, a_dot=None):
    return np.zeros_like(ans[1]), logdet_tangent(a, a_dot)


@defadjoint(np.linalg.cholesky, ndim=_ndim.same_as("a"), diff=("a",))
def cholesky(ans_bar, ans, a, upper=False):
    """Murray 2016; only the triangle NumPy reads (lower, or upper with ``upper=True``) gets an adjoint."""
    return cholesky_adjoint(ans_bar, ans, a, upper)


@deftangent(np.linalg.cholesky)
def cholesky_dot(ans, a, upper=False, a_dot=None):
    return cholesky_tangent(ans, a, upper, a_dot)


@defadjoint(np.linalg.eigh, diff=("a",))
def eigh(ans_bar, ans, a, UPLO="L"):  # noqa: N803 - NumPy's name
    """Giles 2008, §3.1; eigenvectors' adjoints refuse a repeated eigenvalue at run time."""
    return eigh_adjoint(ans_bar, ans, a, UPLO)


@deftangent(np.linalg.eigh)
def eigh_dot(ans, a, UPLO="L", a_dot=None):  # noqa: N803
    return eigh_tangent(ans, a, UPLO, a_dot)


def _svd_refuse(statics):
    if statics.get("hermitian", False) is not False:
        return ("srcgrad differentiates `np.linalg.svd` with `hermitian=False` only",
                "drop hermitian=True (or use `np.linalg.eigh` for a symmetric matrix)")
    return None


@defadjoint(np.linalg.svd, diff=("a",), refuse=_svd_refuse)
def svd(ans_bar, ans, a, full_matrices=True, compute_uv=True, hermitian=False):
    """Townsend 2016; singular vectors refuse repeated singular values at run time, and
    ``full_matrices=True``'s extra columns of ``U`` (rows of ``Vh``) when read."""
    return svd_adjoint(ans_bar, ans, a, full_matrices, compute_uv)


@deftangent(np.linalg.svd)
def svd_dot(ans, a, full_matrices=True, compute_uv=True, hermitian=False, a_dot=None):
    return svd_tangent(ans, a, full_matrices, compute_uv, a_dot)


def _qr_refuse(statics):
    if statics.get("mode", "reduced") not in ("reduced", "r"):
        return ("srcgrad differentiates `np.linalg.qr` with mode='reduced' (the default) or 'r' only "
                "('complete' adds columns that are any basis of a complement; 'raw' is LAPACK's storage)",
                "use mode='reduced'")
    return None


@defadjoint(np.linalg.qr, diff=("a",), refuse=_qr_refuse)
def qr(ans_bar, ans, a, mode="reduced"):
    """Walter & Lehmann 2018 (tall and square), Liao et al. 2019 (wide)."""
    return qr_adjoint(ans_bar, ans, a, mode)


@deftangent(np.linalg.qr)
def qr_dot(ans, a, mode="reduced", a_dot=None):
    return qr_tangent(ans, a, mode, a_dot)


def _pinv_refuse(statics):
    if statics.get("hermitian", False) is not False:
        return ("srcgrad differentiates `np.linalg.pinv` with `hermitian=False` only", "drop hermitian=True")
    return None


@defadjoint(np.linalg.pinv, diff=("a",), refuse=_pinv_refuse)
def pinv(ans_bar, ans, a, rcond=None, hermitian=False, rtol=None):
    """Golub & Pereyra 1973, for a matrix of full rank (a rank-deficient one is refused at run time)."""
    return pinv_adjoint(ans_bar, ans, a)


@deftangent(np.linalg.pinv)
def pinv_dot(ans, a, rcond=None, hermitian=False, rtol=None, a_dot=None):
    return pinv_tangent(ans, a, a_dot)


@defadjoint(np.linalg.matrix_power, ndim=_ndim.same_as("a"), diff=("a",))
def matrix_power(ans_bar, ans, a, n):
    """``sum_k (A^T)^k ans_bar (A^T)^(n-1-k)``; negative ``n`` through ``A^-1``."""
    return matrix_power_adjoint(ans_bar, a, n)


@deftangent(np.linalg.matrix_power)
def matrix_power_dot(ans, a, n, a_dot=None):
    return matrix_power_tangent(ans, a, n, a_dot)


@defadjoint(np.linalg.eigvalsh, diff=("a",))
def eigvalsh(ans_bar, ans, a, UPLO="L"):  # noqa: N803 - NumPy's name
    """``eigh``'s eigenvalues: ``A_bar = V diag(w_bar) V^T`` (Giles 2008, §3.1), in the triangle
    ``UPLO`` names; defined at repeated eigenvalues too (any eigenbasis gives the same sum)."""
    v = np.linalg.eigh(a, UPLO)[1]
    return from_triangle((v * np.expand_dims(ans_bar, -2)) @ np.swapaxes(v, -1, -2), UPLO == "U")


@deftangent(np.linalg.eigvalsh)
def eigvalsh_dot(ans, a, UPLO="L", a_dot=None):  # noqa: N803
    v = np.linalg.eigh(a, UPLO)[1]
    return np.sum(v * (to_symmetric(a_dot, UPLO == "U") @ v), axis=-2)


@defadjoint(np.linalg.multi_dot, diff=("arrays",), sequence=("arrays",), tangent="bilinear")
def multi_dot(ans_bar, ans, arrays, *, out=None):
    """Each factor gets the product of the others' transposes around ``ans_bar`` (Giles 2008,
    §2.2); tangents: the sum of the products with one factor's tangent.  Two or three
    factors as ``np.dot``'s adjoints (so ``hvp`` follows); more through
    ``rt.multi_dot_adjoint`` (whose second derivatives forward mode refuses)."""
    if len(arrays) == 2:
        return [dot_lhs(ans_bar, arrays[0], arrays[1]), dot_rhs(ans_bar, arrays[0], arrays[1])]
    if len(arrays) == 3:
        rest = np.dot(arrays[1], arrays[2])
        rest_bar = dot_rhs(ans_bar, arrays[0], rest)
        return [dot_lhs(ans_bar, arrays[0], rest), dot_lhs(rest_bar, arrays[1], arrays[2]),
                dot_rhs(rest_bar, arrays[1], arrays[2])]
    return multi_dot_adjoint(ans_bar, arrays)


def _cov_refuse(statics):
    for name in ("y", "fweights", "aweights", "dtype"):
        if statics.get(name, None) is not None:
            return (f"srcgrad differentiates `np.cov`/`np.corrcoef` without `{name}=`",
                    "stack the variables first: `np.cov(np.vstack([m, y]))`" if name == "y"
                    else f"leave out {name}")
    return None


@defadjoint(np.cov, diff=("m",), refuse=_cov_refuse)
def cov(ans_bar, ans, m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    """``X_c X_c^T / (N - ddof)``: ``X_bar = (G + G^T) X_c / (N - ddof)`` (``rt.cov_adjoint``)."""
    return cov_adjoint(ans_bar, m, rowvar, bias, ddof)


@deftangent(np.cov)
def cov_dot(ans, m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
            dtype=None, m_dot=None):
    return cov_tangent(m_dot, m, rowvar, bias, ddof)


@defadjoint(np.corrcoef, diff=("x",), refuse=_cov_refuse)
def corrcoef(ans_bar, ans, x, y=None, rowvar=True, *, dtype=None):
    """``C_ij / sqrt(C_ii C_jj)`` of ``C = np.cov(x)`` (``rt.corrcoef_adjoint``)."""
    return corrcoef_adjoint(ans_bar, ans, x, rowvar)


@deftangent(np.corrcoef)
def corrcoef_dot(ans, x, y=None, rowvar=True, *, dtype=None, x_dot=None):
    return corrcoef_tangent(x_dot, ans, x, rowvar)


@defadjoint(np.linalg.lstsq, diff=("a", "b"))
def lstsq(ans_bar, ans, a, b, rcond=None):
    """``x = A^+ b`` of a full-rank ``a`` (a rank-deficient one is refused at run time), its
    residuals and singular values (``rt.lstsq_adjoint``); ``rank`` has none."""
    return lstsq_adjoint(ans_bar, ans, a, b, 0), lstsq_adjoint(ans_bar, ans, a, b, 1)


@deftangent(np.linalg.lstsq)
def lstsq_dot(ans, a, b, rcond=None, a_dot=None, b_dot=None):
    return lstsq_tangent(ans, a, b, a_dot, b_dot)
