"""Rules whose adjoints must follow the forward exactly:

* ``order='F'`` in ``reshape``/``ravel``/``flatten``: the adjoint unravels in the
  same order;
* ``np.einsum`` where NumPy broadcasts a length-1 axis of an operand, and user
  rules registered ``elementwise=True`` whose inputs broadcast: adjoints summed
  back to each operand's shape;
* ``np.transpose`` with negative axes;
* array methods on expressions, ``clip`` with one bound, backward divisions by a
  Python float zero, tuple-valued custom adjoints with an unused output,
  ``np.asarray`` of a scalar read.

Each is checked against central differences in float64 (the optimizer on and
off), in float32, and inside a loop or a helper.
"""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from tests.finite_differences import numerical_grad

import srcgrad
from srcgrad import errors

OPT = pytest.mark.parametrize("optimize", [True, False], ids=["opt", "noopt"])
RNG = np.random.default_rng(0)
M = RNG.normal(size=(2, 3))
W6 = np.arange(6.0)


def check_gradient(f, args, optimize, wrt=0, atol=1e-6):
    """grad(f, wrt) against central differences in float64; float32 stays float32 and close."""
    args = [np.array(a, dtype=np.float64) for a in args]
    g = srcgrad.grad(f, wrt=wrt, optimize=optimize)(*[a.copy() for a in args])
    np.testing.assert_allclose(g, numerical_grad(f, [a.copy() for a in args], wrt), rtol=1e-5, atol=atol)
    g32 = srcgrad.grad(f, wrt=wrt, optimize=optimize)(*[a.astype(np.float32) for a in args])
    assert g32.dtype == np.float32
    np.testing.assert_allclose(g32, g, rtol=2e-3, atol=2e-3)
    return g


def assert_refused(f, *args, kind=errors.UserCodeError, match=None):
    with pytest.raises(kind, match=match) as info:
        srcgrad.grad(f)(*args)
    assert __file__.rsplit("/", 1)[-1] in str(info.value)
    return info.value


# ---- order='F' ---------------------------------------------------------------------------


def ravel_method_f(x):
    return np.sum(x.ravel(order="F") * W6)


def ravel_fn_f(x):
    return np.sum(np.ravel(x, "F") * W6)


def flatten_f(x):
    return np.sum(x.flatten("F") * W6)


def reshape_method_f(x):
    return np.sum(x.reshape(-1, 2, order="F") * W6.reshape(3, 2))


def reshape_fn_f(x):
    return np.sum(np.reshape(x, (3, 2), order="F") * W6.reshape(3, 2))


def reshape_fn_c(x):
    return np.sum(np.reshape(x, (3, 2), order="C") * W6.reshape(3, 2))


def reshape_f_of_expr(x):
    return np.sum((x * 2.0).reshape((3, 2), order="F") ** 2 * W6.reshape(3, 2))


def reshape_f_loop(x):
    s = 0.0
    for i in range(2):
        s = s + np.sum(np.reshape(x * (i + 1.0), (3, 2), order="F") * W6.reshape(3, 2))
    return s


def _unravel(v):
    return np.ravel(v, order="F")


def ravel_f_helper(x):
    return np.sum(_unravel(x) * W6)


@OPT
@pytest.mark.parametrize("f", [ravel_method_f, ravel_fn_f, flatten_f, reshape_method_f, reshape_fn_f,
                               reshape_fn_c, reshape_f_of_expr, reshape_f_loop, ravel_f_helper])
def test_order_f(f, optimize):
    g = check_gradient(f, [M], optimize)
    if f in (ravel_method_f, ravel_fn_f, flatten_f):
        np.testing.assert_allclose(g, [[0, 2, 4], [1, 3, 5]])


def ravel_order_a(x):
    return np.sum(np.ravel(x, order="A") * W6)


def reshape_order_k(x):
    return np.sum(x.reshape((3, 2), order="K") * W6.reshape(3, 2))


@OPT
def test_order_a_follows_the_layout(optimize):
    # 'A' reads in Fortran order an array that is Fortran- and not C-contiguous.
    check_gradient(ravel_order_a, [M], optimize)
    g = srcgrad.grad(ravel_order_a, optimize=optimize)(np.asfortranarray(M))
    np.testing.assert_allclose(g, [[0, 2, 4], [1, 3, 5]])
    g = srcgrad.grad(ravel_order_a, optimize=optimize)(np.ascontiguousarray(M))
    np.testing.assert_allclose(g, [[0, 1, 2], [3, 4, 5]])


def ravel_order_k(x):
    return np.sum(np.ravel(x, order="K") * W6)


def test_order_k_refused():
    assert_refused(ravel_order_k, M, kind=errors.NoDerivativeRuleError, match="order='K'")
    assert_refused(reshape_order_k, M, kind=errors.NoDerivativeRuleError, match="order='K'")


# ---- einsum broadcasting a length-1 axis ----------------------------------------------------


def einsum_rows(x, z):
    w = np.mean(z, axis=0, keepdims=True)  # (1, 4)
    return np.sum(np.einsum("ij,ij->i", x, w) ** 2)


def einsum_input(x, b):
    return np.sum(np.einsum("ij,ij->i", x, b) ** 2)


def einsum_batched(a, b):
    return np.sum(np.einsum("bij,bjk->bik", a, b) ** 2)


def einsum_scalar(a, b):
    return np.einsum("i,i->", a, b) ** 2


def einsum_three(a, b, c):
    return np.sum(np.einsum("ij,ij,ij->j", a, b, c) ** 2)


def einsum_ellipsis(a, b):
    return np.sum(np.einsum("...j,...j->...", a, b) ** 2)


def einsum_loop(x, b):
    s = 0.0
    for i in range(2):
        s = s + np.sum(np.einsum("ij,ij->i", x, b * (i + 1.0)) ** 2)
    return s


@OPT
@pytest.mark.parametrize("f, shapes, wrt", [
    (einsum_rows, [(3, 4), (3, 4)], 1), (einsum_rows, [(3, 4), (3, 4)], 0),
    (einsum_input, [(3, 4), (1, 4)], 1), (einsum_input, [(1, 4), (3, 4)], 0),
    (einsum_batched, [(2, 3, 4), (1, 4, 5)], 1), (einsum_batched, [(1, 3, 4), (2, 4, 5)], 0),
    (einsum_scalar, [(3,), (1,)], 1), (einsum_scalar, [(1,), (3,)], 0),
    (einsum_three, [(3, 4), (1, 4), (3, 1)], 1), (einsum_three, [(3, 4), (1, 4), (3, 1)], 2),
    (einsum_ellipsis, [(3, 4), (1, 4)], 1), (einsum_loop, [(3, 4), (1, 4)], 1),
])
def test_einsum_broadcast(f, shapes, wrt, optimize):
    args = [RNG.normal(size=s) for s in shapes]
    g = check_gradient(f, args, optimize, wrt=wrt)
    assert g.shape == shapes[wrt]


# ---- user elementwise rules whose inputs broadcast ---------------------------------------


def _my_atan2(y, x):
    return np.arctan2(y, x)


my_atan2 = srcgrad.custom_adjoint(_my_atan2)


@my_atan2.defadjoint(elementwise=True)
def _my_atan2_adjoint(ans_bar, ans, y, x):
    d = x ** 2 + y ** 2
    return ans_bar * x / d, -ans_bar * y / d


def atan2_mean(y, z):
    x = np.mean(z, axis=0, keepdims=True)
    return np.sum(my_atan2(y, x))


def atan2_inputs(y, x):
    return np.sum(my_atan2(y, x) ** 2)


def atan2_loop(y, x):
    s = 0.0
    for i in range(2):
        s = s + np.sum(my_atan2(y * (i + 1.0), x))
    return s


@OPT
@pytest.mark.parametrize("f, shapes, wrt", [
    (atan2_mean, [(3, 4), (3, 4)], 1), (atan2_mean, [(3, 4), (3, 4)], 0),
    (atan2_inputs, [(3, 4), (1, 4)], 1), (atan2_inputs, [(3, 4), (1, 4)], 0),
    (atan2_inputs, [(4,), (3, 1)], 0), (atan2_inputs, [(4,), (3, 1)], 1),
    (atan2_inputs, [(3, 4), ()], 1), (atan2_loop, [(3, 4), (4,)], 1),
])
def test_user_elementwise_rule_broadcasts(f, shapes, wrt, optimize):
    args = [RNG.normal(size=s) + 2.0 for s in shapes]
    g = check_gradient(f, args, optimize, wrt=wrt)
    assert np.shape(g) == shapes[wrt]


def atan2_float(y):
    return np.sum(my_atan2(y, 0.7))


@OPT
def test_user_elementwise_rule_with_a_float(optimize):
    check_gradient(atan2_float, [RNG.normal(size=(3, 4))], optimize)


# ---- transpose with negative axes ------------------------------------------------------------


def transpose_negative(a):
    return np.sum(np.transpose(a, (-1, 0, 1)) * np.arange(24.0).reshape(4, 2, 3))


def transpose_negative_2d(a):
    return np.sum(np.transpose(a, (-1, 0)) * np.array([[1.0, 2.0]]))


def transpose_negative_cube(a):
    return np.sum(np.transpose(a, (1, -1, 0)) * np.arange(8.0).reshape(2, 2, 2))


def transpose_method_negative(a):
    return np.sum(a.transpose(-2, -1, 0) * np.arange(24.0).reshape(3, 4, 2))


@OPT
@pytest.mark.parametrize("f, shape", [(transpose_negative, (2, 3, 4)), (transpose_negative_2d, (1, 2)),
                                      (transpose_negative_cube, (2, 2, 2)),
                                      (transpose_method_negative, (2, 3, 4))])
def test_transpose_negative_axes(f, shape, optimize):
    check_gradient(f, [RNG.normal(size=shape)], optimize)


# ---- clip with one bound -------------------------------------------------------------------


def clip_method_lower(x):
    return np.sum(x.clip(-0.5) ** 2)


def clip_method_max(x):
    return np.sum(x.clip(max=1.0) ** 2)


def clip_method_min_keyword(x):
    return np.sum(x.clip(min=0.1) ** 2)


def clip_fn_min_keyword(x):
    return np.sum(np.clip(x, min=-0.5, max=1.0) ** 2)


def clip_fn_max_only(x):
    return np.sum(np.clip(x, None, 1.0) ** 2)


def clip_expr_loop(x):
    s = 0.0
    for i in range(2):
        s = s + np.sum((x * (i + 1.0)).clip(-0.5) ** 2)
    return s


@OPT
@pytest.mark.parametrize("f", [clip_method_lower, clip_method_max, clip_method_min_keyword,
                               clip_fn_min_keyword, clip_fn_max_only, clip_expr_loop])
def test_clip_one_bound(f, optimize):
    check_gradient(f, [np.array([-1.0, 0.2, 2.0, -0.3])], optimize)


# ---- array methods on expressions: refused at the user's line, as on names ---------------------


def method_on_product(x):
    return np.sum((x * 1.5).compress([True, False, True, True]))


def method_on_index(x):
    return np.sum(x[None].conj())


def method_on_call(x):
    return np.sum(np.tanh(x).conjugate())


def method_on_method(x):
    return np.sum(x.reshape(2, 2).argpartition(1))


@pytest.mark.parametrize("f, method", [(method_on_product, "compress"), (method_on_index, "conj"),
                                       (method_on_call, "conjugate"), (method_on_method, "argpartition")])
@pytest.mark.parametrize("optimize", [True, False])
def test_array_method_on_expression_refused(f, method, optimize):
    with pytest.raises(errors.UnsupportedSyntaxError, match=f"`.{method}\\(\\)`") as info:
        srcgrad.grad(f, optimize=optimize)(np.array([1.0, 2.0, 3.0, 4.0]))
    assert __file__.rsplit("/", 1)[-1] in str(info.value)


@pytest.mark.parametrize("method", ["conjugate", "compress", "sort", "conj", "argpartition"])  # (`tolist`: has a
# rule now, tests/language/test_container_operations.py)
def test_other_array_methods_on_expression_refused(method, tmp_path):
    path = tmp_path / f"method_on_expression_{method}.py"
    path.write_text(f"import numpy as np\n\n\ndef g(x):\n    return np.sum((x * 1.5).{method}())\n")
    spec = importlib.util.spec_from_file_location(f"method_on_expression_{method}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(errors.UnsupportedSyntaxError, match=f"`.{method}\\(\\)`") as info:
        srcgrad.grad(mod.g)(np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert str(path) in str(info.value) and ":5:" in str(info.value)


# ---- a backward division by a Python float zero follows NumPy --------------------------------


def masked_mean(x, mask):
    count = float(np.sum(mask))
    return np.sum(x * mask) / count


def over_zero(x):
    return np.sum(x ** 2) / 0.0


def over_zero_helper(x):
    return masked_mean(x, np.zeros(2))


@OPT
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_division_by_python_zero(optimize):
    x = np.array([1.0, 2.0])
    g = srcgrad.grad(masked_mean, optimize=optimize)(x, np.zeros(2))
    assert np.all(np.isnan(g))  # 0 * inf, as NumPy
    g = srcgrad.grad(over_zero, optimize=optimize)(x)
    assert np.all(np.isinf(g))
    g = srcgrad.grad(over_zero_helper, optimize=optimize)(x)
    assert np.all(np.isnan(g))
    check_gradient(masked_mean, [x, np.array([1.0, 0.0])], optimize)
    g32 = srcgrad.grad(over_zero, optimize=optimize)(x.astype(np.float32))
    assert g32.dtype == np.float32


# ---- a custom adjoint of several outputs, one unused -------------------------------------


@srcgrad.custom_adjoint
def two(x):
    return x * 2, x * 3


@two.defadjoint
def _two_adjoint(ans_bar, ans, x):
    return ans_bar[0] * 2 + ans_bar[1] * 3


def two_first(x):
    a, b = two(x)
    return np.sum(a ** 2)


def two_second(x):
    a, b = two(x)
    return np.sum(np.sin(b))


def two_both(x):
    a, b = two(x)
    return np.sum(a * b)


def two_loop(x):
    s = 0.0
    for i in range(2):
        a, b = two(x * (i + 1.0))
        s = s + np.sum(a ** 2)
    return s


def _two_helper(x):
    a, _ = two(x)
    return a


def two_in_helper(x):
    return np.sum(_two_helper(x) ** 2)


@OPT
@pytest.mark.parametrize("f", [two_first, two_second, two_both, two_loop, two_in_helper])
def test_custom_adjoint_tuple_with_unused_output(f, optimize):
    check_gradient(f, [np.array([0.3, -1.2, 0.7])], optimize)


# ---- a sequence rule given a value of a kind unknown when compiling ---------------------------


def asarray_of_read(a):
    return np.sum(np.asarray(a[tuple([1, 2])]) * 2.0)


def asarray_of_read_twice(a):
    v = a[tuple([1, 2])]
    return np.sum(np.asarray(v) * 2.0) + np.sum(np.array(v) ** 2)


def asarray_of_rows(a):
    return np.sum(np.asarray(a[tuple([1])]) ** 2)


@OPT
@pytest.mark.parametrize("f", [asarray_of_read, asarray_of_read_twice, asarray_of_rows])
def test_sequence_rule_of_unknown_kind(f, optimize):
    check_gradient(f, [np.arange(20.0).reshape(4, 5) / 10], optimize)


# ---- a user's rule not declared elementwise, whose adjoint has another shape ----------------


def _my_hypot(a, b):
    return np.hypot(a, b)


my_hypot = srcgrad.custom_adjoint(_my_hypot)


@my_hypot.defadjoint
def _my_hypot_adjoint(ans_bar, ans, a, b):
    return ans_bar * a / ans, ans_bar * b / ans


def hypot_same(a, b):
    return np.sum(my_hypot(a, b))


def hypot_broadcast(a, b):
    return np.sum(my_hypot(a, b))


@OPT
def test_user_rule_same_shapes(optimize):
    check_gradient(hypot_same, [RNG.normal(size=(3, 4)), RNG.normal(size=(3, 4))], optimize, wrt=1)


@OPT
def test_user_rule_broadcast_refused(optimize):
    with pytest.raises(errors.NoDerivativeRuleError, match=r"shape \(3, 4\) for `b`, of shape \(1, 4\)") \
            as info:
        srcgrad.grad(hypot_broadcast, wrt=1, optimize=optimize)(RNG.normal(size=(3, 4)),
                                                                RNG.normal(size=(1, 4)))
    assert "test_rules_adjoints_follow_the_forward.py:" in str(info.value) and "elementwise=True" in str(info.value)


# ---- array methods with a NumPy function's rule: on names and expressions --------------------


def cumsum_method(x):
    return np.sum(x.cumsum() ** 2)


def cumsum_of_expression(x):
    return np.sum((x * 1.5).cumsum(axis=1) ** 2)


def swapaxes_of_index(x):
    return np.sum(x[None].swapaxes(0, 2) * np.arange(6.0).reshape(3, 2, 1))


def trace_of_product(x):
    return (x @ x.T).trace() + x[:, :2].trace(offset=1)


def cumsum_in_loop(x):
    s = 0.0
    for i in range(2):
        s = s + np.sum((x * (i + 1.0)).cumsum(0) ** 2)
    return s


@OPT
@pytest.mark.parametrize("f", [cumsum_method, cumsum_of_expression, swapaxes_of_index, trace_of_product,
                               cumsum_in_loop])
def test_array_methods_with_rules(f, optimize):
    check_gradient(f, [M], optimize)


def method_on_list_item(x):
    xs = [x * 1.5, x]
    return np.sum(xs[0].conjugate())


def test_array_method_of_unknown_receiver_is_a_named_error():
    # The receiver is known to be an array only when it runs: a named error, not a TypeError.
    with pytest.raises(errors.NoDerivativeRuleError, match=r"`.conjugate\(\)`"):
        srcgrad.grad(method_on_list_item)(np.array([1.0, 2.0]))
