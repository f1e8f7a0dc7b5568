"""HIPS autograd examples/natural_gradient_black_box_svi.py: black_box_svi.py's objective on
a 40-dimensional posterior, its gradient preconditioned by the inverse Fisher
(natural_gradient), run through the main block's optimize_and_lls with adam and with sgd."""
import numpy as np

from .conftest import assert_close, load, main_block

SKIP = ("plt.", "for step_size", "for col", "llrange")  # the 3 x 2 runs of 200 steps, the plot
NUM_ITERS, STEP_SIZE = 10, 0.25  # (the example: 200 steps at 0.1, 0.25 and 0.5)


def _main(flavour):
    return main_block(load("natural_gradient_black_box_svi", flavour), skip=SKIP)


def _init(D):
    return np.concatenate([-1 * np.ones(D), -5 * np.ones(D)])


def test_natural_gradient_svi_gradients():
    ours, theirs = _main("srcgrad"), _main("autograd")
    x0 = _init(ours["D"])
    x1 = x0 + 0.3 * np.random.RandomState(0).randn(len(x0))
    for x in (x0, x1):
        assert_close(ours["gradient"](x, 0), theirs["gradient"](x, 0))
        assert_close(ours["natural_gradient"](x, 1), theirs["natural_gradient"](x, 1))


def test_natural_gradient_svi_adam_and_sgd_runs():
    runs = []
    for ns in (_main("srcgrad"), _main("autograd")):
        # As the example's loop body builds them, with fewer steps.
        optfun = lambda n, init, cb: ns["adam"](ns["gradient"], init, step_size=STEP_SIZE,
                                                  num_iters=NUM_ITERS, callback=cb)
        optnat = lambda n, init, cb: ns["sgd"](ns["natural_gradient"], init, step_size=STEP_SIZE,
                                                 num_iters=NUM_ITERS, callback=cb, mass=0.001)
        runs.append((ns["optimize_and_lls"](optfun), ns["optimize_and_lls"](optnat)))
    assert_close(runs[0], runs[1])
    assert runs[0][1][-1] > runs[0][1][0]  # the natural-gradient ELBO went up
