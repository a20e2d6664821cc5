"""The autotuner's logic with a fake clock: fastest wins, one timing per shape, failures
never win, and choices survive a restart through the warehouse's kernel_tuning table."""

from __future__ import annotations

import pytest

from aicf_induct.kernels.autotune import (
    Autotuner,
    MemoryTuningStore,
    TunedRegistry,
    WarehouseTuningStore,
    shape_key,
)
from aicf_induct.kernels.registry import Kernel, KernelQuery, KernelRegistry

SPEED = {"k.slow": 30.0, "k.fast": 10.0, "k.mid": 20.0}


def _noop(*_a, **_k) -> None:
    return None


def _registry() -> KernelRegistry:
    reg = KernelRegistry()
    for prio, name in enumerate(SPEED):
        reg.register(Kernel(name, "linear_act", "fused", "cuda", _noop, priority=prio))
    reg.register(Kernel("k.big_only", "linear_act", "fused", "cuda", _noop, priority=9,
                        applies=lambda q: q.shapes[0][0] > 1000))
    return reg


def _q(m: int = 64, **attrs) -> KernelQuery:
    return KernelQuery("linear_act", "fused", "cuda", "float32", ((m, 16),),
                       {"out_features": 8, "act": "relu", **attrs})


class Clock:
    def __init__(self, speed=SPEED, broken=()):
        self.speed, self.broken, self.calls = dict(speed), set(broken), []

    def __call__(self, k: Kernel, q: KernelQuery) -> float:
        self.calls.append((k.name, q.shapes))
        if k.name in self.broken:
            raise RuntimeError("cannot run here")
        return self.speed.get(k.name, 1.0)


def test_fastest_variant_is_chosen_once_per_shape() -> None:
    clock = Clock()
    reg = TunedRegistry(Autotuner(clock, "gpu0"), _registry())
    assert reg.select(_q()).name == "k.fast"
    assert len(clock.calls) == 3
    assert reg.select(_q()).name == "k.fast"
    assert len(clock.calls) == 3  # cached
    assert reg.select(_q(m=2000)).name == "k.big_only"  # another shape: tuned again
    assert len(clock.calls) == 7


def test_a_variant_that_fails_is_never_chosen() -> None:
    clock = Clock(broken={"k.fast"})
    assert TunedRegistry(Autotuner(clock, "d"), _registry()).select(_q()).name == "k.mid"
    clock = Clock(broken=set(SPEED))  # none runs: the highest priority stays
    assert TunedRegistry(Autotuner(clock, "d"), _registry()).select(_q()).name == "k.mid"


def test_single_candidate_and_fallback_need_no_timing() -> None:
    clock = Clock()
    reg = KernelRegistry()
    reg.register(Kernel("only", "relu", "fwd", "cuda", _noop))
    tuned = TunedRegistry(Autotuner(clock, "d"), reg)
    assert tuned.select(KernelQuery("relu", "fwd", "cuda", "float32", ((4, 4),))).name == "only"
    fallback = tuned.select(KernelQuery("tanh", "fwd", "cuda", "float32", ((4, 4),)))
    assert fallback.name == "tanh.fwd.reference"
    assert clock.calls == []


def test_shape_key_ignores_private_state() -> None:
    assert shape_key(_q()) == shape_key(_q(_scratch={"gz": object()}))
    assert shape_key(_q()) != shape_key(_q(act="gelu"))
    assert shape_key(_q()) != shape_key(_q(m=65))


def test_measurements_are_kept_and_marked() -> None:
    store = MemoryTuningStore()
    Autotuner(Clock(), "d", store).choose(_q(), _registry().candidates(_q()))
    assert {r.kernel: r.chosen for r in store.rows} == {"k.slow": False, "k.fast": True,
                                                       "k.mid": False}
    assert {r.time_us for r in store.rows} == {10.0, 20.0, 30.0}


def test_choices_survive_a_restart_through_the_warehouse(tmp_path) -> None:
    pytest.importorskip("pyarrow")
    root = tmp_path / "wh"
    first = Autotuner(Clock(), "H100", WarehouseTuningStore(root))
    assert TunedRegistry(first, _registry()).select(_q()).name == "k.fast"
    assert list((root / "kernel_tuning").rglob("*.parquet"))
    slow_wins = {"k.slow": 1.0, "k.fast": 5.0, "k.mid": 5.0}
    clock = Clock(speed=slow_wins)  # would pick k.slow if it timed anything
    second = Autotuner(clock, "H100", WarehouseTuningStore(root))
    assert TunedRegistry(second, _registry()).select(_q()).name == "k.fast"
    assert clock.calls == [] and second.timed == 0
    other = Autotuner(Clock(speed=slow_wins), "A100", WarehouseTuningStore(root))
    assert TunedRegistry(other, _registry()).select(_q()).name == "k.slow"  # per device


def test_warehouse_table_reads_through_duckdb_too(tmp_path) -> None:
    pytest.importorskip("duckdb")
    from warehouse.catalog import connect

    root = tmp_path / "wh"
    Autotuner(Clock(), "H100", WarehouseTuningStore(root)).choose(
        _q(), _registry().candidates(_q()))
    con = connect(root)
    rows = con.execute("SELECT kernel, chosen, time_us FROM raw_kernel_tuning "
                       "ORDER BY time_us").fetchall()
    assert rows == [("k.fast", True, 10.0), ("k.mid", False, 20.0), ("k.slow", False, 30.0)]
