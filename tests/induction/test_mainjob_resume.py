"""A main-job run (the learned rewrite policy) resumes from its checkpoint with the proposer
it started with: the checkpoint keeps the policy's settings (the rewrite table, the fallback,
the depth ceiling) and the structure proposal its decisions name; `learned_policy` rebuilds
it, whose answers are the first one's; the resumed run ends exactly as the uninterrupted
one, its learned decision (after the interrupt) included."""

from __future__ import annotations

import json

import numpy as np
import pytest

from aicf_induct.induction.mainjob import LocalRewrites, learned_policy, main_job
from aicf_induct.problems import load_problem
from aicf_induct.records import MemoryRecorder
from aicf_induct.runtime import snapshot as disk
from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun, checkpoint_policy
from aicf_induct.runtime.guard import GuardConfig
from aicf_induct.runtime.policies import policy_settings
from aicf_induct.runtime.trainer import TrainConfig

STOP_AT = 60  # executed steps: before the warm-up trigger (step 100), whose decision is learned


class Interrupt:
    def before_step(self, run, x, y):  # type: ignore[no-untyped-def]
        if run.work == STOP_AT:
            raise KeyboardInterrupt
        return x, y


def test_a_main_job_run_resumes_with_its_own_proposer(tmp_path) -> None:  # type: ignore[no-untyped-def]
    problem = load_problem("wine")
    job = main_job(problem, TrainConfig(seed=0))
    adapt = AdaptConfig(steps=300, guard=GuardConfig(counterfactual=True), checkpoint_steps=20)
    whole = MemoryRecorder()
    first = job.adaptive_run(adapt, recorder=whole).run()
    learned = [e for e in whole.events if e.kind == "decision" and e.name != "none"]
    assert learned and learned[0].step == 100 and "induction" in learned[0].detail["source"]

    ckpt = tmp_path / "ck"
    with pytest.raises(KeyboardInterrupt):
        job.adaptive_run(adapt, checkpoint_dir=ckpt, hooks=[Interrupt()]).run()
    name, settings = checkpoint_policy(ckpt)
    assert name == "learned" and settings == json.loads(json.dumps(
        policy_settings(job.policy)))
    assert disk.read_meta(disk.latest(ckpt))["run"]["proposal"] == job.start.record
    rebuilt = learned_policy(settings)
    assert isinstance(rebuilt.ask, LocalRewrites) and rebuilt.fallback.name == "rules"

    again = MemoryRecorder()
    resumed = AdaptiveRun.resume(ckpt, problem, rebuilt, recorder=again).run()
    assert resumed.steps == first.steps and resumed.work == first.work
    assert resumed.rewrites == first.rewrites and resumed.best_step == first.best_step
    assert resumed.metrics == first.metrics
    decided = [e for e in again.events if e.kind == "decision" and e.name != "none"]
    assert [(e.step, e.name, e.detail["proposal"]) for e in decided] == \
        [(e.step, e.name, e.detail["proposal"]) for e in learned]
    np.testing.assert_array_equal([h["val_loss"] for h in resumed.history],
                                  [h["val_loss"] for h in first.history])


def test_a_rebuilt_proposer_answers_as_the_first_one() -> None:
    job = main_job(load_problem("iris"), TrainConfig(seed=0))
    ask = job.policy.ask
    assert isinstance(ask, LocalRewrites)
    again = LocalRewrites.from_settings(json.loads(json.dumps(ask.settings())))
    assert again.effects.table_.equals(ask.effects.table_)
    assert again.effects.get_params() == ask.effects.get_params() and \
        again.n_rows == ask.n_rows
    assert json.loads(json.dumps(again.settings())) == json.loads(json.dumps(ask.settings()))
