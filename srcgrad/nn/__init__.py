"""Neural-network layers, losses and initialisers, written in ordinary NumPy
that srcgrad differentiates (the library eats its own cooking), with PyTorch's
names, constructor arguments, defaults, initialisation and parameter names.

A model is a plain object: ``grad(loss)(model, x, y)`` returns a gradient of
the same structure (``g.linear1.weight``), which ``nn.utils.clip_grad_norm_``
and ``clip_grad_value_`` clip in place.
"""
from . import functional, init, utils
from .functional import (binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy, l1_loss,
                         mse_loss, nll_loss, smooth_l1_loss)
from .layers import (ELU, GELU, AdaptiveAvgPool2d, AvgPool2d, BatchNorm1d, BatchNorm2d, Conv1d, Conv2d,
                     ConvTranspose2d, Dropout, Dropout2d, Embedding, Flatten, LayerNorm, LeakyReLU, Linear,
                     LogSoftmax, MaxPool2d, ReLU, Sequential, Sigmoid, Softmax, Tanh)
from .loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss,
                   SmoothL1Loss)
from .module import Module
from .recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from .transformer import (MultiheadAttention, TransformerEncoder, TransformerEncoderLayer,
                          generate_square_subsequent_mask)

__all__ = [
    "Module", "Sequential", "Linear", "Conv1d", "Conv2d", "ConvTranspose2d", "MaxPool2d", "AvgPool2d",
    "AdaptiveAvgPool2d", "Flatten", "ReLU", "Tanh", "Sigmoid", "LeakyReLU", "ELU", "GELU", "Softmax",
    "LogSoftmax", "Dropout", "Dropout2d", "Embedding", "LayerNorm", "BatchNorm1d", "BatchNorm2d", "RNNCell",
    "LSTMCell", "GRUCell", "RNN", "LSTM", "GRU", "MultiheadAttention", "TransformerEncoderLayer",
    "TransformerEncoder", "generate_square_subsequent_mask", "MSELoss", "L1Loss", "SmoothL1Loss", "NLLLoss",
    "CrossEntropyLoss", "BCELoss", "BCEWithLogitsLoss", "mse_loss", "l1_loss", "smooth_l1_loss",
    "cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "functional",
    "init", "utils",
]
