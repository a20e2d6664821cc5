"""The epoch's row order: a function of (seed, epoch) alone, shared read-only between the
streams of one seed, the cache of recent orders bounded."""

import numpy as np
import pytest

from aicf_induct.runtime import data
from aicf_induct.runtime.data import BatchStream


def test_an_epochs_order_is_the_seeded_generators_permutation_whoever_asks_first() -> None:
    a, b = BatchStream(1000, 32, seed=7), BatchStream(1000, 64, seed=7)
    for epoch in (0, 3, 0):
        want = np.random.default_rng([7, epoch]).permutation(1000)
        np.testing.assert_array_equal(a.order(epoch), want)
        np.testing.assert_array_equal(b.order(epoch), want)
    assert not np.array_equal(BatchStream(1000, 32, seed=8).order(0), a.order(0))
    assert not np.array_equal(BatchStream(999, 32, seed=7).order(0)[:999], a.order(0)[:999])


def test_a_shared_order_cannot_be_written_through() -> None:
    order = BatchStream(50, 8, seed=1).order(2)
    with pytest.raises(ValueError):
        order[0] = order[1]


def test_the_cache_of_orders_stays_under_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(data, "ORDER_CACHE_BYTES", 10 * 800)
    stream = BatchStream(100, 10, seed=3)
    for epoch in range(40):
        stream.order(epoch)
    assert data._order_bytes <= 10 * 800
    assert sum(o.nbytes for o in data._orders.values()) == data._order_bytes
    np.testing.assert_array_equal(stream.order(1), np.random.default_rng([3, 1]).permutation(100))


def test_threads_asking_at_once_get_the_same_orders_and_keep_the_count(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(data, "ORDER_CACHE_BYTES", 20 * 8 * 300)  # evictions all along
    def ask(i: int) -> np.ndarray:
        return BatchStream(300, 16, seed=i % 3).order(i % 50)

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(ask, range(2000)))
    for i in (0, 7, 1999):
        np.testing.assert_array_equal(got[i], np.random.default_rng([i % 3, i % 50])
                                      .permutation(300))
    assert data._order_bytes == sum(o.nbytes for o in data._orders.values()) <= 20 * 8 * 300
