"""ParamStore: flat buffers, aliasing views, buffers, copies."""

from __future__ import annotations

import numpy as np
import pytest

from aicf_induct.runtime.params import ParamStore

SHAPES = {"w1": (4, 3), "b1": (4,), "w2": (2, 4), "scale": ()}


def _arrays(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: rng.normal(size=s) for n, s in SHAPES.items()}


def test_layout_follows_mapping_order() -> None:
    arrays = _arrays()
    store = ParamStore.from_arrays(arrays)
    assert store.names == tuple(SHAPES)
    assert store.numel() == 12 + 4 + 8 + 1 == store.data.size == store.grad.size
    assert store.slices["w1"] == slice(0, 12) and store.slices["scale"] == slice(24, 25)
    expected = np.concatenate([np.ravel(a) for a in arrays.values()])
    np.testing.assert_array_equal(store.data, expected)
    for name, value in arrays.items():
        assert store.params[name].shape == np.shape(value)
        np.testing.assert_array_equal(store.params[name], value)
    assert store.layout == tuple((n, s) for n, s in SHAPES.items())


def test_from_arrays_copies_and_casts() -> None:
    arrays = _arrays()
    store = ParamStore.from_arrays(arrays, dtype=np.float32)
    assert store.data.dtype == store.grad.dtype == np.float32
    arrays["w1"][...] = 0.0
    assert np.all(store.params["w1"] != 0.0)


def test_param_views_alias_data() -> None:
    store = ParamStore.from_arrays(_arrays())
    for name in store.names:
        assert np.shares_memory(store.params[name], store.data)
        assert np.shares_memory(store.grads[name], store.grad)
    store.params["w2"][1, 2] = 7.0
    assert store.data[store.slices["w2"]][1 * 4 + 2] == 7.0
    store.data[store.slices["b1"]] = -1.0
    np.testing.assert_array_equal(store.params["b1"], -1.0)
    store.params["scale"][...] = 3.0  # a 0-d view writes through too
    assert store.data[-1] == 3.0


def test_zero_grad_zeroes_every_view() -> None:
    store = ParamStore.from_arrays(_arrays())
    for name in store.names:
        store.grads[name][...] = 1.5
    assert np.all(store.grad == 1.5)
    store.zero_grad()
    for name in store.names:
        assert np.all(store.grads[name] == 0.0)


def test_buffers_have_own_storage() -> None:
    running = np.ones(4)
    store = ParamStore.from_arrays(_arrays(), {"bn.running_mean": running})
    running[...] = 5.0
    np.testing.assert_array_equal(store.buffers["bn.running_mean"], 1.0)
    assert "bn.running_mean" not in store.params


def test_name_clash_between_param_and_buffer() -> None:
    with pytest.raises(ValueError, match="w1"):
        ParamStore.from_arrays(_arrays(), {"w1": np.zeros(3)})


def test_state_arrays_are_copies() -> None:
    store = ParamStore.from_arrays(_arrays(), {"bn.var": np.ones(4)})
    state = store.state_arrays()
    assert set(state) == {*SHAPES, "bn.var"}
    state["w1"][...] = 0.0
    state["bn.var"][...] = 0.0
    assert np.all(store.params["w1"] != 0.0)
    np.testing.assert_array_equal(store.buffers["bn.var"], 1.0)


def test_copy_is_independent() -> None:
    store = ParamStore.from_arrays(_arrays(), {"bn.var": np.ones(4)})
    store.grad[...] = 2.0
    twin = store.copy()
    assert twin.layout == store.layout and twin.dtype == store.dtype
    np.testing.assert_array_equal(twin.data, store.data)
    np.testing.assert_array_equal(twin.grad, store.grad)
    twin.params["w1"][...] = 0.0
    twin.grads["b1"][...] = 0.0
    twin.buffers["bn.var"][...] = 0.0
    assert np.all(store.params["w1"] != 0.0)
    assert np.all(store.grads["b1"] == 2.0)
    np.testing.assert_array_equal(store.buffers["bn.var"], 1.0)
    assert np.shares_memory(twin.params["w1"], twin.data)
    assert not np.shares_memory(twin.data, store.data)


def test_empty_store() -> None:
    store = ParamStore.from_arrays({})
    assert store.numel() == 0 and store.names == ()
    store.zero_grad()
