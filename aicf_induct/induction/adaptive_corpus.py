"""Adaptive runs for the corpus (`corpus build --adaptive N`): the rewrite history the learned
rewrite proposer learns from.

Per problem, N runs (run i: split seed i), each starting from candidate i (mod) of the corpus
space's candidates no wider than 128 units, with the `ExplorePolicy` (a randomised
experiment over the transforms and "no change", seeded per run) at its triggers, the guard
as always. Each run
starts and logs through `AdaptiveRun.start` (that is `runtime.runs.start_run`, the one way
every run is logged), so it lands in the warehouse with its problem row and meta-features,
origin `adapt` and `config.corpus_adaptive` = {problem, index, candidate}. The problems are
loaded once before any run starts (`loadable`, the sweep's loader): one that cannot be loaded
is left out with the sweep's warning, and none loading is the sweep's error.

The runs go through the sweep's machinery (`sweep.dispatch` over its local engine: an
`AdaptiveJob` is a sweep `Task`), so they behave as a sweep's do. Resumable: a (problem,
start candidate, index) with a run that ended under the same settings (its `adapt` config and
policy: the protocol, as a sweep's) is skipped; a run under other settings (say, another
--adaptive-steps) is another experiment, and the job runs again, as a sweep's triple under
another protocol does. Builds at once on one warehouse split the runs (claims, as sweeps do);
a worker whose build is gone stops, and SIGTERM or Ctrl-C ends the runs in flight logged as
`interrupted`, which the next build runs again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from collections import Counter
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from aicf_induct.frontend.specs import MLPSpec
from aicf_induct.induction.meta_dataset import DONE_STATUSES
from aicf_induct.induction.space import Candidate
from aicf_induct.induction.sweep import SweepReport, TripleClaims
from aicf_induct.induction.sweep_engines import Ended, Engine
from aicf_induct.induction.sweep_spec import Triple
from aicf_induct.induction.sweep_worker import Task
from aicf_induct.json_values import json_object
from aicf_induct.problems.problem import Problem
from aicf_induct.records import Recorder
from aicf_induct.runtime.trainer import TrainConfig

STEPS = 600  # optimizer steps per adaptive run
WARMUP = 50  # the warm-up trigger
EVAL_EVERY = 25  # validation every this many steps (the plateau trigger's clock)
GUARD = 30  # steps the guard watches after a rewrite
MAX_REWRITES = 6
POLICY = "explore"  # `ExplorePolicy.name`
ENDED = (*DONE_STATUSES, "failed")  # a job with a run so ended is done (failed: it would again)


def adapt_settings(steps: int) -> dict[str, Any]:
    """The `AdaptConfig` of a run of `steps` steps, as its config logs it (`adapt`)."""
    from aicf_induct.runtime.adaptive import AdaptConfig
    from aicf_induct.runtime.guard import GuardConfig

    return dataclasses.asdict(AdaptConfig(steps=steps, warmup_steps=WARMUP,
                                          eval_every=EVAL_EVERY, guard=GuardConfig(steps=GUARD),
                                          max_rewrites=MAX_REWRITES))


def protocol_of(adapt: dict[str, Any], policy: str) -> str:
    """The settings that define an adaptive run besides its triple, hashed (a sweep's
    protocol's counterpart): its logged `adapt` config (read back through `AdaptConfig`, so
    a run logged before a setting was added hashes as one with its default) and policy."""
    from aicf_induct.runtime.adaptive import AdaptConfig

    with suppress(TypeError, KeyError, ValueError):  # an older shape: its settings as logged
        adapt = dataclasses.asdict(AdaptConfig.from_dict(adapt))
    text = json.dumps({"corpus_adaptive": adapt, "policy": policy}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class AdaptiveJob(Task):
    """Adaptive run `index` (its split seed, `seed`) of a problem, as a sweep task: its triple
    is (problem name, start candidate, index), its protocol its settings' (`protocol_of`)."""

    steps: int = STEPS

    @classmethod
    def of(cls, problem: str, index: int, candidate: Candidate,
           steps: int = STEPS) -> AdaptiveJob:
        # the run's recipe is the candidate's (`Task.config`); no early stop, no time budget
        return cls(problem, "", candidate, index, TrainConfig(patience=0), 0.0, "", steps=steps)

    origin = "adapt"

    @property
    def index(self) -> int:
        return self.seed

    @property
    def triple(self) -> tuple[str, str, int]:
        return (self.problem, self.candidate.key, self.seed)

    @property
    def protocol(self) -> str:
        return protocol_of(adapt_settings(self.steps), POLICY)

    def extra_config(self) -> dict[str, Any]:
        return {"adapt": adapt_settings(self.steps), "policy": POLICY,
                "model": self.candidate.spec.to_string(),
                "corpus_adaptive": {"problem": self.problem, "index": self.index,
                                    "candidate": self.candidate.key}}

    def fit(self, problem: Problem, log: Recorder, run_id: str) -> None:
        from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun
        from aicf_induct.runtime.policies import ExplorePolicy

        seed = int(hashlib.sha256(f"{self.problem}#{self.index}".encode()).hexdigest()[:8], 16)
        run = AdaptiveRun(problem, self.candidate.graph(problem.n_features, problem.n_outputs),
                          self.config(), AdaptConfig.from_dict(adapt_settings(self.steps)),
                          ExplorePolicy(seed=seed), recorder=log, run_id=run_id,
                          extra_config=self.extra_config())
        run.run()


@dataclass(frozen=True)
class AdaptiveReport:
    planned: int
    skipped: int  # ended before (or by another build on the warehouse while this one ran)
    ran: int
    failed: list[str]
    held: int = 0  # of `skipped`: still running in another live build when this one ended


MAX_START_WIDTH = 128  # wider candidates are left out as start points (cost; widen doubles)


def plan(names: Sequence[str], per_problem: int, candidates: Sequence[Candidate],
         steps: int = STEPS) -> list[AdaptiveJob]:
    """Run i of a problem starts from the i-th MLP candidate (mod) no wider than
    MAX_START_WIDTH (the rewrite history is of MLP transforms)."""
    mlps = [c for c in candidates if isinstance(c.spec, MLPSpec)] or list(candidates)
    starts = [c for c in mlps if isinstance(c.spec, MLPSpec)
              and c.spec.width <= MAX_START_WIDTH] or mlps
    return [AdaptiveJob.of(name, i, starts[i % len(starts)], steps)
            for name in names for i in range(per_problem)]


def loadable(names: Sequence[str], progress: bool = False,
             stream: TextIO | None = None) -> list[str]:
    """The problems of `names` that load, each loaded once by the sweep's loader
    (`sweep.load_problems`) at seed 0 (run 0's split; run i loads its problem at split seed i,
    and whether a load fails does not depend on the seed: every check comes before the
    split); each other one said on `stream` (stderr) as the sweep says it. A ConfigError when
    none loads, before any run starts."""
    from aicf_induct.induction.sweep import load_problems, say_unloadable

    ids, _, errors = load_problems(names, 0, progress)
    say_unloadable(errors, stream or sys.stderr)
    return [name for name in names if name in ids]


FINISHED_SQL = """
SELECT json_extract_string(config, '$.corpus_adaptive.problem'),
       json_extract_string(config, '$.corpus_adaptive.candidate'),
       TRY_CAST(json_extract(config, '$.corpus_adaptive.index') AS BIGINT),
       json_extract_string(config, '$.adapt'), json_extract_string(config, '$.policy'),
       status, count(*)
FROM runs
WHERE origin = 'adapt' AND json_extract(config, '$.corpus_adaptive') IS NOT NULL
  AND list_contains(?, status)
GROUP BY ALL
"""


def finished_jobs(root: str | Path, protocol: str,
                  statuses: Sequence[str] = ENDED) -> dict[Triple, Counter[str]]:
    """Ended adaptive corpus runs per triple under `protocol`, by status."""
    import warehouse

    if not Path(root).is_dir():
        return {}
    rows = warehouse.with_retry(Path(root), lambda c: c.execute(FINISHED_SQL, [list(statuses)])
                                .fetchall())
    out: dict[Triple, Counter[str]] = {}
    for problem, cand, index, adapt, policy, status, n in rows:
        if index is None or protocol_of(json_object(adapt), str(policy)) != protocol:
            continue
        out.setdefault((str(problem), str(cand), int(index)), Counter())[str(status)] += int(n)
    return out


class AdaptiveClaims(TripleClaims):
    """The sweep's claims (`sweep.TripleClaims`) on adaptive jobs: a dead holder's job is
    taken over unless one of its adaptive runs ended."""

    def ended(self, task: Task) -> Counter[str] | None:
        return finished_jobs(self.root, self.protocol, self.done).get(task.triple)


class _Failures:
    """The engine, noting each failed run's error for the report."""

    def __init__(self, eng: Engine, failed: list[str]) -> None:
        self.eng, self.failed = eng, failed
        self.capacity = eng.capacity

    def submit(self, task: Task) -> None:
        self.eng.submit(task)

    def wait(self) -> list[Ended]:
        out = self.eng.wait()
        for task, outcome, _ in out:
            if outcome is not None and outcome.status == "failed" and \
                    isinstance(task, AdaptiveJob):
                self.failed.append(f"{task.problem}#{task.index}: {outcome.error}")
        return out

    def interrupt(self) -> None:
        self.eng.interrupt()

    def close(self) -> None:
        self.eng.close()

    def slower_paths(self) -> dict[str, int]:
        return self.eng.slower_paths()


def run_adaptive(jobs: Sequence[AdaptiveJob], root: str | Path, workers: int = 1,
                 progress: bool = False) -> AdaptiveReport:
    """Run the jobs not yet in the warehouse (see the module docstring), in `workers` worker
    processes. Ctrl-C or SIGTERM: the runs in flight end logged as `interrupted` and
    KeyboardInterrupt propagates."""
    from aicf_induct.induction.sweep import dispatch
    from aicf_induct.induction.sweep_engines import open_engine
    from aicf_induct.induction.sweep_worker import open_recorder
    from aicf_induct.interrupts import sigterm_interrupts
    from aicf_induct.progress import lasting

    jobs = [dataclasses.replace(j, root=str(root)) for j in jobs]
    groups: dict[str, list[AdaptiveJob]] = {}
    for job in jobs:
        groups.setdefault(job.protocol, []).append(job)
    report = SweepReport("", len(jobs), 0)
    failed: list[str] = []
    with sigterm_interrupts():
        todo = {}
        for p, group in groups.items():
            done = finished_jobs(root, p)  # once per protocol, not once per job
            todo[p] = [j for j in group if j.triple not in done]
        report.skipped = len(jobs) - sum(len(t) for t in todo.values())
        if report.skipped == len(jobs):
            return AdaptiveReport(len(jobs), len(jobs), 0, [])
        parent = open_recorder(root)  # its writer holds the claims
        try:
            with lasting(total=len(jobs) - report.skipped, desc="adaptive runs", unit="run",
                         enabled=progress) as bar, \
                    open_engine("local", max(1, workers), None) as eng:
                for protocol, group in todo.items():
                    claims = AdaptiveClaims(Path(root), protocol, parent.writer.writer_id,
                                            ENDED)
                    dispatch(group, _Failures(eng, failed), claims, parent, report, bar)
        finally:
            parent.close()
    ran = sum(n for s, n in report.statuses.items() if s not in ("failed", "interrupted"))
    return AdaptiveReport(len(jobs), report.skipped + report.elsewhere + report.held, ran,
                          failed, report.held)
