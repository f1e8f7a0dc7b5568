"""L-BFGS (Liu & Nocedal 1989) with an optional strong-Wolfe line search, as ``torch.optim.LBFGS``.

PyTorch's L-BFGS calls a *closure* that evaluates the loss again, as often as
the line search needs.  srcgrad keeps no ``.grad`` on the arrays, so here the
closure returns the loss *and* its gradient, in the parameters' structure --
exactly what :func:`srcgrad.value_and_grad` returns::

    value_and_grad = srcgrad.value_and_grad(loss)        # loss(model, x, y)
    opt = srcgrad.optim.LBFGS(model, line_search_fn="strong_wolfe")
    for _ in range(10):
        opt.step(lambda: value_and_grad(model, x, y))    # returns the first loss
"""
from __future__ import annotations

import copy
import math
import numbers
from typing import Any, Callable

import numpy as np

from .base import Optimizer, _real, _same_names

# (t, f, g, gᵀd): a step length along d, the loss there, its flat gradient and directional derivative.
_Point = tuple


class LBFGS(Optimizer):
    r"""Limited-memory BFGS: Liu & Nocedal, "On the limited memory BFGS method for large
    scale optimization", Math. Programming 45 (1989); Nocedal & Wright, *Numerical
    Optimization*, 2nd ed. (2006), Algorithms 7.4 and 7.5; with the defaults, stopping
    tests and strong-Wolfe line search PyTorch documents for ``torch.optim.LBFGS``
    (https://pytorch.org/docs/stable/generated/torch.optim.LBFGS.html, after Schmidt's
    minFunc).

    The parameters are seen as one vector θ (the arrays in the optimizer's order,
    flattened), g its gradient.  Each :meth:`step` runs up to ``max_iter`` iterations::

        s_k = θ_{k+1} - θ_k,  y_k = g_{k+1} - g_k        kept when y_kᵀs_k > 1e-10, the last
                                                         ``history_size`` pairs
        d_k = -H_k g_k          H_k by the two-loop recursion (N&W Algorithm 7.4) from
                                H_k⁰ = (sᵀy / yᵀy) I of the newest pair (N&W eq. 7.20);
                                d = -g on the very first iteration
        t_k = lr                (the first iteration of all: min(1, 1/‖g‖₁) · lr)
        t_k from the line search, if ``line_search_fn="strong_wolfe"``: the strong Wolfe
            conditions f(θ + t d) ≤ f(θ) + c₁ t gᵀd and |g(θ + t d)ᵀd| ≤ c₂ |gᵀd| with
            c₁ = 1e-4, c₂ = 0.9, by bracketing then zooming (N&W Algorithms 3.5 and 3.6)
            with the cubic interpolation of N&W eq. (3.59), within what is left of
            ``max_eval``; the zoom stops when the bracket is under 1e-9 / max|d| wide
        θ_{k+1} = θ_k + t_k d_k

    and stops early when gᵀd > -``tolerance_change`` (not a descent direction),
    ``max_eval`` evaluations were made, max|g| ≤ ``tolerance_grad``,
    max|t d| ≤ ``tolerance_change``, or the loss changed by less than
    ``tolerance_change``.  The history carries over from one ``step`` to the next.

    Args:
        params: a model (an object whose attributes hold arrays), or a dict/list/tuple
            nesting of floating-point ndarrays of any shape.  One parameter group only,
            as PyTorch's LBFGS.
        lr: step length multiplier ≥ 0 (default 1).
        max_iter: iterations per :meth:`step` (default 20).
        max_eval: closure evaluations per :meth:`step` (default ``max_iter * 5 // 4``).
        tolerance_grad: stop when max|g| ≤ this (default 1e-7).
        tolerance_change: stop when a step or a loss change is below this (default 1e-9).
        history_size: the number of (s, y) pairs kept (default 100).
        line_search_fn: None (fixed steps) or ``"strong_wolfe"``.

    State, under the first parameter's path (PyTorch's keys): ``func_evals`` and
    ``n_iter`` (counts over all steps), ``d`` and ``t`` (the last direction and step
    length), ``old_dirs`` (the y_k), ``old_stps`` (the s_k), ``ro`` (1 / y_kᵀs_k),
    ``H_diag`` (sᵀy / yᵀy), ``prev_flat_grad`` and ``prev_loss``.

    Raises:
        TypeError: a parameter is not a floating-point ndarray (names its path).
        ValueError: a hyper-parameter is out of range, or ``line_search_fn`` is neither
            None nor ``"strong_wolfe"``.
    """

    _hyper = ("lr", "max_iter", "max_eval", "tolerance_grad", "tolerance_change", "history_size",
              "line_search_fn")

    def __init__(self, params: Any, lr: float = 1, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None) -> None:
        if max_eval is None and isinstance(max_iter, numbers.Integral):
            max_eval = max_iter * 5 // 4
        super().__init__(params, lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                         tolerance_change=tolerance_change, history_size=history_size,
                         line_search_fn=line_search_fn)

    def _check_hyper(self) -> None:
        self.lr = _real("LBFGS", "lr", self.lr)
        for key in ("max_iter", "max_eval", "history_size"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"LBFGS: {key} must be a positive integer, got {value!r}")
            setattr(self, key, int(value))
        self.tolerance_grad = _real("LBFGS", "tolerance_grad", self.tolerance_grad)
        self.tolerance_change = _real("LBFGS", "tolerance_change", self.tolerance_change)
        if self.line_search_fn not in (None, "strong_wolfe"):
            raise ValueError("LBFGS: line_search_fn must be None or 'strong_wolfe', "
                             f"got {self.line_search_fn!r}")

    def step(self, closure: Callable[[], tuple[Any, Any]] | None = None) -> Any:
        """Run up to ``max_iter`` L-BFGS iterations, updating the parameters in place.

        Args:
            closure: called with no arguments, as often as the iterations and the line
                search need, with the parameters' arrays holding the point to evaluate;
                returns ``(loss, gradient)``: a real number (or 0-d array) and a gradient
                with the parameters' structure, as ``srcgrad.value_and_grad(f)(model, ...)``
                gives (a frozen parameter's gradient, None, counts as zero).

        Returns:
            the loss the first call of ``closure`` returned (at the parameters before the step).

        Raises:
            TypeError: no closure, or the closure does not return ``(loss, gradient)``.
            ValueError: the gradient's structure or shapes differ from the parameters'
                (names the path), or a hyper-parameter assigned since is invalid.  A
                closure that raises stops the step: the parameters are left at the last
                accepted iterate (a line search's trial point is undone).
        """
        if closure is None or not callable(closure):
            raise TypeError("LBFGS.step(closure): the closure, called again at each trial point, returns "
                            "(loss, gradient), as `srcgrad.value_and_grad(loss)(model, x, y)` does: write "
                            "`opt.step(lambda: value_and_grad(model, x, y))`")
        self._check_hyper()
        self._check_same_arrays()
        lr, tol_grad, tol_change = self.lr, self.tolerance_grad, self.tolerance_change
        state = self.state[self._names[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss, loss, g = self._evaluate(closure)
        self.step_count += 1
        state["func_evals"] += 1
        evals = 1
        converged = _max_abs(g) <= tol_grad
        if converged:
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs", []), state.get("old_stps", []), state.get("ro", [])
        h_diag = state.get("H_diag", 1.0)
        prev_g, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < self.max_iter:
            n_iter += 1
            state["n_iter"] += 1
            first = state["n_iter"] == 1
            if first:
                d = -g
                old_dirs, old_stps, ro, h_diag = [], [], [], 1.0
            else:
                y, s = g - prev_g, d * t
                ys = float(y @ s)
                if ys > 1e-10:                      # keep the pair only with positive curvature
                    if len(old_dirs) == self.history_size:
                        del old_dirs[0], old_stps[0], ro[0]
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / float(y @ y)
                d = _two_loop(g, old_dirs, old_stps, ro, h_diag)
            prev_g, prev_loss = g, loss
            t = min(1.0, 1.0 / float(np.sum(np.abs(g)))) * lr if first else lr
            gtd = float(g @ d)
            if gtd > -tol_change:                   # not a descent direction
                break

            if self.line_search_fn == "strong_wolfe":
                start = [p.copy() for p in self._arrays]

                def phi(step, start=start, d=d):
                    self._add(step, d)
                    try:
                        return self._evaluate(closure)[1:]
                    finally:
                        for p, p0 in zip(self._arrays, start):
                            np.copyto(p, p0)

                loss, g, t, ls_evals = _strong_wolfe(phi, t, d, loss, g, gtd, max_ls=self.max_eval - evals)
                self._add(t, d)
                converged = _max_abs(g) <= tol_grad
            else:
                self._add(t, d)
                ls_evals = 0
                if n_iter != self.max_iter:         # (the last point is evaluated by the next step)
                    _, loss, g = self._evaluate(closure)
                    converged = _max_abs(g) <= tol_grad
                    ls_evals = 1
            evals += ls_evals
            state["func_evals"] += ls_evals

            if n_iter == self.max_iter or evals >= self.max_eval or converged:
                break
            if _max_abs(d) * abs(t) <= tol_change or abs(loss - prev_loss) < tol_change:
                break

        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
                     prev_flat_grad=prev_g, prev_loss=prev_loss)
        return orig_loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Not needed (see :meth:`Optimizer.zero_grad`); the closure returns the gradient."""
        raise TypeError("LBFGS.zero_grad(): srcgrad keeps no gradients on the arrays, so there is nothing "
                        "to zero; the closure returns the gradient: `return value_and_grad(model, x, y)`")

    def state_dict(self) -> dict[str, Any]:
        """A deep copy of the hyper-parameters, step count and L-BFGS history (see :class:`LBFGS`)."""
        return {"optimizer": "LBFGS", "step": self.step_count,
                "hyper": {key: getattr(self, key) for key in self._hyper},
                "state": copy.deepcopy(self.state), "group": copy.deepcopy(self._group_extras)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from :meth:`state_dict` output (the parameters are restored separately).

        Raises:
            ValueError: the state is from another optimizer class, names other parameter
                paths, holds vectors of another length than the parameters' total size,
                or invalid hyper-parameters.
        """
        if state.get("optimizer") != "LBFGS":
            raise ValueError(f"LBFGS.load_state_dict: the state is from {state.get('optimizer')!r}, "
                             "not LBFGS")
        _same_names(self._names, list(state["state"]), "this optimizer's parameters", "the loaded state")
        size = sum(p.size for p in self._arrays)
        history = state["state"][self._names[0]]
        vectors = [history.get(k) for k in ("d", "prev_flat_grad")] + list(history.get("old_dirs", [])) \
            + list(history.get("old_stps", []))
        for v in vectors:
            if v is not None and np.shape(v) != (size,):
                raise ValueError(f"LBFGS.load_state_dict: a saved vector has shape {np.shape(v)} but the "
                                 f"parameters hold {size} values")
        saved = {key: getattr(self, key) for key in self._hyper}
        try:
            for key in self._hyper:
                setattr(self, key, state["hyper"][key])
            self._check_hyper()
        except (KeyError, ValueError):
            for key, value in saved.items():
                setattr(self, key, value)
            raise
        self.step_count = int(state["step"])
        self.state = copy.deepcopy(state["state"])
        self._group_extras = copy.deepcopy(dict(state.get("group", {})))

    # ---- helpers ----------------------------------------------------------------
    def _evaluate(self, closure: Callable) -> tuple[Any, float, np.ndarray]:
        """``(loss as returned, loss as a float, flat gradient)`` at the parameters now."""
        result = closure()
        if not (isinstance(result, (tuple, list)) and len(result) == 2):
            raise TypeError(f"LBFGS.step(closure): the closure returned {type(result).__name__}, not "
                            "(loss, gradient); srcgrad keeps no .grad on the arrays, so the closure returns "
                            "the gradient too: `return srcgrad.value_and_grad(loss)(model, x, y)`")
        loss, grads = result
        slots = self._match(grads)
        flat = np.concatenate([np.zeros(p.size, p.dtype) if g is None else g.reshape(-1)
                               for p, g in zip(self._arrays, slots)])
        return loss, float(loss), flat

    def _add(self, t: float, d: np.ndarray) -> None:
        """θ ← θ + t d, each array in place."""
        offset = 0
        for p in self._arrays:
            p += t * d[offset:offset + p.size].reshape(p.shape)
            offset += p.size


def _max_abs(v: np.ndarray) -> float:
    return float(np.max(np.abs(v), initial=0.0))


def _two_loop(g: np.ndarray, ys: list, ss: list, rho: list, gamma: float) -> np.ndarray:
    """-H g by the two-loop recursion, Nocedal & Wright Algorithm 7.4, H⁰ = γ I."""
    q = -g
    alpha = [0.0] * len(ss)
    for i in reversed(range(len(ss))):
        alpha[i] = float(ss[i] @ q) * rho[i]
        q -= alpha[i] * ys[i]
    r = q * gamma
    for i in range(len(ss)):
        beta = float(ys[i] @ r) * rho[i]
        r += (alpha[i] - beta) * ss[i]
    return r


def _cubic_minimizer(t1: float, f1: float, g1: float, t2: float, f2: float, g2: float,
                     bounds: tuple[float, float] | None = None) -> float:
    """The minimizer of the cubic through (t1, f1) and (t2, f2) with slopes g1, g2, clipped to
    ``bounds`` (default: between t1 and t2); Nocedal & Wright eq. (3.59).  Where the cubic has
    no minimizer, the middle of the bounds."""
    lo, hi = bounds if bounds is not None else (min(t1, t2), max(t1, t2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (t1 - t2)
    disc = d1 * d1 - g1 * g2
    if not disc >= 0:
        return (lo + hi) / 2
    d2 = math.sqrt(disc)
    if t1 > t2:                                   # (3.59) is written for t1 < t2
        t1, g1, t2, g2 = t2, g2, t1, g1
    t = t2 - (t2 - t1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    return min(max(t, lo), hi)


def _strong_wolfe(phi: Callable[[float], tuple[float, np.ndarray]], t: float, d: np.ndarray, f: float,
                  g: np.ndarray, gtd: float, c1: float = 1e-4, c2: float = 0.9,
                  tolerance_change: float = 1e-9, max_ls: int = 25) -> tuple[float, np.ndarray, float, int]:
    """A step length along ``d`` meeting the strong Wolfe conditions: Nocedal & Wright
    Algorithm 3.5 (bracketing, extrapolating by cubic interpolation within
    [t + 0.01 (t - t_prev), 10 t]) then Algorithm 3.6 (zoom, by cubic interpolation
    kept at least a tenth of the bracket away from its ends when the last trial made too
    little progress), as minFunc and PyTorch do.  ``phi(t)`` gives (f, g) at θ + t d.

    Returns:
        ``(f, g, t, evaluations)`` at the step length found (the best point of the bracket
        when ``max_ls`` evaluations did not meet the conditions).
    """
    d_norm = _max_abs(d)
    f_new, g_new = phi(t)
    evals = 1
    new: _Point = (t, f_new, g_new, float(g_new @ d))
    prev: _Point = (0.0, f, g, gtd)
    done = False
    tries = 0
    bracket: list[_Point] = []
    # Bracketing (Algorithm 3.5): grow t until an interval holds a point meeting the conditions.
    while tries < max_ls:
        t, f_new, _, gtd_new = new
        if f_new > f + c1 * t * gtd or (tries > 1 and f_new >= prev[1]):
            bracket = [prev, new]                 # sufficient decrease fails: the minimizer is inside
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, done = [new], True           # both conditions hold
            break
        if gtd_new >= 0:
            bracket = [prev, new]                 # the slope turned: the minimizer is inside
            break
        t_next = _cubic_minimizer(prev[0], prev[1], prev[3], t, f_new, gtd_new,
                                  bounds=(t + 0.01 * (t - prev[0]), t * 10))
        prev = new
        f_next, g_next = phi(t_next)
        evals += 1
        tries += 1
        new = (t_next, f_next, g_next, float(g_next @ d))
    if tries == max_ls:
        bracket = [(0.0, f, g, gtd), new]

    # Zoom (Algorithm 3.6): shrink the bracket, keeping its lower end the best point so far.
    low, high = (0, 1) if bracket[0][1] <= bracket[-1][1] else (1, 0)
    stalled = False
    while not done and tries < max_ls:
        (t_a, f_a, _, gtd_a), (t_b, f_b, _, gtd_b) = bracket
        if abs(t_b - t_a) * d_norm < tolerance_change:
            break
        t = _cubic_minimizer(t_a, f_a, gtd_a, t_b, f_b, gtd_b)
        top, bottom = max(t_a, t_b), min(t_a, t_b)
        margin = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < margin:     # too close to an end: progress may stall
            if stalled or t >= top or t <= bottom:
                t = top - margin if abs(t - top) < abs(t - bottom) else bottom + margin
                stalled = False
            else:
                stalled = True
        else:
            stalled = False
        f_new, g_new = phi(t)
        evals += 1
        tries += 1
        new = (t, f_new, g_new, float(g_new @ d))
        if f_new > f + c1 * t * gtd or f_new >= bracket[low][1]:
            bracket[high] = new
            low, high = (0, 1) if bracket[0][1] <= bracket[1][1] else (1, 0)
        else:
            if abs(new[3]) <= -c2 * gtd:
                done = True
            elif new[3] * (bracket[high][0] - bracket[low][0]) >= 0:
                bracket[high] = bracket[low]
            bracket[low] = new
    t, f_new, g_new, _ = bracket[low]
    return f_new, g_new, t, evals
