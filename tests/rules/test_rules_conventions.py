"""Conventions at non-smooth and singular points, each with exact expected values.

Finite differences cannot check these (the derivative does not exist there, or
the formula divides by zero), so each test states the value the rule's
docstring promises.  Every test runs the compiled gradient with the optimizer
on and off; a few also call the rule function directly.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import srcgrad
from srcgrad.rules import elementwise, linalg, operators, reductions

OPTIMIZE = pytest.mark.parametrize("optimize", [True, False], ids=["opt", "noopt"])


def grad(fn, *args, wrt=0, optimize=True):
    """The compiled gradient; a NaN-producing or warning rule fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return srcgrad.grad(fn, wrt=wrt, optimize=optimize)(*args)


def assert_exact(actual, expected):
    np.testing.assert_array_equal(actual, np.asarray(expected, dtype=np.float64))


# ---- abs and ReLU: derivative 0 at 0 -------------------------------------------


def sum_abs(x):
    return np.sum(np.abs(x))


def sum_builtin_abs(x):
    return np.sum(abs(x))


def sum_relu(x):
    return np.sum(np.maximum(x, 0))


def sum_relu_constant_first(x):
    return np.sum(np.maximum(0.0, x))


def sum_min_zero(x):
    return np.sum(np.minimum(x, 0))


@OPTIMIZE
@pytest.mark.parametrize("fn, expected", [
    (sum_abs, [-1, 0, 1]),
    (sum_builtin_abs, [-1, 0, 1]),
    (sum_relu, [0, 0, 1]),
    (sum_relu_constant_first, [0, 0, 1]),
    (sum_min_zero, [1, 0, 0]),
], ids=["np.abs", "abs", "maximum(x,0)", "maximum(0,x)", "minimum(x,0)"])
def test_kink_at_zero_has_derivative_zero(fn, expected, optimize):
    assert_exact(grad(fn, np.array([-2.0, 0.0, 3.0]), optimize=optimize), expected)


def test_abs_rule_directly():
    x = np.array([-2.0, 0.0, 3.0])
    assert_exact(elementwise.absolute(np.ones(3), np.abs(x), x), [-1, 0, 1])


# ---- maximum / minimum of two differentiated arrays: ties split 0.5 / 0.5 ---------


def sum_maximum(x, y):
    return np.sum(np.maximum(x, y) * np.array([1.0, 2.0, 4.0]))


def sum_minimum(x, y):
    return np.sum(np.minimum(x, y) * np.array([1.0, 2.0, 4.0]))


@OPTIMIZE
@pytest.mark.parametrize("fn, expected_x, expected_y", [
    (sum_maximum, [0.5, 2, 0], [0.5, 0, 4]),
    (sum_minimum, [0.5, 0, 4], [0.5, 2, 0]),
], ids=["maximum", "minimum"])
def test_two_array_ties_split_evenly(fn, expected_x, expected_y, optimize):
    x, y = np.array([1.0, 5.0, -1.0]), np.array([1.0, 2.0, 3.0])
    gx, gy = grad(fn, x, y, wrt=(0, 1), optimize=optimize)
    assert_exact(gx, expected_x)
    assert_exact(gy, expected_y)


def sum_fmax(x, y):
    return np.sum(np.fmax(x, y) * np.array([1.0, 2.0, 4.0, 8.0]))


def sum_fmin(x, y):
    return np.sum(np.fmin(x, y) * np.array([1.0, 2.0, 4.0, 8.0]))


@OPTIMIZE
@pytest.mark.parametrize("fn", [sum_fmax, sum_fmin], ids=["fmax", "fmin"])
def test_fmax_fmin_skip_nan_and_split_ties(fn, optimize):
    """NaN on one side: the adjoint goes to the other; on both: to ``x1``; a tie: 0.5/0.5."""
    x, y = np.array([np.nan, 1.0, np.nan, 2.0]), np.array([3.0, np.nan, np.nan, 2.0])
    gx, gy = srcgrad.grad(fn, wrt=(0, 1), optimize=optimize)(x, y)
    assert_exact(gx, [0, 2, 4, 4])
    assert_exact(gy, [1, 0, 0, 4])


@OPTIMIZE
def test_sinc_has_derivative_zero_at_zero(optimize):
    assert_exact(grad(lambda x: np.sum(np.sinc(x)), np.array([0.0, 0.0]), optimize=optimize), [0, 0])


def sum_maximum_broadcast(x, y):
    return np.sum(np.maximum(x, y))


@OPTIMIZE
def test_tie_split_sums_back_over_broadcasting(optimize):
    x, y = np.array([[1.0, 2.0], [1.0, 0.0]]), np.array([1.0, 2.0])
    gx, gy = grad(sum_maximum_broadcast, x, y, wrt=(0, 1), optimize=optimize)
    assert_exact(gx, [[0.5, 0.5], [0.5, 0]])
    assert_exact(gy, [1.0, 1.5])


def test_maximum_rule_directly():
    x, y = np.array([1.0, 5.0, -1.0]), np.array([1.0, 2.0, 3.0])
    gx, gy = elementwise.maximum(np.ones(3), np.maximum(x, y), x, y)
    assert_exact(gx, [0.5, 1, 0])
    assert_exact(gy, [0.5, 0, 1])


# ---- clip: the gradient passes at a bound (inclusive) -----------------------------


def sum_clip(x):
    return np.sum(np.clip(x, -1.0, 1.0))


def sum_clip_method(x):
    return np.sum(x.clip(-1.0, 1.0))


def sum_clip_arrays(x, lo, hi):
    return np.sum(np.clip(x, lo, hi))


@OPTIMIZE
@pytest.mark.parametrize("fn", [sum_clip, sum_clip_method], ids=["np.clip", "x.clip"])
def test_clip_is_inclusive_at_its_bounds(fn, optimize):
    x = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    assert_exact(grad(fn, x, optimize=optimize), [0, 1, 1, 1, 0])


@OPTIMIZE
def test_clip_bounds_get_the_gradient_outside(optimize):
    x = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    lo, hi = np.full(5, -1.0), np.full(5, 1.0)
    gx, glo, ghi = grad(sum_clip_arrays, x, lo, hi, wrt=(0, 1, 2), optimize=optimize)
    assert_exact(gx, [0, 1, 1, 1, 0])
    assert_exact(glo, [1, 0, 0, 0, 0])
    assert_exact(ghi, [0, 0, 0, 0, 1])


# ---- powers ------------------------------------------------------------------------


def sum_power(x, y):
    return np.sum(x ** y)


def sum_np_power(x, y):
    return np.sum(np.power(x, y))


def sum_square_op(x):
    return np.sum(x ** 2)


def sum_cube_op(x):
    return np.sum(x ** 3)


def sum_power_zero(x):
    return np.sum(x ** 0)


def sum_power_one(x):
    return np.sum(x ** 1)


def sum_np_power_two(x):
    return np.sum(np.power(x, 2))


@OPTIMIZE
@pytest.mark.parametrize("fn", [sum_power, sum_np_power], ids=["**", "np.power"])
def test_power_at_zero_base_has_no_nan(fn, optimize):
    x, y = np.array([0.0, 0.0, 1.0, 4.0]), np.array([2.0, 3.0, 3.0, 0.5])
    gx, gy = grad(fn, x, y, wrt=(0, 1), optimize=optimize)
    assert_exact(gx, [0, 0, 3, 0.25])
    assert_exact(gy, [0, 0, 0, np.log(4.0) * 2.0])


@OPTIMIZE
@pytest.mark.parametrize("fn, expected", [
    (sum_square_op, [0, -4, 6]),
    (sum_np_power_two, [0, -4, 6]),
    (sum_cube_op, [0, 12, 27]),
    (sum_power_zero, [0, 0, 0]),
    (sum_power_one, [1, 1, 1]),
], ids=["x**2", "np.power(x,2)", "x**3", "x**0", "x**1"])
def test_integer_exponent_uses_n_x_to_the_n_minus_1(fn, expected, optimize):
    """Exact at 0 and at negative bases, where a log-based formula gives NaN."""
    assert_exact(grad(fn, np.array([0.0, -2.0, 3.0]), optimize=optimize), expected)


def test_power_rule_directly_at_zero():
    x, y = np.array([0.0, 2.0]), np.array([2.0, 3.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gx, gy = operators.power(np.ones(2), x ** y, x, y)
    assert_exact(gx, [0, 12])
    assert_exact(gy, [0, 8 * np.log(2.0)])


# ---- max / min reductions: a tie's adjoint goes to the first extremum --------------


def max_all(x):
    return np.max(x)


def min_all(x):
    return np.min(x)


def max_method(x):
    return x.max()


def max_rows(x):
    return np.sum(np.max(x, axis=1) * np.array([1.0, 6.0]))


def min_columns_keepdims(x):
    return np.sum(np.min(x, axis=0, keepdims=True))


def max_pairs(x):
    """Eight windows of two (many windows: one comparison per offset)."""
    return np.sum(np.max(x, axis=1) * np.arange(1.0, 9.0))


def max_outer_axes(x):
    """Windows over the first and last axes of a (2, 3, 2) array, four elements each."""
    return np.sum(np.max(x, axis=(0, 2)) * np.array([1.0, 2.0, 3.0]))


PAIRS = [[1.0, 1.0], [2.0, 0.0], [0.0, 2.0], [3.0, 3.0], [-1.0, -1.0], [0.0, 0.0], [5.0, 4.0], [4.0, 5.0]]


@OPTIMIZE
@pytest.mark.parametrize("fn, x, expected", [
    (max_all, [1.0, 3.0, 3.0], [0, 1, 0]),
    (max_method, [2.0, 2.0, 2.0, 2.0], [1, 0, 0, 0]),
    (min_all, [1.0, 3.0, 1.0], [1, 0, 0]),
    (max_rows, [[1.0, 4.0, 4.0], [5.0, 5.0, 5.0]], [[0, 1, 0], [6, 0, 0]]),
    (min_columns_keepdims, [[1.0, 0.0], [1.0, 2.0]], [[1, 1], [0, 0]]),
    (max_pairs, PAIRS, [[1, 0], [2, 0], [0, 3], [4, 0], [5, 0], [6, 0], [7, 0], [0, 8]]),
    # window j is x[:, j, :] read row-major: x[0, j, 0], x[0, j, 1], x[1, j, 0], x[1, j, 1]
    (max_outer_axes, [[[1.0, 1.0], [0.0, 2.0], [3.0, 3.0]], [[1.0, 1.0], [2.0, 2.0], [1.0, 3.0]]],
     [[[1, 0], [0, 2], [3, 0]], [[0, 0], [0, 0], [0, 0]]]),
], ids=["max", "x.max()", "min", "max-axis1", "min-axis0-keepdims", "max-pairs", "max-outer-axes"])
def test_max_min_tie_goes_to_first_extremum(fn, x, expected, optimize):
    assert_exact(grad(fn, np.array(x), optimize=optimize), expected)


@pytest.mark.parametrize("keepdims", [False, True], ids=["", "keepdims"])
@pytest.mark.parametrize("shape, axis", [
    ((8, 2), 1), ((2, 8), 0), ((32, 2, 2, 4), (1, 2)),  # many windows: a pass per window offset
    ((4, 32, 2, 3), 0), ((2, 2, 64, 3), (0, 1)),  # the offsets leading (srcgrad.nn's pooling)
    ((3, 5), 1), ((4, 2, 2, 3), (1, 2)), ((2, 3), None),  # few: np.argmax in each window
], ids=["pairs", "pairs-axis0", "pool-windows", "leading-windows", "leading-pool-windows", "rows",
        "few-pool-windows", "all"])
def test_max_rule_adjoint_sums_to_each_window(shape, axis, keepdims):
    """Ties everywhere (values in {0, 1}): each window's adjoints sum to its ``ans_bar``,
    all of it on the first element equal to the maximum."""
    x = np.random.default_rng(0).integers(0, 2, shape).astype(np.float32)
    ans = np.max(x, axis=axis, keepdims=keepdims)
    ans_bar = np.arange(1.0, np.size(ans) + 1, dtype=np.float32).reshape(np.shape(ans))
    x_bar = reductions.max(ans_bar, ans, x, axis=axis, keepdims=keepdims)
    axes = tuple(range(x.ndim)) if axis is None else np.atleast_1d(axis).tolist()
    assert x_bar.dtype == np.float32 and x_bar.shape == x.shape
    assert_exact(np.sum(x_bar, axis=tuple(axes), keepdims=keepdims), ans_bar)
    # windows as rows (reduced axes last): the one nonzero is where np.argmax points
    rest = [a for a in range(x.ndim) if a not in axes]
    rows = np.transpose(x, rest + list(axes)).reshape(np.size(ans), -1)
    rows_bar = np.transpose(x_bar, rest + list(axes)).reshape(rows.shape)
    expected = np.zeros_like(rows_bar)
    expected[np.arange(len(rows)), np.argmax(rows, axis=1)] = ans_bar.ravel()
    assert_exact(rows_bar, expected)


# ---- prod with zeros: exact --------------------------------------------------------


def prod_all(x):
    return np.prod(x)


def prod_rows(x):
    return np.sum(np.prod(x, axis=1))


@OPTIMIZE
@pytest.mark.parametrize("fn, x, expected", [
    (prod_all, [2.0, 0.0, 3.0], [0, 6, 0]),
    (prod_all, [2.0, 0.0, 0.0], [0, 0, 0]),
    (prod_all, [2.0, -1.0, 3.0], [-3, 6, -2]),
    (prod_rows, [[0.0, 2.0, 5.0], [1.0, 2.0, 3.0]], [[10, 0, 0], [6, 3, 2]]),
], ids=["one-zero", "two-zeros", "no-zero", "axis1"])
def test_prod_is_exact_with_zeros(fn, x, expected, optimize):
    assert_exact(grad(fn, np.array(x), optimize=optimize), expected)


def test_prod_rule_directly_with_a_zero():
    x = np.array([[2.0, 0.0, 3.0], [1.0, 4.0, 0.5]])
    ans = np.prod(x, axis=-1, keepdims=True)
    assert_exact(reductions.prod(np.ones((2, 1)), ans, x, axis=-1, keepdims=True), [[0, 6, 0], [2, 0.5, 4]])


# ---- std and norm at zero: 0, never NaN ----------------------------------------------


def std_all(x):
    return np.std(x)


def std_rows(x):
    return np.sum(np.std(x, axis=1))


def std_ddof(x):
    return np.std(x, ddof=1)


def norm_all(x):
    return np.linalg.norm(x)


def norm_rows(x):
    return np.sum(np.linalg.norm(x, axis=1))


@OPTIMIZE
@pytest.mark.parametrize("fn, x, expected", [
    (std_all, [[2.0, 2.0], [2.0, 2.0]], [[0, 0], [0, 0]]),
    (std_ddof, [[2.0, 2.0], [2.0, 2.0]], [[0, 0], [0, 0]]),
    (std_rows, [[2.0, 2.0], [1.0, 3.0]], [[0, 0], [-0.5, 0.5]]),
    (norm_all, [[0.0, 0.0], [0.0, 0.0]], [[0, 0], [0, 0]]),
    (norm_rows, [[0.0, 0.0], [3.0, 4.0]], [[0, 0], [0.6, 0.8]]),
], ids=["std", "std-ddof1", "std-axis1", "norm", "norm-axis1"])
def test_zero_spread_and_zero_norm_give_zero(fn, x, expected, optimize):
    assert_exact(grad(fn, np.array(x), optimize=optimize), expected)


def test_norm_and_std_rules_directly_at_zero():
    x = np.zeros((2, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_exact(linalg.norm(1.0, 0.0, x), np.zeros((2, 3)))
        assert_exact(reductions.std(np.ones(2), np.zeros(2), x, axis=1), np.zeros((2, 3)))


# ---- repeated indices accumulate ---------------------------------------------------


def gather_repeated(x):
    return np.sum(x[np.array([0, 0, 2, 0])] * np.array([1.0, 2.0, 3.0, 4.0]))


def gather_several_times(x):
    return np.sum(x[np.array([0, 0, 2])]) + np.sum(x[np.array([0, 1])]) * 2.0 + x[0] + x[-1]


def gather_repeated_list(x):
    return np.sum(x[[0, 0, 1]])


def gather_rows_repeated(x):
    return np.sum(x[np.array([1, 1])])


@OPTIMIZE
def test_repeated_integer_indices_accumulate(optimize):
    assert_exact(grad(gather_repeated, np.array([5.0, 6.0, 7.0]), optimize=optimize), [7, 0, 3])
    assert_exact(grad(gather_rows_repeated, np.ones((3, 2)), optimize=optimize), [[0, 0], [2, 2], [0, 0]])
    assert_exact(grad(gather_several_times, np.array([5.0, 6.0, 7.0]), optimize=optimize), [5, 2, 2])


@OPTIMIZE
def test_repeated_indices_in_a_list_literal_accumulate(optimize):
    assert_exact(grad(gather_repeated_list, np.array([5.0, 6.0, 7.0]), optimize=optimize), [2, 1, 0])


# ---- NaN-skipping reductions, initial= and where=, cumprod at zeros -------------------


@OPTIMIZE
@pytest.mark.parametrize("fn, expected", [
    (lambda x: np.nansum(x * np.array([1.0, 2.0, 4.0])), [1, 0, 4]),
    (lambda x: np.nanmean(x), [0.5, 0, 0.5]),
    (lambda x: np.nanmax(x), [0, 0, 1]),
    (lambda x: np.nanmin(x), [1, 0, 0]),
], ids=["nansum", "nanmean", "nanmax", "nanmin"])
def test_nan_reductions_give_nan_elements_zero(fn, expected, optimize):
    assert_exact(grad(fn, np.array([1.0, np.nan, 3.0]), optimize=optimize), expected)


@OPTIMIZE
def test_max_where_the_initial_value_wins_gives_zero(optimize):
    x = np.array([[1.0, 5.0], [-1.0, -2.0]])
    g = srcgrad.grad(lambda x: np.sum(np.max(x, axis=1, initial=0.0)), optimize=optimize)(x)
    assert_exact(g, [[0, 1], [0, 0]])


@OPTIMIZE
def test_max_where_skips_the_elements_left_out(optimize):
    x = np.array([3.0, 1.0, 2.0])
    g = srcgrad.grad(lambda x: np.max(x, where=np.array([False, True, True]), initial=-9.0), optimize=optimize)(x)
    assert_exact(g, [0, 0, 1])


def test_sum_with_a_nonzero_initial_value_is_refused():
    with pytest.raises(srcgrad.NoDerivativeRuleError, match=r"c \+ np.sum\(x\)"):
        srcgrad.grad(lambda x: np.sum(x, initial=2.0))(np.ones(3))


@OPTIMIZE
def test_ptp_of_a_constant_window_is_zero(optimize):
    assert_exact(grad(lambda x: np.ptp(x), np.array([2.0, 2.0, 2.0]), optimize=optimize), [0, 0, 0])


@OPTIMIZE
def test_cumprod_is_exact_at_zeros(optimize):
    x = np.array([2.0, 0.0, 3.0, 0.5])
    g = grad(lambda x: np.sum(np.cumprod(x)), x, optimize=optimize)
    # d/dx_k of sum_i prod_{j<=i} x_j: products of the other factors, none divided by 0.
    assert_exact(g, [1, 2 + 2 * 3 + 2 * 3 * 0.5, 0, 0])


# ---- median, quantile: NumPy's linear interpolation; ties in argsort's stable order ----


def sum_median(x):
    return np.sum(np.median(x, axis=0))


def quantile_3_8(x):
    return np.quantile(x, 0.375)


@OPTIMIZE
def test_median_of_an_even_count_splits_between_the_middle_two(optimize):
    """NumPy's median of an even count is the mean of the middle two: each gets half
    (JAX's median; PyTorch's ``quantile(x, 0.5)``)."""
    x = np.array([[4.0, 1.0], [1.0, 2.0], [3.0, 5.0], [2.0, 0.0]])
    assert_exact(grad(sum_median, x, optimize=optimize), [[0, 0.5], [0, 0.5], [0.5, 0], [0.5, 0]])


@OPTIMIZE
def test_quantile_ties_give_each_place_to_one_element(optimize):
    """``q (n - 1) = 1.5``: places 1 and 2 of the sorted order get half each; equal elements
    take the places in argsort's stable order."""
    x = np.array([3.0, 1.0, 1.0, 1.0, 5.0])
    assert_exact(grad(quantile_3_8, x, optimize=optimize), [0, 0, 0.5, 0.5, 0])


def test_quantile_matches_torch_where_it_is_smooth():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((5, 6))
    t = torch.tensor(x, requires_grad=True)
    torch.sum(torch.quantile(t, torch.tensor([0.1, 0.5, 0.75], dtype=torch.float64), dim=1) ** 2).backward()

    def loss(x):
        return np.sum(np.quantile(x, [0.1, 0.5, 0.75], axis=1) ** 2)

    np.testing.assert_allclose(grad(loss, x), t.grad.numpy(), rtol=1e-12)


def test_quantile_refuses_other_methods_by_name():
    def loss(x):
        return np.quantile(x, 0.5, method="nearest")

    with pytest.raises(srcgrad.SrcgradError, match="method='linear'"):
        srcgrad.grad(loss)(np.arange(4.0))


# ---- nan_to_num, heaviside, interp ------------------------------------------------


def sum_nan_to_num(x):
    return np.sum(np.nan_to_num(x) * 2.0)


def sum_heaviside(x, y):
    return np.sum(np.heaviside(x, y))


def sum_interp(x):
    return np.sum(np.interp(x, [0.0, 1.0, 3.0], [0.0, 2.0, 3.0]))


@OPTIMIZE
def test_nan_to_num_passes_finite_values_and_stops_at_replaced_ones(optimize):
    g = srcgrad.grad(sum_nan_to_num, optimize=optimize)(np.array([2.0, np.nan, np.inf, -np.inf, -1.0]))
    assert_exact(g, [2, 0, 0, 0, 2])


@OPTIMIZE
def test_heaviside_reads_its_second_argument_where_the_first_is_zero(optimize):
    x, y = np.array([-1.0, 0.0, 2.0]), np.array([0.3, 0.4, 0.5])
    gx, gy = grad(sum_heaviside, x, y, wrt=(0, 1), optimize=optimize)
    assert_exact(gx, [0, 0, 0])
    assert_exact(gy, [0, 1, 0])


@OPTIMIZE
def test_interp_takes_the_slope_to_the_right_of_a_knot_and_zero_outside(optimize):
    """JAX's ``interp``: a knot starts the segment to its right, the last knot ends the last
    segment; beyond the range, 0 (``np.interp`` is constant there)."""
    x = np.array([-1.0, 0.0, 0.5, 1.0, 3.0, 4.0])
    assert_exact(grad(sum_interp, x, optimize=optimize), [0, 2, 2, 0.5, 0.5, 0])


# ---- cov, corrcoef, eigvalsh against PyTorch (optional) -----------------------------


def cov_loss(x):
    return np.sum(np.cov(x) ** 2) + np.sum(np.corrcoef(x) ** 3) + np.sum(np.linalg.eigvalsh(np.cov(x)) ** 2)


def test_cov_corrcoef_eigvalsh_match_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((3, 7))
    t = torch.tensor(x, requires_grad=True)
    (torch.sum(torch.cov(t) ** 2) + torch.sum(torch.corrcoef(t) ** 3)
     + torch.sum(torch.linalg.eigvalsh(torch.cov(t)) ** 2)).backward()
    np.testing.assert_allclose(grad(cov_loss, x), t.grad.numpy(), rtol=1e-10)


# ---- nanvar, nanstd, nanprod, nancumsum: NaNs get 0 --------------------------------


def nan_family(x):
    return (np.nanvar(x, axis=0) + np.nanstd(x, axis=0) + np.nanprod(x, axis=0)
            + np.nancumsum(x, axis=0)[-1])


@OPTIMIZE
def test_nan_reductions_give_nans_zero(optimize):
    x = np.array([[1.0, 2.0], [np.nan, 4.0], [3.0, np.nan]])
    g = grad(lambda_free_sum_nan_family, x, optimize=optimize)
    assert g[1, 0] == 0 and g[2, 1] == 0 and np.all(np.isfinite(g))
    # column 0: values 1, 3 -> var' = (x - 2) (2 / 2), std' = var' / (2 std), prod' = other, cumsum' = 1
    np.testing.assert_allclose(g[[0, 2], 0], [-1 - 0.5 + 3 + 1, 1 + 0.5 + 1 + 1])


def lambda_free_sum_nan_family(x):
    return np.sum(nan_family(x))


def lstsq_solution(a, b):
    x, residuals, rank, s = np.linalg.lstsq(a, b)
    return np.sum(x ** 2)


def test_lstsq_refuses_a_rank_deficient_matrix_at_run_time():
    a = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
    with pytest.raises(srcgrad.NoDerivativeRuleError, match="rank-deficient"):
        srcgrad.grad(lstsq_solution)(a, np.ones(3))


def test_lstsq_matches_torch():
    torch = pytest.importorskip("torch")
    r = np.random.default_rng(0)
    a, b = r.standard_normal((6, 3)), r.standard_normal(6)
    ta = torch.tensor(a, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True)
    torch.sum(torch.linalg.lstsq(ta, tb[:, None]).solution ** 2).backward()
    ga, gb = srcgrad.grad(lstsq_solution, wrt=(0, 1))(a, b)
    np.testing.assert_allclose(ga, ta.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(gb, tb.grad.numpy(), rtol=1e-10)


def weighted_unique(x):
    return np.sum(np.unique(x) * np.array([1.0, 2.0, 3.0]))


@OPTIMIZE
def test_unique_gives_each_value_to_its_first_occurrence(optimize):
    assert_exact(grad(weighted_unique, np.array([3.0, 1.0, 3.0, 2.0]), optimize=optimize), [3, 1, 0, 2])


# ---- more of the new rules against PyTorch (optional) -------------------------------


def series_loss(x, w):
    return (np.sum(np.median(x, axis=1) ** 2) + np.sum(np.correlate(x[0], w, "valid") ** 2)
            + np.sum(np.trapezoid(x, axis=0) ** 2) + np.sum(np.gradient(x[1]) ** 3)
            + np.sum(np.nan_to_num(x) ** 3))


def test_median_correlate_trapezoid_gradient_nan_to_num_match_torch():
    torch = pytest.importorskip("torch")
    r = np.random.default_rng(1)
    x, w = r.standard_normal((3, 7)), r.standard_normal(3)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    conv = torch.nn.functional.conv1d(tx[0][None, None], tw[None, None])[0, 0]
    (torch.sum(torch.quantile(tx, 0.5, dim=1) ** 2) + torch.sum(conv ** 2)
     + torch.sum(torch.trapezoid(tx, dim=0) ** 2) + torch.sum(torch.gradient(tx[1])[0] ** 3)
     + torch.sum(torch.nan_to_num(tx) ** 3)).backward()
    gx, gw = srcgrad.grad(series_loss, wrt=(0, 1))(x, w)
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(gw, tw.grad.numpy(), rtol=1e-10)
