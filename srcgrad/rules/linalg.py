"""Linear algebra: ``dot vdot inner outer kron cross tensordot einsum linalg.norm trace
diag linalg.inv``.

Matrix-product adjoints follow Giles (2008), "Collected matrix derivative
results for forward and reverse mode AD": for ``C = A B``,
``A_bar = C_bar B^T`` and ``B_bar = A^T C_bar``.
"""
from __future__ import annotations

import functools

import numpy as np

from ..runtime import (diag_adjoint, dot_lhs, dot_rhs, einsum_adjoint_subscripts, einsum_adjoints,
                       inner_adjoint, is_constant, kron_adjoint, norm_adjoint, tensordot_adjoint, trace_adjoint, unbroadcast)
from . import _ndim
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
        return ans_bar * np.eye(*np.shape(a), dtype=np.result_type(ans_bar, 1.0))
    return trace_adjoint(ans_bar, a, offset, axis1, axis2)


@defadjoint(np.diag, diff=("v",), tangent="linear")
def diag(ans_bar, ans, v, k=0):
    """A vector's matrix: its diagonal read back; a matrix's diagonal: scattered onto it."""
    return diag_adjoint(ans_bar, v, k)


@defadjoint(np.linalg.inv, ndim=_ndim.same_as("a"))
def inv(ans_bar, ans, a):
    """``d(A^-1) = -A^-1 dA A^-1``, so ``A_bar = -A^-T ans_bar A^-T`` (Giles 2008, §2.2)."""
    return -np.swapaxes(ans, -1, -2) @ ans_bar @ np.swapaxes(ans, -1, -2)


@deftangent(np.linalg.inv)
def inv_tangent(ans, a, a_dot=None):
    """``d(A^-1) = -A^-1 dA A^-1`` (Giles 2008, §2.2)."""
    return -ans @ a_dot @ ans
