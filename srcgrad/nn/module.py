"""``Module``: the base class of layers and models."""
from __future__ import annotations

import numpy as np

from .. import runtime, tree


class Parameters(list):
    """``model.parameters()``: a list of the model's arrays that remembers the model, so that an
    optimizer given it updates the model by path (``linear1.weight``) and takes the gradient
    ``grad(Model.loss, wrt=0)`` returns, shaped like the model (or a list in this order)."""

    __slots__ = ("module",)

    def __init__(self, module, arrays):
        super().__init__(arrays)
        self.module = module


class Module:
    """A layer or model: an object whose array attributes are its parameters.

    Subclasses define ``forward``; calling the module calls ``forward``.
    Parameters are the floating-point array attributes of the module and of
    its sub-modules (also inside lists and dicts), named by path
    (``linear1.weight``).  ``training`` switches layers such as ``Dropout``.
    """

    training = True

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    __call__.__srcgrad_calls_forward__ = True

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward method: define "
                                  f"`def forward(self, x): ...` in class {type(self).__name__}")

    forward.__srcgrad_abstract__ = True

    # ---- parameters, buffers and sub-modules ---------------------------------------
    def named_parameters(self):
        """``[(name, array)]`` for every parameter (frozen ones too), in the order of
        :meth:`parameters`, named as PyTorch names them: attributes joined by dots, an
        entry of a list (``ModuleList``) or of a :class:`Sequential` by its index
        (``layers.0.weight``, ``0.weight``), of a dict by its key."""
        paths, leaves, _ = tree.flatten(self)
        return [(torch_name(self, p), leaf) for p, leaf in zip(paths, leaves)]

    def parameters(self):
        """Every parameter array (the arrays themselves, not copies), as a :class:`Parameters`
        list: given to an optimizer (``optim.Adam(model.parameters())``, as in PyTorch) it
        stands for the model, whose gradient ``grad(Model.loss, wrt=0)(model, x)`` then
        steps it.  Order: attributes in the order they were set, depth first (PyTorch lists a
        module's own parameters before its sub-modules'; the two differ only where a module
        sets an array after a sub-module)."""
        return Parameters(self, [leaf for _, leaf in self.named_parameters()])

    def register_buffer(self, name: str, array, persistent: bool = True) -> None:
        """Hold ``array`` as state that is not trained (PyTorch's buffer): ``self.<name>``,
        listed by :meth:`buffers` and (if ``persistent``) :meth:`state_dict`, not by
        :meth:`parameters`; it gets no gradient (None), optimizers never step it, and
        differentiated code reads it as a constant.  A forward may rebind it
        (``self.running_mean = ...``): the stored value is bookkeeping, not differentiated.
        ``array`` None registers the name with no value (a layer without running statistics).

        Raises:
            KeyError: ``name`` is already a parameter or a sub-module.
        """
        if name in vars(self) and name not in tree.buffer_names(self) and vars(self)[name] is not None:
            raise KeyError(f"attribute {name!r} already exists on {type(self).__name__}: "
                           "a buffer needs a new name")
        object.__setattr__(self, name, None if array is None else np.asarray(array))
        if name not in tree.buffer_names(self):
            self.__dict__[tree.BUFFERS] = tree.buffer_names(self) + (name,)
        if not persistent:
            self.__dict__["_non_persistent"] = self.__dict__.get("_non_persistent", ()) + (name,)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Not needed (see ``Optimizer.zero_grad``): srcgrad keeps no gradients on arrays.

        Raises:
            TypeError: always, saying what to write instead.
        """
        raise TypeError(f"{type(self).__name__}.zero_grad(): srcgrad keeps no gradients on the arrays, so "
                        "there is nothing to zero; compute the gradient and pass it to the optimizer: "
                        "`grads = srcgrad.grad(loss)(model, x, y); opt.step(grads)`")

    def named_buffers(self):
        """``[(name, array)]`` for every buffer of this module and its sub-modules (PyTorch's
        names, as :meth:`named_parameters`)."""
        found = []
        for prefix, module in self.named_modules():
            for key in tree.buffer_names(module):
                if vars(module).get(key) is not None:
                    found.append((prefix + key if not prefix else f"{prefix}.{key}", vars(module)[key]))
        return found

    def buffers(self):
        """Every buffer array (running statistics, counters), as :meth:`named_buffers`."""
        return [array for _, array in self.named_buffers()]

    def named_children(self):
        """``[(name, module)]`` for the direct sub-modules: attributes, entries of lists
        (``layers.0``; a :class:`Sequential`'s own, ``0``) and of dicts (``blocks.key``)."""
        found = []
        for key, value in vars(self).items():
            if isinstance(value, Module):
                found.append((key, value))
            elif isinstance(value, (list, tuple, dict)):
                items = value.items() if isinstance(value, dict) else enumerate(value)
                own = getattr(type(self), "_items", None) == key
                found += [(str(i) if own else f"{key}.{i}", item) for i, item in items
                          if isinstance(item, Module)]
        return found

    def children(self):
        """The direct sub-modules (see :meth:`named_children`)."""
        return [module for _, module in self.named_children()]

    def named_modules(self, prefix: str = ""):
        """``[(name, module)]`` for this module (name ``""``) and every sub-module, depth first."""
        found = [(prefix, self)]
        for key, child in self.named_children():
            found += child.named_modules(f"{prefix}.{key}" if prefix else key)
        return found

    def modules(self):
        """This module and every sub-module, depth first."""
        return [module for _, module in self.named_modules()]

    def apply(self, fn):
        """Call ``fn(module)`` on every sub-module, then on this one (PyTorch's order, for
        initialising weights: ``model.apply(init_weights)``); returns this module."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def requires_grad_(self, requires_grad: bool = True):
        """Freeze (``False``) or unfreeze every parameter of this module and its sub-modules:
        a frozen parameter stays among :meth:`parameters` and in :meth:`state_dict`, but its
        gradient is None and optimizers do not step it (its adjoint is still computed, then
        dropped: the code is the same as unfrozen).  Returns the module."""
        if not requires_grad:
            tree.frozen_in_use = True
        for module in self.modules():
            own = tuple(key for key, value in vars(module).items()
                        if isinstance(value, np.ndarray) and value.dtype.kind == "f"
                        and key not in tree.buffer_names(module))
            module.__dict__[tree.FROZEN] = () if requires_grad else own
        return self

    # ---- state -------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """``{name: copy of the array}`` for every parameter, then every persistent buffer,
        under PyTorch's names (``0.weight``, ``bn.running_mean``, ``bn.num_batches_tracked``),
        so that a PyTorch model's ``state_dict()`` loads (see :meth:`load_state_dict`)."""
        # PyTorch's order: module by module (depth first), each one's parameters, then its buffers.
        by_owner: dict = {}
        owners = {id(value): id(module) for module in self.modules() for value in vars(module).values()
                  if isinstance(value, np.ndarray)}
        for name, leaf in self.named_parameters():
            by_owner.setdefault(owners.get(id(leaf)), []).append((name, leaf))
        state = {}
        for prefix, module in self.named_modules():
            for name, leaf in by_owner.pop(id(module), []):
                state[name] = np.array(leaf, copy=True)
            skip = vars(module).get("_non_persistent", ())
            for key in tree.buffer_names(module):
                if key not in skip and vars(module).get(key) is not None:
                    state[f"{prefix}.{key}" if prefix else key] = np.array(vars(module)[key], copy=True)
        for rest in by_owner.values():  # (arrays held in a plain list or dict of a module)
            state.update((name, np.array(leaf, copy=True)) for name, leaf in rest)
        return state

    def load_state_dict(self, state, strict: bool = True) -> None:
        """Copy arrays into the parameters and buffers, in place, each cast to its dtype.

        Args:
            state: ``{name: array}`` as :meth:`state_dict` gives it, a PyTorch model's
                ``state_dict()`` (tensors are converted), an ``np.load``-ed ``.npz`` file, or
                the path of one.
            strict: missing or unknown names are an error (else they are skipped).

        Raises:
            KeyError: (strict) a name is missing from ``state``, or ``state`` has an unknown one.
            ValueError: an array's shape differs from the parameter's (names it).
        """
        if isinstance(state, (str, bytes)) or hasattr(state, "__fspath__"):
            with np.load(state) as loaded:
                state = {key: loaded[key] for key in loaded.files}
        state = {key: _to_numpy(value) for key, value in state.items()}
        targets = dict(self.named_parameters())
        for prefix, module in self.named_modules():
            for key in tree.buffer_names(module):
                targets[f"{prefix}.{key}" if prefix else key] = (module, key)
        missing, unexpected = sorted(set(targets) - set(state)), sorted(set(state) - set(targets))
        if strict and (missing or unexpected):
            raise KeyError(f"state does not match {type(self).__name__}: missing {missing}, "
                           f"unexpected {unexpected}")
        for name, target in targets.items():
            if name not in state:
                continue
            value = state[name]
            current = vars(target[0])[target[1]] if isinstance(target, tuple) else target
            if current is None or value.shape != current.shape:
                have = None if current is None else current.shape
                raise ValueError(f"{name}: the state has shape {value.shape}, the model {have}")
            if isinstance(target, tuple):  # a buffer: rebound (a forward may have replaced it)
                object.__setattr__(target[0], target[1], np.array(value, dtype=current.dtype))
            else:
                target[...] = value

    def to(self, where):
        """Cast every floating-point parameter and buffer to a dtype (``model.to(np.float32)``),
        or move them to ``"cuda"`` (CuPy arrays, on the GPU) or ``"cpu"`` (NumPy), replacing
        the arrays; returns the module.  Make optimizers after, as they hold the arrays they update.

        Raises:
            srcgrad.errors.BackendError: ``"cuda"`` without CuPy or a GPU.
            ValueError: an unknown device name.
            TypeError: a dtype that is not floating-point.
        """
        if not isinstance(where, str):
            dtype = np.dtype(where)
            if dtype.kind != "f":
                raise TypeError(f"Module.to: parameters must stay floating-point, got {dtype}")
            move = lambda value: value.astype(dtype)  # noqa: E731
        elif where in ("cuda", "gpu", "cpu"):
            move = runtime.to_host if where == "cpu" else runtime.to_device
        else:
            raise ValueError(f"device must be 'cuda' or 'cpu' (or a dtype), got {where!r}")
        for module in self.modules():
            for key, value in list(vars(module).items()):
                if hasattr(value, "dtype") and getattr(value.dtype, "kind", "") in "fc":
                    object.__setattr__(module, key, move(value))
        return self

    def double(self):
        return self.to(np.float64)

    def float(self):
        return self.to(np.float32)

    def set_rng(self, rng):
        """Make every layer that draws random numbers (``Dropout``) draw from one generator:
        ``rng`` a ``np.random.Generator`` or a seed.  Returns the module."""
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        for module in self.modules():
            if getattr(module, "draws_random", False):
                module.rng = rng
        return self

    def train(self, mode: bool = True):
        """Switch training behaviour (dropout, batch statistics) on or off, for every sub-module."""
        for module in self.modules():
            module.training = mode
        return self

    def eval(self):
        """``train(False)``: dropout off, batch normalisation by its running statistics."""
        return self.train(False)

    def __repr__(self):
        parts = [f"  ({key}): " + repr(child).replace("\n", "\n  ") for key, child in self.named_children()]
        extra = self.extra_repr()
        if not parts:
            return f"{type(self).__name__}({extra})"
        return f"{type(self).__name__}(\n" + "\n".join(parts) + "\n)"

    def extra_repr(self) -> str:
        return ""


def torch_name(module, path) -> str:
    """The PyTorch name of the parameter at ``path`` (a ``tree.flatten`` path) in ``module``:
    entries joined by dots, a :class:`Sequential`'s own list left out (``0.weight``), a
    recurrent layer's cells too, each cell's ``_name_suffix`` after the name (``weight_ih_l0``)."""
    parts, node, suffix, flat = [], module, "", False
    for entry in path:
        if flat:  # the index into a recurrent layer's cells: the cell's suffix (``_l0``) instead
            flat = False
        elif isinstance(node, Module) and getattr(type(node), "_flat_items", None) == entry:
            flat = True
        elif not (isinstance(node, Module) and getattr(type(node), "_items", None) == entry):
            parts.append(str(entry))
        node = node[entry] if isinstance(node, (list, tuple, dict)) else getattr(node, entry, None)
        suffix = getattr(node, "_name_suffix", "") if flat is False and isinstance(node, Module) else suffix
    return ".".join(parts) + suffix


def _to_numpy(value):
    """A state entry as a NumPy array (a PyTorch tensor detached and copied to the host)."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)
