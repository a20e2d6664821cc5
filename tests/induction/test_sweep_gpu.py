"""The GPU sweep engine's bookkeeping, on the CPU (backend numpy: its runs interleaved in the
sweep's process, no GPU): the same runs and results as the process pool, failures logged
without stopping the others, and a killed or interrupted sweep resumed with every triple
ended exactly once. The cuda tier (tests/induction/test_sweep_gpu_cuda.py) runs it on a GPU."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest

import warehouse
from aicf_induct.errors import ConfigError
from aicf_induct.frontend.specs import MLPSpec
from aicf_induct.induction.space import Candidate, Recipe
from aicf_induct.induction.space_io import parse_space
from aicf_induct.induction.sweep import run_sweep
from aicf_induct.induction.sweep_spec import SweepSpec
from aicf_induct.induction.sweep_worker import close_process_recorders
from aicf_induct.runtime.backend import gpu_available
from aicf_induct.runtime.trainer import TrainConfig
from tests.induction.helpers import ended_triples, sweep_runs
from tests.induction.test_sweep_resume import planned, restart, start, statuses, wait_running

TRAIN = TrainConfig(epochs=3, patience=0, backend="numpy")
FINAL_SQL = """
SELECT json_extract_string(r.config, '$.sweep.problem_id'),
       json_extract_string(r.config, '$.sweep.candidate'), r.seed, x.split, x.metric, x.value
FROM runs r JOIN results x USING (run_id) WHERE x.final ORDER BY ALL
"""
STEPS_SQL = """
SELECT json_extract_string(r.config, '$.sweep.problem_id'),
       json_extract_string(r.config, '$.sweep.candidate'), r.seed, list(s.loss ORDER BY s.step)
FROM runs r JOIN steps s USING (run_id) GROUP BY ALL ORDER BY ALL
"""


def spec() -> SweepSpec:
    return SweepSpec(("iris", "wine"), tuple(parse_space("tiny3").candidates()), (0, 1),
                     TRAIN, 60.0)


def rows(root: Path, sql: str) -> list[tuple[object, ...]]:
    return warehouse.with_retry(root, lambda c: c.execute(sql).fetchall())


def assert_same_runs(a: Path, b: Path, rtol: float = 0.0, atol: float = 0.0) -> None:
    """Warehouse `a` ended every triple `b` did, each once, with `b`'s final results: the
    same to the bit, or within `rtol` / `atol` where given (fp32 runs on a GPU)."""
    assert ended_triples(a) == ended_triples(b)
    assert max(ended_triples(a).values()) == 1
    got, want = rows(a, FINAL_SQL), rows(b, FINAL_SQL)
    if not rtol and not atol:
        assert got == want
        return
    assert [r[:5] for r in got] == [r[:5] for r in want]
    np.testing.assert_allclose([float(r[5]) for r in got],
                               [float(r[5]) for r in want], rtol=rtol, atol=atol)


def test_the_engine_logs_the_runs_and_results_the_pool_logs(tmp_path: Path) -> None:
    s = spec()
    try:
        many = run_sweep(s, tmp_path / "many", workers=5, engine="gpu", progress=False)
    finally:
        close_process_recorders()
    pool = run_sweep(s, tmp_path / "pool", workers=2, progress=False)
    assert dict(many.statuses) == dict(pool.statuses) == {"completed": 12}
    assert_same_runs(tmp_path / "many", tmp_path / "pool")
    assert rows(tmp_path / "many", STEPS_SQL) == rows(tmp_path / "pool", STEPS_SQL)
    again = run_sweep(s, tmp_path / "many", workers=5, engine="gpu", progress=False)
    assert (again.skipped, again.ran) == (12, 0)


def test_failures_are_logged_and_the_others_go_on(tmp_path: Path) -> None:
    good = Candidate(MLPSpec(depth=1, width=8))
    bad = Candidate(MLPSpec(depth=1, width=8), Recipe(lr=-1.0))
    (tmp_path / "t.csv").write_text("a,b\n1,2\n3,4\n")  # a table that does not load: no 'y'
    s = SweepSpec(("iris", f"file:{tmp_path / 't.csv'}?target=y"), (bad, good), (0,), TRAIN,
                  60.0)
    try:
        report = run_sweep(s, tmp_path / "wh", workers=4, engine="gpu", progress=False)
    finally:
        close_process_recorders()
    assert dict(report.statuses) == {"failed": 1, "completed": 1}
    [failed] = [r for r in sweep_runs(tmp_path / "wh") if r[3] == "failed"]
    assert "ConfigError: lr must be > 0, got -1" in (failed[4] or "")


@pytest.mark.skipif(gpu_available(), reason="a GPU is here: the engine would use it")
def test_without_a_gpu_the_engine_needs_backend_numpy(tmp_path: Path) -> None:
    s = SweepSpec(("iris",), (Candidate(MLPSpec(depth=1, width=8)),), (0,),
                  TrainConfig(epochs=1), 60.0)
    with pytest.raises(ConfigError, match="engine 'gpu' needs an NVIDIA GPU"):
        run_sweep(s, tmp_path / "wh", engine="gpu", progress=False)
    assert not (tmp_path / "wh").exists()


ENGINE = ("--engine", "gpu", "--backend", "numpy")
ENDLESS = ("--epochs", "100000", "--budget", "60", "--workers", "2", *ENGINE)
RESTART = ("--epochs", "100000", "--budget", "0.5", "--workers", "4", *ENGINE)


def test_sigkill_then_restart_ends_every_triple_exactly_once(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    proc = start(root, *ENDLESS)
    wait_running(root, proc, 2)
    proc.send_signal(signal.SIGKILL)  # the engine's runs die with it, their ends unlogged
    proc.communicate()
    assert restart(root, *RESTART)["ran"] == len(planned())
    assert statuses(root)["timeout"] == len(planned())


def test_ctrl_c_logs_the_runs_in_flight_as_interrupted(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    proc = start(root, *ENDLESS)
    wait_running(root, proc, 2)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and err.splitlines()[0] == "interrupted", err
    assert statuses(root) == {"interrupted": 2}
    restart(root, *RESTART)
    assert statuses(root) == {"timeout": len(planned()), "interrupted": 2}


def test_corpus_build_takes_the_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    from aicf_induct.cli.main import main

    argv = ["corpus", "build", "--problems", "iris", "--space", "depth=1;width=8", "--seeds",
            "2", "--epochs", "2", "--engine", "gpu", "--backend", "numpy", "--warehouse",
            str(tmp_path / "wh"), "--quiet", "--json"]
    try:
        assert main(argv) == 0
    finally:
        close_process_recorders()
    report = json.loads(capsys.readouterr().out)
    assert (report["ran"], report["statuses"]) == (2, {"completed": 2})


def test_corpus_build_retries_failed_runs_when_asked(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # a budget too small for any run: it ends `timeout`, which counts as done unless
    # --retry-failed (e.g. after runs ran out of GPU memory) trains it again
    from aicf_induct.cli.main import main

    argv = ["corpus", "build", "--problems", "iris", "--space", "depth=1;width=8", "--seeds",
            "1", "--epochs", "400", "--budget", "0.001", "--backend", "numpy", "--workers", "1",
            "--warehouse", str(tmp_path / "wh"), "--quiet", "--json"]
    reports = []
    try:
        for extra in ([], [], ["--retry-failed"]):
            assert main(argv + extra) == 0
            reports.append(json.loads(capsys.readouterr().out))
    finally:
        close_process_recorders()
    assert [(r["ran"], r["skipped"], r["failed"]) for r in reports] == [
        (1, 0, 1), (0, 1, 0), (1, 0, 1)]
