"""`aicf-induct train --ranks N` (data parallel over CPU processes) end to end: the one-rank
run's metrics, one run logged; the ranks keep in step through early stopping with per-rank
batchnorm statistics; a failing or dying rank ends the run with an error naming it; `--gpus`
without GPUs is refused in one line. (`--gpus N` itself: tests/runtime/test_parallel_gpu.py,
cuda tier.)"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from aicf_induct.cli.main import main
from aicf_induct.errors import ExecutionError
from aicf_induct.runtime.ranks import run_ranks
from tests.runtime.parallel_rank import failing_rank, summing_rank

ARGS = ("--dataset", "wine", "--model", "mlp:depth=2,width=16", "--epochs", "4", "--seed", "3",
        "--batch-size", "16", "--backend", "numpy")


def _train(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["train", "--quiet", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_two_ranks_train_the_one_rank_run_and_log_one_run(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    import warehouse

    one = _train(capsys, *ARGS, "--no-log")
    two = _train(capsys, *ARGS, "--ranks", "2", "--warehouse", str(tmp_path / "wh"))
    assert two["steps"] == one["steps"]
    for key, value in one.items():
        if key.startswith(("train_", "val_", "test_")):
            np.testing.assert_allclose(two[key], value, rtol=1e-9, err_msg=key)
    conn = warehouse.connect(tmp_path / "wh")
    runs = conn.execute("SELECT run_id, config FROM runs").fetchall()
    assert [r[0] for r in runs] == [two["run_id"]]
    assert json.loads(runs[0][1])["data_parallel"] == {"ranks": 2, "gpus": False}


def test_three_ranks_stop_together_with_per_rank_batchnorm(capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    # each rank's running statistics differ; rank 0's evaluation decides for all
    out = _train(capsys, "--dataset", "iris", "--model", "mlp:depth=2,width=8,norm=batchnorm",
                 "--epochs", "60", "--patience", "2", "--lr", "0.05", "--backend", "numpy",
                 "--ranks", "3", "--no-log")
    assert out["status"] in ("early_stopped", "completed")


@pytest.mark.parametrize(("how", "says"), [("raise", "rank 1 failed: ValueError: boom"),
                                           ("exit", "rank 1 ended without a word")])
def test_a_failing_rank_ends_the_run_with_its_error(how: str, says: str) -> None:
    def rank0(comm) -> None:  # type: ignore[no-untyped-def]
        comm.allreduce_sum_(np.ones(1))
        comm.allreduce_sum_(np.ones(1))  # rank 1 is gone by now

    with pytest.raises(ExecutionError, match=says):
        run_ranks(2, rank0, failing_rank, how)


def test_ranks_sum_and_rank_0_returns() -> None:
    def rank0(comm) -> float:  # type: ignore[no-untyped-def]
        buf = np.full(2, 1.0)
        comm.allreduce_sum_(buf)
        return float(buf[0])

    assert run_ranks(3, rank0, summing_rank, 2.5) == 6.0


def test_gpus_without_a_gpu_or_with_numpy_are_refused(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    assert main(["train", *ARGS, "--gpus", "2", "--no-log"]) != 0
    assert "--gpus trains on GPUs" in capsys.readouterr().err
    try:
        import cupy

        have = cupy.cuda.runtime.getDeviceCount()
    except Exception:
        have = 0
    if have < 64:
        rc = main(["train", "--dataset", "wine", "--gpus", "64", "--no-log"])
        assert rc != 0 and "--gpus 64:" in capsys.readouterr().err


@pytest.mark.parametrize("model,batch,note", [
    ("mlp:depth=1,width=8,norm=batchnorm", "4", "note: batches of 4 rows keep 2 of the 3 ranks "
     "busy (a rank takes 2 rows at least with batchnorm); the other waits: a batch size of 6 "
     "or more uses them all"),
    ("mlp:depth=1,width=8", "1", "note: batches of 1 row keep 1 of the 3 ranks busy (a rank "
     "takes 1 row at least); the other 2 wait: a batch size of 3 or more uses them all"),
    ("mlp:depth=1,width=8,norm=batchnorm", "6", None),
])
def test_a_batch_too_small_for_every_rank_is_noted(capsys: pytest.CaptureFixture[str],
                                                  model: str, batch: str,
                                                  note: str | None) -> None:
    assert main(["train", "--quiet", "--dataset", "iris", "--model", model, "--epochs", "1",
                 "--batch-size", batch, "--ranks", "3", "--backend", "numpy", "--no-log"]) == 0
    err = capsys.readouterr().err
    assert (note in err.splitlines()) if note else "busy" not in err


@pytest.mark.parametrize("after_s", [0.2, 0.5, 0.8, 3.0])
def test_ctrl_c_on_ranks_says_interrupted_and_nothing_else(tmp_path: Path,
                                                           after_s: float) -> None:
    """A terminal's Ctrl-C reaches every rank: one still importing printed its
    KeyboardInterrupt's traceback; ranks that rank 0 then killed left the resource tracker's
    "leaked semaphore objects" warning. (The console script, as a user runs it.)"""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.induction.test_sweep_resume import children
    from tests.signals import default_sigint

    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "aicf-induct"), "train", "--dataset", "digits",
         "--model", "mlp:depth=2,width=64", "--epochs", "200", "--patience", "0",
         "--backend", "numpy", "--quiet", "--ranks", "2", "--warehouse", str(tmp_path / "wh")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=default_sigint, env={**os.environ, "PYTHONPATH": str(repo)})
    deadline = time.monotonic() + 60
    while not any(b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
                  for pid in children(proc.pid) if Path(f"/proc/{pid}").exists()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    time.sleep(after_s)  # the rank importing (its first second), or training
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) == (130, "interrupted\n"), err


def test_a_rank_s_failure_is_the_logged_run_s_error() -> None:
    """The user read "rank 1 failed: MemoryError ...", the warehouse "EOFError": the trainer
    logged the run's end before the failed rank's word was read."""
    from aicf_induct.records import MemoryRecorder
    from tests.runtime.parallel_rank import failing_trainer_rank, iris_trainer

    rec = MemoryRecorder()
    with pytest.raises(ExecutionError) as info:
        run_ranks(2, lambda comm: iris_trainer(comm, rec).fit(), failing_trainer_rank, "mid")
    said = "data parallel: rank 1 failed: MemoryError: out of memory on this rank (simulated)"
    assert str(info.value).startswith(said)
    assert [(e.status, e.error) for e in rec.run_ends] == [
        ("failed", f"ExecutionError: {info.value}")]


def test_a_rank_failing_after_the_last_exchange_leaves_the_run_rank_0_logged(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Rank 0 had logged the run completed, with its metrics; a rank failing in its own final
    evaluation then failed the command, which printed no metrics."""
    from aicf_induct.records import MemoryRecorder
    from tests.runtime.parallel_rank import failing_trainer_rank, iris_trainer

    rec = MemoryRecorder()
    res = run_ranks(2, lambda comm: iris_trainer(comm, rec).fit(), failing_trainer_rank, "end")
    assert res.status == "completed" and [e.status for e in rec.run_ends] == ["completed"]
    assert capsys.readouterr().err == (
        "note: data parallel: rank 1 failed: MemoryError: out of memory evaluating (simulated) "
        "after the run's last exchange; the run's results are rank 0's, as logged\n")


def test_a_stopped_rank_is_killed_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rank that cannot act on SIGTERM (stopped, or blocked in C): rank 0's failure then
    waited for it with no limit."""
    import time

    from aicf_induct.runtime import ranks
    from tests.runtime.parallel_rank import stopping_rank

    monkeypatch.setattr(ranks, "STOP_S", 1.0)

    def rank0(comm) -> None:  # type: ignore[no-untyped-def]
        comm.allreduce_sum_(np.ones(1))
        time.sleep(0.5)  # rank 1 stops itself
        raise ValueError("rank 0 fails")

    t0 = time.monotonic()
    with pytest.raises(ValueError, match="rank 0 fails"):
        run_ranks(2, rank0, stopping_rank, None)
    assert time.monotonic() - t0 < 30


def test_rank_0_speaks_for_the_run(capfd: pytest.CaptureFixture[str]) -> None:
    """Every rank printed its notes (a `--values` note three times with --ranks 3) and NumPy's
    warnings of a diverging run, where rank 0 says it once."""
    from tests.runtime.parallel_rank import talking_rank

    def rank0(comm) -> None:  # type: ignore[no-untyped-def]
        comm.allreduce_sum_(np.ones(1))

    run_ranks(2, rank0, talking_rank, None)
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
