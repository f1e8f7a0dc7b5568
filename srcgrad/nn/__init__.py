"""Neural-network layers, losses and initialisers, written in ordinary NumPy
that srcgrad differentiates (the library eats its own cooking).

A model is a plain object: ``grad(loss)(model, x, y)`` returns a gradient of
the same structure (``g.linear1.weight``).
"""
from . import functional, init
from .functional import cross_entropy, mse_loss, nll_loss
from .layers import (AvgPool2d, Conv2d, Dropout, Flatten, Linear, MaxPool2d, ReLU, RNNCell, Sequential,
                     Sigmoid, Tanh)
from .module import Module

__all__ = [
    "Module", "Sequential", "Linear", "Conv2d", "MaxPool2d", "AvgPool2d", "Flatten", "ReLU", "Tanh",
    "Sigmoid", "Dropout", "RNNCell", "mse_loss", "cross_entropy", "nll_loss", "functional", "init",
]
