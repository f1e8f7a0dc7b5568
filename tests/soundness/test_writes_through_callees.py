"""Writes made through a callee: into a global the backward sweep reads (through aliases,
partials, lambdas, given functions), and into arguments of inlined callees (lists, dicts,
arrays, views).  Each is followed (checked against finite differences) or refused at the
user's line."""
from __future__ import annotations

import functools

import numpy as np
import pytest

import srcgrad
from srcgrad.testing import check_grads


X3 = np.array([0.5, -0.3, 1.2])


def numerical_grad(f, x, eps=1e-6):
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[idx] = eps
        g[idx] = (f(x + step) - f(x - step)) / (2 * eps)
    return g


# ---- writes through callees that slip past analysis/outside.py ----------------------------

G = np.array([1.0, 2.0, 3.0])


H = np.array([1.0, 2.0, 3.0])


GL = [np.array([1.0, 2.0, 3.0])]


GD = {"w": np.array([1.0, 2.0, 3.0])}


def _reset():
    for a in (G, H, GL[0], GD["w"]):
        a[:] = [1.0, 2.0, 3.0]


def writes_through_a_tuple_alias():
    a, b = G, H
    a[0] = 9.0


def writes_through_a_conditional_alias(c=True):
    a = G if c else H
    a[0] = 9.0


def writes_through_a_list_holding_it():
    held = [G]
    held[0][0] = 9.0


def writes_through_a_walrus():
    if (a := G) is not None:
        a[0] = 9.0


def writes_through_an_augmented_alias():
    a = G
    a += 1.0


def writes_by_positional_out():
    np.multiply(G, 3.0, G)


def writes_through_np_reshape():
    np.reshape(G, (3,))[0] = 9.0


writes_in_a_lambda = lambda: G.fill(9.0)  # noqa: E731


def _set_first(i):
    G[i] = 9.0


writes_in_a_partial = functools.partial(_set_first, 0)


def writes_each_of_a_global_list():
    for a in GL:
        a[0] = 9.0


def writes_each_of_a_global_dict():
    for a in GD.values():
        a[0] = 9.0


def writes_a_starred_entry():
    a, *rest = GL
    a[0] = 9.0


WRITERS = [(w, "G") for w in (
    writes_through_a_tuple_alias, writes_through_a_conditional_alias, writes_through_a_list_holding_it,
    writes_through_a_walrus, writes_through_an_augmented_alias, writes_by_positional_out,
    writes_through_np_reshape, writes_in_a_lambda)] + [
    (writes_each_of_a_global_list, "GL[0]"), (writes_a_starred_entry, "GL[0]"),
    (writes_each_of_a_global_dict, "GD['w']")]


def _check_refused_or_right(loss, *args):
    _reset()
    try:
        got = srcgrad.grad(loss)(X3, *args)
    except srcgrad.errors.SrcgradError:
        return  # refused: right

    def f(x):
        _reset()
        return loss(x, *args)
    np.testing.assert_allclose(got, numerical_grad(f, X3), atol=1e-6)


@pytest.mark.parametrize("case", WRITERS, ids=lambda c: str(WRITERS.index(c)))
def test_a_write_into_a_global_the_backward_sweep_reads_is_refused(case, tmp_path, monkeypatch):
    # analysis/outside.py followed an alias only through `a = <place>`: tuple targets, for
    # targets, walrus, conditional and list displays, positional out=, np.reshape(G) (a view)
    # and lambdas were not seen, and the gradient silently used the array as the call left it.
    writer, reads = case
    name = next(k for k, v in globals().items() if v is writer and not k.startswith("_"))
    source = f"from tests.soundness.test_writes_through_callees import *\n\n\ndef loss(x):\n" \
             f"    y = np.sum(np.sin(x * {reads}) * x)\n    {name}()\n    return y\n"
    (tmp_path / "writes_through_callees_case.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    import sys
    sys.modules.pop("writes_through_callees_case", None)
    module = importlib.import_module("writes_through_callees_case")
    _reset()
    with pytest.raises(srcgrad.errors.SrcgradError, match="writes into"):
        srcgrad.grad(module.loss)(X3)


def calls_a_partial(x):
    y = np.sum(np.sin(x * G) * x)
    writes_in_a_partial()
    return y


def calls_a_given_writer(x, writer):
    y = np.sum(np.sin(x * G) * x)
    writer()
    return y


def test_a_partial_writing_a_global_is_refused_or_right():
    _check_refused_or_right(calls_a_partial)


def test_a_given_function_writing_a_global_is_refused_or_right():
    _check_refused_or_right(calls_a_given_writer, writes_by_positional_out)


X = np.array([0.3, -1.2, 0.7])


def scale_in_place(a, k):
    a *= k


def calls_a_function_that_scales_in_place(x):
    y = x * 1.0
    scale_in_place(y, 3.0)
    return np.sum(y * x)


def set_key(d, v):
    d["k"] = v


def calls_a_function_that_fills_a_dict(x):
    d = {}
    set_key(d, x * 2)
    return np.sum(d["k"])


def writes_into_an_array_stored_in_a_list(x):
    y = x * 1.0
    ys = [y, x]
    y[0] = 0.0
    return np.sum(np.stack(ys) * x)


def writes_into_an_array_appended_to_a_list(x):
    y = x * 1.0
    ys = []
    ys.append(y)
    y[0] = 0.0
    return np.sum(np.stack(ys) * x)


def first_row(a):
    return a[0]


def writes_into_an_array_a_callee_returned_a_view_of(x):
    y = np.outer(x, x)
    r = first_row(y)
    y[0] = 5.0
    return np.sum(r * x)


def zips_differentiated_values(x):
    pairs = list(zip(x, x * 2))
    return pairs[0][0] * pairs[1][1]


@pytest.mark.parametrize("fn", [calls_a_function_that_scales_in_place,
                                writes_into_an_array_a_callee_returned_a_view_of], ids=lambda f: f.__name__)
def test_changes_made_through_an_inlined_callee_are_followed(fn):
    """The callee's parameter is the caller's array once inlined (`a = y`), and the view
    it returns (`return a[0]`) is made again after the write into its base."""
    check_grads(fn, (X,))


@pytest.mark.parametrize("fn, message", [
    (writes_into_an_array_stored_in_a_list, r"stored or passed on at test_writes_through_callees.py:\d+: `ys = \[y, x\]`"),
    (writes_into_an_array_appended_to_a_list, r"stored or passed on at .*`ys.append\(y\)`"),
])
def test_changes_srcgrad_cannot_follow_are_refused(fn, message):
    """Each gave a wrong value or gradient silently: a change made inside another
    function, a write into an array a list or a callee's result also holds."""
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match=message):
        srcgrad.grad(fn)(X)


def test_values_zipped_into_a_list():
    # (it gave a wrong gradient silently, then was refused; `list(zip(...))` is now the list of
    # its tuples, lowered as a comprehension, each item's adjoint reaching its source)
    check_grads(zips_differentiated_values, (X,))


def test_a_function_filling_a_dict_it_is_given_is_inlined():
    # (its write is the caller's own: `d["k"] = x * 2` on the caller's `d`)
    np.testing.assert_allclose(srcgrad.grad(calls_a_function_that_fills_a_dict)(X), 2.0 * np.ones_like(X))


def two_results(h, w):
    return h * w, h + w


def uses_the_first_result_only(x, w):
    a, _ = two_results(x, w)
    return np.sum(a)


def stacks_with_asarray(x):
    return np.sum(np.asarray([x[0], x[1]]) ** 2)


def set_k(d):
    d["k"] = 2.0


def reads_a_dict_a_callee_changed(x):
    d = {"k": 1.0}
    set_k(d)
    return x * d["k"]


def test_first_result_asarray_of_a_list_and_a_dict_changed_by_a_callee():
    """A crash (`a, _ = f(x)`: the pullback got a 1-tuple) and two silent zeros or
    wrong values (`np.asarray([...])`; `d["k"]` read as its literal though a callee
    changed it)."""
    check_grads(uses_the_first_result_only, (X, X + 1), wrt=(0, 1))
    np.testing.assert_allclose(srcgrad.grad(stacks_with_asarray)(X), [2 * X[0], 2 * X[1], 0.0], rtol=1e-14)
    value, g = srcgrad.value_and_grad(reads_a_dict_a_callee_changed)(1.5)
    assert (value, g) == (3.0, 2.0)
