"""The autotuner's logic with a fake clock: fastest wins, one timing per shape, failures
never win, choices survive a restart through the warehouse's kernel_tuning table; and its
cost stays bounded: candidates that cannot win are never timed, a clearly slower one is
abandoned, the budget is honoured, and what it tunes is said on stderr; turned off, it takes
every shape's default, whatever is stored."""

from __future__ import annotations

import math
import os

import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.kernels.autotune import (
    ABANDON,
    BUDGET_ENV,
    DEFAULT_BUDGET_S,
    Autotuner,
    Limit,
    MemoryTuningStore,
    TunedRegistry,
    default_budget,
    shape_key,
    tuning_is_off,
    tuning_off,
)
from aicf_induct.kernels.cuda.step_floor import step_floor_us
from aicf_induct.kernels.cuda.timer import clearly_over, median_rounds, round_reps
from aicf_induct.kernels.registry import Kernel, KernelQuery, KernelRegistry
from warehouse.tuning_store import WarehouseTuningStore

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
    """A fake GPU timer and the tuner's clock in one: timing a kernel costs `cost_s`
    seconds of fake time (less when it stops at the limit, as the real timer does)."""

    def __init__(self, speed=SPEED, broken=(), cost_s: float = 0.0):
        self.speed, self.broken, self.calls = dict(speed), set(broken), []
        self.limits: list[Limit] = []
        self.cost_s, self.now = cost_s, 0.0

    def __call__(self, k: Kernel, q: KernelQuery, limit: Limit) -> float:
        self.calls.append((k.name, q.shapes))
        self.limits.append(limit)
        if k.name in self.broken:
            raise RuntimeError("cannot run here")
        t = self.speed.get(k.name, 1.0)
        slower = t > limit.us
        self.now += min(self.cost_s / (5 if slower else 1), limit.seconds)
        return t

    def time(self) -> float:
        return self.now


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


# -- bounded cost ---------------------------------------------------------------------------
def _tuner(clock: Clock, budget_s: float = 10.0, store=None) -> tuple[Autotuner, list[str]]:
    said: list[str] = []
    return Autotuner(clock, "gpu0", store, budget_s=budget_s, clock=clock.time,
                     say=said.append), said


def test_a_candidate_whose_floor_cannot_win_is_never_timed() -> None:
    timed: list[str] = []

    def time_us(name: str, limit: Limit) -> float:
        timed.append(name)
        return {"plan": 240.0, "layers": 430.0, "clusters": 5.0}[name]

    tuner, _ = _tuner(Clock())
    floors = {"layers": 1.0, "clusters": 530.0}  # clusters: at least 530 us > the plan's 240
    chosen = tuner.pick("train_step", "k", "float64", ["plan", "layers", "clusters"], time_us,
                        floors=floors)
    assert chosen == "plan" and timed == ["plan", "layers"] and tuner.pruned == 1
    # a floor under the best so far does not rule out; candidates go in rising floor order
    timed.clear()
    tuner.pick("train_step", "k2", "float64", ["plan", "layers", "clusters"], time_us,
               floors={"layers": 300.0, "clusters": 200.0})
    assert timed == ["plan", "clusters"]  # then layers' floor 300 >= clusters' 5 us
    assert tuner.choices[("train_step", "k2", "float64", "gpu0")] == "clusters"


def test_the_timer_is_told_to_abandon_past_the_best_so_far() -> None:
    clock = Clock()
    tuner, _ = _tuner(clock)
    TunedRegistry(tuner, _registry()).select(_q())
    # candidates in priority order: k.mid (20 us), k.fast (10), k.slow (30)
    assert [c[0] for c in clock.calls] == ["k.mid", "k.fast", "k.slow"]
    assert [lim.us for lim in clock.limits] == [math.inf, 20.0 * ABANDON, 10.0 * ABANDON]
    assert tuner.abandoned == 1  # k.slow, 30 us against 12.5
    assert all(0 < lim.seconds <= 10.0 for lim in clock.limits)


def test_rounds_stop_at_the_first_one_over_the_limit() -> None:
    replays: list[float] = []

    def replay() -> float:
        replays.append(50.0)
        return 50.0

    assert median_rounds(replay, 5, Limit(us=20.0), started=0.0, clock=lambda: 0.0) == 50.0
    assert len(replays) == 2  # the uncounted first, then one over the limit
    replays.clear()
    assert median_rounds(replay, 5, Limit(), started=0.0, clock=lambda: 0.0) == 50.0
    assert len(replays) == 6
    # the candidate's seconds run out: the median so far
    now = iter([0.0, 0.5, 2.0, 9.0])
    replays.clear()
    assert median_rounds(replay, 5, Limit(seconds=1.0), 0.0, clock=lambda: next(now)) == 50.0
    assert len(replays) == 3
    # one eager launch decides little: only clearly over (twice the limit plus launch slack)
    assert not clearly_over(30.0, Limit(us=20.0)) and clearly_over(5000.0, Limit(us=20.0))
    assert round_reps(20_000.0, 20) == 1 and round_reps(5.0, 20) == 20


def test_the_budget_caps_tuning_and_a_cut_choice_is_not_stored() -> None:
    clock = Clock(cost_s=4.0)  # each candidate takes 4 s to time (0.8 s when abandoned)
    store = MemoryTuningStore()
    tuner, said = _tuner(clock, budget_s=10.0, store=store)
    reg = TunedRegistry(tuner, _registry())
    assert reg.select(_q(m=1)).name == "k.fast"  # 4 + 4 + 0.8 s: within the budget, stored
    assert {r.kernel for r in store.rows if r.chosen} == {"k.fast"}
    reg.select(_q(m=2))  # 1.2 s left: the first candidate gets at most that
    assert clock.limits[-1].seconds == pytest.approx(10.0 - 8.8)
    assert tuner.budget_left_s == 0
    assert [r for r in store.rows if r.shape_key == shape_key(_q(m=2))] == []
    calls = len(clock.calls)
    assert reg.select(_q(m=3)).name == "k.mid"  # spent: the first (highest priority), untimed
    assert len(clock.calls) == calls
    assert clock.now <= 10.0 + 1e-9
    assert sum("budget" in line and "spent" in line for line in said) == 1


def test_what_is_tuned_is_said_in_one_line() -> None:
    tuner, said = _tuner(Clock())
    reg = TunedRegistry(tuner, _registry())
    for m in (1, 2, 3):
        reg.select(_q(m=m))
    assert len(said) == 1 and "timing kernel variants" in said[0] and "gpu0" in said[0]
    tuner.pick("train_step", "k", "float32", ["plan", "mlp_layers"], lambda n, lim: 1.0,
               label="the training step for batch 32")
    assert len(said) == 2 and "the training step for batch 32" in said[1]
    assert "plan, mlp_layers" in said[1]
    tuner.pick("train_step", "k", "float32", ["plan", "mlp_layers"], lambda n, lim: 1.0,
               label="the training step for batch 32")
    assert len(said) == 2  # known: nothing timed, nothing said


def test_the_budget_comes_from_the_environment(monkeypatch) -> None:
    monkeypatch.delenv(BUDGET_ENV, raising=False)
    assert default_budget() == DEFAULT_BUDGET_S
    monkeypatch.setenv(BUDGET_ENV, "2.5")
    assert default_budget() == 2.5 and Autotuner(Clock(), "d").budget_s == 2.5
    for bad in ("-1", "nan", "soon"):
        monkeypatch.setenv(BUDGET_ENV, bad)
        with pytest.raises(ConfigError, match=BUDGET_ENV):
            default_budget()
    monkeypatch.setenv(BUDGET_ENV, " OFF ")
    assert default_budget() == 0.0 and tuning_is_off()


def test_off_takes_the_default_whatever_is_stored(monkeypatch) -> None:
    store = MemoryTuningStore()
    tuner = Autotuner(Clock(), "gpu0", store)  # tuning on: k.fast timed fastest, stored
    assert TunedRegistry(tuner, _registry()).select(_q()).name == "k.fast"
    monkeypatch.setenv(BUDGET_ENV, "off")
    said: list[str] = []
    clock = Clock()
    off = Autotuner(clock, "gpu0", store, say=said.append)
    reg = TunedRegistry(off, _registry())
    assert off.off and off.choices == {}
    # the stored shape and a new one: each the default (first by priority), nothing timed
    assert [reg.select(q).name for q in (_q(), _q(m=5))] == ["k.mid", "k.mid"]
    assert clock.calls == [] and off.timed == 0
    assert len(said) == 1 and "off" in said[0] and "default kernel" in said[0]
    assert not any(r.shape_key == shape_key(_q(m=5)) for r in store.rows)  # nothing stored
    # a budget given in code is a budget: off is the environment's word only
    assert not Autotuner(Clock(), "gpu0", store, budget_s=0.0).off


def test_tuning_off_sets_the_environment_and_restores_it(monkeypatch) -> None:
    monkeypatch.setenv(BUDGET_ENV, "2.5")
    with tuning_off():
        assert tuning_is_off() and default_budget() == 0.0
    assert default_budget() == 2.5
    monkeypatch.delenv(BUDGET_ENV)
    with pytest.raises(RuntimeError), tuning_off():
        raise RuntimeError("a build that fails")
    assert BUDGET_ENV not in os.environ


def test_the_step_floor_rules_out_only_what_cannot_win() -> None:
    """Against times measured on an H100 (132 multiprocessors): the floor of the issue's
    case (width 2048, depth 3, batch 32, float64: the plan's step took 240 us) rules out
    "clusters", whose one cluster runs the row tile alone; and it stays under the bodies the
    tuner chose at step_gpu's sizes (benchmarks/RESULTS.md), so it never rules those out."""
    wide = [(64, 2048), (2048, 2048), (2048, 2048), (2048, 10)]
    assert step_floor_us(32, wide, "clusters", "float64", False, 132) > 240.0
    assert step_floor_us(32, wide, "rows", "float64", False, 132) > 240.0
    assert step_floor_us(32, wide, "layers", "float64", False, 132) < 240.0
    size0 = [(16, 64), (64, 64), (64, 2)]
    size1 = [(64, 256), (256, 256), (256, 256), (256, 256), (256, 10)]
    assert step_floor_us(256, size0, "rows", "float32", False, 132) < 24.8
    assert step_floor_us(512, size1, "clusters", "float32", True, 132) < 79.6
    assert step_floor_us(512, size1, "clusters", "float32", False, 132) < 100.0
    # more rows than the grid holds run in turn; tensor cores lower the floor
    assert (step_floor_us(32 * 2000, size1, "rows", "float32", False, 1)
            > 100 * step_floor_us(32, size1, "rows", "float32", False, 1))
    assert (step_floor_us(32, wide, "clusters", "float32", True, 132)
            < step_floor_us(32, wide, "clusters", "float32", False, 132))
