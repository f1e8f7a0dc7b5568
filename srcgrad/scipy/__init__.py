"""SciPy-like functions that HIPS autograd has and SciPy lacks, under autograd's names
(``autograd.scipy.signal.convolve`` is :func:`srcgrad.scipy.signal.convolve`), so its
programs run with their import lines changed.  Each needs SciPy, whose rule family its
rule joins (``rules/scipy_signal.py``)."""
