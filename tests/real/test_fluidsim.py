"""HIPS autograd examples/fluidsim/fluidsim.py and fluidsim/wing.py: Jos Stam's stable
fluids (semi-Lagrangian advection by floor/astype(int)/mod indexing, Gauss-Seidel
projection by np.roll), differentiated through the whole simulation with
value_and_grad for scipy's CG.  fluidsim.py's images (init_smoke.png, skull.png) are
not in the corpus: smooth blobs on a 16 x 16 grid stand in for them."""
import numpy as np
import pytest
import srcgrad.errors

from .conftest import assert_close, load, main_block

N, STEPS = 16, 3  # (fluidsim.py: the images' size, 100 steps; wing.py: 40 x 60, 20 steps)

def _blob(i0, j0):
    ii, jj = np.meshgrid(np.arange(N), np.arange(N))
    return np.exp(-((ii - i0) ** 2 + (jj - j0) ** 2) / 8.0)


def _fluidsim(flavour):
    skip = ("imread", "plt.", "fig = ", "ax = fig", "def callback", "result = minimize(", "result.x",
            "simulate(init_vx", "os.system", 'print("Rendering', 'print("Converting')
    ns = main_block(load("fluidsim_fluidsim", flavour), skip=skip,
                    before=dict(init_smoke=_blob(5.0, 8.0), target=_blob(10.0, 8.0)))
    ns["simulation_timesteps"] = STEPS
    return ns


def _wing(flavour):
    skip = ("plt.", "fig = ", "ax = fig", "def callback", "callback(init", "result = minimize(",
            "final_occlusion", "os.system", 'print("Rendering', 'print("Converting', 'print("Optimizing')
    ns = main_block(load("fluidsim_wing", flavour), skip=skip)
    ns["simulation_timesteps"] = STEPS
    return ns


def _fields(seed, shape):
    rs = np.random.RandomState(seed)
    return rs.rand(*shape), rs.randn(*shape), rs.randn(*shape)


@pytest.mark.parametrize("name", ["fluidsim_fluidsim", "fluidsim_wing"])
def test_fluidsim_advect_gradient(name):
    """advect alone (what simulate calls three times a step), in both programs."""
    f0, vx0, vy0 = _fields(0, (N, N))
    results = []
    for m in (load(name), load(name, "autograd")):
        loss = lambda vx, vy: m.np.sum(m.advect(f0, vx, vy) ** 2) + m.np.sum(m.advect(vx, vx, vy) * f0)
        results.append(m.value_and_grad(loss, (0, 1))(vx0, vy0))
    assert_close(results[0], results[1])


def test_wing_project_and_advect_gradient():
    """wing.py's projection (50 Gauss-Seidel sweeps through make_continuous) and advection,
    a step of simulate less its plotting, differentiated in the occlusion."""
    results = []
    for m in (load("fluidsim_wing"), load("fluidsim_wing", "autograd")):
        vx, vy = np.ones((m.rows, m.cols)), np.zeros((m.rows, m.cols))

        def step(params):
            occlusion = m.sigmoid(m.np.reshape(params, (m.rows, m.cols)))
            vx1, vy1 = m.project(vx, vy, occlusion)
            vx2, vy2 = m.project(m.advect(vx1, vx1, vy1), m.advect(vy1, vx1, vy1), occlusion)
            return m.np.mean(vy2) / m.np.mean(1.0 - vx2)

        results.append(m.value_and_grad(step)(np.random.RandomState(1).randn(m.rows * m.cols)))
    assert_close(results[0], results[1])


def test_fluidsim_objective_value_and_grad():
    ours, theirs = _fluidsim("srcgrad"), _fluidsim("autograd")
    x0 = 0.5 * np.random.RandomState(0).randn(2 * N * N)
    assert_close(ours["value_and_grad"](ours["objective"])(x0),
                 theirs["value_and_grad"](theirs["objective"])(x0))


def test_fluidsim_project_gradient():
    _, vx0, vy0 = _fields(1, (N, N))
    results = []
    for m in (load("fluidsim_fluidsim"), load("fluidsim_fluidsim", "autograd")):
        loss = lambda vx, vy: m.np.sum(m.project(vx * 1.0, vy * 1.0)[0] ** 2)
        results.append(m.value_and_grad(loss, (0, 1))(vx0, vy0))  # (autograd: both boxes, for `-=`)
    assert_close(results[0], results[1])


def test_wing_objective_value_and_grad():
    ours, theirs = _wing("srcgrad"), _wing("autograd")
    x0 = ours["init_occlusion"]
    assert_close(ours["value_and_grad"](ours["objective"])(x0),
                 theirs["value_and_grad"](theirs["objective"])(x0))
