"""HIPS autograd examples/sinusoid.py: grad and grad(grad) of sin and of a Taylor series with a
data-dependent `break`, mapped over points; the example runs on import (it plots), so the
curves it plots are recorded and compared."""
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
from .conftest import assert_close, load


def _load_recording_plots(flavour, directory):
    curves = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plt, "plot", lambda *args, **kwargs: curves.append([np.asarray(a) for a in args]))
        mp.chdir(directory)  # it saves sinusoid.png and sinusoid_taylor.png
        module = load("sinusoid", flavour)
    return module, curves


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    matplotlib.use("Agg")
    return (_load_recording_plots("srcgrad", tmp_path_factory.mktemp("ours")),
            _load_recording_plots("autograd", tmp_path_factory.mktemp("theirs")))


def test_sinusoid_plotted_derivatives(loaded):
    (_, ours), (_, theirs) = loaded
    assert len(ours) == len(theirs) == 2  # sin and its Taylor series: x, f, x, f', x, f''
    assert_close(ours, theirs, path="curves")


def test_sinusoid_taylor_derivatives(loaded):
    (ours, _), (theirs, _) = loaded
    for x in (-3.0, 0.25, 2.0):
        np.testing.assert_allclose(ours.d_fun(x), theirs.d_fun(x), rtol=1e-6)
        np.testing.assert_allclose(ours.dd_fun(x), theirs.dd_fun(x), rtol=1e-6)
