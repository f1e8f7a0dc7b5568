"""srcgrad.data.batches: mini-batches of rows of several arrays, as a DataLoader over a
TensorDataset gives them (compared with torch's where it is installed)."""
from __future__ import annotations

import numpy as np
import pytest

from srcgrad import data


def test_in_order_with_a_short_last_batch():
    x, y = np.arange(20).reshape(10, 2), np.arange(10)
    got = list(data.batches(x, y, batch_size=4, shuffle=False))
    assert [len(yb) for _, yb in got] == [4, 4, 2]
    np.testing.assert_array_equal(got[2][0], [[16, 17], [18, 19]])
    assert all(np.shares_memory(xb, x) for xb, _ in got)   # views, in order
    assert [len(b) for b in data.batches(y, batch_size=4, shuffle=False, drop_last=True)] == [4, 4]


def test_a_single_array_yields_arrays():
    (only,) = list(data.batches(np.ones((3, 2)), batch_size=5))
    assert isinstance(only, np.ndarray) and only.shape == (3, 2)


def test_shuffled_rows_stay_together_and_each_comes_once():
    x = np.arange(23) * 10.0
    y = np.arange(23)
    seen = []
    for xb, yb in data.batches(x, y, batch_size=5, seed=0):
        np.testing.assert_array_equal(xb, yb * 10.0)
        seen.extend(yb)
    assert sorted(seen) == list(range(23)) and seen != list(range(23))


def test_seeds():
    y = np.arange(50)

    def order(seed):
        return np.concatenate(list(data.batches(y, batch_size=8, seed=seed)))

    np.testing.assert_array_equal(order(3), order(3))            # an int: the same order each time
    rng = np.random.default_rng(3)
    first, second = order(rng), order(rng)                       # a Generator: a new order each epoch
    np.testing.assert_array_equal(first, order(3))
    assert not np.array_equal(first, second)
    assert sorted(order(None)) == list(y)


def test_lists_and_trailing_shapes():
    xb, yb = next(data.batches([[1, 2], [3, 4], [5, 6]], [0, 1, 0], batch_size=2, shuffle=False))
    assert xb.shape == (2, 2) and yb.tolist() == [0, 1]


@pytest.mark.parametrize("args, kw, message", [
    ((), {"batch_size": 2}, "at least one array"),
    ((np.float64(1.0),), {"batch_size": 2}, "scalar"),
    ((np.zeros(3), np.zeros(4)), {"batch_size": 2}, r"first dimensions differ \(3, 4\)"),
    ((np.zeros(3),), {"batch_size": 0}, "positive integer"),
    ((np.zeros(3),), {"batch_size": 2.0}, "positive integer"),
])
def test_errors_raise_at_the_call(args, kw, message):
    with pytest.raises(ValueError, match=message):
        data.batches(*args, **kw)                    # (not only once iterated)


@pytest.mark.parametrize("n, batch_size, drop_last",
                         [(10, 3, False), (10, 3, True), (9, 3, True), (2, 5, True)])
def test_same_batches_as_torchs_dataloader_in_order(n, batch_size, drop_last):
    torch = pytest.importorskip("torch")
    x, y = np.random.default_rng(0).standard_normal((n, 3)), np.arange(n)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.tensor(x), torch.tensor(y)),
                                         batch_size=batch_size, shuffle=False, drop_last=drop_last)
    ours = list(data.batches(x, y, batch_size=batch_size, shuffle=False, drop_last=drop_last))
    theirs = list(loader)
    assert len(ours) == len(theirs)
    for (xb, yb), (txb, tyb) in zip(ours, theirs):
        np.testing.assert_array_equal(xb, txb.numpy())
        np.testing.assert_array_equal(yb, tyb.numpy())
    shuffled = list(data.batches(x, y, batch_size=batch_size, drop_last=drop_last, seed=1))
    assert [len(b) for _, b in shuffled] == [len(b) for _, b in theirs]
