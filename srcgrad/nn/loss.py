"""Losses as layers, PyTorch's ``criterion = nn.NLLLoss()`` spelling: each holds its
constructor arguments and calls the function of ``functional`` of the same name
(``criterion(output, target)`` is ``F.nll_loss(output, target, ...)``), so it is
differentiated exactly as the function is."""
from __future__ import annotations

from . import functional as F
from .module import Module


class _Loss(Module):
    _constant_fields = ("reduction",)  # (hyper-parameters: read as constants, no gradient)

    def __init__(self, reduction="mean"):
        F._check_reduction(reduction)
        self.reduction = reduction

    def extra_repr(self):
        return f"reduction={self.reduction!r}"


class MSELoss(_Loss):
    """``F.mse_loss``: ``(input - target) ** 2``, reduced."""

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """``F.l1_loss``: ``|input - target|``, reduced."""

    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """``F.smooth_l1_loss`` with ``beta``."""

    _constant_fields = ("reduction", "beta")

    def __init__(self, reduction="mean", beta=1.0):
        super().__init__(reduction)
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class NLLLoss(_Loss):
    """``F.nll_loss``: ``input`` (N, C) log-probabilities, ``target`` (N,) class indices;
    ``weight`` (C,) a buffer (not trained), ``ignore_index`` as PyTorch's."""

    _constant_fields = ("reduction", "ignore_index")

    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class CrossEntropyLoss(NLLLoss):
    """``F.cross_entropy``: ``input`` (N, C) logits; ``label_smoothing`` as PyTorch's."""

    _constant_fields = ("reduction", "ignore_index", "label_smoothing")

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__(weight, ignore_index, reduction)
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class BCELoss(_Loss):
    """``F.binary_cross_entropy``: ``input`` probabilities, ``target`` of its shape (each log
    clamped at -100, as PyTorch's); ``weight`` a buffer."""

    def __init__(self, weight=None, reduction="mean"):
        super().__init__(reduction)
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """``F.binary_cross_entropy_with_logits``; ``weight`` and ``pos_weight`` buffers."""

    def __init__(self, weight=None, reduction="mean", pos_weight=None):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, weight=self.weight, reduction=self.reduction,
                                                  pos_weight=self.pos_weight)
