"""Sweeps: train every (problem, candidate, seed) triple into the warehouse, resumably.

The warehouse is the sweep's state. Each run's config carries its triple under
`config["sweep"]` (problem_id, candidate key, seed, plus the sweep's protocol: a hash of the
training settings that are not part of the candidate). A triple is *finished* when a run of it
under the same protocol has a run end with an `END_STATUSES` status; a run that never ended
(`abandoned`: its process was killed) or was stopped (`interrupted`: Ctrl-C) does not count
and its triple runs again. So a stopped sweep, restarted with the same command, runs exactly
the triples it is missing. (`sweep_spec`: the spec and the checks before a sweep starts;
`sweep_state`: the finished triples read back.)

Sweeps running at once on one warehouse split the work: a triple is claimed (see
`warehouse.claims`, held by the sweep's own writer lease) just before it runs, and its claim
ends with its run's status. A triple another live sweep holds is left to it; a triple whose
holder died is taken over, after checking the warehouse that its run did not end.

Runs execute in worker processes (`engine="local"`: a process pool on this machine) or as Ray
tasks (`engine="ray"`: a local Ray instance, or an existing cluster), all through
`sweep_worker.run_task`, which logs every failure as a `failed` (or `timeout`) run instead of
raising; or many at once in this process on its GPU (`engine="gpu"`: `sweep_gpu`, `workers`
runs in flight), logged the same way, or in several such processes (`processes`,
`sweep_processes`) spread over the machine's GPUs. Ctrl-C (or SIGTERM) stops the runs in
flight, which log their end as `interrupted`, and exits with the claims saying so.

On a GPU each process times kernel variants per shape and keeps the fastest (the autotuner,
within a budget): which shapes a process tunes depends on which runs it gets and when, and
variants round differently, so two builds with several processes differ in a few runs
(most in their last digits; training can grow it). `repeatable=True` turns tuning off
(every shape its default kernel): the same triples then give bit-identical results,
whatever the engine's processes.

A sweep may log through the service instead (`root` a URL, `http(s)://HOST:PORT`, with a write
key): the parent and every worker log with a `RemoteRecorder`, and the finished triples are
read with the service's SQL, so a restarted sweep runs what is missing as it does on a local
warehouse. Claims live in a warehouse's directory, so sweeps through a service do not split
triples between them: run one at a time per service (or a second one on the warehouse).
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from aicf_induct.errors import AicfError, ConfigError
from aicf_induct.induction.sweep_engines import Engine, open_engine
from aicf_induct.induction.sweep_spec import SweepSpec, Triple, applicable, check_sweep
from aicf_induct.induction.sweep_state import (
    END_STATUSES,
    RETRY_STATUSES,
    finished_runs,
    finished_triples,
)
from aicf_induct.induction.sweep_worker import (
    RunLog,
    Task,
    is_remote,
    log_failure,
    open_recorder,
)
from aicf_induct.interrupts import sigterm_interrupts
from aicf_induct.kernels.autotune import tuning_off
from aicf_induct.problems import load_problem
from aicf_induct.progress import lasting, transient
from aicf_induct.records import ProblemRecord
from aicf_induct.words import counted
from warehouse.claims import Claim, State, end_claim, try_claim

MAX_CRASHES = 2  # worker deaths a triple may cause before it is logged as failed


SLOWER_PATHS = {"eager": "with steps run eagerly",
                "multi": "with full-batch steps captured k at a time"}


@dataclass
class SweepReport:
    sweep_id: str
    planned: int  # triples of the sweep (over the problems that loaded)
    skipped: int  # finished before this invocation
    statuses: Counter[str] = field(default_factory=Counter)  # this invocation's runs
    unloadable: dict[str, str] = field(default_factory=dict)  # problem -> error
    elsewhere: int = 0  # ended by another sweep on this warehouse while this one ran
    held: int = 0  # still running in another live sweep when this one ended
    left: int = 0  # not started: the time limit came first (the next invocation runs them)
    wall_s: float = 0.0
    # runs that took a slower path of the GPU engine, by path (`epoch_gpu.FELL_BACK`)
    slower_paths: dict[str, int] = field(default_factory=dict)
    repeatable: bool = False  # kernel tuning was off (`run_sweep(repeatable=True)`)
    interrupted: bool = False  # stopped by Ctrl-C or SIGTERM (`SweepInterrupted`)

    @property
    def ran(self) -> int:
        return sum(self.statuses.values())

    @property
    def failed(self) -> int:
        return self.statuses["failed"] + self.statuses["timeout"]

    def summary(self) -> str:
        parts = ", ".join(f"{n} {s}" for s, n in sorted(self.statuses.items()))
        text = (f"sweep {self.sweep_id}: {counted(self.planned, 'run')} planned, "
                f"{self.skipped} skipped (finished before), {self.ran} ran "
                f"({parts or 'none'}) in {self.wall_s:.1f} s")
        if self.repeatable:
            text += "; kernel tuning off (repeatable)"
        if self.elsewhere or self.held:
            text += (f"; another sweep on this warehouse ended {self.elsewhere} and is still "
                     f"running {self.held}")
        if self.interrupted:
            text += (f"; interrupted: {self.left} not started; run the same command again "
                     "to resume (it runs what has not ended, the interrupted runs too)")
        elif self.left:
            text += (f"; time limit reached: {self.left} left for the next invocation of the "
                     "same command")
        if self.slower_paths:
            text += "; on slower GPU paths (the same results): " + ", ".join(
                f"{n} run(s) {SLOWER_PATHS.get(k, k)}" for k, n in sorted(
                    self.slower_paths.items()))
        if self.unloadable:
            text += f"; {len(self.unloadable)} problem(s) failed to load: " + "; ".join(
                f"{k}: {v}" for k, v in self.unloadable.items())
        return text

    def as_dict(self) -> dict[str, Any]:
        return {"sweep_id": self.sweep_id, "planned": self.planned, "skipped": self.skipped,
                "ran": self.ran, "failed": self.failed, "statuses": dict(self.statuses),
                "unloadable": self.unloadable, "elsewhere": self.elsewhere,
                "held": self.held, "left": self.left, "wall_s": self.wall_s,
                "slower_paths": self.slower_paths, "repeatable": self.repeatable,
                "interrupted": self.interrupted}


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) stopped the sweep: its runs in flight ended logged as
    `interrupted`; `report` says what ran and what is left for the same sweep run again."""

    def __init__(self, report: SweepReport) -> None:
        super().__init__("interrupted")
        self.report = report


# -- the sweep -----------------------------------------------------------------------------------
def load_problems(names: Sequence[str], seed: int, progress: bool = False
                  ) -> tuple[dict[str, str], list[ProblemRecord], dict[str, str]]:
    """Load each problem once: name -> problem_id, the problems' rows for the warehouse (in
    the order of the ids), and name -> error for those that fail (this project's errors as
    their message; any other with its type, a bug to report) or that load a problem an
    earlier name loaded (`iris` and `iris?max_rows=500`: its runs would train twice); a
    ConfigError when none loads (the sweep refuses: it has nothing to run). The sweep, its
    dry run and the adaptive corpus runs (`adaptive_corpus.loadable`) call it. The
    meta-features come with the runs (`runtime.runs` logs seed 0's split's, once per problem
    in each worker), not computed here, serially, before any run starts."""
    ids: dict[str, str] = {}
    rows: list[ProblemRecord] = []
    errors: dict[str, str] = {}
    for name in transient(names, enabled=progress, desc="loading", unit="problem"):
        try:
            problem = load_problem(name, seed=seed)
            same = next((n for n, pid in ids.items() if pid == problem.problem_id), None)
            if same is not None:  # one table under two names: its runs would train twice
                errors[name] = (f"the same problem as '{same}' (problem {problem.problem_id}), "
                                "which the sweep runs")
                continue
            rows.append(problem.record())
            ids[name] = problem.problem_id
        except Exception as err:
            said = str(err) if isinstance(err, AicfError) else f"{type(err).__name__}: {err}"
            errors[name] = said.splitlines()[0]
    if not ids:
        raise ConfigError("no problem could be loaded: " + "; ".join(
            f"{k}: {v}" for k, v in errors.items()))
    return ids, rows, errors


def plan(spec: SweepSpec, problem_ids: dict[str, str], root: str | Path,
         api_key: str | None = None) -> list[Task]:
    protocol = spec.protocol
    sweep = {"sweep_id": spec.sweep_id(problem_ids.values()), "protocol": protocol}
    return [Task(name, problem_ids[name], cand, seed, spec.train, spec.budget_s, str(root),
                 sweep, api_key)
            for name, cand in applicable(spec, problem_ids) for seed in spec.seeds]


def say_unloadable(errors: Mapping[str, str], stream: TextIO) -> None:
    """One warning line per problem `load_problems` could not load (the sweep goes on
    without it; so do the adaptive corpus runs)."""
    for name, error in errors.items():
        print(f"warning: problem '{name}' left out: {error}", file=stream)


def run_sweep(spec: SweepSpec, root: str | Path, *, workers: int = 1, engine: str = "local",
              retry_failed: bool = False, ray_address: str | None = None,
              progress: bool = True, stream: TextIO | None = None,
              api_key: str | None = None, time_limit_s: float = 0.0,
              processes: int = 1, repeatable: bool = False) -> SweepReport:
    """Run the triples of `spec` not finished in the warehouse at `root` (or logged through
    the service at the URL `root`, with the write key `api_key`); see the module docstring.
    Local workers are spawned processes: a script that calls this must do so under
    `if __name__ == "__main__":`. With Ray on several machines, `root` must be a directory
    every node sees (a shared file system), or the service's URL. `time_limit_s` (> 0): start
    no run after that many seconds from now; the runs in flight finish and are logged, and
    the rest is left to the next invocation (`SweepReport.left`). `processes` (> 1, engine
    "gpu" only): that many GPU-engine processes, each with `workers` runs in flight, spread
    over the visible GPUs (`sweep_processes`). `repeatable`: kernel tuning off in every
    process of the sweep (see the module docstring)."""
    check_sweep(spec, root, workers=workers, engine=engine, processes=processes)
    out = stream or sys.stderr
    t0 = time.perf_counter()
    untuned: AbstractContextManager[None] = tuning_off() if repeatable else nullcontext()
    with sigterm_interrupts(), untuned:
        # loaded before the warehouse is opened: a sweep none of whose problems loads
        # leaves nothing behind
        ids, rows, errors = load_problems(spec.problems, spec.seeds[0], progress)
        parent = open_recorder(root, api_key)
        try:
            for row in rows:
                parent.problem(row)
            parent.flush()
            say_unloadable(errors, out)  # the others go on
            tasks = plan(spec, ids, root, api_key)
            done_statuses = RETRY_STATUSES if retry_failed else END_STATUSES
            done = finished_triples(root, spec.protocol, done_statuses, api_key)
            todo = [t for t in tasks if t.triple not in done]
            report = SweepReport(spec.sweep_id(ids.values()), len(tasks),
                                 len(tasks) - len(todo), unloadable=errors,
                                 repeatable=repeatable)
            claims: TripleClaims | NoClaims = NoClaims() if is_remote(root) else \
                TripleClaims(Path(root), spec.protocol, parent.writer.writer_id, done_statuses)
            bar = lasting(total=len(tasks), initial=report.skipped, unit="run", desc="sweep",
                          enabled=progress, file=out, smoothing=0.05)
            stop_at = t0 + time_limit_s if time_limit_s > 0 else None
            try:
                if processes > 1:
                    _run_processes(todo, root, spec, done_statuses, workers, processes,
                                   stop_at, report, bar)
                else:
                    with open_engine(engine, workers, ray_address) as eng:
                        dispatch(todo, eng, claims, parent, report, bar, stop_at)
                        report.slower_paths = eng.slower_paths()
            except KeyboardInterrupt:
                if processes > 1:  # the processes' counts did not come back: the warehouse's
                    _count_stopped(todo, root, spec.protocol, done_statuses, report)
                report.interrupted = True
                report.wall_s = time.perf_counter() - t0
                raise SweepInterrupted(report) from None
            finally:
                bar.close()
        finally:
            parent.close()
    report.wall_s = time.perf_counter() - t0
    return report


def _count_stopped(todo: list[Task], root: str | Path, protocol: str,
                   done_statuses: Sequence[str], report: SweepReport) -> None:
    """Counts of a sweep of several processes stopped part-way, read from the warehouse:
    the triples of `todo` that ended, and those that did not (their runs interrupted, or
    not started)."""
    finished = finished_triples(root, protocol, done_statuses)
    ended = sum(1 for t in todo if t.triple in finished)
    report.statuses["ended"] += ended
    report.left = len(todo) - ended


def _run_processes(todo: list[Task], root: str | Path, spec: SweepSpec,
                   done_statuses: Sequence[str], workers: int, processes: int,
                   stop_at: float | None, report: SweepReport, bar: Any) -> None:
    """`todo` by several GPU-engine processes (`sweep_processes`); their counts into
    `report`, and what none of them finished read back from the warehouse."""
    from aicf_induct.induction.sweep_processes import run_processes

    if not todo:
        return
    together = run_processes(engine_process, todo, (str(root), spec.protocol,
                                                    tuple(done_statuses), workers),
                             processes=processes, backend=spec.train.backend,
                             stop_at=stop_at, bar=bar)
    report.statuses.update(together.statuses)
    report.slower_paths = together.slower_paths
    finished = finished_triples(root, spec.protocol, done_statuses)
    ours = sum(n for s, n in together.statuses.items() if s in done_statuses)
    ended = sum(1 for t in todo if t.triple in finished)
    report.elsewhere = max(0, ended - ours)  # by sweeps other than these processes
    if together.left_any:
        report.left = len(todo) - ended
    else:
        report.held = len(todo) - ended  # in flight in another live sweep


def engine_process(todo: list[Task], seconds_left: float | None, counter: Any, results: Any,
                   index: int, root: str, protocol: str, done: tuple[str, ...],
                   workers: int) -> None:
    """One of several GPU-engine processes (`sweep_processes`, which starts it): the
    dispatch over its order of `todo`, through its own writer's claims."""
    from aicf_induct.induction.sweep_processes import SharedBar, put_result, stop_once

    report = SweepReport("", len(todo), 0)
    stop_at = None if seconds_left is None else time.perf_counter() + seconds_left
    parent = open_recorder(root)
    try:
        with stop_once():
            claims = TripleClaims(Path(root), protocol, parent.writer.writer_id, done)
            with open_engine("gpu", workers, None) as eng:
                dispatch(todo, eng, claims, parent, report, SharedBar(counter), stop_at,
                         count_elsewhere=False)
                report.slower_paths = eng.slower_paths()
        put_result(results, index, dict(report.statuses), report.slower_paths, report.left,
                   None)
    except KeyboardInterrupt:
        put_result(results, index, None, None, 0, "interrupted")
    except Exception as err:  # the parent names it; the runs and claims ended logged
        put_result(results, index, None, None, 0,
                   f"{type(err).__name__}: {err}".splitlines()[0])
    finally:
        parent.close()


class NoClaims:
    """A sweep through the service claims nothing (claims are files in a warehouse): every
    triple it did not find finished is its own."""

    def take(self, task: Task) -> tuple[State, Claim | None]:
        return State.CLAIMED, None

    def end(self, claim: Claim | None, status: str) -> None:
        pass


class TripleClaims:
    """The sweep's claims on its triples (see `warehouse.claims`), held by the parent's writer:
    concurrent sweeps on one warehouse split the triples, and a dead sweep's are taken over."""

    def __init__(self, root: Path, protocol: str, holder: str, done: Sequence[str]) -> None:
        self.root, self.protocol, self.holder, self.done = root, protocol, holder, tuple(done)

    def take(self, task: Task) -> tuple[State, Claim | None]:
        state, claim = try_claim(self.root, self.protocol, json.dumps(task.triple), self.holder,
                                 self.done)
        if claim is not None and claim.previous is not None and \
                claim.previous.get("status") in (None, "interrupted"):
            # its holder died or was stopped: maybe just after its run ended, before it could
            # end the claim with the run's status
            ended = self.ended(task)
            if ended:
                end_claim(claim, ended.most_common(1)[0][0])
                return State.DONE, None
        return state, claim

    def ended(self, task: Task) -> Counter[str] | None:
        """The task's runs that ended in the warehouse, by status (a subclass reads other
        runs than the sweep's: `adaptive_corpus.AdaptiveClaims`)."""
        return finished_runs(self.root, self.protocol, self.done).get(task.triple)

    def end(self, claim: Claim | None, status: str) -> None:
        if claim is not None:
            end_claim(claim, status)


def dispatch(todo: Sequence[Task], eng: Engine, claims: TripleClaims | NoClaims, parent: Any,
             report: SweepReport, bar: Any, stop_at: float | None = None,
             count_elsewhere: bool = True) -> None:
    """Claim each triple just before it runs, keep the engine full, end each claim with its
    run's status. A triple another live sweep holds is left to it (looked at again at the
    end, in case that sweep died meanwhile). Past `stop_at` (time.perf_counter) no run
    starts: those in flight finish, the rest is counted in `report.left`. The bar moves for
    each run's end, and for each triple another sweep ended unless `count_elsewhere` is
    False (one of several processes, whose siblings count their own)."""
    queue, second_look = deque(todo), False
    held: list[Task] = []
    inflight: dict[Triple, Claim | None] = {}
    crashes: Counter[Triple] = Counter()

    def runs_so_far() -> dict[Triple, Counter[str]] | None:
        """The tasks' runs that ended (interrupted too), by status per triple; None: no
        task, other work than a sweep's (a `Task` subclass, its runs read otherwise), or an
        unreadable warehouse."""
        if not todo or type(todo[0]) is not Task:
            return None
        first = todo[0]
        try:
            return finished_runs(first.root, first.sweep.get("protocol", ""),
                                 (*END_STATUSES, "interrupted"), first.api_key)
        except Exception:
            return None

    # before any run starts: on an interrupt, a run past these is how one in flight really
    # ended (it may have finished as the signal came, or not have started)
    before = runs_so_far()

    def finish(task: Task, status: str) -> None:
        claims.end(inflight.pop(task.triple), status)
        report.statuses[status] += 1
        bar.update(1)
        bar.set_postfix(failed=report.failed, refresh=False)

    try:
        while True:
            if stop_at is not None and queue and time.perf_counter() >= stop_at:
                report.left += len(queue) + len(held)  # unclaimed: the next sweep's
                queue.clear()
                held.clear()
            while queue and len(inflight) < eng.capacity:
                task = queue.popleft()
                state, claim = claims.take(task)
                if state is State.CLAIMED:
                    inflight[task.triple] = claim
                    eng.submit(task)
                elif state is State.HELD:
                    held.append(task)
                else:
                    report.elsewhere += 1  # another sweep ended it since we planned
                    if count_elsewhere:
                        bar.update(1)
            if not inflight and not queue:
                if not held or second_look:
                    break
                queue, held, second_look = deque(held), [], True  # did their holder die?
                continue
            for task, outcome, error in eng.wait():
                if outcome is not None:
                    finish(task, outcome.status)
                    continue
                crashes[task.triple] += 1
                if crashes[task.triple] < MAX_CRASHES:
                    eng.submit(task)  # the claim stays ours
                    continue
                log_failure(RunLog(parent), task, error or "worker died")
                parent.flush()
                finish(task, "failed")
    except BaseException:
        # Ctrl-C or an error: stop the runs in flight (each logs its end as interrupted),
        # then end their claims as the warehouse says each ended: the next sweep takes the
        # interrupted ones over
        eng.interrupt()
        after = runs_so_far() if inflight else None
        for triple, claim in inflight.items():
            if after is None or before is None:  # unreadable: as the runs were told to end
                new = Counter({"interrupted": 1})
            else:
                new = after.get(triple, Counter()) - before.get(triple, Counter())
            ended = [s for s in new if s != "interrupted"]  # it finished as the signal came
            status = ended[0] if ended else "interrupted"
            claims.end(claim, status)
            if new:
                report.statuses[status] += 1
            else:
                report.left += 1  # never started: not a run
        report.left += len(queue) + len(held)
        raise
    report.held = len(held)
