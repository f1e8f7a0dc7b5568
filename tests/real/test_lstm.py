"""HIPS autograd examples/lstm.py: a character LSTM trained on its own source (helpers from rnn.py)."""
import numpy as np
from .conftest import PROGRAMS, assert_close, load

NUM_CHARS, SEQUENCE_LENGTH, MAX_LINES, STATE_SIZE = 128, 10, 12, 8  # (the example: 128, 30, 60, 40)



def _setup(m):
    text_filename = str(PROGRAMS / "lstm.py")
    train_inputs = m.build_dataset(text_filename, sequence_length=SEQUENCE_LENGTH, alphabet_size=NUM_CHARS,
                                   max_lines=MAX_LINES)
    init_params = m.init_lstm_params(input_size=NUM_CHARS, output_size=NUM_CHARS, state_size=STATE_SIZE,
                                     param_scale=0.01)

    def training_loss(params, iter):
        return -m.lstm_log_likelihood(params, train_inputs, train_inputs)

    return init_params, training_loss


def test_lstm_gradient():
    ours, theirs = load("lstm"), load("lstm", "autograd")
    p, loss = _setup(ours)
    p2, loss2 = _setup(theirs)
    assert_close(ours.grad(loss)(p, 0), theirs.grad(loss2)(p2, 0))


def test_lstm_adam_steps():
    ours, theirs = load("lstm"), load("lstm", "autograd")
    results = []
    for m in (ours, theirs):
        p, loss = _setup(m)
        trained = m.adam(m.grad(loss), p, step_size=0.1, num_iters=3)
        results.append((trained, loss(trained, 0)))
    assert_close(results[0][0], results[1][0])
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6)
