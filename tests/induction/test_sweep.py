"""Sweeps into a temporary warehouse: exact runs, resume, failures, timeouts, Ray."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

import warehouse
from aicf_induct.errors import ConfigError
from aicf_induct.frontend.specs import MLPSpec
from aicf_induct.induction.space import Candidate, Recipe
from aicf_induct.induction.space_io import parse_space
from aicf_induct.induction.sweep import SweepReport, run_sweep
from aicf_induct.induction.sweep_problems import resolve
from aicf_induct.induction.sweep_spec import SweepSpec
from aicf_induct.induction.sweep_state import finished_triples
from aicf_induct.induction.sweep_worker import Task, close_process_recorders, run_task
from aicf_induct.problems import load_problem
from aicf_induct.runtime.trainer import TrainConfig
from tests.induction.helpers import ended_triples, sweep_runs

PROBLEMS = ("iris", "wine")
TRAIN = TrainConfig(epochs=2, patience=0)


def small_spec() -> SweepSpec:
    return SweepSpec(PROBLEMS, tuple(parse_space("tiny3").candidates()), (0,), TRAIN, 60.0)


def planned(spec: SweepSpec) -> set[tuple[str, str, int]]:
    ids = [load_problem(p).problem_id for p in spec.problems]
    return {(pid, c.key, s) for pid in ids for c in spec.candidates for s in spec.seeds}


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SweepSpec]:
    root = tmp_path_factory.mktemp("sweep") / "wh"
    spec = small_spec()
    report = run_sweep(spec, root, workers=2, progress=False)
    assert (report.planned, report.skipped, report.statuses["completed"]) == (6, 0, 6)
    assert report.slower_paths == {} and "slower" not in report.summary()
    return root, spec


def test_a_report_names_the_runs_on_slower_gpu_paths() -> None:
    # the GPU engine's fallbacks (epoch_gpu.FELL_BACK), counted a run each; the tests of
    # the engine's paths themselves are the cuda tier's (tests/runtime/test_many_gpu.py)
    from collections import Counter

    report = SweepReport("s", 5, 0, Counter(completed=5), slower_paths={"multi": 3, "eager": 1})
    assert report.summary().endswith(
        "; on slower GPU paths (the same results): 1 run(s) with steps run eagerly, 3 run(s) "
        "with full-batch steps captured k at a time")
    assert report.as_dict()["slower_paths"] == {"multi": 3, "eager": 1}


def test_sweep_logs_exactly_the_planned_runs(local_sweep: tuple[Path, SweepSpec]) -> None:
    root, spec = local_sweep
    assert ended_triples(root) == dict.fromkeys(planned(spec), 1)
    conn = warehouse.connect(root)
    names = {r[0] for r in conn.execute("SELECT name FROM problems").fetchall()}
    assert names == set(PROBLEMS)
    cfg = conn.execute("SELECT config::JSON -> 'sweep' FROM runs LIMIT 1").fetchone()[0]
    assert {"sweep_id", "protocol", "problem", "problem_id", "candidate", "structure_key",
            "seed"} <= set(__import__("json").loads(cfg))
    # every run logged its IR, and the fingerprint is the candidate's
    rows = conn.execute("""SELECT json_extract_string(r.config, '$.sweep.structure_key'),
                                  s.fingerprint, r.problem_name
                           FROM runs r JOIN ir_snapshots s USING (run_id)""").fetchall()
    by_key = {c.structure_key: c for c in spec.candidates}
    for skey, fp, pname in rows:
        p = load_problem(pname)
        assert by_key[skey].fingerprint(p.n_features, p.n_outputs) == fp


def test_a_second_sweep_skips_finished_triples(local_sweep: tuple[Path, SweepSpec]) -> None:
    root, spec = local_sweep
    report = run_sweep(spec, root, workers=2, progress=False)
    assert (report.skipped, report.ran) == (6, 0)
    # other training settings are another protocol: nothing of it is finished
    assert not finished_triples(root, SweepSpec(PROBLEMS, spec.candidates, (0,),
                                                TrainConfig(epochs=3)).protocol)


def test_ray_engine_gives_the_same_runs(local_sweep: tuple[Path, SweepSpec],
                                        tmp_path: Path) -> None:
    pytest.importorskip("ray")
    root, spec = local_sweep
    report = run_sweep(spec, tmp_path / "wh", workers=2, engine="ray", progress=False)
    assert report.statuses["completed"] == 6
    assert ended_triples(tmp_path / "wh") == ended_triples(root)


def task(tmp_path: Path, cand: Candidate, budget: float = 0.0,
         train: TrainConfig = TRAIN) -> Task:
    pid = load_problem("iris").problem_id
    return Task("iris", pid, cand, 0, train, budget, str(tmp_path / "wh"),
                {"sweep_id": "t", "protocol": "p"})


@pytest.mark.parametrize("recipe, words", [
    (Recipe(lr=-1.0), "ConfigError: lr must be > 0, got -1"),
    (Recipe(batch_size=0), "ConfigError: batch_size must be >= 1"),
])
def test_a_failing_run_is_logged_with_its_error(tmp_path: Path, recipe: Recipe,
                                                words: str) -> None:
    try:
        out = run_task(task(tmp_path, Candidate(MLPSpec(depth=1, width=8), recipe)))
    finally:
        close_process_recorders()
    assert out.status == "failed" and words in (out.error or "")
    [(_, key, seed, status, error)] = sweep_runs(tmp_path / "wh")
    assert (key, seed, status) == (out.triple[1], 0, "failed") and words in (error or "")


def test_a_run_past_its_budget_ends_as_timeout(tmp_path: Path) -> None:
    cand = Candidate(MLPSpec(depth=2, width=16), Recipe(batch_size=4))
    try:
        out = run_task(task(tmp_path, cand, budget=0.2,
                            train=TrainConfig(epochs=500, patience=0)))
    finally:
        close_process_recorders()
    assert out.status == "timeout" and "time budget of 0.2 s used up" in (out.error or "")
    assert out.wall_s < 10
    assert [r[3] for r in sweep_runs(tmp_path / "wh")] == ["timeout"]


def test_failures_do_not_stop_a_sweep_and_can_be_retried(tmp_path: Path) -> None:
    good = Candidate(MLPSpec(depth=1, width=8))
    bad = Candidate(MLPSpec(depth=1, width=8), Recipe(lr=-1.0))
    (tmp_path / "t.csv").write_text("a,b\n1,2\n3,4\n")  # a table, with no column 'y'
    unusable = f"file:{tmp_path / 't.csv'}?target=y"
    spec = SweepSpec(("iris", unusable), (bad, good), (0,), TRAIN, 60.0)
    said = io.StringIO()
    report = run_sweep(spec, tmp_path / "wh", workers=1, progress=False, stream=said)
    assert dict(report.statuses) == {"failed": 1, "completed": 1}
    assert list(report.unloadable) == [unusable]
    # the problem left out is said once, in this project's words (no exception class)
    assert said.getvalue().count(f"warning: problem '{unusable}' left out: ") == 1
    assert "no column 'y'" in said.getvalue()
    # none loads: one error naming each, no warning besides, and the warehouse untouched
    said = io.StringIO()
    with pytest.raises(ConfigError, match=r"^no problem could be loaded: "
                                          r"file:.*no column 'y'"):
        run_sweep(SweepSpec((unusable,), (good,), (0,), TRAIN, 60.0),
                  tmp_path / "wh2", workers=1, progress=False, stream=said)
    assert "warning" not in said.getvalue()
    assert not (tmp_path / "wh2").exists()
    again = run_sweep(spec, tmp_path / "wh", workers=1, progress=False, retry_failed=True)
    assert (again.skipped, dict(again.statuses)) == (1, {"failed": 1})


def test_names_that_name_no_table_are_refused_before_the_warehouse_is_touched(
        tmp_path: Path) -> None:
    good = Candidate(MLPSpec(depth=1, width=8))
    spec = SweepSpec(("iris", "no_such_problem", "nosrc:3"), (good,), (0,), TRAIN, 60.0)
    with pytest.raises(ConfigError, match=r"^2 of the problems name no table: "
                                          r"no_such_problem: no bundled dataset .*; "
                                          r"nosrc:3: unknown problem source 'nosrc'"):
        run_sweep(spec, tmp_path / "wh", workers=1, progress=False)
    assert not (tmp_path / "wh").exists()


def test_a_str_of_problems_is_one_problem(tmp_path: Path) -> None:
    """`problems="iris"` was one problem per character: "3 of the problems name no table:
    i ... r ... s"."""
    from aicf_induct.induction.sweep_spec import check_sweep

    good = Candidate(MLPSpec(depth=1, width=8))
    spec = SweepSpec("iris", (good,), (0,), TRAIN, 60.0)  # type: ignore[arg-type]
    assert spec.problems == ("iris",)
    assert check_sweep(spec, tmp_path / "wh").problems == ("iris",)
    assert not (tmp_path / "wh").exists()


def test_a_space_that_applies_to_no_problem_is_refused_before_the_warehouse_is_touched(
        tmp_path: Path) -> None:
    cnn = tuple(parse_space("family=cnn").candidates())
    with pytest.raises(ConfigError, match=r"^no candidate of the space applies to the "
                                          r"problems \(iris, wine\): cnn candidates train on "
                                          r"image-shaped problems only"):
        run_sweep(SweepSpec(PROBLEMS, cnn, (0,), TRAIN, 60.0), tmp_path / "wh", workers=1,
                  progress=False)
    assert not (tmp_path / "wh").exists()


def test_problem_specs() -> None:
    assert resolve("sklearn") == ["iris", "wine", "breast_cancer", "digits", "diabetes"]
    assert resolve("sklearn:2,digits,iris", exclude=["wine"]) == ["iris", "digits"]
    with pytest.raises(Exception, match="no problems left"):
        resolve("iris", exclude=["iris"])


def test_a_repeatable_sweep_starts_its_runs_with_tuning_off(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the GPU engine in this process (NumPy backend): every trainer is built while
    # $AICF_TUNING_BUDGET_S says off (spawned engine processes inherit it), and after the
    # sweep the environment is as it was; the cuda tier checks the results repeat bit for bit
    from aicf_induct.kernels.autotune import BUDGET_ENV, tuning_is_off
    from aicf_induct.runtime import trainer

    seen: list[bool] = []
    real = trainer.select_backend

    def select(*args: object, **kwargs: object) -> object:
        seen.append(tuning_is_off())
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(trainer, "select_backend", select)
    monkeypatch.setenv(BUDGET_ENV, "3")
    spec = SweepSpec(("iris",), tuple(parse_space("tiny3").candidates()), (0,),
                     TrainConfig(epochs=2, patience=0, backend="numpy"), 60.0)
    report = run_sweep(spec, tmp_path / "wh", workers=3, engine="gpu", progress=False,
                       repeatable=True)
    assert report.statuses["completed"] == 3 and seen == [True] * 3
    assert report.as_dict()["repeatable"] and report.summary().endswith(
        "; kernel tuning off (repeatable)")
    assert not tuning_is_off() and os.environ[BUDGET_ENV] == "3"
    seen.clear()
    more = run_sweep(spec, tmp_path / "wh", engine="gpu", progress=False, retry_failed=True)
    assert (more.skipped, more.repeatable) == (3, False)


def test_two_names_of_one_problem_train_its_runs_once(tmp_path: Path) -> None:
    """`iris` and `iris?max_rows=500` load the same problem (150 rows, none cut): the plan
    held each of its runs twice, with 4 workers each trained twice, and the report said
    2 ran where 4 did (or that another sweep had ended them)."""
    from aicf_induct.induction.sweep import load_problems

    ids, rows, errors = load_problems(["iris", "iris?max_rows=500"], seed=0)
    assert list(ids) == ["iris"] and len(rows) == 1
    assert errors == {"iris?max_rows=500": f"the same problem as 'iris' (problem "
                                           f"{ids['iris']}), which the sweep runs"}
    spec = SweepSpec(("iris", "iris?max_rows=500"),
                     tuple(parse_space("tiny3").candidates())[:2], (0,), TRAIN, 60.0)
    report = run_sweep(spec, tmp_path / "wh", workers=4, progress=False)
    assert (report.planned, report.statuses["completed"]) == (2, 2)
    assert "another sweep" not in report.summary()
    runs = warehouse.connect(tmp_path / "wh").execute(
        "SELECT problem_id, json_extract_string(config, '$.sweep.candidate'), seed FROM runs"
    ).fetchall()
    assert len(runs) == len(set(runs)) == 2
