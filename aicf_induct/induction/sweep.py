"""Sweeps: train every (problem, candidate, seed) triple into the warehouse, resumably.

The warehouse is the sweep's only state. Each run's config carries its triple under
`config["sweep"]` (problem_id, candidate key, seed, plus the sweep's protocol: a hash of the
training settings that are not part of the candidate). A triple is *finished* when a run of it
under the same protocol has a run end with an `END_STATUSES` status; a run that started but
never ended (its process was killed) does not count and its triple runs again. So a killed
sweep, restarted with the same command, runs exactly the triples it is missing.

Runs execute in worker processes (`engine="local"`: a process pool on this machine) or as
Ray tasks (`engine="ray"`: a local Ray instance, or an existing cluster), all through
`sweep_worker.run_task`, which logs every failure as a `failed` (or `timeout`) run instead
of raising.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import multiprocessing
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from tqdm.auto import tqdm

from aicf_induct.errors import ConfigError
from aicf_induct.induction.space import Candidate
from aicf_induct.induction.sweep_problems import problem_features
from aicf_induct.induction.sweep_worker import (
    RunLog,
    Task,
    init_local_worker,
    log_failure,
    run_task,
)
from aicf_induct.problems import load_problem
from aicf_induct.runtime.trainer import TrainConfig

END_STATUSES = ("completed", "early_stopped", "failed", "timeout")
RETRY_STATUSES = ("completed", "early_stopped")  # finished when failures are retried
ENGINES = ("local", "ray")
RECIPE_FIELDS = ("optimizer", "lr", "weight_decay", "batch_size", "seed")
MAX_CRASHES = 2  # worker deaths a triple may cause before it is logged as failed

Triple = tuple[str, str, int]  # (problem_id, candidate key, seed)


@dataclass(frozen=True)
class SweepSpec:
    """What to train: problems × candidates × seeds, with the shared training settings."""

    problems: tuple[str, ...]
    candidates: tuple[Candidate, ...]
    seeds: tuple[int, ...] = (0,)
    # the candidate's recipe and the seed override these
    train: TrainConfig = field(default_factory=TrainConfig)
    budget_s: float = 0.0  # wall-clock budget per run; 0: none

    def __post_init__(self) -> None:
        if not self.problems or not self.candidates or not self.seeds:
            raise ConfigError("a sweep needs at least one problem, candidate and seed")
        if self.budget_s < 0:
            raise ConfigError(f"the per-run budget must be >= 0 s, got {self.budget_s}")

    @property
    def protocol(self) -> str:
        """Hash of the training settings outside the candidate: runs under another protocol
        (say, more epochs) are other experiments and do not finish a triple."""
        settings = {k: v for k, v in dataclasses.asdict(self.train).items()
                    if k not in RECIPE_FIELDS}
        return _hash(settings)

    def sweep_id(self, problem_ids: Iterable[str]) -> str:
        return _hash([self.protocol, sorted(problem_ids), sorted(c.key for c in self.candidates),
                      sorted(self.seeds)])


def _hash(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class SweepReport:
    sweep_id: str
    planned: int  # triples of the sweep (over the problems that loaded)
    skipped: int  # finished before this invocation
    statuses: Counter[str] = field(default_factory=Counter)  # this invocation's runs
    unloadable: dict[str, str] = field(default_factory=dict)  # problem -> error
    wall_s: float = 0.0

    @property
    def ran(self) -> int:
        return sum(self.statuses.values())

    @property
    def failed(self) -> int:
        return self.statuses["failed"] + self.statuses["timeout"]

    def summary(self) -> str:
        parts = ", ".join(f"{n} {s}" for s, n in sorted(self.statuses.items()))
        text = (f"sweep {self.sweep_id}: {self.planned} runs planned, {self.skipped} skipped "
                f"(finished before), {self.ran} ran ({parts or 'none'}) in {self.wall_s:.1f} s")
        if self.unloadable:
            text += f"; {len(self.unloadable)} problem(s) failed to load: " + "; ".join(
                f"{k}: {v}" for k, v in self.unloadable.items())
        return text

    def as_dict(self) -> dict[str, Any]:
        return {"sweep_id": self.sweep_id, "planned": self.planned, "skipped": self.skipped,
                "ran": self.ran, "failed": self.failed, "statuses": dict(self.statuses),
                "unloadable": self.unloadable, "wall_s": self.wall_s}


# -- the warehouse as the sweep's state ----------------------------------------------------------
FINISHED_SQL = """
SELECT json_extract_string(config, '$.sweep.problem_id') AS problem_id,
       json_extract_string(config, '$.sweep.candidate') AS candidate,
       seed, count(*) AS runs
FROM runs
WHERE origin = 'sweep'
  AND json_extract_string(config, '$.sweep.protocol') = $protocol
  AND list_contains($statuses, status)
GROUP BY ALL
"""


def finished_triples(root: str | Path, protocol: str,
                     statuses: Sequence[str] = END_STATUSES) -> Counter[Triple]:
    """Ended runs per triple under `protocol` (more than 1: a duplicate)."""
    import warehouse

    def query(conn: Any) -> Counter[Triple]:
        rows = conn.execute(FINISHED_SQL, {"protocol": protocol,
                                           "statuses": list(statuses)}).fetchall()
        return Counter({(str(p), str(c), int(s)): int(n) for p, c, s, n in rows})

    return warehouse.with_retry(root, query)


# -- the sweep -----------------------------------------------------------------------------------
def load_problems(names: Sequence[str], seed: int, recorder: Any,
                  say: Callable[[str], None]) -> tuple[dict[str, str], dict[str, str]]:
    """Load each problem once: name -> problem_id, and name -> error for those that fail.
    Logs each problem with its meta-features (once per sweep)."""
    ids: dict[str, str] = {}
    errors: dict[str, str] = {}
    for name in names:
        try:
            problem = load_problem(name, seed=seed)
            recorder.problem(problem.record(problem_features(problem)))
            ids[name] = problem.problem_id
        except Exception as err:
            errors[name] = f"{type(err).__name__}: {err}".splitlines()[0]
            say(f"warning: problem '{name}' left out: {errors[name]}")
    return ids, errors


def plan(spec: SweepSpec, problem_ids: dict[str, str], root: str | Path) -> list[Task]:
    protocol = spec.protocol
    sweep = {"sweep_id": spec.sweep_id(problem_ids.values()), "protocol": protocol}
    return [Task(name, pid, cand, seed, spec.train, spec.budget_s, str(root), sweep)
            for name, pid in problem_ids.items() for cand in spec.candidates
            for seed in spec.seeds]


def run_sweep(spec: SweepSpec, root: str | Path, *, workers: int = 1, engine: str = "local",
              retry_failed: bool = False, ray_address: str | None = None,
              progress: bool = True, stream: TextIO | None = None) -> SweepReport:
    """Run the triples of `spec` not finished in the warehouse at `root`; see the module
    docstring. Local workers are spawned processes: a script that calls this must do so under
    `if __name__ == "__main__":`. With Ray on several machines, `root` must be a directory
    every node sees (a shared file system)."""
    import warehouse

    if engine not in ENGINES:
        raise ConfigError(f"unknown engine '{engine}' (valid: {', '.join(ENGINES)})")
    if workers < 1:
        raise ConfigError(f"workers must be >= 1, got {workers}")
    out = stream or sys.stderr
    t0 = time.perf_counter()
    parent = warehouse.open_recorder(root)
    try:
        ids, errors = load_problems(spec.problems, spec.seeds[0], parent,
                                    lambda s: print(s, file=out))
        parent.flush()
        if not ids:
            raise ConfigError("no problem of the sweep could be loaded: " + "; ".join(
                f"{k}: {v}" for k, v in errors.items()))
        tasks = plan(spec, ids, root)
        done = finished_triples(root, spec.protocol,
                                RETRY_STATUSES if retry_failed else END_STATUSES)
        todo = [t for t in tasks if t.triple not in done]
        report = SweepReport(tasks[0].sweep["sweep_id"], len(tasks), len(tasks) - len(todo),
                             unloadable=errors)
        bar = tqdm(total=len(tasks), initial=report.skipped, unit="run", desc="sweep",
                   disable=not progress, file=out, smoothing=0.05)

        def on_done(status: str) -> None:
            report.statuses[status] += 1
            bar.update(1)
            bar.set_postfix(failed=report.failed, refresh=False)

        def record_crash(task: Task, error: str) -> None:
            log_failure(RunLog(parent), task, error)
            parent.flush()
            on_done("failed")

        try:
            if engine == "local":
                run_local(todo, workers, on_done, record_crash)
            else:
                run_ray(todo, workers, ray_address, on_done, record_crash)
        finally:
            bar.close()
        report.wall_s = time.perf_counter() - t0
        return report
    finally:
        parent.close()


def run_local(tasks: Sequence[Task], workers: int, on_done: Callable[[str], None],
              on_crash: Callable[[Task, str], None]) -> None:
    """A spawn-context process pool; a worker death (segfault, OOM kill) restarts the pool,
    and a triple present at `MAX_CRASHES` deaths is logged as failed."""
    ctx = multiprocessing.get_context("spawn")  # no fork of the parent's writer thread
    crashes: Counter[Triple] = Counter()
    pending = list(tasks)
    while pending:
        pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=init_local_worker,
                                   initargs=(os.getpid(),))
        futures = {pool.submit(run_task, t): t for t in pending}
        pending = []
        finished: set[Triple] = set()
        try:
            for fut in as_completed(futures):
                on_done(fut.result().status)
                finished.add(futures[fut].triple)
        except BrokenProcessPool:
            for task in futures.values():
                if task.triple in finished:
                    continue
                crashes[task.triple] += 1
                if crashes[task.triple] >= MAX_CRASHES:
                    on_crash(task, "worker process died while running this triple")
                else:
                    pending.append(task)
        except BaseException:
            # Ctrl-C (workers ignore SIGINT) or an error here: stop the workers now; their
            # unended runs are run again by the next sweep
            _stop_workers(pool)
            raise
        pool.shutdown(wait=True)


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        proc.terminate()


def run_ray(tasks: Sequence[Task], workers: int, address: str | None,
            on_done: Callable[[str], None], on_crash: Callable[[Task, str], None]) -> None:
    """One Ray task per triple on a local Ray instance (`address` None: started here with
    `workers` CPUs) or an existing cluster (`address`: "auto" or "host:port")."""
    try:
        import ray
    except ImportError:
        raise ConfigError("--engine ray needs Ray: pip install 'aicf-induct[ray]'") from None
    started = not ray.is_initialized()
    if started:
        if address is None:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(run_task)
        refs = {remote.remote(t): t for t in tasks}
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            for ref in ready:
                task = refs.pop(ref)
                try:
                    on_done(ray.get(ref).status)
                except Exception as err:  # the worker died: run_task itself never raises
                    on_crash(task, f"ray task failed: {type(err).__name__}: "
                                   f"{str(err).splitlines()[0] if str(err) else ''}")
    finally:
        if started:
            ray.shutdown()
