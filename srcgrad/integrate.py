"""``odeint`` (HIPS autograd's ``autograd.scipy.integrate.odeint``): SciPy's LSODA
integrator, differentiable in the initial state, the times and the arguments of the
dynamics by the adjoint method.

The adjoint is an augmented ODE solved backwards in time with the same integrator
(Pontryagin's adjoint equations in the form of Chen, Rubanova, Bettencourt &
Duvenaud 2018, "Neural Ordinary Differential Equations", Algorithm 1).  The
vector-Jacobian products of the dynamics it needs come from srcgrad itself
(:func:`srcgrad.vjp` of ``func``), so this module sits above the API: it registers
``odeint``'s rule in the registry when it is imported, which any code calling
``odeint`` has done.
"""
from __future__ import annotations

import weakref

import numpy as np
import optree
import scipy.integrate

from . import api, errors
from .rules.registry import defadjoint


def odeint(func, y0, t, args=(), **kwargs):
    """Integrate ``dy/dt = func(y, t, *args)`` from ``y(t[0]) = y0`` (``scipy.integrate.odeint``).

    Args:
        func: the dynamics, ``func(y, t, *args) -> dy/dt`` of ``y``'s shape.  Differentiated
            by srcgrad when a gradient is asked for, so it must be a function srcgrad
            differentiates (your own ``def``).
        y0: the initial state, a 1-D float array of length ``D``.
        t: the times, a 1-D array of length ``T``, monotonic; ``t[0]`` is ``y0``'s time.
        args: a tuple of further arguments to ``func``: arrays, numbers, or structures of
            them (lists, tuples, dicts), as many as ``func`` takes after ``t``.
        **kwargs: SciPy's options (``rtol``, ``atol``, ``mxstep``, ...), used for the
            forward integration and for the adjoint one alike.  ``full_output`` is refused.

    Returns:
        A ``(T, D)`` float64 array: the state at each time (row 0 is ``y0``).

    Raises:
        ValueError: ``full_output=True`` (its second output has no derivative).

    The gradient with respect to ``y0``, ``t`` and ``args`` is the adjoint method's
    (:func:`odeint_adjoint`).  Forward mode (``srcgrad.jvp``) through ``odeint`` is not
    provided.
    """
    if kwargs.get("full_output"):
        raise ValueError("srcgrad's odeint returns the states only: full_output=True is not supported")
    return scipy.integrate.odeint(func, y0, t, args=tuple(args), **kwargs)


def odeint_adjoint(ans_bar, ans, func, y0, t, args=(), **kwargs):
    """Adjoints of ``y0``, ``t`` and ``args`` in ``ans = odeint(func, y0, t, args)``.

    Chen et al. 2018, Algorithm 1, applied interval by interval from the last time to
    the first.  On each ``[t[i-1], t[i]]`` the augmented state ``s = (y, a, a_t, a_args)``
    is integrated backwards from ``t[i]`` with

        dy/dt = f(y, t),   da/dt = -a·∂f/∂y,   da_t/dt = -a·∂f/∂t,   da_args/dt = -a·∂f/∂args

    (``f = func(., ., *args)``; the three products are one vector-Jacobian product of
    ``f`` with the cotangent ``-a``).  It starts at the last time with ``y = ans[-1]``,
    ``a = ans_bar[-1]``, ``a_args = 0``; at each output time ``t[i]`` the output's own
    adjoint is added to ``a``, and its time gets ``t_bar[i] = ans_bar[i]·f(ans[i], t[i])``
    (``∂ans[i]/∂t[i] = f``), which is also taken from ``a_t``.  At ``t[0]``:
    ``y0_bar = a``, ``t_bar[0] = a_t`` and ``args_bar = a_args``.

    Args:
        ans_bar: ``(T, D)``, the adjoint of ``ans``.
        ans: ``(T, D)``, the states ``odeint`` returned.
        func, y0, t, args, **kwargs: as given to :func:`odeint`.

    Returns:
        ``(y0_bar, t_bar, args_bar)``: ``y0``'s shape, ``t``'s shape (float64), and the
        structure of ``args`` (a leaf without a float dtype gets zeros).
    """
    ans_bar = np.asarray(ans_bar, dtype=np.float64)
    steps, size = np.shape(ans)
    args = tuple(args)
    leaves, spec = optree.tree_flatten(args)
    shapes = [np.shape(leaf) for leaf in leaves]
    ends = np.cumsum([int(np.size(leaf)) for leaf in leaves]).tolist()
    flat_args = np.concatenate([np.ravel(leaf).astype(np.float64) for leaf in leaves]) if leaves else np.zeros(0)
    differentiated = _pullback_of(func, len(args))

    def flat(adjoints, like):
        """The adjoints of ``like``'s leaves raveled in ``flat_args``' order (zeros for None)."""
        parts = optree.tree_flatten(like)[0]
        found = optree.tree_flatten(adjoints, none_is_leaf=True)[0] if adjoints is not None else []
        if len(found) != len(parts):  # an adjoint given in another form: leaf by leaf through the structure
            found = optree.tree_map(lambda leaf, g: g, like, adjoints, none_is_leaf=True)
            found = optree.tree_flatten(found, none_is_leaf=True)[0]
        return np.concatenate([np.zeros(np.size(x)) if g is None else np.ravel(np.broadcast_to(g, np.shape(x)))
                               for g, x in zip(found, parts)]) if parts else np.zeros(0)

    def augmented(state, time, flat_args):
        y, a = state[:size], state[size:2 * size]
        rebuilt = optree.tree_unflatten(spec, [piece.reshape(shape) for piece, shape in
                                               zip(np.split(flat_args, ends[:-1]), shapes)])
        dy_dt, pullback = differentiated(y, time, *rebuilt)
        adjoints = pullback(-a)
        a_dot, t_dot = np.ravel(adjoints[0]), np.sum(adjoints[1])
        return np.concatenate([np.ravel(dy_dt), a_dot, [t_dot], flat(adjoints[2:], args)])

    t = np.asarray(t, dtype=np.float64)
    a, a_t, a_args = ans_bar[-1], 0.0, np.zeros(flat_args.shape)
    t_bar = np.zeros(steps)
    for i in range(steps - 1, 0, -1):
        t_bar[i] = np.dot(np.ravel(func(ans[i], t[i], *args)), ans_bar[i])
        a_t = a_t - t_bar[i]
        start = np.concatenate([ans[i], a, [a_t], a_args])
        end = scipy.integrate.odeint(augmented, start, np.array([t[i], t[i - 1]]), args=(flat_args,),
                                     **kwargs)[1]
        a, a_t, a_args = end[size:2 * size] + ans_bar[i - 1], end[2 * size], end[2 * size + 1:]
    t_bar[0] = a_t
    args_bar = optree.tree_unflatten(spec, [piece.reshape(shape) for piece, shape in
                                            zip(np.split(a_args, ends[:-1]), shapes)])
    return np.reshape(a, np.shape(y0)), np.reshape(t_bar, np.shape(t)), args_bar


_PULLBACKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # func -> {len(args): its vjp}


def _pullback_of(func, count):
    """``srcgrad.vjp`` of ``func`` with respect to ``y``, ``t`` and its ``count`` arguments
    after them, one per function (compiled once per argument ranks, as any vjp)."""
    wrt = tuple(range(2 + count))
    try:
        made = _PULLBACKS.setdefault(func, {})
    except TypeError:  # (not weakly referable: made again each time)
        return api.vjp(func, wrt)
    if count not in made:
        made[count] = api.vjp(func, wrt)
    return made[count]


def _odeint_tangent(ans, func, y0, t, args=(), y0_dot=None, t_dot=None, args_dot=None, **kwargs):
    """Forward mode through ``odeint`` (forward sensitivities) is not written yet: refused."""
    raise errors.UnsupportedSyntaxError(
        "srcgrad differentiates `odeint` in reverse mode only (the adjoint method): forward mode "
        "through it (jvp, hvp, hessian, grad of grad) is not supported yet", None,
        "take the derivative with srcgrad.grad / vjp, or a second derivative by finite differences of it")


@defadjoint(odeint, diff=("y0", "t", "args"), tangent=_odeint_tangent)
def odeint_rule(ans_bar, ans, func, y0, t, args=(), **kwargs):
    """``ans = odeint(func, y0, t, args, **kwargs)``: the adjoint method (:func:`odeint_adjoint`)."""
    return odeint_adjoint(ans_bar, ans, func, y0, t, args, **kwargs)
