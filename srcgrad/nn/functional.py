"""Losses and activations as plain functions (differentiated by srcgrad).

Shapes: ``logits`` (N, C) float, ``labels`` (N,) int in [0, C).
"""
from __future__ import annotations

import numpy as np

from ..runtime import stop_gradient


def relu(x):
    return np.maximum(x, 0)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def log_softmax(logits):
    """log softmax along the last axis, stable: shift by the maximum first.

    The shift changes no value (log-softmax is invariant to adding a constant per
    row), so its derivative is exactly zero: ``stop_gradient`` says so, and the
    backward sweep skips the maximum's adjoint."""
    shifted = logits - stop_gradient(np.max(logits, axis=-1, keepdims=True))
    return shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))


def mse_loss(prediction, target):
    """Mean squared error over all elements: ``mean((prediction - target)**2)``."""
    return np.mean((prediction - target) ** 2)


def nll_loss(log_probabilities, labels):
    """Mean negative log-likelihood of the labels: ``-mean(logp[i, labels[i]])``."""
    n = log_probabilities.shape[0]
    return -np.mean(log_probabilities[np.arange(n), labels])


def cross_entropy(logits, labels):
    """``nll_loss(log_softmax(logits), labels)``, computed stably (the shift as in ``log_softmax``)."""
    shifted = logits - stop_gradient(np.max(logits, axis=-1, keepdims=True))
    log_probabilities = shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))
    n = logits.shape[0]
    return -np.mean(log_probabilities[np.arange(n), labels])
