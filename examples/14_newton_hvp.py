"""Second order: Hessian-vector products and damped Newton steps on the tutorial's two-layer network.

``srcgrad.hvp(loss, wrt=("w1", "w2"))`` returns ``H v``, the Hessian of the
loss times a vector, exactly and for about the cost of two gradients: srcgrad
generates the gradient's code, then runs forward mode over *that* code
(forward-over-reverse, Pearlmutter 1994).  Both are ordinary Python, and the
script prints the second one (``srcgrad.show``): every line of the gradient
code followed by its tangent (``w2_bar_dot = ...``).

With ``H v`` a Newton step needs no Hessian matrix: conjugate gradients solve
``(H + damping I) p = -g`` from products alone (Newton-CG, Nocedal & Wright
2006, §7.1).  The script compares a few such steps with as many gradient
descent steps on the same data.

Run it from the repository root::

    python examples/14_newton_hvp.py           # 10 Newton steps
    python examples/14_newton_hvp.py --quick   # 5 (also SRCGRAD_QUICK=1), as CI does

It checks ``H v`` against central differences of ``srcgrad.grad``, that
``srcgrad.hessian`` is symmetric and agrees with ``hvp`` column by column, and
that the Newton steps bring the loss below half of where as many gradient
steps (step size 0.05) leave it; it exits with a message starting ``FAILED:`` otherwise, and
writes ``out/14_newton_hvp_code.py`` (the forward-over-reverse code).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from _gallery import check, quick_by_default

try:
    import srcgrad
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import srcgrad

N, D_IN, H, D_OUT = 64, 30, 16, 5


def loss(w1, w2, x, y):
    """The tutorial's two-layer network (examples/01), with tanh so that H is not piecewise 0."""
    h = np.tanh(x @ w1)
    y_pred = h @ w2
    return np.sum((y_pred - y) ** 2) / len(x)


def conjugate_gradients(hvp, g, damping, iterations=50, tolerance=1e-10):
    """``p`` with ``(H + damping I) p = -g`` by conjugate gradients (Hestenes & Stiefel 1952),
    ``H`` seen only through ``hvp``; ``g`` and ``p`` are tuples of arrays."""
    def dot(a, b):
        return sum(float(np.sum(u * v)) for u, v in zip(a, b))

    p = tuple(np.zeros_like(gi) for gi in g)
    r = tuple(-gi for gi in g)
    d = r
    rr = dot(r, r)
    for _ in range(iterations):
        hd = tuple(h + damping * di for h, di in zip(hvp(d), d))
        curvature = dot(d, hd)
        if curvature <= 0:  # negative curvature along d (H is indefinite): stop there
            break
        alpha = rr / curvature
        p = tuple(pi + alpha * di for pi, di in zip(p, d))
        r = tuple(ri - alpha * hi for ri, hi in zip(r, hd))
        rr, previous = dot(r, r), rr
        if rr < tolerance:
            break
        d = tuple(ri + rr / previous * di for ri, di in zip(r, d))
    return p


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", default=quick_by_default(), help="5 Newton steps")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "out",
                        help="where to write the generated code")
    args = parser.parse_args(argv)
    steps = 5 if args.quick else 10

    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((N, D_IN)), rng.standard_normal((N, D_OUT))
    w1, w2 = 0.3 * rng.standard_normal((D_IN, H)), 0.3 * rng.standard_normal((H, D_OUT))

    grad = srcgrad.grad(loss, wrt=("w1", "w2"))
    hvp = srcgrad.hvp(loss, wrt=("w1", "w2"))

    # ---- the code: forward mode over the gradient's code ----
    v = (rng.standard_normal(w1.shape), rng.standard_normal(w2.shape))
    code = srcgrad.source(hvp, w1, w2, x, y, v)
    print(code)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "14_newton_hvp_code.py").write_text(code)

    # ---- checks: H v against differences of the gradient; the Hessian symmetric ----
    eps = 1e-6
    plus, minus = grad(w1 + eps * v[0], w2 + eps * v[1], x, y), grad(w1 - eps * v[0], w2 - eps * v[1], x, y)
    hv = hvp(w1, w2, x, y, v)
    for exact, p, m in zip(hv, plus, minus):
        difference = (p - m) / (2 * eps)
        check(np.allclose(exact, difference, rtol=1e-5, atol=1e-7), "H v disagrees with differences of grad")
    print("H v agrees with central differences of srcgrad.grad")
    hessian = srcgrad.hessian(loss, wrt="w2")(w1, w2, x, y)  # (H, D_OUT, H, D_OUT)
    matrix = hessian.reshape(w2.size, w2.size)
    check(np.allclose(matrix, matrix.T, atol=1e-12), "the Hessian is not symmetric")
    e = np.zeros(w2.shape)
    e[3, 1] = 1.0
    column = srcgrad.hvp(loss, wrt="w2")(w1, w2, x, y, e)
    check(np.allclose(hessian[:, :, 3, 1], column, atol=1e-12), "hessian and hvp disagree")
    print(f"hessian wrt w2: {matrix.shape}, symmetric, its columns the hvp of unit vectors; "
          f"eigenvalues in [{np.linalg.eigvalsh(matrix).min():.3g}, {np.linalg.eigvalsh(matrix).max():.3g}]")

    # ---- damped Newton-CG against gradient descent, the same number of steps ----
    # The damping adapts (Levenberg 1944, Marquardt 1963): a step that raises the loss is
    # taken again with more damping, nearer a gradient step; one that lowers it, with less.
    start = loss(w1, w2, x, y)
    n1, n2, damping = w1.copy(), w2.copy(), 1.0
    for step in range(steps):
        g, now = grad(n1, n2, x, y), loss(n1, n2, x, y)
        while True:
            p = conjugate_gradients(lambda d, n1=n1, n2=n2: hvp(n1, n2, x, y, d), g, damping)
            if loss(n1 + p[0], n2 + p[1], x, y) < now or damping > 1e6:
                break
            damping *= 10
        n1, n2, damping = n1 + p[0], n2 + p[1], damping / 3
        print(f"Newton step {step + 1}: loss {loss(n1, n2, x, y):.6f} (damping {damping * 3:.3g})")
    g1, g2 = w1.copy(), w2.copy()
    for _ in range(steps):
        d1, d2 = grad(g1, g2, x, y)
        g1, g2 = g1 - 0.05 * d1, g2 - 0.05 * d2
    newton, descent = loss(n1, n2, x, y), loss(g1, g2, x, y)
    print(f"loss from {start:.4f}: {steps} damped Newton-CG steps {newton:.6f}, {steps} gradient steps "
          f"{descent:.6f}")
    check(newton < descent / 2, "the Newton steps did not bring the loss below half of gradient descent's")
    print("14_newton_hvp: all checks passed")


if __name__ == "__main__":
    main()
