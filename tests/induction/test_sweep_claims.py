"""A sweep's claims against the warehouse: a dead holder's claim is taken over, unless the
warehouse shows its run ended (the holder died between the run's end and its claim's)."""

from __future__ import annotations

import json
from pathlib import Path

from aicf_induct.frontend.specs import MLPSpec
from aicf_induct.induction.space import Candidate
from aicf_induct.induction.sweep import TripleClaims, run_sweep
from aicf_induct.induction.sweep_spec import SweepSpec
from aicf_induct.induction.sweep_state import END_STATUSES, RETRY_STATUSES
from aicf_induct.induction.sweep_worker import Task
from aicf_induct.problems import load_problem
from aicf_induct.records import RunEndRecord, RunStartRecord
from aicf_induct.runtime.trainer import TrainConfig
from tests.induction.helpers import ended_triples
from warehouse import WarehouseRecorder, Writer
from warehouse.claims import State, try_claim
from warehouse.lease import lease_path

PROTOCOL = "proto"


def _task(root: Path, width: int) -> Task:
    return Task("iris", "pid", Candidate(MLPSpec(depth=1, width=width)), 0, TrainConfig(),
                0.0, str(root), {"sweep_id": "s", "protocol": PROTOCOL})


def _dead_holder(root: Path, model: Writer) -> str:
    """A writer id whose lease names a process that no longer exists (a SIGKILLed sweep)."""
    data = json.loads(lease_path(root, model.writer_id).read_text())
    lease_path(root, "dead").write_text(json.dumps({**data, "writer_id": "dead",
                                                    "pid": 2**22 + 1}))
    return "dead"


def _log_ended(root: Path, task: Task, status: str) -> None:
    rec = WarehouseRecorder(root)
    rec.run_start(RunStartRecord("r-" + task.candidate.key, task.problem_id, "iris",
                                 "classification", {"sweep": task.run_config()}, task.seed,
                                 "cpu", {}, "sweep"))
    rec.run_end(RunEndRecord("r-" + task.candidate.key, status, 10, 0.1))
    rec.close()


def test_a_dead_holders_triple_is_taken_over_unless_its_run_ended(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    ended, cut, failed = _task(root, 8), _task(root, 16), _task(root, 32)
    with Writer(root) as me:
        dead = _dead_holder(root, me)
        for t in (ended, cut, failed):
            assert try_claim(root, PROTOCOL, json.dumps(t.triple), dead, END_STATUSES)[0] \
                is State.CLAIMED
        _log_ended(root, ended, "completed")  # then the holder died, its claim not ended
        _log_ended(root, failed, "failed")
        claims = TripleClaims(root, PROTOCOL, me.writer_id, END_STATUSES)
        assert claims.take(ended) == (State.DONE, None)  # not run twice
        assert claims.take(failed) == (State.DONE, None)
        state, claim = claims.take(cut)  # never ended: run it again
        assert state is State.CLAIMED and claim is not None and claim.generation == 2
        # the claim now says how the triple ended: a retrying sweep runs the failed one only
        retry = TripleClaims(root, PROTOCOL, me.writer_id, RETRY_STATUSES)
        assert retry.take(ended) == (State.DONE, None)
        assert retry.take(failed)[0] is State.CLAIMED


def test_a_sweep_leaves_a_triple_held_by_a_live_sweep_to_it(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    cands = (Candidate(MLPSpec(depth=1, width=8)), Candidate(MLPSpec(depth=1, width=16)))
    spec = SweepSpec(("iris",), cands, (0,), TrainConfig(epochs=2, patience=0), 60.0)
    pid = load_problem("iris").problem_id
    with Writer(root) as other:  # another sweep, alive, running the first triple
        triple = json.dumps((pid, cands[0].key, 0))
        _, claim = try_claim(root, spec.protocol, triple, other.writer_id, END_STATUSES)
        assert claim is not None
        report = run_sweep(spec, root, workers=1, progress=False)
    assert (report.ran, report.held, report.elsewhere) == (1, 1, 0)
    assert set(ended_triples(root)) == {(pid, cands[1].key, 0)}  # the held one not run
