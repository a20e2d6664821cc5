"""One way to start and log a run: `train`, `sweep` and `adapt` write the same problem row,
meta-features, device label, start and final IR, final results and end for their runs; an
error ends a run `failed`, Ctrl-C `interrupted`."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

import warehouse
from aicf_induct.cli.main import main
from aicf_induct.errors import ConfigError
from aicf_induct.problems import load_problem
from aicf_induct.records import MemoryRecorder
from aicf_induct.runtime.backend import select_backend
from aicf_induct.runtime.runs import start_run
from aicf_induct.runtime.trainer import TrainConfig, Trainer
from tests.runtime.test_adaptive_fixtures import toy_graph, toy_problem

COMMON = ["--dataset", "iris", "--backend", "numpy", "--seed", "0"]


def _logged(conn) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """What a warehouse holding one run says about it, beyond what differs by design."""
    ((run_id, problem_id, device, status, versions),) = conn.execute(
        "SELECT run_id, problem_id, device, status, json_keys(library_versions) "
        "FROM runs").fetchall()
    q = lambda sql: conn.execute(sql, [run_id]).fetchall()  # noqa: E731
    reasons = [r for (r,) in q("SELECT reason FROM ir_snapshots WHERE run_id = ? "
                               "ORDER BY step, recorded_at")]
    return {
        "run": (problem_id, device, status, sorted(versions)),
        "problems": conn.execute("SELECT problem_id, name, task, n_rows FROM problems "
                                 "WHERE problem_id = ?", [problem_id]).fetchall(),
        "features": conn.execute("SELECT feature, value FROM problem_features "
                                 "WHERE problem_id = ? ORDER BY 1", [problem_id]).fetchall(),
        "final results": q("SELECT split, metric FROM results WHERE run_id = ? AND final "
                           "ORDER BY 1, 2"),
        "first and last IR": [reasons[0], reasons[-1]],
    }


def test_every_origin_logs_its_run_the_same_way(tmp_path: Path, capsys) -> None:
    commands = {
        "train": ["train", *COMMON, "--epochs", "2", "--quiet"],
        "adapt": ["adapt", *COMMON, "--steps", "20", "--json"],
        "sweep": ["sweep", "--problems", "iris", "--space", "depth=1;width=8", "--epochs", "2",
                  "--workers", "1", "--quiet", "--backend", "numpy"],
    }
    logged = {}
    for origin, command in commands.items():  # each into its own warehouse
        assert main([*command, "--warehouse", str(tmp_path / origin)]) == 0
        logged[origin] = _logged(warehouse.connect(tmp_path / origin))
    capsys.readouterr()
    iris = load_problem("iris", seed=0)
    expected = {
        "run": (iris.problem_id, select_backend("numpy").description, "completed",
                sorted(logged["train"]["run"][3])),  # type: ignore[index]
        "problems": [(iris.problem_id, "iris", "classification", 150)],
        "features": logged["train"]["features"],
        "final results": [(s, m) for s in ("test", "train", "val")
                          for m in ("accuracy", "loss")],
        "first and last IR": ["start", "final"],
    }
    assert len(expected["features"]) > 40  # type: ignore[arg-type]
    for origin in commands:
        assert logged[origin] == expected, origin


def _trainer(rec: MemoryRecorder) -> Trainer:
    p = toy_problem(n=200)
    return Trainer(p, toy_graph(p), TrainConfig(epochs=1), recorder=rec)


@pytest.mark.parametrize("error,status", [(ValueError("boom"), "failed"),
                                          (KeyboardInterrupt(), "interrupted"),
                                          (SystemExit(1), "interrupted")])
def test_a_run_stopped_by_an_exception_ends_with_its_status(error: BaseException,
                                                            status: str) -> None:
    rec = MemoryRecorder()
    tr = _trainer(rec)
    with pytest.raises(type(error)), start_run(tr):
        raise error
    (end,) = rec.run_ends
    assert (end.run_id, end.status, end.steps) == (tr.run_id, status, 0)
    assert end.error == (f"{type(error).__name__}: {error}".rstrip(": "))
    assert [s.reason for s in rec.snapshots] == ["start"] and not rec.results


def test_a_run_left_without_results_is_not_left_running() -> None:
    rec = MemoryRecorder()
    with start_run(_trainer(rec)):
        pass
    (end,) = rec.run_ends
    assert end.status == "failed" and "without its final results" in str(end.error)


def test_a_trainer_fits_once_and_a_second_fit_logs_nothing() -> None:
    """A second `fit` logged the same run id's start, steps and end again (two `runs` rows of
    one id): it is refused, and a new Trainer goes on from the first one's parameters."""
    rec = MemoryRecorder()
    tr = _trainer(rec)
    tr.fit()
    logged = (len(rec.runs), len(rec.steps), len(rec.run_ends))
    with pytest.raises(ConfigError, match=f"run {tr.run_id} was fitted already"):
        tr.fit()
    assert (len(rec.runs), len(rec.steps), len(rec.run_ends)) == logged == (1, logged[1], 1)
    again = Trainer(tr.problem, tr.graph, tr.config, recorder=rec,
                    values=tr.store.state_arrays())
    assert again.fit().run_id != tr.run_id and len(rec.runs) == 2


class Console(MemoryRecorder):
    keeps_problems = False  # like the adapt timeline: problem rows go nowhere that lasts


def test_features_are_computed_only_for_a_recorder_that_keeps_problems() -> None:
    console = Console()
    tr = _trainer(console)
    start_run(tr).finish("completed", {}, 0)
    assert console.problems[0].features == {}
    rec = MemoryRecorder()
    tr.recorder = rec
    with start_run(tr) as run:
        run.finish("completed", {"val_loss": 0.5}, 0)
    assert rec.problems[0].features["simple.n_rows"] == 200
    assert [(r.split, r.metric, r.value, r.final) for r in rec.results] == [
        ("val", "loss", 0.5, True)]
    assert [(e.status, e.error) for e in rec.run_ends] == [("completed", None)]


def test_every_split_seed_logs_the_features_of_seed_0s_split() -> None:
    """The problem id names the prepared table, whatever the split seed, and the warehouse
    keeps one row per problem and feature: so every seed's run logs the features `propose`
    computes, those of seed 0's split, not its own (which would leave the corpus with
    whichever seed was logged last)."""
    from aicf_induct.problems.features import extract_features
    from aicf_induct.runtime.runs import problem_record

    rec = MemoryRecorder()
    seed0, seed1 = load_problem("iris", seed=0), load_problem("iris", seed=1)
    assert seed0.problem_id == seed1.problem_id and seed1.split_seed == 1
    assert extract_features(seed1) != extract_features(seed0)  # the splits do differ
    for problem in (seed1, seed0):
        record = problem_record(problem, rec)
        assert record.features == extract_features(seed0)
        assert record.features_split_seed == 0  # what the warehouse keeps beside them


def test_two_problems_sharing_an_id_keep_their_own_features() -> None:
    """The features are cached per process; a hand-made problem's id is whatever it says,
    so two of them with one id (a toy of 250 rows, then of 200) must not share features."""
    from aicf_induct.runtime.runs import problem_record

    rec = MemoryRecorder()
    big, small = toy_problem(n=250), toy_problem(n=200)
    assert big.problem_id == small.problem_id
    assert problem_record(big, rec).features["simple.n_rows"] == 250
    assert problem_record(small, rec).features["simple.n_rows"] == 200


def test_a_problem_its_name_cannot_load_keeps_its_own_splits_features() -> None:
    """A table prepared in memory (its name loads nothing, or other data) is featurised on
    the split it has, whatever its seed."""
    from aicf_induct.problems.features import extract_features
    from aicf_induct.problems.meta_features import featurised_split
    from aicf_induct.problems.preprocess import prepare
    from aicf_induct.problems.registry import load_table
    from aicf_induct.runtime import runs

    table, policy, _ = load_table("wine")
    for name in ("not a loadable name", "iris"):  # nothing; another table
        own = prepare(dataclasses.replace(table, name=name), seed=2, policy=policy)
        assert featurised_split(own) is own
        runs._FEATURES.clear()  # wine's seed-2 split may be cached by its own name
        record = runs.problem_record(own, MemoryRecorder())
        assert (record.features, record.features_split_seed) == (extract_features(own), 2)


def test_every_seed_s_split_of_one_table_featurises_it_once(
        monkeypatch: pytest.MonkeyPatch, extractions: list[int]) -> None:
    """Every seed's split of one table has seed 0's features: a sweep's worker running
    seeds 0-7 of a problem loads the table again for a new split (cheap), not featurises
    it again (seconds on a large table)."""
    from aicf_induct.runtime import runs

    monkeypatch.setattr(runs, "_FEATURES", {})  # nothing in memory (nor on disk: the fixture)
    got = [runs.problem_meta_features_with_seed(load_problem("iris", seed=s))
           for s in (3, 1, 0, 3)]
    assert extractions == [0]  # once, on seed 0's split
    assert all(g == got[0] for g in got) and got[0][1] == 0


def test_the_same_data_with_a_column_dropped_has_its_own_features() -> None:
    """`drop=` leaves the cleaned table, and so the problem id, as it was; the features count
    the dropped column (simple.dropped_columns), and the cache by id gave the first's."""
    import numpy as np
    import pandas as pd

    from aicf_induct.problems.registry import problem_from_frame
    from aicf_induct.runtime import runs

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=60), "b": rng.normal(size=60),
                          "y": rng.integers(0, 2, 60)})
    plain = problem_from_frame(frame, "y")
    less = problem_from_frame(frame.assign(z=rng.normal(size=60)), "y", drop=["z"])
    assert less.problem_id == plain.problem_id
    assert runs.problem_meta_features(plain)["simple.dropped_columns"] == 0.0
    assert runs.problem_meta_features(less)["simple.dropped_columns"] == 1.0


def test_interrupts_deferred_holds_a_signal_that_another_thread_receives() -> None:
    """With a second thread alive (the warehouse writer's), a process-directed SIGTERM may be
    delivered to that thread; the block still finishes first, and the signal comes after."""
    import os
    import signal
    import threading

    from aicf_induct.interrupts import interrupts_deferred

    got: list[str] = []
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    old = signal.signal(signal.SIGTERM, lambda *_: got.append("SIGTERM"))
    try:
        with interrupts_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)  # the handler would run here if the signal were not held
            got.append("block done")
        time.sleep(0.05)
    finally:
        signal.signal(signal.SIGTERM, old)
        stop.set()
    assert got == ["block done", "SIGTERM"]
