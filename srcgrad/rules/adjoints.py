"""Rules of the runtime helpers that generated reverse-mode code calls, so that
srcgrad can transform its own output again (``srcgrad.hvp``: forward mode over
a gradient's code).

Each helper computes an adjoint, which is linear in the adjoint it is given
(``g``): its tangent is the helper applied to ``g``'s tangent (``"linear"``),
or, for the matmul adjoints, also linear in the other factor (``"bilinear"``).
The primal arguments a helper reads only for their shape, or through a mask
that is piecewise constant in them (which element of a window is its maximum),
have derivative zero (almost everywhere, the convention of ``np.maximum``'s
rule).  Each adjoint rule is the transpose of that linear map:
``<u, helper(g)> = <helper^T(u), g>``, defined beside its helper in ``runtime/``.

Here are those of the helpers generated code itself calls (``runtime/core.py``,
``runtime/containers.py``); those of a family's helpers are registered beside the
family's rules (``matmul_lhs``'s in ``rules/operators.py``, ``max_adjoint``'s in
``rules/reductions.py``).  A helper without a rule is differentiated from its own source
when forward mode meets it (right, or refused at its line).
"""
from __future__ import annotations

from ..runtime import (add, add_each, add_each_tangent, add_each_transposed, add_items, add_items_tangent,
                       add_items_transposed, add_tangent, add_transposed, as_items, as_items_transposed,
                       broadcast_tangent, broadcast_tangent_transposed, cast_adjoint, cast_adjoint_transposed,
                       cast_tangent, cast_tangent_transposed, fill_like, fill_like_transposed, item_of,
                       item_of_transposed_rule, items_adjoint, items_adjoint_transposed, overwritten_adjoint,
                       overwritten_adjoint_rule, unbroadcast, unbroadcast_to, unbroadcast_to_transposed,
                       unbroadcast_transposed, written_adjoint, written_adjoint_transposed, written_entry,
                       written_entry_rule, zeros_like, zeros_tangent)
from .registry import defadjoint, deftangent, nondifferentiable

nondifferentiable(zeros_tangent, zeros_like)  # zeros

defadjoint(add, diff=("a", "b"))(add_transposed)
deftangent(add)(add_tangent)
defadjoint(broadcast_tangent, diff=("t",), zero=("ans",), tangent="linear")(broadcast_tangent_transposed)
defadjoint(cast_tangent, diff=("t",), zero=("ans", "lead"), tangent="linear")(cast_tangent_transposed)
defadjoint(as_items, diff=("g",), zero=("items",), tangent="linear")(as_items_transposed)
defadjoint(items_adjoint, diff=("g",), zero=("items",), tangent="linear")(items_adjoint_transposed)
defadjoint(add_each, diff=("adjoints", "more"))(add_each_transposed)
deftangent(add_each)(add_each_tangent)
defadjoint(add_items, diff=("adjoints", "more"), zero=("items",))(add_items_transposed)
deftangent(add_items)(add_items_tangent)
defadjoint(cast_adjoint, diff=("g",), zero=("like",), tangent="linear")(cast_adjoint_transposed)
defadjoint(written_entry, diff=("g",), zero=("y", "index", "value"), tangent="linear")(written_entry_rule)
defadjoint(overwritten_adjoint, diff=("g",), zero=("y", "index"), tangent="linear")(overwritten_adjoint_rule)
defadjoint(unbroadcast_to, diff=("g",), tangent="linear")(unbroadcast_to_transposed)
defadjoint(written_adjoint, diff=("g",), zero=("value",), tangent="linear")(written_adjoint_transposed)
defadjoint(unbroadcast, diff=("g",), zero=("x",), tangent="linear")(unbroadcast_transposed)
defadjoint(fill_like, diff=("value",), zero=("a",), tangent="linear")(fill_like_transposed)
defadjoint(item_of, diff=("g",), tangent="linear")(item_of_transposed_rule)
