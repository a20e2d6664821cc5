from __future__ import annotations

import itertools
import math
import statistics
from pathlib import Path
from typing import Any

import pytest

from aicf_induct.records import EventRecord, Recorder, RunEndRecord, utc_now
from tests.warehouse.conftest import log_run, problem
from warehouse import (
    WarehouseError,
    WarehouseRecorder,
    Writer,
    connect,
    open_recorder,
    run_report,
)


def _q(root: Path, sql: str) -> list[tuple[object, ...]]:
    return connect(root).execute(sql).fetchall()


def test_recorder_satisfies_protocol_and_default_root(root: Path, monkeypatch,
                                                      tmp_path: Path) -> None:
    rec = WarehouseRecorder(root)
    assert isinstance(rec, Recorder)
    rec.close()
    monkeypatch.setenv("AICF_WAREHOUSE", str(tmp_path / "env"))
    rec = open_recorder(None)
    assert rec.root == tmp_path / "env"
    rec.close()


def test_a_warehouse_that_cannot_be_written_is_refused_before_any_row(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("not a warehouse")
    with pytest.raises(WarehouseError, match=f"^warehouse {f} is not a directory$"):
        WarehouseRecorder(f)
    with pytest.raises(WarehouseError, match=f"^warehouse {f / 'wh'} is not writable: "):
        WarehouseRecorder(f / "wh")
    assert f.read_text() == "not a warehouse" and list(tmp_path.iterdir()) == [f]
    rec = WarehouseRecorder(tmp_path / "new" / "wh")  # created, with no probe left behind
    rec.close()
    # only the (empty) folder of writers' leases: the closed writer's lease is gone
    left = sorted(p.relative_to(tmp_path / "new" / "wh").as_posix()
                  for p in (tmp_path / "new" / "wh").rglob("*"))
    assert left == ["_leases"]


def test_events_made_in_a_burst_come_back_in_order_by_their_time(root: Path) -> None:
    # back-to-back clock readings often share a microsecond: the clock must still order them
    stamps = [utc_now() for _ in range(10_000)]
    assert all(a < b for a, b in itertools.pairwise(stamps))
    p = problem("p1", n_rows_log=4.6)
    rec = WarehouseRecorder(root)
    log_run(rec, "a", p, 0.9, "fp1", {"depth": 3.0, "params": 50}, end=False)
    names = [f"e{i:03d}" for i in range(200)]
    for name in names:  # a trigger and its decision are made this close together
        rec.event(EventRecord("a", 7, "decision", name))
    rec.close()
    got = _q(root, "SELECT name FROM events WHERE run_id = 'a' AND step = 7 ORDER BY \"at\"")
    assert [n for (n,) in got] == names


def test_recorder_logs_every_table(root: Path) -> None:
    p = problem("p1", n_rows_log=4.6, class_entropy=1.1)
    rec = WarehouseRecorder(root)
    log_run(rec, "a", p, 0.9, "fp1", {"depth": 3.0, "params": 50},
            rewrites=(("widen", {"loss": 0.5}, {"loss": 0.4}),))
    log_run(rec, "b", p, 0.8, "fp1", {"depth": 3.0, "params": 50}, end=False)
    rec.run_end(RunEndRecord("b", "failed", 3, 0.1, error="nan loss"))
    log_run(rec, "c", p, 0.7, "fp2", {"depth": 2.0, "params": 20}, end=False)
    rec.close()
    assert _q(root, "SELECT count(*) FROM problems") == [(1,)]  # logged once per writer
    assert _q(root, "SELECT feature, value FROM problem_features ORDER BY 1") == [
        ("class_entropy", 1.1), ("n_rows_log", 4.6)]
    assert _q(root, "SELECT run_id, status, error FROM runs ORDER BY 1") == [
        ("a", "completed", None), ("b", "failed", "nan loss"), ("c", "abandoned", None)]
    # snapshot rows for every snapshot; patterns once per fingerprint
    assert _q(root, "SELECT count(*) FROM ir_snapshots") == [(6,)]
    assert _q(root, "SELECT count(*) FROM raw_ir_patterns") == [(5,)]
    assert _q(root, "SELECT count(*), max(step) FROM steps WHERE run_id = 'a'") == [(10, 9)]
    ev = _q(root, "SELECT kind, name, metrics_before ->> 'loss' FROM events")
    assert ev == [("rewrite", "widen", "0.5")]
    # JSON columns are JSON strings any engine can parse
    assert _q(root, "SELECT config::JSON ->> '$.hidden[0]' FROM runs LIMIT 1") == [("8",)]
    tz = _q(root, "SELECT typeof(started_at) FROM runs LIMIT 1")
    assert tz == [("TIMESTAMP WITH TIME ZONE",)]


@pytest.fixture
def scored(root: Path) -> Path:
    """Two problems; known scores, fingerprints and rewrite effects."""
    p1, p2 = problem("p1", size=1.0), problem("p2", "regression", size=3.0)
    rec = WarehouseRecorder(root)
    widen = ("widen", {"loss": 1.0, "acc": 0.5}, {"loss": 0.8, "acc": 0.6})
    log_run(rec, "a1", p1, 0.90, "big", {"width": 64.0}, rewrites=(widen,))
    log_run(rec, "a2", p1, 0.80, "big", {"width": 64.0},
            rewrites=(("widen", {"loss": 1.0}, {"loss": 0.6}),))
    log_run(rec, "a3", p1, 0.70, "small", {"width": 8.0})
    log_run(rec, "b1", p2, 0.10, "small", {"width": 8.0})
    log_run(rec, "b2", p2, float("nan"), "big", {"width": 64.0})  # diverged: ranks last
    rec.close()
    return root


def test_run_scores_normalize_within_problem(scored: Path) -> None:
    got = dict(_q(scored, "SELECT run_id, norm_score FROM run_scores"))
    assert got == {"a1": 1.0, "a2": 0.5, "a3": 0.0, "b1": 1.0, "b2": 0.0}
    # the test split wins over val; accuracy for classification, r2 for regression
    assert _q(scored, "SELECT score_metric, score_split, score FROM run_scores "
                      "WHERE run_id = 'b1'") == [("r2", "test", 0.1)]


def test_leaderboard(scored: Path) -> None:
    conn = connect(scored)
    df = run_report(conn, "leaderboard", {"problem": "name-p1"})
    assert df[["rank", "fingerprint", "runs"]].values.tolist() == [[1, "big", 2], [2, "small", 1]]
    assert df["mean_score"].iloc[0] == pytest.approx(0.85)
    top1 = run_report(conn, "leaderboard", {"top": 1})
    assert top1["problem_name"].tolist() == ["name-p1", "name-p2"]
    assert top1["fingerprint"].tolist() == ["big", "small"]
    assert df["score_split"].tolist() == ["test", "test"]


def test_the_leaderboard_says_which_split_its_scores_are_of(scored: Path) -> None:
    """A run that logged no test result is scored on validation: a structure whose runs
    differ says both, so no figure calls a validation score a test one."""
    rec = WarehouseRecorder(scored)
    log_run(rec, "a4", problem("p1", size=1.0), 0.6, "small", {"width": 8.0}, test=False)
    log_run(rec, "a5", problem("p1", size=1.0), 0.5, "tiny", {"width": 4.0}, test=False)
    rec.close()
    df = run_report(connect(scored), "leaderboard", {"problem": "name-p1"})
    assert df[["fingerprint", "score_split"]].values.tolist() == [
        ["big", "test"], ["small", "test, val"], ["tiny", "val"]]


def test_a_diverged_run_counts_apart_from_its_structure_s_scores(scored: Path) -> None:
    """A NaN score made the structure's mean and best NaN (an empty leaderboard chart)."""
    rec = WarehouseRecorder(scored)
    log_run(rec, "a4", problem("p1", size=1.0), float("nan"), "big", {"width": 64.0})
    rec.close()
    df = run_report(connect(scored), "leaderboard", {"problem": "name-p1"})
    big = df[df["fingerprint"] == "big"].iloc[0]
    assert (big["runs"], big["diverged"], big["rank"]) == (3, 1, 1)
    assert big["mean_score"] == pytest.approx(0.85) and big["best_score"] == pytest.approx(0.9)
    p2 = run_report(connect(scored), "leaderboard", {"problem": "name-p2"})
    # a structure whose every run diverged has no mean: last
    assert p2[["fingerprint", "diverged"]].values.tolist() == [["small", 0], ["big", 1]]
    assert math.isnan(p2["mean_score"].iloc[1])


def test_pattern_performance_with_t_interval(scored: Path) -> None:
    df = run_report(connect(scored), "pattern_performance", {"pattern": "width"})
    big = df[df["value"] == 64.0].iloc[0]
    scores = [1.0, 0.5, 0.0]  # a1, a2, b2
    mean = sum(scores) / 3
    sd = math.sqrt(sum((s - mean) ** 2 for s in scores) / 2)
    assert big["runs"] == 3 and big["problems"] == 2
    assert big["mean_norm_score"] == pytest.approx(mean)
    assert big["median_norm_score"] == pytest.approx(0.5)
    assert big["ci95_low"] == pytest.approx(mean - 4.303 * sd / math.sqrt(3))
    assert big["ci95_high"] == pytest.approx(mean + 4.303 * sd / math.sqrt(3))


def test_rewrite_effects(scored: Path) -> None:
    df = run_report(connect(scored), "rewrite_effects").set_index("metric")
    assert df.loc["loss", "rewrites"] == 2
    assert df.loc["loss", "mean_change"] == pytest.approx(-0.3)
    assert df.loc["loss", "share_increased"] == 0.0
    assert df.loc["acc", "mean_change"] == pytest.approx(0.1)


def test_rewrite_effects_leaves_out_an_event_whose_metrics_are_not_json(scored: Path) -> None:
    """The service stored such text before it refused it, and the report then failed on
    every read (DuckDB's json_keys on "not json") instead of leaving the event out."""
    with Writer(scored) as w:
        for i, (before, after) in enumerate((("not json", '{"loss": 0.1}'),
                                             ('{"loss": 2.0}', "{broken"))):
            w.append("events", {"run_id": "a1", "step": 50 + i, "kind": "rewrite",
                                "name": "widen", "detail": "{}", "metrics_before": before,
                                "metrics_after": after, "at": utc_now()})
    df = run_report(connect(scored), "rewrite_effects").set_index("metric")
    assert df.loc["loss", "rewrites"] == 2
    assert df.loc["loss", "mean_change"] == pytest.approx(-0.3)


def test_run_summary_and_feature_correlation(scored: Path) -> None:
    conn = connect(scored)
    df = run_report(conn, "run_summary", {"status": "completed", "limit": 3})
    assert len(df) == 3
    row = run_report(conn, "run_summary", {"problem": "p1"}).set_index("run_id").loc["a1"]
    assert (row["logged_steps"], row["rewrites"], row["fingerprint"]) == (10, 1, "big")
    # p1 alone has 3 scored runs: one problem, so an effect but no correlation yet
    corr = run_report(conn, "feature_pattern_correlation", {"min_problems": 1})
    assert corr[["feature", "pattern", "problems"]].values.tolist() == [["size", "width", 1]]
    assert math.isnan(corr["correlation"][0])
    # widths 64, 64, 8 against norm scores 1, 0.5, 0: corr 0.866 (x - mean = 18.67,
    # 18.67, -37.33; y - mean = 0.5, 0, -0.5; cov 28 / sqrt(2090.67 * 0.5))
    assert corr["mean_effect"][0] == pytest.approx(28 / math.sqrt(2090.6667 * 0.5), rel=1e-4)


def test_feature_pattern_correlation_across_problems(root: Path) -> None:
    # per problem, widths 8, 16, 24 with scores ranked so that the width effect (the
    # correlation of width and norm score) is +1 (q1), -0.5 (q2: 16 best, 8, 24 worst), -1 (q3)
    rec = WarehouseRecorder(root)
    orders = {"q1": (0.1, 0.2, 0.3), "q2": (0.2, 0.3, 0.1), "q3": (0.3, 0.2, 0.1)}
    for size, (pid, scores) in enumerate(orders.items(), start=1):
        p = problem(pid, size=float(size))
        for width, score in zip((8, 16, 24), scores, strict=True):
            log_run(rec, f"{pid}-{width}", p, score, f"fp{width}", {"width": float(width)})
    rec.close()
    corr = run_report(connect(root), "feature_pattern_correlation", {"min_problems": 3})
    assert corr[["feature", "pattern", "problems"]].values.tolist() == [["size", "width", 3]]
    effects, sizes = [1.0, -0.5, -1.0], [1.0, 2.0, 3.0]
    assert corr["mean_effect"][0] == pytest.approx(statistics.mean(effects))
    assert corr["correlation"][0] == pytest.approx(statistics.correlation(sizes, effects))
    assert run_report(connect(root), "feature_pattern_correlation",
                      {"min_problems": 4}).empty


def test_report_errors(scored: Path) -> None:
    conn = connect(scored)
    with pytest.raises(WarehouseError, match="unknown report"):
        run_report(conn, "nope")
    with pytest.raises(WarehouseError, match="no parameter"):
        run_report(conn, "leaderboard", {"bogus": 1})
    with pytest.raises(WarehouseError, match="must be a whole number, got"):
        run_report(conn, "leaderboard", {"top": "x"})


def test_reports_run_on_an_empty_warehouse(root: Path) -> None:
    root.mkdir()  # a warehouse nothing was written to yet (a missing one is refused)
    conn = connect(root)
    for name in ("run_summary", "leaderboard", "pattern_performance", "rewrite_effects",
                 "feature_pattern_correlation"):
        assert run_report(conn, name).empty


def test_a_step_batch_logs_the_rows_its_steps_log_one_by_one(tmp_path: Path) -> None:
    import numpy as np

    from aicf_induct.records import FanoutRecorder, MemoryRecorder, StepBatch, send_steps

    rng = np.random.default_rng()
    n = 300
    batch = StepBatch(run_id="r", epoch=3, step=np.arange(40, 40 + n),
                      loss=rng.normal(size=n), grad_norm=rng.uniform(size=n),
                      update_ratio=rng.uniform(size=n), lr=rng.uniform(size=n),
                      step_time_s=0.0125, batch_size=np.r_[[32] * (n - 1), [7]])
    columns = "run_id, step, epoch, loss, grad_norm, update_ratio, lr, step_time_s, batch_size"
    by_rows, memory = WarehouseRecorder(tmp_path / "rows"), MemoryRecorder()
    for r in batch.records():
        by_rows.step(r)
    by_rows.close()
    at_once = WarehouseRecorder(tmp_path / "batch")
    send_steps(FanoutRecorder(at_once, memory), batch)  # the warehouse's step_batch, the
    at_once.close()                                     # memory recorder's rows
    want = _q(tmp_path / "rows", f"SELECT {columns} FROM steps ORDER BY step")
    assert len(want) == n
    assert _q(tmp_path / "batch", f"SELECT {columns} FROM steps ORDER BY step") == want
    assert memory.steps == list(batch.records())
    assert [type(v) for v in (memory.steps[0].step, memory.steps[0].loss)] == [int, float]


def test_gathered_step_batches_land_whole_by_their_run_end(tmp_path: Path,
                                                             monkeypatch: Any) -> None:
    import numpy as np

    import warehouse.recorder as recorder_module
    from aicf_induct.records import StepBatch

    monkeypatch.setattr(recorder_module, "STEP_BATCH_ROWS", 60)  # some sends mid-way
    rng = np.random.default_rng()
    rec = WarehouseRecorder(tmp_path / "wh", flush_interval_s=3600)
    want = []
    for epoch in range(4):
        for run, n in (("a", 17), ("b", 9 + epoch)):
            b = StepBatch(run_id=run, epoch=epoch, step=epoch * 100 + np.arange(n),
                          loss=rng.normal(size=n), grad_norm=rng.uniform(size=n),
                          update_ratio=rng.uniform(size=n), lr=rng.uniform(size=n),
                          step_time_s=float(rng.uniform()),
                          batch_size=rng.integers(1, 64, size=n))
            rec.step_batch(b)
            want += [(r.run_id, r.step, r.epoch, r.loss, r.step_time_s, r.batch_size)
                     for r in b.records()]
    assert rec._steps, "the last batches should still wait, under the threshold"
    rec.run_end(RunEndRecord(run_id="a", status="completed", steps=4, wall_time_s=1.0))
    rec.writer.flush()  # what the writer holds now: every step row, waiting none
    assert not rec._steps
    cols = "run_id, step, epoch, loss, step_time_s, batch_size"
    got = _q(tmp_path / "wh", f"SELECT {cols} FROM steps ORDER BY run_id, step")
    assert got == sorted(want)
    rec.close()


def test_a_run_s_structure_is_the_one_it_went_on_with_after_a_rollback(root: Path) -> None:
    """The snapshot of the highest step was taken: after a rewrite at 100 and a rollback to
    74, the branch the run dropped (and the leaderboard listed its structure)."""
    from aicf_induct.records import SnapshotRecord

    rec = WarehouseRecorder(root)
    for run_id, final in (("ended", True), ("stopped", False)):
        log_run(rec, run_id, problem("p1"), 0.8, "fA", {"params": 10}, end=False)
        rec.snapshot(SnapshotRecord(run_id, 100, "rewrite", "{}", "fB", 20, {"params": 20}))
        rec.snapshot(SnapshotRecord(run_id, 74, "rollback", "{}", "fA", 10, {"params": 10}))
        if final:
            rec.snapshot(SnapshotRecord(run_id, 90, "final", "{}", "fA", 10, {"params": 10}))
    rec.close()
    got = dict(_q(root, "SELECT run_id, fingerprint FROM run_structure"))
    assert got == {"ended": "fA", "stopped": "fA"}


def test_a_pattern_a_structure_lacks_counts_0_in_the_reports(root: Path) -> None:
    """A relu structure logs no `act.tanh`: its runs were left out of the pattern's rows (the
    induction layer counts it 0)."""
    rec = WarehouseRecorder(root)
    log_run(rec, "t", problem("p1"), 0.9, "tanh-net", {"act.tanh": 2.0, "depth": 2.0})
    log_run(rec, "r", problem("p1"), 0.7, "relu-net", {"act.relu": 2.0, "depth": 2.0})
    rec.close()
    rows = _q(root, "SELECT run_id, value FROM run_patterns WHERE pattern = 'act.tanh' "
                    "ORDER BY run_id")
    assert rows == [("r", 0.0), ("t", 2.0)]
    perf = run_report(connect(root), "pattern_performance", {"pattern": "act.tanh"})
    assert sorted(perf["value"].tolist()) == [0.0, 2.0]


def test_undefined_correlations_sort_last(root: Path) -> None:
    """DuckDB's corr is NaN (not NULL) for a feature constant across problems, and NaN
    sorts above every number: such rows came first."""
    rec = WarehouseRecorder(root)
    for k, size in enumerate((1.0, 2.0, 3.0)):
        p = problem(f"p{k}", size=size, constant=1.0)
        for j, width in enumerate((8.0, 16.0, 32.0)):
            score = 0.5 + (0.1 * j if k else -0.1 * j) + 0.01 * k
            log_run(rec, f"r{k}{j}", p, score, f"fp{j}", {"width": width})
    rec.close()
    df = run_report(connect(root), "feature_pattern_correlation", {"min_problems": 3})
    width = df[df["pattern"] == "width"]
    assert width["feature"].tolist() == ["size", "constant"]
    assert math.isnan(width["correlation"].iloc[1])
