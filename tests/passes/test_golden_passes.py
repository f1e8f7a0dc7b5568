"""Golden before/after pairs, two to four per pass: a small user function (here, at module
level: srcgrad reads its source) and the exact program the pass leaves
(``tests/passes/golden.py`` runs the pipeline's steps up to it and prints it), the map
of what each pass does.

When a pass's output changes on purpose, its golden text here is updated in the same
commit (and the example in its module docstring, ``test_pass_docstrings.py``): the diff
then shows what the change does to generated code.  Every pass after ``normalize``
prints names ``normalize`` made (``_t1``, ``b_2``), so a change there moves the later
goldens too.  ``golden.after`` writes a line of the user's file as ``fn:line`` counted
from the function's ``def``, so that moving a function in this file changes nothing.
"""
from __future__ import annotations

import textwrap

import numpy as np

from tests.passes.golden import after


def golden(text: str) -> str:
    """An expected program as ``golden.after`` prints it (indentation and trailing blanks
    as written in this file do not count)."""
    return "\n".join(line.rstrip() for line in textwrap.dedent(text).strip("\n").splitlines()) + "\n"


# ---- desugar -------------------------------------------------------------------------------

def comprehension(x):
    ys = [np.sin(v) for v in x if v > 0]
    return sum(ys)


def walrus_and_chain(a):
    b = c = a * 2.0
    return (d := b + c) * d


def sum_of_generator(x, n):
    return sum(x[i] ** 2 for i in range(n))


def test_desugar_a_comprehension_becomes_a_loop_appending_to_a_new_list():
    assert after("desugar", comprehension, (1,)) == golden("""
        def comprehension(x):
            ys = []
            for v in x:
                if v > 0:
                    ys.append(np.sin(v))
            return sum(ys)
    """)


def test_desugar_a_chained_assignment_and_a_walrus_become_plain_assignments():
    assert after("desugar", walrus_and_chain, (0,)) == golden("""
        def walrus_and_chain(a):
            b = a * 2.0
            c = b
            d = b + c
            return d * d
    """)


def test_desugar_sum_of_a_generator_becomes_a_running_total():
    assert after("desugar", sum_of_generator, (1, 0)) == golden("""
        def sum_of_generator(x, n):
            _total = 0
            for i in range(n):
                _total = _total + x[i] ** 2
            return _total
    """)


# ---- inline --------------------------------------------------------------------------------

def _affine(v, w):
    h = v @ w
    return h + 1.0


def helper_call(x, w):
    h = _affine(x, w)
    return np.sum(h * h)


def _scale(v, k=2.0):
    return v * k


def helper_with_default(x):
    return np.sum(_scale(x) + _scale(x, k=3.0))


def _layer(v, w):
    return np.tanh(_affine(v, w))


def helper_calling_helper(x, w):
    return np.sum(_layer(x, w))


def test_inline_a_helper_call_becomes_its_body_its_names_renamed_apart():
    assert after("inline", helper_call, (1, 2)) == golden("""
        def helper_call(x, w):
            affine_h = x @ w
            h = affine_h + 1.0
            return np.sum(h * h)
    """)


def test_inline_a_default_and_a_keyword_bound_by_assignment():
    assert after("inline", helper_with_default, (1,)) == golden("""
        def helper_with_default(x):
            k = 2.0
            scale_out = x * k
            scale_k = 3.0
            scale_out2 = x * scale_k
            return np.sum(scale_out + scale_out2)
    """)


def test_inline_the_helpers_own_calls_inlined_in_turn():
    assert after("inline", helper_calling_helper, (1, 2)) == golden("""
        def helper_calling_helper(x, w):
            h = x @ w
            affine_out = h + 1.0
            layer_out = np.tanh(affine_out)
            return np.sum(layer_out)
    """)


# ---- exits ---------------------------------------------------------------------------------

def loop_with_break(x, n):
    s = 0.0
    for i in range(n):
        if x[i] > 3:
            break
        s = s + x[i]
    return s


def early_return(a):
    if a > 0:
        return a * 2.0
    return -a


def loop_with_continue(x, n):
    s = 0.0
    for i in range(n):
        if x[i] < 0:
            continue
        s = s + x[i]
    return s


def test_exits_break_becomes_a_flag_the_rest_of_the_loop_tests():
    assert after("exits", loop_with_break, (1, 0)) == golden("""
        def loop_with_break(x, n):
            s = 0.0
            _break = False
            for _i in range(n):
                if not _break:
                    i = _i
                    if x[i] > 3:
                        _break = True
                    if not _break:
                        s = s + x[i]
            return s
    """)


def test_exits_an_early_return_becomes_one_return_at_the_end():
    assert after("exits", early_return, (0,)) == golden("""
        def early_return(a):
            _returned = False
            _return_value = None
            if a > 0:
                _return_value = a * 2.0
                _returned = True
            if not _returned:
                _return_value = -a
                _returned = True
            return _return_value
    """)


def test_exits_continue_skips_the_rest_of_the_iteration_under_a_flag():
    assert after("exits", loop_with_continue, (1, 0)) == golden("""
        def loop_with_continue(x, n):
            s = 0.0
            for i in range(n):
                _continue = False
                if x[i] < 0:
                    _continue = True
                if not _continue:
                    s = s + x[i]
            return s
    """)


# ---- normalize (anf) -----------------------------------------------------------------------

def nested_expression(x, w):
    return np.sum(np.tanh(x @ w) ** 2)


def reassigned_name(a):
    b = a * 2.0
    b = b + a
    b += 1.0
    return b


def carried_in_a_loop(a, n):
    s = 0.0
    for i in range(n):
        s = s + a * i
    return s


def test_normalize_a_nested_expression_becomes_one_primitive_per_statement():
    assert after("normalize", nested_expression, (1, 2)) == golden("""
        _t1 = x @ w
        _t2 = np.tanh(_t1)
        _t3 = _t2 ** 2
        result = np.sum(_t3)
        return result
    """)


def test_normalize_a_reassigned_name_gets_a_new_version_each_time():
    assert after("normalize", reassigned_name, (0,)) == golden("""
        b = a * 2.0
        b_2 = b + a
        b_3 = b_2 + 1.0
        return b_3
    """)


def test_normalize_a_loop_carried_name_is_updated_by_a_copy_at_the_end_of_the_body():
    assert after("normalize", carried_in_a_loop, (0, 0)) == golden("""
        s = 0.0
        for i in range(n):
            _t1 = a * i
            s_2 = s + _t1
            s = s_2
        return s
    """)


# ---- aliases -------------------------------------------------------------------------------

def copy_then_write(x):
    v = x * 1.0
    u = v
    v[0] = 5.0
    return np.sum(u * x)


def view_then_write(x):
    v = x * 1.0
    w = v[1:3]
    v[1] = 0.0
    return np.sum(w * w)


def test_aliases_a_read_through_a_copy_of_an_array_reads_the_arrays_present_name():
    # (normalize left `_t1 = u * x`: `u` is `v`, which the write changed)
    assert after("aliases", copy_then_write, (1,)) == golden("""
        v = x * 1.0
        u = v
        v_overwritten = np.copy(v[0])
        v[0] = 5.0
        _t1 = v * x
        result = np.sum(_t1)
        return result
    """)


def test_aliases_a_view_read_after_a_write_into_its_base_is_made_again():
    # (normalize left `_t1 = w * w`, `w` the view made before the write)
    assert after("aliases", view_then_write, (1,)) == golden("""
        v = x * 1.0
        w = v[1:3]
        v_overwritten = np.copy(v[1])
        v[1] = 0.0
        w_2 = v[1:3]
        _t1 = w_2 * w_2
        result = np.sum(_t1)
        return result
    """)


# ---- reverse -------------------------------------------------------------------------------

def loop_pushing_to_a_stack(a, n):
    s = a
    for i in range(n):
        s = np.sin(s) * a
    return s


def shared_use(a, b):
    c = a * b
    return c * a


def branch(a, b):
    if b > 0:
        c = a * b
    else:
        c = a
    return c * c


def test_reverse_a_loop_pushes_what_its_backward_iteration_needs_to_a_stack():
    assert after("reverse", loop_pushing_to_a_stack, (0, 0)) == golden("""
        loop1_stack = []
        s = a
        for i in range(n):
            _t1 = np.sin(s)
            s_2 = _t1 * a
            loop1_stack.append((_t1, s))
            s = s_2
        # backward
        a_bar = np.zeros_like(a)
        for i in reversed(range(n)):
            _t1, s = loop1_stack.pop()
            s_2_bar = s_bar
            _t1_bar = s_2_bar * a
            a_bar = a_bar + s_2_bar * _t1
            s_bar = _t1_bar * np.cos(s)
        a_bar = a_bar + s_bar
    """)


def test_reverse_a_value_used_twice_accumulates_its_adjoint():
    assert after("reverse", shared_use, (0, 0)) == golden("""
        c = a * b
        result = c * a
        # backward
        c_bar = result_bar * a
        a_bar = result_bar * c
        a_bar = a_bar + c_bar * b
    """)


def test_reverse_a_branchs_backward_sweep_takes_the_branch_the_forward_sweep_took():
    assert after("reverse", branch, (0, 0)) == golden("""
        _t1 = b > 0
        if _t1:
            c = a * b
            c_3 = c
        else:
            c_2 = a
            c_3 = c_2
        result = c_3 * c_3
        # backward
        c_3_bar = result_bar * c_3
        c_3_bar = c_3_bar + result_bar * c_3
        if _t1:
            c_bar = c_3_bar
            a_bar = c_bar * b
        else:
            c_2_bar = c_3_bar
            a_bar = c_2_bar
    """)


# ---- forward -------------------------------------------------------------------------------

def tangent_line(x, w):
    h = np.tanh(x @ w)
    return np.sum(h * h)


def forward_loop(a, n):
    s = 0.0
    for i in range(n):
        s = s + np.sin(a * i)
    return s


def test_forward_each_statement_followed_by_its_tangent():
    assert after("forward", tangent_line, (1, 2)) == golden("""
        _t1 = x @ w
        _t1_dot = x_dot @ w
        h = np.tanh(_t1)
        h_dot = _t1_dot * (1 - h ** 2)
        _t2 = h * h
        _t2_dot = h_dot * h + h_dot * h
        result = np.sum(_t2)
        result_dot = np.sum(_t2_dot)
    """)


def test_forward_a_loop_carries_its_tangent_alongside():
    assert after("forward", forward_loop, (0, 0)) == golden("""
        s = 0.0
        s_dot = rt.zeros_tangent(s)
        for i in range(n):
            _t1 = a * i
            _t1_dot = a_dot * i
            _t2 = np.sin(_t1)
            _t2_dot = _t1_dot * np.cos(_t1)
            s_2 = s + _t2
            s_2_dot = s_dot + _t2_dot
            s = s_2
            s_dot = s_2_dot
    """)


# ---- optimize (with coalesce) --------------------------------------------------------------

def dead_value(x):
    h = np.tanh(x)
    unused = np.exp(x)
    return np.sum(h * 2.0)


def branch_in_a_loop(a, c):
    s = 0.0
    for t in range(3):
        if c:
            s = s + a * t
    return s


def shape_only(x, y):
    return np.sum((x - y) ** 2)


def test_optimize_a_dead_value_is_dropped():
    # (reverse left `unused = np.exp(x)`, `_t1 = h * 2.0` and `result = np.sum(_t1)`)
    assert after("optimize", dead_value, (1,)) == golden("""
        h = np.tanh(x)
        # backward
        _t1_bar = rt.fill_like(x, result_bar)
        h_bar = _t1_bar * 2.0
        x_bar = h_bar * (1 - h ** 2)
    """)


def test_optimize_coalesce_adjoint_copies_become_one_name():
    # (reverse left `s_3_bar = s_bar`, `s_2_bar = s_3_bar`, `s_bar = s_2_bar` and the stack of `s`:
    # the same value under four names, coalesced into `s_bar`; then nothing reads the stack)
    assert after("optimize", branch_in_a_loop, (0, 0)) == golden("""
        # backward
        a_bar = np.zeros_like(a)
        for t in reversed(range(3)):
            if c:
                a_bar += s_bar * t
    """)


def test_optimize_a_value_read_only_for_its_shape_is_not_kept():
    # (reverse left `_t2 = _t1 ** 2`, read by `_t2_bar = rt.fill_like(_t2, result_bar)` for its shape)
    assert after("optimize", shape_only, (1, 1)) == golden("""
        _t1 = x - y
        # backward
        _t1_bar = result_bar * (2 * _t1)
        x_bar = rt.unbroadcast(_t1_bar, x)
    """)


# ---- emit ----------------------------------------------------------------------------------

def small_model(x, w):
    h = np.tanh(x @ w)
    return np.sum(h * h)


def test_emit_the_grad_module():
    assert after("emit", small_model, (1, 2)) == golden("""
        # srcgrad: reverse mode of small_model (small_model:1) | wrt: x | backend: numpy
        import numpy as np
        from srcgrad import runtime as rt

        def small_model_grad(x, w, result_bar=1.0):
            # ---- forward sweep ----
            # small_model:2  h = np.tanh(x @ w)
            _t1 = x @ w
            h = np.tanh(_t1)
            # small_model:3  return np.sum(h * h)
            _t2 = h * h
            # ---- backward sweep ----
            # small_model:3  return np.sum(h * h)
            _t2_bar = rt.fill_like(_t2, result_bar)
            h_bar = _t2_bar * h
            h_bar = h_bar + _t2_bar * h
            # small_model:2  h = np.tanh(x @ w)
            _t1_bar = h_bar * (1 - h ** 2)
            x_bar = rt.matmul_lhs(_t1_bar, x, w)
            return x_bar
    """)


def test_emit_the_jvp_module():
    assert after("emit", small_model, (1, 2), mode="jvp") == golden("""
        # srcgrad: forward mode of small_model (small_model:1) | wrt: x | backend: numpy
        import numpy as np
        from srcgrad import runtime as rt

        def small_model_jvp(x, w, x_dot):
            # small_model:2  h = np.tanh(x @ w)
            _t1 = x @ w
            _t1_dot = x_dot @ w
            h = np.tanh(_t1)
            h_dot = _t1_dot * (1 - h ** 2)
            # small_model:3  return np.sum(h * h)
            _t2 = h * h
            _t2_dot = h_dot * h + h_dot * h
            result = np.sum(_t2)
            result_dot = np.sum(_t2_dot)
            return (result, result_dot)
    """)
