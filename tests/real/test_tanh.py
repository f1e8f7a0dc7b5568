"""HIPS autograd examples/tanh.py: elementwise_grad of tanh nested four deep; the example runs
on import (it plots), so the curves it plots are recorded and compared."""
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
from .conftest import assert_close, load


def _load_recording_plots(flavour, directory):
    curves = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plt, "plot", lambda *args, **kwargs: curves.append([np.asarray(a) for a in args]))
        mp.setattr(plt, "show", lambda *args, **kwargs: None)
        mp.chdir(directory)  # it saves tanh.png
        module = load("tanh", flavour)
    return module, curves


def test_tanh_plotted_derivatives(tmp_path):
    matplotlib.use("Agg")
    ours, ours_curves = _load_recording_plots("srcgrad", tmp_path)
    theirs, theirs_curves = _load_recording_plots("autograd", tmp_path)
    assert len(ours_curves) == len(theirs_curves) == 5  # tanh and its derivatives 1 to 4
    assert_close(ours_curves, theirs_curves, path="curves")

