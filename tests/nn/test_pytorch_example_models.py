"""PyTorch's example models written with srcgrad.nn (``benchmarks/pytorch_examples.py``: the
MNIST CNN, the VAE, the word language model's LSTM, GRU and Transformer, DCGAN, the
LSTMCell time-sequence predictor, the MNIST RNN, the siamese ResNet-18, REINFORCE,
actor-critic, the GCN), loaded from the torch model's ``state_dict``: the loss and every
parameter's gradient equal torch's, float64 to 1e-7 and float32 to 1e-3 (relative to the
largest), and so do the buffers a training step updates (BatchNorm's running statistics), at
small sizes.  Skipped without torch."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from benchmarks import pytorch_examples  # noqa: E402


@pytest.mark.parametrize("name", pytorch_examples.NAMES)
@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-7), (np.float32, 1e-3)])
def test_gradients_equal_torchs(name, dtype, rtol):
    assert pytorch_examples.check(name, dtype, quick=True, rtol=rtol) <= rtol
