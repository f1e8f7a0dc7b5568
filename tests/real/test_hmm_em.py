"""HIPS autograd examples/hmm_em.py: EM for an HMM, the E step as the gradient of the log
partition function (value_and_grad over a list of natural parameters, summed over
sequences with map and functools.partial); trained on lines of a program's source."""
import numpy as np
import pytest

from .conftest import PROGRAMS, assert_close, load

NUM_STATES, MAX_LINES = 4, 3  # (the example: 20 states, 60 lines of lstm.py)


def _setup(m):
    m.np.random.seed(0)
    train_inputs, num_outputs = m.build_dataset(str(PROGRAMS / "lstm.py"), max_lines=MAX_LINES)
    return train_inputs, m.initialize_hmm_parameters(NUM_STATES, num_outputs)


@pytest.mark.parametrize("one_sequence", [False, True])
def test_hmm_e_step_gradient(one_sequence):
    results = []
    for m in (load("hmm_em"), load("hmm_em", "autograd")):
        data, params = _setup(m)
        natural_params = list(map(np.log, params))
        results.append(m.vgrad(m.log_partition_function)(natural_params, data[0] if one_sequence else data))
    assert_close(results[0], results[1])


def test_hmm_em_runs():
    results = []
    for m in (load("hmm_em"), load("hmm_em", "autograd")):
        data, params = _setup(m)
        loglikes = []
        results.append((m.EM(params, data, lambda loglike, params: loglikes.append(loglike)), loglikes))
    assert_close(results[0], results[1])
