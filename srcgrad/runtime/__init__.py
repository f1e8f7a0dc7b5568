"""What generated code calls (imported there as ``rt``), and the rules too: every helper is
``srcgrad.runtime.<name>``, whichever module below defines it.

Kept small and fast: generated code spends its time in NumPy, not here.  ``core`` holds
what generated code itself calls, ``containers`` its lists and dicts, ``objects`` the state
of objects, ``batched`` batched forward mode; each other module holds the mathematics of one
family of rules (``runtime/linalg.py`` for ``rules/linalg.py``), each helper's transpose (for
higher order) beside it.

A leaf: it imports only ``errors``, ``tree`` and ``backends``.  What compiles a
callee when generated code runs (``vjp_call`` and its like) is in
``srcgrad/dispatch.py``, above the API.
"""
from __future__ import annotations

import functools  # noqa: F401
import inspect  # noqa: F401
import itertools  # noqa: F401
import operator  # noqa: F401
import types

import optree  # noqa: F401

# A rule's global that is ``rt.<name>`` too is the runtime's in generated code
# (``templates.self_contained``): the names the runtime module always held stay here.
from .. import errors, tree  # noqa: F401
from ..tree import add  # noqa: F401 - generated code accumulates adjoints with rt.add
from .core import (  # noqa: F401
    array_module, static, is_constant, to_device, to_host, enter, leave, managed, added_at,
    added_at_tangent, stop_gradient, is_array, is_structure, unbroadcast, unbroadcast_transposed,
    unbroadcast_to, unbroadcast_to_transposed, add_transposed, add_tangent, is_basic_index, basic_index,
    cast_adjoint, cast_adjoint_transposed, fill_like, fill_like_transposed, check_scalar_output,
    scalar_seed, size_one_seed, zip_length, checked_adjoint, hooked, Unbound, zeros_like, item_of, entry,
    item, broadcast_tangent, broadcast_tangent_transposed, reduction_tangent, cast_tangent,
    cast_tangent_transposed, zeros_tangent, own_tangent, written_tangent, array_operand)
from .containers import (  # noqa: F401
    with_item, without_item, overwritten_adjoint, overwritten_adjoint_rule, iterates_keys, dense_items,
    reversed_list, reversed_list_adjoint, inserted, inserted_adjoints, inserted_tangent, restore,
    snapshot, redo, iterated, as_tuple, sequence_of, sequence_of_tangent, sequence_of_adjoint, fromkeys,
    fromkeys_adjoint, tolist, tolist_adjoint, mapping_of, mapping_of_adjoint, without_key,
    without_key_adjoint, merged, merged_adjoints, concatenated, concatenated_adjoints, repeated,
    repeated_adjoint, iterated_adjoint, ABSENT, overwritten, restore_entry, written_entry,
    written_entry_rule, written_entry_transposed, add_each, add_each_transposed, add_each_tangent,
    items_adjoint, items_adjoint_transposed, add_items, add_items_transposed, add_items_tangent,
    in_form_of, no_items_dot, add_item, rows_adjoint, as_items, as_items_transposed, unpop, zeros_each,
    outputs_adjoint, unpacked_adjoint, item_of_transposed, item_of_transposed_rule)
from .objects import (  # noqa: F401
    keeping_fields, stored, KEPT, differentiated_call, kept, growing, entries, not_in_place, kept_entry,
    kept_fields, kept_read, field, refuse_read_back, check_kept_pullback, is_gradient_function,
    read_back, entry_read_back, super_method, array_attribute, Cells, Globals, scope_of_globals)
from .batched import (  # noqa: F401
    batch_zeros, batch_size, batch_column, batch_stack, batch_each, batch_aligned, batch_broadcast,
    batch_cast, batch_axis, batch_reduction_tangent, batch_reshape, batch_getitem, batch_written,
    batch_add, batch_asarray, batch_matmul)
from .operators import (  # noqa: F401
    log_of_base, matmul_lhs, matmul_lhs_transposed, matmul_rhs, matmul_rhs_transposed)
from .reductions import (  # noqa: F401
    broadcast_reduced, broadcast_reduced_transposed, count_reduced, max_adjoint, max_adjoint_transposed,
    items_extremum_adjoint, items_extremum_adjoint_transposed, items_extremum_transposed,
    items_extremum_tangent, sorted_order, sorted_adjoint, sorted_tangent, items_sum_adjoint,
    items_sum_tangent, nanmean_adjoint, average_adjoint, average_tangent, cumprod_adjoint,
    cumprod_tangent, prod_adjoint, var_adjoint, std_adjoint, quantile_adjoint,
    quantile_adjoint_transposed, quantile_tangent, quantile_tangent_transposed, nanvar_adjoint)
from .linalg import (  # noqa: F401
    norm_adjoint, dot_lhs, dot_rhs, tensordot_adjoint, einsum_adjoint_subscripts, einsum_adjoint,
    einsum_adjoints, einsum_adjoints_transposed_rule, einsum_adjoints_dot, einsum_adjoints_tangent,
    einsum_adjoints_transposed, trace_adjoint, diag_adjoint, diag_adjoint_transposed, kron_adjoint,
    inner_adjoint, from_triangle, to_symmetric, inverse_gaps, solve_adjoint, solve_tangent,
    logdet_adjoint, logdet_tangent, slogdet_adjoint, cholesky_adjoint, cholesky_tangent, eigh_adjoint,
    eigh_tangent, svd_values_adjoint, svd_adjoint, svd_tangent, qr_adjoint, qr_r_adjoint, qr_tangent,
    pinv_adjoint, pinv_tangent, matrix_power_adjoint, matrix_power_tangent, cov_adjoint, cov_tangent,
    corrcoef_adjoint, corrcoef_tangent, multi_dot_adjoint, lstsq_adjoint, lstsq_tangent)
from .shape import (  # noqa: F401
    counts_from_the_end, inverse_permutation, reshape_back, reshape_back_transposed, real_input,
    real_input_transposed, dtype_adjoint, dtype_adjoint_transposed, index_concat, index_concat_adjoint,
    unconcatenate, flattened_adjoint, flattened_tangent, unflattened_adjoint,
    unflattened_adjoint_transposed, unflattened_tangent, getitem_adjoint, getitem_adjoint_transposed,
    written_adjoint, written_adjoint_transposed, window_adjoint, window_adjoint_transposed,
    joined_adjoint, cumsum_adjoint, roll_back, diff_adjoint, sort_adjoint, sort_adjoint_transposed,
    positions, gather_adjoint, gather_adjoint_transposed, gathered, gathered_transposed,
    permuted_adjoint, permuted_tangent, split_adjoint, sorted_like, rollaxis_destination,
    broadcast_arrays_adjoint, meshgrid_adjoint, unique_adjoint, unique_tangent)
from .series import (  # noqa: F401
    full_padding, interp_segments, interp_slope, polyval_powers, trapezoid_weights, ediff1d_adjoint,
    gradient_adjoint, interp_knot_partials)
from .creation import (  # noqa: F401
    linspace_adjoint)
from .pymath import (  # noqa: F401
    items_prod_adjoint, items_prod_tangent, items_dist_adjoint, items_dist_tangent, digamma, erf)
from .scipy_special import (  # noqa: F401
    polygamma_scale)
from .scipy_stats import (  # noqa: F401
    gaussian_cdf_adjoints, gaussian_cdf_tangent, gaussian_cdf_partials)


# Each helper keeps the name it had before its module was split off: rules are labelled
# `srcgrad.runtime.<name>`, and the compiler spells a helper `rt.<name>` by its module.
for _helper in list(globals().values()):
    if isinstance(_helper, (types.FunctionType, type)) and _helper.__module__.startswith(__name__ + "."):
        _helper.__module__ = __name__
del _helper
