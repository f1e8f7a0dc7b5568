"""Issue 14's rule list and the second list below, audited: every function they name has a row in ``rule_table.py``
(dot-product and finite-difference checks), or zero derivative, or is refused for a reason that
``docs/rules.md`` gives by name.  ``python -m tests.rules.test_rules_coverage`` prints the counts."""
from __future__ import annotations

import builtins
import math
import pathlib

import numpy as np
import pytest

import srcgrad
from srcgrad.rules import registry
from tests.rules.rule_table import ROWS, special, stats

NUMPY = ("log2 log10 exp2 arcsinh arccosh arctanh deg2rad rad2deg degrees radians arctan2 hypot fmax fmin "
         "sinc logaddexp2 cbrt true_divide floor_divide mod fmod abs "
         "cumsum cumprod nansum nanmean nanmax nanmin amax amin average ptp sum max "
         "flip fliplr flipud roll rot90 tile repeat pad diag diagonal trace tril triu swapaxes moveaxis "
         "atleast_1d atleast_2d atleast_3d vstack hstack dstack column_stack split array_split hsplit vsplit "
         "take "
         "take_along_axis where sort partition append insert delete squeeze kron cross outer inner "
         "vdot").split()
LINALG = "inv solve det slogdet cholesky eigh svd qr pinv matrix_power norm".split()
# The second list: functions users reach for that had no rule (statistics, series, linear algebra).
MORE_NUMPY = ("median percentile quantile nan_to_num interp convolve correlate cov corrcoef meshgrid polyval "
              "broadcast_arrays rollaxis nanstd nanvar nanprod nancumsum trapezoid ediff1d gradient heaviside "
              "searchsorted unique block").split()
MORE_LINALG = "eigvalsh multi_dot lstsq".split()
FFT = "fft ifft rfft irfft fft2".split()
SPECIAL = ("expit logit erf erfc erfinv gammaln digamma polygamma psi multigammaln beta betaln logsumexp "
           "softmax log_softmax xlogy i0 i1 ive jn yn").split()
DISTRIBUTIONS = "norm t gamma beta poisson chi2 multivariate_normal dirichlet".split()
BUILTINS = "sum max min abs pow round divmod".split()

# Named in the issue, and not differentiated: the reason, which docs/rules.md gives too.
REFUSED = {
    "np.block": "nested lists of blocks: write np.concatenate of np.concatenate",
    **{f"np.fft.{n}": "complex values: srcgrad differentiates real arrays only" for n in FFT},
}
ABSENT = {"stats.dirichlet.cdf", "stats.dirichlet.logcdf"}  # SciPy has no such method


def named() -> dict:
    """Every function issue 14 names: label -> the object (None where SciPy is missing)."""
    out = {f"np.{n}": getattr(np, n) for n in NUMPY}
    out["np.r_/np.c_"] = srcgrad.runtime.index_concat  # how the compiler writes np.r_[...] and np.c_[...]
    out.update({f"np.linalg.{n}": getattr(np.linalg, n) for n in LINALG})
    out.update({f"np.{n}": getattr(np, n) for n in MORE_NUMPY})
    out.update({f"np.linalg.{n}": getattr(np.linalg, n) for n in MORE_LINALG})
    out.update({f"np.fft.{n}": getattr(np.fft, n) for n in FFT})
    out.update({f"builtins.{n}": getattr(builtins, n) for n in BUILTINS})
    out.update({f"math.{n}": getattr(math, n) for n in dir(math)
                if not n.startswith("_") and callable(getattr(math, n))})
    if special is not None:
        out.update({f"special.{n}": getattr(special, n) for n in SPECIAL})
        from scipy import signal
        out.update({"signal.convolve": signal.convolve, "signal.correlate": signal.correlate})
        for d in DISTRIBUTIONS:
            methods = ("pmf", "logpmf") if d == "poisson" else ("pdf", "logpdf")
            for m in methods + ("cdf", "logcdf"):
                if f"stats.{d}.{m}" not in ABSENT:
                    out[f"stats.{d}.{m}"] = getattr(getattr(stats, d), m)
    return out


def status(obj) -> str:
    """``row`` (a rule with a row), ``zero`` (zero derivative), ``refused``, or ``missing`` (a rule
    without a row)."""
    tested = {registry.lookup(row.primitive).adjoint for row in ROWS}
    tested.add(registry.lookup(srcgrad.runtime.index_concat).adjoint)  # tests/soundness/test_trust_rules.py
    rule = registry.lookup(obj)
    if rule is None or not rule.differentiable:
        return "zero" if rule is not None and rule.zero_derivative else "refused"
    return "row" if rule.adjoint in tested else "missing"


NAMED = named()


@pytest.mark.parametrize("label", sorted(NAMED))
def test_each_named_function_is_tested_or_refused_by_name(label):
    found = status(NAMED[label])
    assert found != "missing", f"{label} has a rule and no row in test_rules.py"
    if found == "refused":
        assert label in REFUSED, f"{label}: no rule, and not listed as refused"
        docs = (pathlib.Path(__file__).parents[2] / "docs" / "rules.md").read_text()
        assert label.split(".", 1)[1] in docs, f"docs/rules.md does not name {label}"
    else:
        assert label not in REFUSED, f"{label} works now: take it out of REFUSED"


if __name__ == "__main__":
    counts: dict = {}
    for label, obj in sorted(NAMED.items()):
        counts.setdefault(status(obj), []).append(label)
    print(f"named in issue 14 and the second list: {len(NAMED)}")
    for kind, labels in sorted(counts.items()):
        print(f"{kind}: {len(labels)}" + ("" if kind in ("row", "zero") else f"  {' '.join(labels)}"))
