"""Learning-rate schedulers with PyTorch's names, arguments, defaults and semantics.

A scheduler changes ``optimizer.param_groups[0]["lr"]`` (the optimizer's ``lr``)
each time its :meth:`~LRScheduler.step` is called, once per epoch or per batch,
after the optimizer's step, as in PyTorch::

    opt = srcgrad.optim.SGD(model, lr=0.1, momentum=0.9)
    sched = srcgrad.optim.lr_scheduler.StepLR(opt, step_size=30, gamma=0.1)
    for epoch in range(100):
        for x, y in batches:
            opt.step(dloss(model, x, y))
        sched.step()

Making a scheduler sets the group's ``initial_lr`` (kept if already set, by an
earlier scheduler or a loaded optimizer state) and takes the first step, so
``last_epoch`` is 0 and ``get_last_lr()`` is the learning rate for epoch 0.
Schedulers that PyTorch computes from the current ``lr`` (StepLR, MultiStepLR,
ExponentialLR, CosineAnnealingLR) do so here too, so they compose with one
another and with a learning rate set by hand.  Each formula is cited from
PyTorch's documentation (https://pytorch.org/docs/stable/optim.html) and the
paper it comes from.
"""
from __future__ import annotations

import bisect
import copy
import math
import numbers
import types
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from .base import Optimizer

__all__ = ["LRScheduler", "LambdaLR", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
           "OneCycleLR", "ReduceLROnPlateau"]

_EPOCH_DEPRECATED = ("passing an epoch to step() is deprecated (as in PyTorch): it sets last_epoch and uses "
                     "the schedule's closed form where it has one; call step() without arguments")


class LRScheduler:
    """Base class: subclasses define :meth:`get_lr` (and may define ``_closed_form_lr``).

    Args:
        optimizer: a :class:`srcgrad.optim.Optimizer`.
        last_epoch: the index of the last epoch done: -1 (default) to start; another
            value to resume, which needs ``initial_lr`` in the optimizer's group (from
            an earlier scheduler, or a loaded optimizer ``state_dict``).

    Attributes:
        optimizer: the optimizer whose ``param_groups[0]["lr"]`` is scheduled.
        base_lrs: each group's ``initial_lr``.
        last_epoch: the number of steps taken since epoch 0 (0 after construction).

    Raises:
        TypeError: ``optimizer`` is not a srcgrad optimizer.
        KeyError: ``last_epoch`` is not -1 and the group has no ``initial_lr``.
    """

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(_not_an_optimizer(optimizer))
        self.optimizer = optimizer
        groups = optimizer.param_groups
        if last_epoch == -1:
            for group in groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] when "
                                   f"resuming a scheduler with last_epoch={last_epoch}: load the "
                                   "optimizer's state_dict first, or start with last_epoch=-1")
        self.base_lrs = [group["initial_lr"] for group in groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list[float]:
        """The learning rate of each group for epoch ``last_epoch`` (called by :meth:`step`)."""
        raise NotImplementedError

    def get_last_lr(self) -> list[float]:
        """The learning rates the last :meth:`step` set, one per parameter group."""
        return list(self._last_lr)

    def step(self, epoch: int | None = None) -> None:
        """Advance ``last_epoch`` by one and set each group's ``lr`` for it.

        Args:
            epoch: deprecated (a UserWarning, as in PyTorch): jump to this epoch, using
                the schedule's closed form where it has one.
        """
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            warnings.warn(_EPOCH_DEPRECATED, UserWarning, stacklevel=2)
            self.last_epoch = epoch
            closed = getattr(self, "_closed_form_lr", None)
            values = closed() if closed is not None else self.get_lr()
        groups = self.optimizer.param_groups
        for group, lr in zip(groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in groups]

    def state_dict(self) -> dict[str, Any]:
        """Every attribute but the optimizer (as PyTorch), copied."""
        return {key: copy.deepcopy(value) for key, value in vars(self).items() if key != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Take back the attributes :meth:`state_dict` gave (load the optimizer's state too)."""
        self.__dict__.update(copy.deepcopy(state_dict))

    def _lrs(self) -> list[float]:
        return [group["lr"] for group in self.optimizer.param_groups]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(last_epoch={self.last_epoch}, lr={self._last_lr})"


def _not_an_optimizer(optimizer: Any) -> str:
    return f"{type(optimizer).__name__} is not a srcgrad optimizer (srcgrad.optim.SGD, Adam, ...)"


def _positive_int(owner: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{owner}: {name} must be a positive integer, got {value!r}")
    return int(value)


def _per_group(owner: str, name: str, optimizer: Optimizer, value: Any) -> list:
    """``value`` for each parameter group: a list or tuple of one per group, or one for all."""
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{owner}: expected {n} values for {name}, one per parameter group, "
                             f"got {len(value)}")
        return list(value)
    return [value] * n


class LambdaLR(LRScheduler):
    """lr = initial_lr · λ(epoch), as ``torch.optim.lr_scheduler.LambdaLR``.

    Args:
        optimizer: a srcgrad optimizer.
        lr_lambda: a function of the epoch (an int) giving a factor, or a list of one
            such function per parameter group.
        last_epoch: -1 to start (see :class:`LRScheduler`).

    ``state_dict`` holds, for each factor function that is a callable object (not
    a function or lambda), a copy of its ``__dict__``, as PyTorch's.

    Raises:
        ValueError: a list of functions whose length is not the number of groups.
    """

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable[[int], float] | list,
                 last_epoch: int = -1) -> None:
        self.lr_lambdas = _per_group("LambdaLR", "lr_lambda", optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]

    def state_dict(self) -> dict[str, Any]:
        state = {key: copy.deepcopy(value) for key, value in vars(self).items()
                 if key not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else dict(vars(fn))
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        saved = state.pop("lr_lambdas", [])
        self.__dict__.update(copy.deepcopy(state))
        for fn, attributes in zip(self.lr_lambdas, saved):
            if attributes is not None:
                fn.__dict__.update(attributes)


class StepLR(LRScheduler):
    """Decay the learning rate by ``gamma`` every ``step_size`` epochs, as
    ``torch.optim.lr_scheduler.StepLR``: lr_t = lr_{t-1} · γ where t > 0 is a multiple of
    ``step_size``, else lr_{t-1}; from ``initial_lr`` alone, lr_t = lr_0 · γ^⌊t / step_size⌋.

    Args:
        optimizer: a srcgrad optimizer.
        step_size: the period, a positive int.
        gamma: the factor (default 0.1).
        last_epoch: -1 to start (see :class:`LRScheduler`).

    Raises:
        ValueError: ``step_size`` is not a positive integer.
    """

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.step_size = _positive_int("StepLR", "step_size", step_size)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _closed_form_lr(self) -> list[float]:
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Decay the learning rate by ``gamma`` at each milestone epoch, as
    ``torch.optim.lr_scheduler.MultiStepLR``: lr_t = lr_{t-1} · γ^k where t appears k times
    among the milestones; from ``initial_lr`` alone, lr_t = lr_0 · γ^(milestones ≤ t).

    Args:
        optimizer: a srcgrad optimizer.
        milestones: epoch indices (any order; one given twice decays twice).
        gamma: the factor (default 0.1).
        last_epoch: -1 to start (see :class:`LRScheduler`).
    """

    def __init__(self, optimizer: Optimizer, milestones: Iterable[int], gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        k = self.milestones.get(self.last_epoch, 0)
        if k == 0:
            return self._lrs()
        return [lr * self.gamma ** k for lr in self._lrs()]

    def _closed_form_lr(self) -> list[float]:
        passed = bisect.bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [base * self.gamma ** passed for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Decay the learning rate by ``gamma`` every epoch, as
    ``torch.optim.lr_scheduler.ExponentialLR``: lr_t = lr_{t-1} · γ (lr_t = lr_0 · γ^t).

    Args:
        optimizer: a srcgrad optimizer.
        gamma: the factor per epoch.
        last_epoch: -1 to start (see :class:`LRScheduler`); the learning rate is not
            changed when the scheduler is made, whatever ``last_epoch``.
    """

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _closed_form_lr(self) -> list[float]:
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    r"""Anneal the learning rate along a half cosine from ``initial_lr`` to ``eta_min`` over
    ``T_max`` epochs: Loshchilov & Hutter, "SGDR: Stochastic Gradient Descent with Warm
    Restarts", ICLR 2017, eq. (5) without restarts, in the recursive form PyTorch documents
    for ``torch.optim.lr_scheduler.CosineAnnealingLR``.  With η_max = ``initial_lr``::

        η_t = η_min + (η_{t-1} - η_min) · (1 + cos(π t / T_max)) / (1 + cos(π (t - 1) / T_max))
                                                      if (t - 1 - T_max) is not a multiple of 2 T_max
        η_t = η_{t-1} + (η_max - η_min) · (1 - cos(π / T_max)) / 2     otherwise

    which, left alone, is η_t = η_min + (η_max - η_min) (1 + cos(π t / T_max)) / 2 (and goes
    back up after T_max, periodically); it follows a learning rate changed by hand or by
    another scheduler.

    Args:
        optimizer: a srcgrad optimizer.
        T_max: the half period in epochs, a positive int.
        eta_min: the lowest learning rate (default 0).
        last_epoch: -1 to start (see :class:`LRScheduler`).

    Raises:
        ValueError: ``T_max`` is not a positive integer.
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1) -> None:
        self.T_max = _positive_int("CosineAnnealingLR", "T_max", T_max)
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        t, period, low = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return self._lrs()
        if (t - 1 - period) % (2 * period) == 0:       # at the bottom: start climbing back
            return [lr + (base - low) * (1 - math.cos(math.pi / period)) / 2
                    for lr, base in zip(self._lrs(), self.base_lrs)]
        ratio = (1 + math.cos(math.pi * t / period)) / (1 + math.cos(math.pi * (t - 1) / period))
        return [ratio * (lr - low) + low for lr in self._lrs()]

    def _closed_form_lr(self) -> list[float]:
        cosine = math.cos(math.pi * self.last_epoch / self.T_max)
        return [self.eta_min + (base - self.eta_min) * (1 + cosine) / 2 for base in self.base_lrs]


class OneCycleLR(LRScheduler):
    r"""The 1cycle policy: Smith & Topin, "Super-Convergence: Very Fast Training of Neural
    Networks Using Large Learning Rates", 2018 (arXiv:1708.07120), as PyTorch documents
    ``torch.optim.lr_scheduler.OneCycleLR`` (phases after fastai).  Call :meth:`step`
    after every batch, ``total_steps`` times at most.

    With initial_lr = max_lr / div_factor and min_lr = initial_lr / final_div_factor, the
    learning rate goes, step by step (p = ``pct_start``, T = ``total_steps``)::

        two phases:    initial_lr → max_lr  over steps 0 .. pT - 1
                       max_lr → min_lr      over steps pT - 1 .. T - 1
        three_phase:   initial_lr → max_lr  over 0 .. pT - 1,  max_lr → initial_lr over
                       pT - 1 .. 2pT - 2,  initial_lr → min_lr over 2pT - 2 .. T - 1

    each by ``anneal_strategy``: "cos", a → b as b + (a - b)(1 + cos(π x)) / 2, or "linear",
    a + (b - a) x, where x is the fraction of the phase done.  With ``cycle_momentum``, the
    momentum (SGD's and RMSprop's ``momentum``, Adam's β1) moves the opposite way, between
    ``max_momentum`` and ``base_momentum`` (the last phase of three ends at max_momentum);
    it is set to ``max_momentum`` when the scheduler is made.

    Args:
        optimizer: a srcgrad optimizer.
        max_lr: the peak learning rate (or a list, one per group).
        total_steps: the number of steps; or give ``epochs`` and ``steps_per_epoch``.
        epochs, steps_per_epoch: positive ints whose product is ``total_steps``.
        pct_start: the fraction of the steps spent increasing the learning rate (0.3).
        anneal_strategy: "cos" (default) or "linear".
        cycle_momentum: cycle the momentum too (default True).
        base_momentum, max_momentum: its bounds (0.85, 0.95; or lists, one per group).
        div_factor: initial_lr = max_lr / div_factor (25).
        final_div_factor: min_lr = initial_lr / final_div_factor (1e4).
        three_phase: the three-phase schedule (default False).
        last_epoch: -1 to start (see :class:`LRScheduler`).

    Raises:
        ValueError: neither ``total_steps`` nor both ``epochs`` and ``steps_per_epoch`` is a
            positive integer, ``pct_start`` is outside [0, 1], an unknown
            ``anneal_strategy``, ``cycle_momentum`` for an optimizer without a momentum or
            betas (Adagrad, Adadelta, LBFGS), or (at :meth:`step`) more than
            ``total_steps`` steps.
    """

    def __init__(self, optimizer: Optimizer, max_lr: float | list[float], total_steps: int | None = None,
                 epochs: int | None = None, steps_per_epoch: int | None = None, pct_start: float = 0.3,
                 anneal_strategy: str = "cos", cycle_momentum: bool = True,
                 base_momentum: float | list[float] = 0.85, max_momentum: float | list[float] = 0.95,
                 div_factor: float = 25.0, final_div_factor: float = 1e4, three_phase: bool = False,
                 last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(_not_an_optimizer(optimizer))
        if total_steps is not None:
            self.total_steps = _positive_int("OneCycleLR", "total_steps", total_steps)
        elif epochs is not None and steps_per_epoch is not None:
            self.total_steps = (_positive_int("OneCycleLR", "epochs", epochs)
                                * _positive_int("OneCycleLR", "steps_per_epoch", steps_per_epoch))
        else:
            raise ValueError("OneCycleLR: give total_steps, or epochs and steps_per_epoch")
        if isinstance(pct_start, bool) or not isinstance(pct_start, numbers.Real) or not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: pct_start must be a number in [0, 1], got {pct_start!r}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', "
                             f"got {anneal_strategy!r}")
        self.anneal_strategy = anneal_strategy
        up = float(pct_start * self.total_steps) - 1
        # (end step, start and end learning rate keys, start and end momentum keys) of each phase
        if three_phase:
            self._phases = [(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                            (float(2 * pct_start * self.total_steps) - 2, "max_lr", "initial_lr",
                             "base_momentum", "max_momentum"),
                            (self.total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum")]
        else:
            self._phases = [(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                            (self.total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum")]
        groups = optimizer.param_groups
        max_lrs = _per_group("OneCycleLR", "max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for group, peak in zip(groups, max_lrs):
                group["initial_lr"] = peak / div_factor
                group["max_lr"] = peak
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in groups[0] and "betas" not in groups[0]:
                raise ValueError(f"OneCycleLR: {type(optimizer).__name__} has no momentum or betas to cycle: "
                                 "pass cycle_momentum=False")
            self.use_beta1 = "betas" in groups[0]
            highs = _per_group("OneCycleLR", "max_momentum", optimizer, max_momentum)
            lows = _per_group("OneCycleLR", "base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for group, high, low in zip(groups, highs, lows):
                    self._set_momentum(group, high)
                    group["max_momentum"], group["base_momentum"] = high, low
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start: float, end: float, fraction: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * fraction) + 1)
        return (end - start) * fraction + start

    def _set_momentum(self, group, value: float) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def get_lr(self) -> list[float]:
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: tried to step {step} times; total_steps is {self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            begin = 0.0
            for i, (end, lr_a, lr_b, m_a, m_b) in enumerate(self._phases):
                if step <= end or i == len(self._phases) - 1:
                    fraction = (step - begin) / (end - begin)
                    lrs.append(self._anneal(group[lr_a], group[lr_b], fraction))
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(group[m_a], group[m_b], fraction))
                    break
                begin = end
        return lrs


class ReduceLROnPlateau(LRScheduler):
    """Reduce the learning rate when a metric stops improving, as
    ``torch.optim.lr_scheduler.ReduceLROnPlateau``: call ``step(metric)`` once per epoch.

    A metric a improves on the best so far b when (mode "min") a < b (1 - threshold) with
    threshold_mode "rel", a < b - threshold with "abs"; (mode "max") a > b (1 + threshold), or
    a > b + threshold.  After more than ``patience`` epochs in a row without improvement,
    lr ← max(lr · factor, min_lr) (kept when that changes it by ``eps`` or less), then
    ``cooldown`` epochs are not counted.

    Args:
        optimizer: a srcgrad optimizer.
        mode: "min" (default) or "max".
        factor: the multiplier, < 1 (default 0.1).
        patience: epochs without improvement tolerated (default 10).
        threshold: the improvement needed (default 1e-4).
        threshold_mode: "rel" (default) or "abs".
        cooldown: epochs to wait after a reduction (default 0).
        min_lr: the lowest learning rate (or a list, one per group; default 0).
        eps: the smallest change made (default 1e-8).

    Attributes: ``best``, ``num_bad_epochs``, ``cooldown_counter``, ``last_epoch``.

    Raises:
        ValueError: ``factor`` ≥ 1, an unknown mode or threshold mode, or a list of
            ``min_lr`` whose length is not the number of groups.
    """

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1, patience: int = 10,
                 threshold: float = 1e-4, threshold_mode: str = "rel", cooldown: int = 0,
                 min_lr: float | list[float] = 0, eps: float = 1e-8) -> None:
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor must be < 1.0, got {factor!r}")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(_not_an_optimizer(optimizer))
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs', "
                             f"got {threshold_mode!r}")
        self.optimizer = optimizer
        self.factor = factor
        self.min_lrs = _per_group("ReduceLROnPlateau", "min_lr", optimizer, min_lr)
        self.patience, self.cooldown, self.eps = patience, cooldown, eps
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.last_epoch = 0
        self._last_lr = self._lrs()
        self.best, self.cooldown_counter, self.num_bad_epochs = self.mode_worse, 0, 0

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def is_better(self, a: float, best: float) -> bool:
        """Whether metric ``a`` improves on ``best`` by the threshold."""
        rel = self.threshold_mode == "rel"
        if self.mode == "min":
            return a < best * (1.0 - self.threshold) if rel else a < best - self.threshold
        return a > best * (self.threshold + 1.0) if rel else a > best + self.threshold

    def step(self, metrics: float, epoch: int | None = None) -> None:  # type: ignore[override]
        """Record this epoch's metric (a number or 0-d array); reduce the learning rate on a plateau."""
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(_EPOCH_DEPRECATED, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self.is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0                   # bad epochs during a cooldown do not count
        if self.num_bad_epochs > self.patience:
            for group, low in zip(self.optimizer.param_groups, self.min_lrs):
                old = float(group["lr"])
                new = max(old * self.factor, low)
                if old - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = self._lrs()

    def get_lr(self) -> list[float]:
        """The learning rates now (this scheduler changes them only in :meth:`step`)."""
        return self._lrs()
