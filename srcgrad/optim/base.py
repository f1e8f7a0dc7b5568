"""What every optimizer shares: parameters, matching gradients, state, repr.

An optimizer holds a structure of parameters -- a model object whose
attributes hold arrays, or a dict/list/tuple nesting of arrays, flattened by
:mod:`srcgrad.tree` -- and updates every array *in place* on
:meth:`Optimizer.step`.  Gradients are values passed to ``step``, never
accumulated on the parameters, so there is no ``zero_grad``.

Each parameter is known by its path name (``linear1.weight``, ``layers[2].bias``,
``w``): gradients are matched to parameters by path, errors name the path, and
the per-parameter state in :meth:`Optimizer.state_dict` is keyed by it.

Requires: the parameters are writeable floating-point ndarrays (checked at
construction).  Guarantees: a parameter keeps its identity and dtype, and every
state array has its parameter's shape and dtype, so float32 training stays
float32; a ``step`` that raises has changed nothing.
"""
from __future__ import annotations

import copy
import numbers
from collections.abc import Iterator, MutableMapping
from typing import Any

import numpy as np

from .. import tree
from ..nn.module import Parameters


class Optimizer:
    """Base class: subclasses set ``_hyper``, ``_buffers``, ``_check_hyper`` and ``_update``.

    Args:
        params: a model (an object whose attributes hold arrays) or a dict/list/tuple
            nesting of writeable floating-point ndarrays, any shapes, float32 or float64.
            ``model.parameters()`` (PyTorch's spelling) stands for the model itself:
            :meth:`step` then takes the model's gradient (``grad(Model.loss, wrt=0)``),
            or a list of gradients in ``model.parameters()``'s order.
            An array reached by several paths (tied weights) is updated once per step
            with the sum of its gradients; its state is kept under its first path.
        **hyper: the subclass's hyper-parameters, set as attributes.

    Raises:
        TypeError: a parameter is not a floating-point ndarray (a Python float, an
            int or complex array); the message names its path and what to do.
        ValueError: no parameters, a read-only parameter, two different parameter
            arrays sharing memory, or an invalid hyper-parameter.

    Attributes:
        params: the structure passed in; its arrays are the ones updated.
        step_count: number of completed :meth:`step` calls (``t`` in the papers).
        state: ``{path name: {buffer name: ndarray}}``, buffers created on first use.
        Hyper-parameters (``lr`` ...) are plain attributes; assigning one (a
        learning-rate schedule) takes effect at the next ``step``.
        param_groups: PyTorch's spelling of the same hyper-parameters, for code
            written against ``torch.optim`` (``srcgrad.optim.lr_scheduler``
            included): a list of one group, a dict-like view in which
            ``group["lr"]`` reads and assigns ``opt.lr``; see :class:`ParamGroup`.
    """

    _hyper: tuple[str, ...] = ()
    _buffers: tuple[str, ...] = ()

    def __init__(self, params: Any, **hyper: Any) -> None:
        for key, value in hyper.items():
            setattr(self, key, value)
        self._check_hyper()
        # `Adam(model.parameters())`: the model, so that parameters are known by path and the
        # model's gradient (an object like it) matches; a list in that order is matched by position.
        self._positional = isinstance(params, Parameters)
        if self._positional:
            current = params.module.parameters()
            if len(params) != len(current) or any(a is not b for a, b in zip(params, current)):
                # Stepping the model would ignore the edit (an array appended never trained, one
                # removed to freeze it still trained).
                raise ValueError(
                    f"this model.parameters() list no longer holds {type(params.module).__name__}'s "
                    "parameters in their order (an array was added, removed or reordered, or the model's "
                    "arrays rebound since): give the optimizer the model itself, or a list of your own "
                    "(list(model.parameters()) + [...]) stepped with a list of gradients in its order")
            params = params.module
        self.params = params
        self._paths, names, arrays = _parameters(params)
        # Several paths may hold the same array (tied weights): it is updated
        # once, with the sum of its gradients, and its state lives under the
        # first path.  ``_slot[i]`` is the unique array behind ``_paths[i]``.
        self._names: list[str] = []
        self._arrays: list[np.ndarray] = []
        self._slot: list[int] = []
        first: dict[int, int] = {}
        for name, array in zip(names, arrays):
            if id(array) not in first:
                first[id(array)] = len(self._arrays)
                self._names.append(name)
                self._arrays.append(array)
            self._slot.append(first[id(array)])
        _check_no_partial_overlap(self._names, self._arrays)
        self.step_count = 0
        self.state: dict[str, dict[str, np.ndarray]] = {name: {} for name in self._names}
        self._group_extras: dict[str, Any] = {}  # keys of param_groups[0] that are not hyper-parameters

    # ---- subclass interface -------------------------------------------------
    def _check_hyper(self) -> None:
        """Validate and normalise the hyper-parameters (to Python floats) or raise ValueError."""

    def _update(self, p: np.ndarray, g: np.ndarray, state: dict[str, np.ndarray], t: int) -> None:
        """Update ``p`` in place from gradient ``g`` (same shape and dtype) at step ``t`` (1-based)."""
        raise NotImplementedError

    # ---- public API -----------------------------------------------------------
    @property
    def param_groups(self) -> list[ParamGroup]:
        """``[group]``: the one parameter group, a view of the hyper-parameters (see :class:`ParamGroup`)."""
        return [ParamGroup(self)]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Not needed: srcgrad keeps no ``.grad`` on arrays, so there is nothing to clear.

        Raises:
            TypeError: always, saying what to write instead (a PyTorch loop's
                ``zero_grad(); loss.backward(); step()`` is ``step(grad(loss)(model, x, y))``).
        """
        raise TypeError(f"{type(self).__name__}.zero_grad(): srcgrad keeps no gradients on the arrays, so "
                        "there is nothing to zero; compute the gradient and pass it to step: "
                        "`grads = srcgrad.grad(loss)(model, x, y); opt.step(grads)`")

    def step(self, grads: Any = None) -> None:
        """Update every parameter in place with one step of the optimizer's rule.

        Args:
            grads: gradients with the parameters' structure (the same paths; a
                nested dict keyed like the paths also matches an object), each
                leaf an array (or number) of its parameter's shape.  A gradient
                is cast to its parameter's dtype; the arrays passed are not modified.

        Raises:
            ValueError: the paths differ (the message names the first parameter
                without a gradient, or the first gradient without a parameter), or a
                gradient's shape differs from its parameter's (names the path and both
                shapes), or a hyper-parameter assigned since construction is invalid.
            TypeError: a gradient is not numeric.
        """
        if grads is None:
            raise TypeError(f"{type(self).__name__}.step() needs the gradient: srcgrad keeps no .grad on "
                            "the arrays (there is no loss.backward()); write "
                            "`grads = srcgrad.grad(loss)(model, x, y)` and `opt.step(grads)`")
        self._check_hyper()
        self._check_same_arrays()
        slots = self._match(grads)
        self.step_count += 1
        for name, p, g in zip(self._names, self._arrays, slots):
            if g is not None:  # (None: a frozen parameter, `requires_grad_(False)`: not stepped)
                self._update(p, g, self.state[name], self.step_count)

    def state_dict(self) -> dict[str, Any]:
        """A snapshot to resume from: copies, not views of the live state.

        Returns:
            ``{"optimizer": class name, "step": int, "hyper": {name: value},
            "state": {path name: {buffer name: ndarray}}, "group": {key: value}}``;
            each buffer has its parameter's shape and dtype; ``group`` holds the keys
            of ``param_groups[0]`` that are not hyper-parameters (a scheduler's
            ``initial_lr``).
        """
        return {
            "optimizer": type(self).__name__,
            "step": self.step_count,
            "hyper": {key: getattr(self, key) for key in self._hyper},
            "state": {name: {k: v.copy() for k, v in bufs.items()} for name, bufs in self.state.items()},
            "group": copy.deepcopy(self._group_extras),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from :meth:`state_dict` output (hyper-parameters, step count and buffers).

        The parameters themselves are not part of the state: restore them separately.
        Buffers are copied and cast to their parameter's dtype.

        Raises:
            ValueError: the state is from another optimizer class, names other
                parameter paths (the message names the first differing one), holds an
                unknown buffer, a buffer of the wrong shape, or invalid hyper-parameters.
        """
        cls = type(self).__name__
        if state.get("optimizer") != cls:
            raise ValueError(f"{cls}.load_state_dict: the state is from {state.get('optimizer')!r}, not {cls}")
        bufs = state["state"]
        _same_names(self._names, list(bufs), "this optimizer's parameters", "the loaded state")
        new_state = {}
        for name, p in zip(self._names, self._arrays):
            new_state[name] = {}
            for key, value in bufs[name].items():
                value = np.asarray(value)
                if key not in self._buffers:
                    raise ValueError(f"{cls}.load_state_dict: unknown buffer {key!r} for '{name}' "
                                     f"(expected some of {self._buffers})")
                if value.shape != p.shape:
                    raise ValueError(f"{cls}.load_state_dict: buffer {key!r} of '{name}' has shape "
                                     f"{value.shape} but the parameter has shape {p.shape}")
                new_state[name][key] = np.array(value, dtype=p.dtype)
        saved = {key: getattr(self, key) for key in self._hyper}
        try:
            for key in self._hyper:
                setattr(self, key, state["hyper"][key])
            self._check_hyper()
        except (KeyError, ValueError):
            for key, value in saved.items():
                setattr(self, key, value)
            raise
        self.step_count = int(state["step"])
        self.state = new_state
        self._group_extras = copy.deepcopy(dict(state.get("group", {})))

    def __repr__(self) -> str:
        n, size = len(self._arrays), sum(p.size for p in self._arrays)
        hyper = ", ".join(f"{key}={getattr(self, key)!r}" for key in self._hyper)
        arrays = f"{n} array{'s' if n != 1 else ''} ({size} values)"
        return f"{type(self).__name__}({arrays}, step={self.step_count}, {hyper})"

    # ---- helpers ----------------------------------------------------------------
    def _check_same_arrays(self) -> None:
        """The parameters still hold the arrays the optimizer updates in place: one rebound
        since (``model.w = model.w - lr * g``, a load) would no longer be trained, silently."""
        paths, arrays, _ = tree.flatten(self.params)
        if paths == self._paths and all(a is self._arrays[k] for a, k in zip(arrays, self._slot)):
            return
        changed = next((tree.path_name(p) for p, a, k in zip(paths, arrays, self._slot)
                        if a is not self._arrays[k]), None) if paths == self._paths else None
        what = f"parameter '{changed}' was rebound to another array" if changed else \
            "the parameters were added, removed or renamed"
        raise ValueError(f"{what} since the optimizer was made: it updates the arrays it was given in place, "
                         "and would no longer train the model's; write into the array instead "
                         "(`model.w[...] = new`), or make a new optimizer after rebinding")

    def _match(self, grads: Any) -> list[np.ndarray]:
        """One gradient per unique parameter array, validated, in ``_arrays`` order."""
        if self._positional and isinstance(grads, (list, tuple)) and len(grads) == len(self._paths) \
                and not any(tree.is_structure(g) for g in grads):
            gpaths, gleaves = self._paths, list(grads)  # one per model.parameters() entry, in its order
        else:
            gpaths, gleaves, _ = tree.flatten(grads)
        if gpaths != self._paths and isinstance(self.params, (list, tuple)) and tree._is_object(grads):
            raise ValueError(
                f"the gradient is shaped like a {type(grads).__name__} object, but the optimizer was given "
                "a list of arrays: give the optimizer the model itself (or model.parameters()), so that "
                "its gradient's parameters are matched by path")
        frozen = _frozen_paths(self.params)
        if gpaths != self._paths:
            # (a frozen parameter's gradient is None, which the gradient's flattening leaves out)
            _same_names([p for p in self._paths if p not in frozen or p in gpaths], gpaths,
                        "the parameters", "the gradient", show=tree.path_name)
            by_path = dict(zip(gpaths, gleaves))
            gleaves = [by_path.get(p) for p in self._paths]
        slots: list[np.ndarray | None] = [None] * len(self._arrays)
        for path, slot, g in zip(self._paths, self._slot, gleaves):
            if path in frozen:
                continue
            p = self._arrays[slot]
            g = np.asarray(g)
            name = tree.path_name(path)
            if g.dtype.kind not in "fiub":
                raise TypeError(f"gradient for '{name}' has dtype {g.dtype}; expected a real number array")
            if g.shape != p.shape:
                raise ValueError(f"gradient for '{name}' has shape {g.shape} but the parameter "
                                 f"has shape {p.shape}")
            g = g.astype(p.dtype, copy=False)
            slots[slot] = g if slots[slot] is None else slots[slot] + g
        return slots


class ParamGroup(MutableMapping):
    """``opt.param_groups[0]``: PyTorch's parameter group, as a view of one optimizer.

    srcgrad's optimizers hold one set of hyper-parameters, as attributes; this
    dict-like view lets code written for ``torch.optim`` read and set them by
    key, as PyTorch's learning-rate schedulers do::

        for group in opt.param_groups:
            group["lr"] *= 0.5          # the same as opt.lr *= 0.5

    Keys: ``"params"`` (the list of parameter arrays, read-only), each
    hyper-parameter of the optimizer (``"lr"``, ``"betas"`` ...: reading and
    assigning go to the attribute, checked at the next ``step``), and any other
    key a caller sets (a scheduler's ``"initial_lr"``), kept with the optimizer
    and saved by its ``state_dict``.  (Several groups with their own
    hyper-parameters, ``[{"params": ..., "lr": ...}, ...]``, are not supported:
    make one optimizer per group.)

    Raises:
        KeyError: reading a key the group does not hold.
        TypeError: assigning or deleting ``"params"``, or deleting a hyper-parameter.
    """

    __slots__ = ("optimizer",)

    def __init__(self, optimizer: Optimizer) -> None:
        self.optimizer = optimizer

    def __getitem__(self, key: str) -> Any:
        opt = self.optimizer
        if key == "params":
            return list(opt._arrays)
        if key in opt._hyper:
            return getattr(opt, key)
        return opt._group_extras[key]

    def __setitem__(self, key: str, value: Any) -> None:
        opt = self.optimizer
        if key == "params":
            raise TypeError("param_groups[0]['params'] is read-only: make a new optimizer for other "
                            "parameters")
        if key in opt._hyper:
            setattr(opt, key, value)
        else:
            opt._group_extras[key] = value

    def __delitem__(self, key: str) -> None:
        opt = self.optimizer
        if key == "params" or key in opt._hyper:
            raise TypeError(f"param_groups[0][{key!r}] cannot be deleted: it is part of "
                            f"{type(opt).__name__}")
        del opt._group_extras[key]

    def __iter__(self) -> Iterator[str]:
        yield "params"
        yield from self.optimizer._hyper
        yield from list(self.optimizer._group_extras)

    def __len__(self) -> int:
        return 1 + len(self.optimizer._hyper) + len(self.optimizer._group_extras)

    def __repr__(self) -> str:
        return repr({key: value for key, value in self.items() if key != "params"})


def _frozen_paths(params: Any) -> set:
    """The paths of the parameters frozen now (``Module.requires_grad_(False)``: ``tree.FROZEN``)."""
    frozen: set = set()
    if not tree.frozen_in_use:
        return frozen

    def walk(node, path):
        if isinstance(node, (list, tuple)):
            for i, item in enumerate(node):
                walk(item, path + (i,))
        elif isinstance(node, dict):
            for key, item in node.items():
                walk(item, path + (key,))
        elif tree._is_object(node):
            names = tree.buffer_names(node, tree.FROZEN)
            frozen.update(path + (key,) for key in names)
            for key, value in vars(node).items():
                if tree._is_part(value) and tree._has_params(value):
                    walk(value, path + (key,))
    walk(params, ())
    return frozen


def _parameters(params: Any) -> tuple[list[tuple], list[str], list[np.ndarray]]:
    """Paths, path names and arrays of ``params``; TypeError naming the path for a non-float leaf."""
    paths, leaves, _ = tree.flatten(params)
    names = [tree.path_name(p) for p in paths]
    if not leaves:
        raise ValueError("the optimizer got no parameters: pass a model or a dict/list of float arrays")
    for name, leaf in zip(names, leaves):
        if not isinstance(leaf, np.ndarray):
            kind = type(leaf).__name__
            raise TypeError(
                f"parameter '{name}' is a {kind}, not an array: optimizers update arrays in place, so "
                f"store a trainable value as a float array (np.array({leaf!r})), or pass the optimizer "
                f"a dict or list of just the trainable arrays")
        if not np.issubdtype(leaf.dtype, np.floating):
            kind = "complex arrays are not supported" if leaf.dtype.kind == "c" else (
                "only floating-point arrays can be trained; convert it with .astype(np.float64) (or float32)")
            raise TypeError(f"parameter '{name}' is an array of dtype {leaf.dtype}: {kind}; or pass the "
                            f"optimizer a dict or list of just the trainable arrays")
        if not leaf.flags.writeable:
            raise ValueError(f"parameter '{name}' is a read-only array; the optimizer updates it in "
                             f"place: pass a writeable copy (np.array(...))")
    return paths, names, leaves


def _check_no_partial_overlap(names: list[str], arrays: list[np.ndarray]) -> None:
    """ValueError when two different arrays share memory (in-place updates would interfere)."""
    by_base: dict[int, list[int]] = {}
    for i, a in enumerate(arrays):
        root = a
        while root.base is not None:  # an ndarray, or the buffer object of np.frombuffer
            root = root.base
            if not isinstance(root, np.ndarray):
                break
        by_base.setdefault(id(root), []).append(i)
    for group in by_base.values():
        for k, i in enumerate(group):
            for j in group[k + 1:]:
                if np.shares_memory(arrays[i], arrays[j]):
                    raise ValueError(f"parameters '{names[i]}' and '{names[j]}' are different arrays "
                                     f"sharing memory; updating them in place would interfere: pass "
                                     f"the underlying array once")


def _same_names(ours: list, theirs: list, our_label: str, their_label: str, show=str) -> None:
    """ValueError naming (by ``show``) the first key in one list and not the other."""
    theirs_set, ours_set = set(theirs), set(ours)
    for key in ours:
        if key not in theirs_set:
            raise ValueError(f"structure mismatch: {our_label} have '{show(key)}' but {their_label} has "
                             f"no such entry ({their_label} has {_listing(theirs, show)})")
    for key in theirs:
        if key not in ours_set:
            raise ValueError(f"structure mismatch: {their_label} has '{show(key)}' which is not among "
                             f"{our_label} ({_listing(ours, show)})")


def _listing(keys: list, show=str, limit: int = 6) -> str:
    if not keys:
        return "nothing"
    shown = ", ".join(f"'{show(k)}'" for k in keys[:limit])
    return shown + (f", ... ({len(keys)} in all)" if len(keys) > limit else "")


def _buffer(state: dict[str, np.ndarray], key: str, p: np.ndarray, fill: float = 0.0) -> np.ndarray:
    """The state buffer ``key``, created as ``fill`` in ``p``'s shape and dtype on first use."""
    if key not in state:
        state[key] = np.full_like(p, fill)
    return state[key]


def _real(owner: str, name: str, value: Any, low: float = 0.0, high: float = np.inf,
         high_open: bool = False) -> float:
    """``value`` as a Python float in ``[low, high]`` (``[low, high)`` if ``high_open``), else ValueError.

    Python floats keep the update in the parameter's dtype (NumPy does not
    promote a float32 array by a Python float).
    """
    bad = isinstance(value, bool) or not isinstance(value, numbers.Real)
    if not bad:
        value = float(value)
        bad = not (low <= value <= high) or (high_open and value == high)
    if bad:
        close = ")" if high_open else "]"
        raise ValueError(f"{owner}: {name} must be a real number in [{low}, {high}{close}, got {value!r}")
    return value
