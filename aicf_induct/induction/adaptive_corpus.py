"""Adaptive runs for the corpus (`corpus build --adaptive N`): the rewrite history the learned
rewrite proposer learns from.

Per problem, N runs (run i: split seed i), each starting from candidate i (mod) of the corpus
space's candidates no wider than 128 units, with the `ExplorePolicy` (a randomised
experiment over the transforms and "no change", seeded per run) at its triggers, the guard
as always. Each run
starts and logs through `AdaptiveRun.start` (that is `runtime.runs.start_run`, the one way
every run is logged), so it lands in the warehouse with its problem row and meta-features,
origin `adapt` and `config.corpus_adaptive` = {problem, index}. Resumable: a (problem,
index) that already ended in the warehouse is skipped. The problems are loaded once before
any run starts (`loadable`, the sweep's loader): one that cannot be loaded is left out with
the sweep's warning, and none loading is the sweep's error.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from aicf_induct.frontend.specs import MLPSpec
from aicf_induct.induction.meta_dataset import DONE_STATUSES
from aicf_induct.induction.space import Candidate

STEPS = 600  # optimizer steps per adaptive run
WARMUP = 50  # the warm-up trigger
EVAL_EVERY = 25  # validation every this many steps (the plateau trigger's clock)
GUARD = 30  # steps the guard watches after a rewrite


@dataclass(frozen=True)
class AdaptiveJob:
    problem: str
    index: int
    candidate: Candidate
    steps: int = STEPS


@dataclass(frozen=True)
class AdaptiveReport:
    planned: int
    skipped: int  # already in the warehouse
    ran: int
    failed: list[str]


MAX_START_WIDTH = 128  # wider candidates are left out as start points (cost; widen doubles)


def plan(names: Sequence[str], per_problem: int, candidates: Sequence[Candidate],
         steps: int = STEPS) -> list[AdaptiveJob]:
    """Run i of a problem starts from the i-th MLP candidate (mod) no wider than
    MAX_START_WIDTH (the rewrite history is of MLP transforms)."""
    mlps = [c for c in candidates if isinstance(c.spec, MLPSpec)] or list(candidates)
    starts = [c for c in mlps if isinstance(c.spec, MLPSpec)
              and c.spec.width <= MAX_START_WIDTH] or mlps
    return [AdaptiveJob(name, i, starts[i % len(starts)], steps)
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


def done_jobs(root: str | Path) -> set[tuple[str, int]]:
    """(problem, index) of the adaptive corpus runs that ended in the warehouse."""
    import warehouse

    root = Path(root)
    if not root.is_dir():
        return set()
    sql = """SELECT json_extract_string(config, '$.corpus_adaptive.problem'),
                    TRY_CAST(json_extract(config, '$.corpus_adaptive.index') AS BIGINT)
             FROM runs WHERE origin = 'adapt' AND list_contains(?, status)
               AND json_extract(config, '$.corpus_adaptive') IS NOT NULL"""
    rows = warehouse.with_retry(root, lambda c: c.execute(sql, [[*DONE_STATUSES, "failed"]])
                                .fetchall())  # failed: it would fail again
    return {(str(p), int(i)) for p, i in rows}


def run_job(job: AdaptiveJob, root: str) -> str | None:
    """Train one adaptive corpus run into the warehouse; None, or the error."""
    import warehouse
    from aicf_induct.problems import load_problem
    from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun
    from aicf_induct.runtime.guard import GuardConfig
    from aicf_induct.runtime.policies import ExplorePolicy
    from aicf_induct.runtime.trainer import TrainConfig

    rec = warehouse.open_recorder(root)
    try:
        problem = load_problem(job.problem, seed=job.index)
        r = job.candidate.recipe
        config = TrainConfig(optimizer=r.optimizer, lr=r.lr, weight_decay=r.weight_decay,
                             batch_size=r.batch_size, seed=job.index, patience=0)
        adapt = AdaptConfig(steps=job.steps, warmup_steps=WARMUP, eval_every=EVAL_EVERY,
                            guard=GuardConfig(steps=GUARD), max_rewrites=6)
        seed = int(hashlib.sha256(f"{job.problem}#{job.index}".encode()).hexdigest()[:8], 16)
        run = AdaptiveRun(problem, job.candidate.graph(problem.n_features, problem.n_outputs),
                          config, adapt, ExplorePolicy(seed=seed), recorder=rec,
                          extra_config={"model": job.candidate.spec.to_string(),
                                        "corpus_adaptive": {"problem": job.problem,
                                                            "index": job.index,
                                                            "candidate": job.candidate.key}})
        run.run()
        return None
    except Exception as err:  # one bad problem must not stop the corpus
        return f"{job.problem}#{job.index}: {type(err).__name__}: {err}"
    finally:
        rec.close()


def run_adaptive(jobs: Sequence[AdaptiveJob], root: str | Path, workers: int = 1,
                 progress: bool = False) -> AdaptiveReport:
    """Run the jobs not yet in the warehouse (see the module docstring)."""
    from aicf_induct.progress import lasting

    done = done_jobs(root)
    todo = [j for j in jobs if (j.problem, j.index) not in done]
    failed: list[str] = []
    with lasting(total=len(todo), desc="adaptive runs", unit="run", enabled=progress) as bar:
        if workers <= 1:
            for job in todo:
                err = run_job(job, str(root))
                if err:
                    failed.append(err)
                bar.update(1)
        else:
            with ProcessPoolExecutor(workers) as pool:
                for err in pool.map(run_job, todo, [str(root)] * len(todo)):
                    if err:
                        failed.append(err)
                    bar.update(1)
    return AdaptiveReport(len(jobs), len(jobs) - len(todo), len(todo) - len(failed), failed)
