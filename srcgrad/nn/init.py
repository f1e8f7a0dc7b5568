"""Parameter initialisers and the seeded generator they draw from.

Defaults follow PyTorch's documented initialisation of ``nn.Linear`` and
``nn.Conv2d``: Kaiming-uniform with ``a = sqrt(5)``, which makes the bound
``1 / sqrt(fan_in)`` (He et al. 2015, "Delving deep into rectifiers",
§2.2), and biases uniform in ``±1 / sqrt(fan_in)``.
"""
from __future__ import annotations

import math

import numpy as np

_generator = np.random.default_rng(0)


def manual_seed(seed: int) -> np.random.Generator:
    """Reseed, in place, the generator that layers draw their initial parameters from and
    that ``Dropout`` layers made without a generator of their own draw their masks from
    (as ``torch.manual_seed``): layers made before the call see the new seed too."""
    _generator.bit_generator.state = np.random.default_rng(seed).bit_generator.state
    return _generator


def generator() -> np.random.Generator:
    return _generator


def fan_in(shape) -> int:
    """Inputs per output unit: ``in_features`` for (out, in), ``in * kh * kw`` for conv."""
    return int(np.prod(shape[1:]))


def kaiming_uniform(shape, a: float = math.sqrt(5), dtype=np.float64, rng=None) -> np.ndarray:
    """U(-b, b) with ``b = gain * sqrt(3 / fan_in)``, ``gain = sqrt(2 / (1 + a^2))``.

    Args:
        shape: (out, in) or (out, in, kh, kw).
        a: negative slope of the rectifier after the layer (PyTorch's default sqrt(5)).
    """
    gain = math.sqrt(2.0 / (1 + a * a))
    bound = gain * math.sqrt(3.0 / fan_in(shape))
    return (rng or _generator).uniform(-bound, bound, size=shape).astype(dtype)


def uniform_bias(size, fan: int, dtype=np.float64, rng=None) -> np.ndarray:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)), PyTorch's default bias initialisation."""
    bound = 1 / math.sqrt(fan) if fan > 0 else 0.0
    return (rng or _generator).uniform(-bound, bound, size=size).astype(dtype)


def fans(shape) -> tuple:
    """``(fan_in, fan_out)`` as PyTorch counts them: ``shape[1] * receptive`` and
    ``shape[0] * receptive``, ``receptive`` the product of the trailing axes (a kernel)."""
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return shape[1] * receptive, shape[0] * receptive


def xavier_uniform(shape, gain: float = 1.0, dtype=np.float64, rng=None) -> np.ndarray:
    """U(-b, b) with ``b = gain * sqrt(6 / (fan_in + fan_out))`` (Glorot and Bengio 2010, eq. 16;
    PyTorch's ``xavier_uniform_``, the initialisation of attention's input projection)."""
    fan_in_, fan_out = fans(shape)
    bound = gain * math.sqrt(6.0 / (fan_in_ + fan_out))
    return (rng or _generator).uniform(-bound, bound, size=shape).astype(dtype)


def xavier_normal(shape, gain: float = 1.0, dtype=np.float64, rng=None) -> np.ndarray:
    """N(0, std^2) with ``std = gain * sqrt(2 / (fan_in + fan_out))`` (PyTorch's ``xavier_normal_``)."""
    fan_in_, fan_out = fans(shape)
    std = gain * math.sqrt(2.0 / (fan_in_ + fan_out))
    return ((rng or _generator).standard_normal(shape) * std).astype(dtype)
