"""The cuda tier of the GPU sweep engine: a sweep with `engine="gpu"` trains every triple once
on the GPU, logged with the GPU as its device, with the final results the process pool's
GPU runs give (fp32 tolerance: relative 1e-4 after a few epochs); run again, it skips them
all. A repeatable sweep (kernel tuning off) gives the same bits with two engine processes as
with one, on a warehouse that holds tuned choices or not."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from aicf_induct.induction.space_io import parse_space
from aicf_induct.induction.sweep import run_sweep
from aicf_induct.induction.sweep_spec import SweepSpec
from aicf_induct.induction.sweep_worker import close_process_recorders
from aicf_induct.runtime.backend import select_backend
from aicf_induct.runtime.trainer import TrainConfig
from tests.induction.test_sweep_gpu import assert_same_runs, rows

pytestmark = pytest.mark.cuda


def three_problems() -> SweepSpec:
    """18 runs: three of scikit-learn's tables × tiny3 × 2 seeds, 4 epochs each."""
    return SweepSpec(("iris", "wine", "breast_cancer"), tuple(parse_space("tiny3").candidates()),
                     (0, 1), TrainConfig(epochs=4, patience=2, backend="cupy"), 120.0)


def test_a_gpu_sweep_logs_every_triple_once_with_the_pools_results(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # no timing: both sweeps take the plan as the step body (two warehouses, two tuners,
    # would otherwise each pick by their own timings)
    monkeypatch.setenv("AICF_TUNING_BUDGET_S", "0")
    spec = three_problems()
    try:
        many = run_sweep(spec, tmp_path / "many", workers=8, engine="gpu", progress=False)
    finally:
        close_process_recorders()
    pool = run_sweep(spec, tmp_path / "pool", workers=2, progress=False)
    assert dict(many.statuses) == dict(pool.statuses)
    assert many.slower_paths == {}  # every run's steps replayed as one graph
    assert_same_runs(tmp_path / "many", tmp_path / "pool", rtol=1e-4, atol=1e-5)
    devices = rows(tmp_path / "many", "SELECT DISTINCT device FROM runs")
    assert devices == [(select_backend("cupy").description,)]
    again = run_sweep(spec, tmp_path / "many", workers=8, engine="gpu", progress=False)
    assert (again.skipped, again.ran) == (18, 0)


def test_two_engine_processes_train_every_triple_once_with_one_engines_results(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AICF_TUNING_BUDGET_S", "0")  # the plan as the step body, as above
    spec = three_problems()
    two = run_sweep(spec, tmp_path / "two", workers=4, engine="gpu", processes=2,
                    progress=False)
    try:
        one = run_sweep(spec, tmp_path / "one", workers=8, engine="gpu", progress=False)
    finally:
        close_process_recorders()
    assert dict(two.statuses) == dict(one.statuses) == {"completed": 18}
    assert (two.elsewhere, two.held, two.left, two.slower_paths) == (0, 0, 0, {})
    assert_same_runs(tmp_path / "two", tmp_path / "one", rtol=1e-4, atol=1e-5)


def test_a_repeatable_sweep_gives_the_same_bits_whatever_its_processes_and_stored_choices(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AICF_TUNING_BUDGET_S", raising=False)  # the first sweep tunes
    spec = three_problems()
    try:
        tuned = run_sweep(spec, tmp_path / "tuned", workers=8, engine="gpu", progress=False)
    finally:
        close_process_recorders()
    assert not tuned.repeatable and any((tmp_path / "tuned" / "kernel_tuning").rglob("*.parquet"))
    # "one" starts with the tuned sweep's choices stored: a repeatable sweep ignores them
    shutil.copytree(tmp_path / "tuned" / "kernel_tuning", tmp_path / "one" / "kernel_tuning")
    two = run_sweep(spec, tmp_path / "two", workers=4, engine="gpu", processes=2,
                    progress=False, repeatable=True)
    try:
        one = run_sweep(spec, tmp_path / "one", workers=8, engine="gpu", progress=False,
                        repeatable=True)
    finally:
        close_process_recorders()
    assert two.repeatable and one.repeatable
    assert dict(two.statuses) == dict(one.statuses) and two.ran == one.ran == 18
    assert_same_runs(tmp_path / "two", tmp_path / "one")  # bit for bit
