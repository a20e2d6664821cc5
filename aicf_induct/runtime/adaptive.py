"""Adaptive training: observe → decide → rewrite → rebind → resume.

`AdaptiveRun` drives a `Trainer`'s pieces (train_step, evaluate, executor, optimizer) one
step at a time. Every step feeds the triggers; when one fires, the policy may decide a
rewrite: pause, snapshot, apply the transform (parameters and optimizer state remapped),
build a new executor, resume. A guard then watches the next K steps and rolls back a
rewrite that hurt, blacklisting its transform for a while; meanwhile the other triggers
wait. A NaN, a loss spike or a gradient explosion rolls back to the last good snapshot
and backs off the learning rate, and the replay skips the batch it happened on (a replay
of the same batches would meet the same hard batch again); during a rewrite's trial the
rewrite is blamed too: the rollback goes to the pre-rewrite snapshot and blacklists the
transform. (The spike statistics restart after each rewrite: until they have 20 steps
again, only non-finite values and the guard judge the new structure.)
Every trigger, decision, rewrite, guard verdict, rollback, fork and checkpoint is an
`EventRecord`; the IR is logged after every rewrite and rollback.

Two counters: `trainer.step_count` is the live trajectory's optimizer step (a rollback
rewinds it); `work` counts every step executed, discarded ones included (budgets,
blacklists and fault injections use it). Everything the next step depends on is in the
snapshots, so a run resumed from its on-disk checkpoint continues bit-exactly; a rewrite's
random draws are keyed on (seed, step) too, so a rollback followed by the same decision
makes the same rewrite again.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from aicf_induct.errors import ConfigError
from aicf_induct.interrupts import interrupts_deferred
from aicf_induct.ir.fingerprint import fingerprint
from aicf_induct.ir.graph import Graph
from aicf_induct.json_values import json_safe
from aicf_induct.kernels.autotune import TuningStore
from aicf_induct.problems.problem import Problem, Split
from aicf_induct.records import (
    EventRecord,
    MemoryRecorder,
    NullRecorder,
    Recorder,
    StepRecord,
)
from aicf_induct.runtime import snapshot as disk
from aicf_induct.runtime.data import BatchStream
from aicf_induct.runtime.guard import Blacklist, Guard, GuardConfig
from aicf_induct.runtime.metrics import score_name
from aicf_induct.runtime.model_state import ModelState, capture, graph_size, install
from aicf_induct.runtime.parallel import DataParallel
from aicf_induct.runtime.policies import (
    NO_CHANGE,
    POLICIES,
    Decision,
    Policy,
    PolicyObservation,
    RuleBasedPolicy,
    make_policy,
    policy_settings,
)
from aicf_induct.runtime.replay import LogCounter
from aicf_induct.runtime.runs import (
    LoggedRun,
    resume_run,
    snapshot_record,
    start_run,
)
from aicf_induct.runtime.schedules import Schedule
from aicf_induct.runtime.snapshot import Snapshot, SnapshotError, UnreadableCheckpoint
from aicf_induct.runtime.trainer import (
    TrainConfig,
    Trainer,
    check_arguments,
    check_trainable,
    integer_field,
    number_field,
)
from aicf_induct.runtime.transforms import RewriteError, make_transform
from aicf_induct.runtime.triggers import (
    EpochEndTrigger,
    Fired,
    InstabilityTrigger,
    Observation,
    PlateauTrigger,
    WarmupTrigger,
)

TRAIN_EVAL_ROWS = 4096  # the training loss for the gap is measured on at most these rows
# what a checkpoint whose files parse but whose run state is malformed raises on resume
STATE_DAMAGE = (KeyError, TypeError, ValueError, AttributeError, IndexError)
# how a run ends when it leaves a final state to branch from (an interrupted or failed run
# goes on from its checkpoints instead: `resume`)
BRANCHABLE = ("completed", "early_stopped")
# a rewrite's random draws (split maps, noise, fresh units) come from (seed, step, this):
# what a snapshot restores, so a rollback and the same decision redraw them as the first
# time did (not `work`, which a rollback does not rewind); the tag keeps the stream apart
# from others keyed on the seed (batch order's (seed, epoch))
REWRITE_STREAM = 0x52455752


# AdaptConfig's integer fields and their least value
ADAPT_INT_FIELDS = {"steps": 1, "warmup_steps": 0, "epoch_trigger": 0, "eval_every": 0,
                    "plateau_patience": 1, "max_rollbacks": 0, "max_rewrites": 0,
                    "early_stop": 0, "checkpoint_steps": 1, "keep_checkpoints": 1}
# its number fields: (the rule in words, the test)
ADAPT_NUMBER_FIELDS: dict[str, tuple[str, Callable[[float], bool]]] = {
    "plateau_min_delta": (">= 0", lambda v: v >= 0),
    "plateau_smoothing": ("in [0, 1)", lambda v: 0 <= v < 1),  # 1: the EMA never moves
    "spike_k": ("> 0", lambda v: v > 0),
    "grad_factor": ("> 1", lambda v: v > 1),  # at most 1: every above-median step fires
    "spike_tolerance": (">= 0", lambda v: v >= 0),
    "lr_backoff": ("in (0, 1]", lambda v: 0 < v <= 1),
}


@dataclass(frozen=True)
class AdaptConfig:
    steps: int = 2000  # optimizer steps of the run (its schedule spans them)
    warmup_steps: int = 100  # the warm-up trigger fires after this many; 0: no trigger
    epoch_trigger: int = 0  # fire at the end of every k-th epoch; 0: never
    eval_every: int = 0  # steps between validation evaluations; 0: at each epoch's end
    plateau_patience: int = 3  # evaluations without improvement before a plateau fires
    plateau_min_delta: float = 0.01  # relative improvement of the smoothed val loss
    plateau_smoothing: float = 0.5  # EMA weight of the past
    spike_k: float = 6.0  # loss spike: above mean + k std of the recent steps
    grad_factor: float = 20.0  # gradient explosion: above this times the recent median
    # a spike or gradient burst is rolled back only when the validation loss right after it
    # is more than this (relative) above the last evaluation's: on real data hard batches
    # fire both near convergence, and rolling each back (halving the lr) ruined runs
    spike_tolerance: float = 0.2
    guard: GuardConfig = field(default_factory=GuardConfig)
    lr_backoff: float = 0.5  # learning-rate factor after an instability rollback
    max_rollbacks: int = 10  # more than this: the run fails
    max_rewrites: int = 20
    early_stop: int = 0  # evaluations without a new best (a kept rewrite resets); 0: off
    checkpoint_steps: int = 500  # executed steps between on-disk checkpoints (with a
    # directory; at the first step boundary outside a rewrite's trial after that many)
    keep_checkpoints: int = 2

    def __post_init__(self) -> None:
        # TrainConfig's rules and words (a bad value fails here, not mid-run); NumPy scalars
        # become Python ones (the settings are logged and checkpointed as JSON)
        for name, low in ADAPT_INT_FIELDS.items():
            object.__setattr__(self, name, integer_field(name, getattr(self, name), low))
        for name, (rule, ok) in ADAPT_NUMBER_FIELDS.items():
            object.__setattr__(self, name, number_field(name, getattr(self, name), rule, ok))
        if not isinstance(self.guard, GuardConfig):
            raise ConfigError(f"guard must be a GuardConfig, got {type(self.guard).__name__}")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AdaptConfig:
        # settings this version no longer has (checkpoint_every) are dropped
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{**{k: v for k, v in d.items() if k in known},
                      "guard": GuardConfig(**d["guard"])})


class ScaledSchedule:
    """A schedule times a factor the loop lowers after instability rollbacks."""

    def __init__(self, inner: Schedule, scale: float = 1.0) -> None:
        self.inner, self.scale = inner, scale

    def lr(self, step: int) -> float:
        return self.inner.lr(step) * self.scale


class StepHook(Protocol):
    def before_step(self, run: AdaptiveRun, x: np.ndarray,
                    y: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...


class FaultInjection:
    """Test hook: once, before executed step `at_work`, set a parameter to NaN
    (`kind="nan"`) or scale every parameter by `factor` (`kind="spike"`: the model blows
    up, as a diverging step leaves it; a batch of huge inputs alone is a spike that Adam
    absorbs, which the loop rightly leaves alone)."""

    def __init__(self, at_work: int, kind: str = "nan", factor: float = 1e3) -> None:
        if kind not in ("nan", "spike"):
            raise ConfigError(f"fault kind must be 'nan' or 'spike', got {kind!r}")
        self.at_work, self.kind, self.factor, self.done = at_work, kind, factor, False

    def before_step(self, run: AdaptiveRun, x: np.ndarray,
                    y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.done or run.work != self.at_work:
            return x, y
        self.done = True
        if self.kind == "nan":
            run.trainer.store.data[0] = np.nan
        else:
            run.trainer.store.data *= self.factor
        return x, y


@dataclass
class AdaptResult:
    """What an adaptive run reports: its end, counts, the best model's metrics and
    structure, every evaluation and event."""

    run_id: str
    status: str  # completed | early_stopped | failed
    steps: int  # live optimizer steps
    work: int  # steps executed, rolled-back ones included
    wall_time_s: float
    metrics: dict[str, float]  # "<split>_<metric>" of the best model
    best_step: int
    best_val_loss: float
    rewrites: int  # rewrites applied (kept or rolled back)
    rollbacks: int
    graph: Graph  # the best model's structure
    history: list[dict[str, float]]  # every evaluation: work, step, epoch, losses
    events: list[EventRecord]
    pause_ms: list[float]  # pause-to-resume time of each rewrite

    def as_dict(self) -> dict[str, Any]:
        """What `aicf-induct adapt --json` prints: JSON-safe (a non-finite metric is null,
        as the service answers it)."""
        return json_safe({"run_id": self.run_id, "status": self.status, "steps": self.steps,
                          "executed_steps": self.work, "rewrites": self.rewrites,
                          "rollbacks": self.rollbacks, "param_count": self.graph.param_count(),
                          "pause_ms": self.pause_ms, **self.metrics})

    def __repr__(self) -> str:
        # the graph, history and events run to tens of kB: counted, not printed
        metrics = ", ".join(f"{k}={v:.4g}" for k, v in self.metrics.items())
        return (f"AdaptResult(run_id={self.run_id!r}, status={self.status!r}, "
                f"steps={self.steps}, work={self.work}, rewrites={self.rewrites}, "
                f"rollbacks={self.rollbacks}, best_step={self.best_step}, {metrics}, "
                f"graph=<{graph_size(self.graph)}>, history=<{len(self.history)} "
                f"evaluations>, events=<{len(self.events)}>)")


@dataclass(frozen=True)
class ControlArm:
    """The counterfactual guard's control: the run continued without the rewrite."""
    arm: Snapshot  # the rewritten arm, to return to if it wins
    metrics: dict[str, float]  # the control's, as `measure` gives them
    losses: list[float]
    steps: list[StepRecord]  # its steps, logged only if the run goes on from it
    # its evaluations where the run evaluates (epoch, metrics with their step, the model
    # then), counted as the run's only if the run goes on from it, as the steps are
    evals: list[tuple[int, dict[str, float], ModelState]] = field(default_factory=list)


class AdaptiveRun:
    """Training whose model changes structure as it trains: `problem`, starting `graph`
    and recipe `config` (its length is `adapt.steps`), triggers and guard set by `adapt`,
    rewrites chosen by `policy`, every step and event logged to `recorder` as one run.

    `run()` trains to the end; `step()` takes one step at a time (the run starts at the
    first), `snapshot()` / `rollback(snapshot)` go back within the run, `fork()` branches a
    child run. Once the run has ended (`run()` returned, or an exception stopped it) it
    logs nothing more: `step()`, `run()` and `rollback()` refuse, `fork()` still branches.
    Before that, `step()` refuses at step `adapt.steps` (`run()` then logs the end).
    `resume(checkpoint_dir, problem)` goes on from a checkpoint `checkpoint_dir` holds
    (written every `adapt.checkpoint_steps` executed steps). `hooks` see each batch first
    (`FaultInjection`); `values`, `origin`, `extra_config`, `tuning` and `parallel` are
    `Trainer`'s."""

    def __init__(self, problem: Problem, graph: Graph, config: TrainConfig,
                 adapt: AdaptConfig, policy: Policy, *, recorder: Recorder | None = None,
                 run_id: str | None = None, parent_run_id: str | None = None,
                 origin: str = "adapt", checkpoint_dir: str | Path | None = None,
                 hooks: Sequence[StepHook] = (), values: dict[str, np.ndarray] | None = None,
                 extra_config: dict[str, Any] | None = None,
                 tuning: TuningStore | None = None,
                 parallel: DataParallel | None = None) -> None:
        check_arguments(problem, graph, config)  # (before the recipe is read)
        if not isinstance(adapt, AdaptConfig):
            raise TypeError(f"adapt: an AdaptConfig, got {type(adapt).__name__}")
        self.config = adaptive_config(config, adapt, len(problem.train))
        self.adapt, self.policy, self.problem = adapt, policy, problem
        # every record the run logs, counted by kind (a checkpoint keeps the counts, so that
        # a resumed run leaves out what it logged past the checkpoint: runtime/replay.py)
        self.logged = LogCounter(recorder or NullRecorder())
        self.recorder: Recorder = self.logged
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
        self.hooks = list(hooks)
        extra = {"adapt": asdict(adapt), "policy": policy.name, **(extra_config or {})}
        # the structure proposal the run started from (--from-proposal), named in decisions
        self.proposal: dict[str, Any] | None = (extra_config or {}).get("proposal")
        self.trainer = Trainer(problem, graph, self.config, recorder=self.recorder,
                               values=values, origin=origin, run_id=run_id or uuid.uuid4().hex,
                               parent_run_id=parent_run_id, extra_config=extra,
                               tuning=tuning, parallel=parallel)
        # data parallel: rank 0 measures, decides and writes checkpoints; every rank takes
        # its word (`Trainer.agreed`), so all apply the same rewrites at the same steps
        self.rank0 = parallel is None or parallel.comm.rank == 0
        self.tuning = tuning  # the GPU autotuner's store, for forks too
        self.schedule = ScaledSchedule(self.trainer.schedule)
        self.trainer.schedule = self.schedule
        self.warmup = WarmupTrigger(adapt.warmup_steps) if adapt.warmup_steps else None
        self.epoch_end = EpochEndTrigger(adapt.epoch_trigger) if adapt.epoch_trigger else None
        self.plateau = PlateauTrigger(adapt.plateau_patience, adapt.plateau_min_delta,
                                      adapt.plateau_smoothing)
        self.instability = InstabilityTrigger(adapt.spike_k, grad_factor=adapt.grad_factor)
        self.guard = Guard(adapt.guard)
        self.blacklist = Blacklist()
        self.position = (0, 0)  # (epoch, batch) of the next batch
        self.work = 0
        self.rewrites = self.rollbacks = 0
        # a fork's trajectories number on from its parent's (the warehouse places its rows
        # by them) while its rollbacks count from 0: the parent's count at the fork
        self.trajectory_base = 0
        self.stop_reason: str | None = None  # why a run stopped `failed`: its end's error
        self.recent: list[float] = []  # last K training losses (the guard's pre-window)
        self.since_best = 0
        self.last_metrics: dict[str, float] = {}
        self.best_val_at: dict[str, float] = {}  # transform -> best val loss at its last use
        self.history: list[dict[str, float]] = []
        self.skip: list[list[int]] = []  # (epoch, batch) positions an instability hit
        self.best_val, self.best_step = math.inf, -1
        self.best_state: ModelState | None = None
        self.events: list[EventRecord] = []
        self.pause_ms: list[float] = []
        self.last_good: Snapshot | None = None
        self.checkpoint_work = 0  # `work` at the last on-disk checkpoint
        self.log: LoggedRun | None = None  # set once the run has started (or resumed)
        self.wall_before = 0.0  # seconds the run trained in earlier processes (a resume's)
        # lets go of the checkpoint directory this process holds while the run goes on
        # (`snapshot.hold`): held from start() or resume() until run() returns
        self._let_go: Callable[[], None] = _nothing
        self.resumed_past: list[str] = []  # why newer checkpoints were not resumed from
        # a resumed run's "checkpoint resume" event, logged when it goes on (after the
        # caller's header), and the log's rows of the run per kind, left out of the replay
        self._resumed: dict[str, Any] | None = None
        self._already_logged: Mapping[str, int] | None = None
        self._earlier_resumes = 0  # "checkpoint resume" events among those rows
        self.logged_counts_known = True  # False: resumed from a checkpoint that did not count
        self._order: tuple[int, np.ndarray] | None = None
        n = min(len(problem.train), TRAIN_EVAL_ROWS)
        self._train_eval = Split(problem.train.X[:n], problem.train.y[:n])

    @property
    def run_id(self) -> str:
        return self.trainer.run_id

    @property
    def ended(self) -> bool:
        """Whether the run's end is logged: `run()` returned, or an exception or Ctrl-C
        stopped it."""
        return self.log is not None and self.log.end is not None

    def __repr__(self) -> str:
        state = ("not started" if self.log is None else
                 f"ended {self.log.end.status}" if self.log.end is not None else "running")
        return (f"AdaptiveRun(run_id={self.run_id!r}, step={self.trainer.step_count} of "
                f"{self.adapt.steps}, work={self.work}, graph=<{graph_size(self.trainer.graph)}>, "
                f"{state})")

    # -- state for snapshots ----------------------------------------------------------------
    def _controller(self) -> dict[str, Any]:
        """What a rollback rewinds: trigger and guard state, recent losses, early stopping
        and the best model so far (a discarded branch's best is discarded with it; the
        model itself is the snapshot's extra "best")."""
        triggers = {t.name: t.state_dict() for t in self._triggers()}
        return {"triggers": triggers, "guard": self.guard.state_dict(), "recent": self.recent,
                "since_best": self.since_best, "last_metrics": self.last_metrics,
                "best_val_at": self.best_val_at, "best_val": self.best_val,
                "best_step": self.best_step}

    def _run_state(self) -> dict[str, Any]:
        """What a rollback keeps (and a resumed run needs): the run's own history."""
        return {"run_id": self.run_id, "problem_id": self.problem.problem_id,
                "problem": self.problem.name, "train_config": asdict(self.config),
                "adapt_config": asdict(self.adapt), "policy": self.policy.name,
                "policy_settings": policy_settings(self.policy), "proposal": self.proposal,
                "lr_scale": self.schedule.scale, "blacklist": self.blacklist.state_dict(),
                "work": self.work, "rewrites": self.rewrites, "rollbacks": self.rollbacks,
                "trajectory_base": self.trajectory_base,
                "history": self.history, "pause_ms": self.pause_ms, "skip": self.skip,
                "checkpoint_work": self.checkpoint_work}

    def _triggers(self) -> list[Any]:
        return [t for t in (self.warmup, self.epoch_end, self.plateau, self.instability) if t]

    def snapshot(self) -> Snapshot:
        """Everything the next step depends on (model, optimizer, data position, the loop's
        state), in memory: for `rollback` or `fork`, or `runtime.snapshot.save`."""
        run = self._run_state()
        history = run.pop("history")
        s = Snapshot.capture(self.trainer, *self.position,
                             meta={"controller": self._controller(), "run": run})
        # The history is the one part that grows with the run: copied through JSON at every
        # evaluation, it made a run's evaluations quadratic (5,000 steps of wine: 11 s, 4.5 s
        # of it copying). Entries are only ever appended, never changed: the list is copied,
        # its entries shared (the run's result hands out copies of them).
        s.meta["run"]["history"] = list(history)
        if self.best_state is not None:  # shared, not copied: a new best replaces it
            s.extras["best"] = self.best_state
        return s

    def _load_controller(self, s: Snapshot) -> None:
        c = s.meta["controller"]
        for t in self._triggers():
            t.load_state_dict(c["triggers"][t.name])
        self.guard.load_state_dict(c["guard"])
        self.recent = [float(v) for v in c["recent"]]
        self.since_best = int(c["since_best"])
        self.last_metrics = {k: float(v) for k, v in c["last_metrics"].items()}
        self.best_val_at = {k: float(v) for k, v in c["best_val_at"].items()}
        best = c if "best_val" in c else s.meta["run"]  # older checkpoints: in the run state
        self.best_val, self.best_step = float(best["best_val"]), int(best["best_step"])
        self.best_state = s.extras.get("best")

    def load(self, s: Snapshot, keep_run_id: bool = False) -> None:
        """Take over everything from a snapshot before the run starts: model, position,
        controller, run state (its `work` and counts too). How `resume` and `fork` set up a
        run; a started run goes back with `rollback`, which logs it."""
        if self.log is not None:
            raise ConfigError(f"load() sets up a run before it starts, and run {self.run_id} "
                              "has started: rollback(snapshot) takes it back to a snapshot "
                              "(logged, counted as a rollback)")
        r = s.meta["run"]
        _same_problem(r, self.problem)
        s.restore(self.trainer)
        self.position = (s.epoch, s.batch)
        self._load_controller(s)
        self.schedule.scale = float(r["lr_scale"])
        self.blacklist.load_state_dict(r["blacklist"])
        self.work, self.rewrites, self.rollbacks = r["work"], r["rewrites"], r["rollbacks"]
        self.trajectory_base = int(r.get("trajectory_base", 0))
        self.trainer.trajectory = self.trajectory_base + self.rollbacks
        self.history = [dict(h) for h in r["history"]]
        self.pause_ms = [float(v) for v in r["pause_ms"]]
        self.skip = [list(p) for p in r["skip"]]
        self.checkpoint_work = int(r.get("checkpoint_work", self.work))
        self.proposal = r.get("proposal") or self.proposal  # what its decisions name
        self.last_good = s
        if not keep_run_id:  # (a fork is a run of its own: its wall time starts at 0)
            self.wall_before = float(r.get("wall_s", 0.0))  # older checkpoints: unknown
            self.trainer.run_id = r["run_id"]
            self.logged_counts_known = isinstance(r.get("logged"), dict)
            if self.logged_counts_known:  # older checkpoints did not count
                self.logged.counts.update({k: int(v) for k, v in r["logged"].items()
                                           if k in self.logged.counts})

    # -- constructors for resumed and forked runs ---------------------------------------------
    @classmethod
    def resume(cls, checkpoint_dir: str | Path, problem: Problem | Callable[[int], Problem],
               policy: Policy | None = None, *, recorder: Recorder | None = None,
               hooks: Sequence[StepHook] = (), extra_config: dict[str, Any] | None = None,
               tuning: TuningStore | None = None,
               logged: Mapping[str, int] | None = None,
               resumed_at: Sequence[int] = ()) -> AdaptiveRun:
        """The run whose latest readable checkpoint is in `checkpoint_dir`, ready to go on.
        `problem`: the run's, or a function of the checkpoint's seed giving it (its split).
        The run keeps the policy it ran with: `policy` must be of that name (None: the
        built-in one). A damaged checkpoint is set aside for the one before it (two are
        kept for this); `resumed_past` then says why. `logged`: the run's rows in the log
        it goes on logging to, per kind (`replay.KINDS`); the replay leaves out those past
        the checkpoint (the run logged them before it stopped); `resumed_at`: the `work`
        of each "checkpoint resume" event that log holds (an earlier resume's: those from
        this checkpoint on are among the rows past it, and are not replayed). The
        "checkpoint resume" event is logged when the run goes on (`run`, `step`)."""
        found = disk.checkpoints(checkpoint_dir)
        if not found:
            raise SnapshotError(f"no checkpoint in {checkpoint_dir}")
        # refused while another process goes on with the run (it would log it twice)
        let_go = disk.hold(checkpoint_dir)
        try:
            found = disk.checkpoints(checkpoint_dir)  # as the holder before us left them
            damaged: list[UnreadableCheckpoint] = []
            for path in reversed(found):
                try:
                    run = cls._from_checkpoint(path, problem, policy, recorder=recorder,
                                               hooks=hooks, extra_config=extra_config,
                                               tuning=tuning)
                    break
                except UnreadableCheckpoint as err:
                    damaged.append(err)
            else:
                older = "; no older one is readable either" if len(damaged) > 1 else ""
                raise UnreadableCheckpoint(f"{damaged[0]}{older}")
            for bad in found[len(found) - len(damaged):]:  # the replay writes them again
                disk.set_aside(bad)
        except BaseException:
            let_go()
            raise
        run._let_go = let_go
        run.resumed_past = [str(err) for err in damaged]
        run.log = resume_run(run.trainer)
        run.log.t0 -= run.wall_before  # its wall time goes on from the checkpoint's
        run._resumed = {"path": str(path), "work": run.work,
                        **({"unreadable": run.resumed_past} if damaged else {})}
        run._already_logged = logged if run.logged_counts_known else None
        # resumes from this checkpoint or a later one came after it (work never rewinds)
        run._earlier_resumes = sum(1 for w in resumed_at if int(w) >= run.work)
        return run

    def _go_on(self) -> None:
        """A resumed run's first step: say where it resumed, then leave out of the log
        what the log already holds past the checkpoint."""
        if self._resumed is None:
            return
        detail, self._resumed = self._resumed, None
        # counted against the checkpoint's counts; the resume event itself is new
        skip = (self.logged.past(self._already_logged, self._earlier_resumes)
                if self._already_logged else None)
        self._event("checkpoint", "resume", detail)
        if self.log is not None:
            self.log.went_on()
        if skip is not None:
            self.logged.skip = skip

    @classmethod
    def _from_checkpoint(cls, path: Path, problem: Problem | Callable[[int], Problem],
                         policy: Policy | None, keep_policy: bool = True,
                         **kwargs: Any) -> AdaptiveRun:
        s = disk.load(path)
        if not isinstance(problem, Problem):
            problem = problem(s.seed)
        try:
            r = s.meta["run"]
            _same_problem(r, problem)  # before the run checks the problem against its model
            run = cls(problem, s.state.graph, TrainConfig(**r["train_config"]),
                      AdaptConfig.from_dict(r["adapt_config"]),
                      _own_policy(r, policy) if keep_policy or policy is None else policy,
                      run_id=r["run_id"], checkpoint_dir=path.parent, **kwargs)
            run.load(s)
        except STATE_DAMAGE as err:
            raise disk.unreadable(path, err) from None
        return run

    @classmethod
    def branch(cls, ended_dir: str | Path, problem: Problem | Callable[[int], Problem],
               steps: int, *, policy: Policy | None = None, recorder: Recorder | None = None,
               hooks: Sequence[StepHook] = (), checkpoint_dir: str | Path | None = None,
               checkpoint_steps: int | None = None, max_rewrites: int | None = None,
               tuning: TuningStore | None = None) -> AdaptiveRun:
        """A new run (`fork`) going on from the final state an ended run left in
        `ended_dir` (its best model, at its last step), to `steps` steps in all: more
        than the ended run took. It keeps the run's model, recipe and settings, its policy
        unless `policy` is given, and writes its own checkpoints to
        `checkpoint_dir` (every `checkpoint_steps`, default the run's). Its rewrites and
        rollbacks are counted from 0 (`max_rewrites`: its own limit, default the run's)."""
        final = branch_point(ended_dir, steps)
        parent = cls._from_checkpoint(final, problem, policy, keep_policy=False, tuning=tuning)
        s = parent.last_good
        assert s is not None
        adapt = dataclasses.replace(
            parent.adapt, steps=steps,
            checkpoint_steps=checkpoint_steps or parent.adapt.checkpoint_steps,
            max_rewrites=parent.adapt.max_rewrites if max_rewrites is None else max_rewrites)
        return parent.fork(s, recorder=recorder, hooks=hooks, adapt=adapt,
                           checkpoint_dir=checkpoint_dir)

    def fork(self, snap: Snapshot | None = None, *, policy: Policy | None = None,
             recorder: Recorder | None = None, hooks: Sequence[StepHook] = (),
             adapt: AdaptConfig | None = None,
             checkpoint_dir: str | Path | None = None) -> AdaptiveRun:
        """A child run (new run id, this run as parent, origin "fork") going on from `snap`
        (default: now; after the run ended, its final state: the best model, at the last
        step). Run it with `.run()`; it logs as its own run, its start naming the parent,
        and counts its own rewrites and rollbacks (from 0, against `adapt`'s limits). A
        running parent logs a `fork branch` event naming the child; an ended one logs
        nothing more. `adapt`: the child's settings (default the parent's; more `steps` let
        a branch of an ended run go further); `checkpoint_dir`: where the child writes its
        checkpoints (default none: the parent's directory holds the parent's). A `snap`
        taken during a rewrite's trial is refused (the guard's way back is not in it);
        forking now takes the trial along."""
        s = snap or self.snapshot()
        if snap is not None:  # now, a rewrite's trial goes on in the child (below)
            _outside_trial(s, "fork()")
        adapt = adapt or self.adapt
        if s.step >= adapt.steps:
            raise ConfigError(f"the snapshot is at step {s.step}, the end of the run's "
                              f"{adapt.steps} steps: fork(adapt=AdaptConfig(steps=...)) "
                              "gives the branch more")
        # the parent's own recorder, not its counter: the child's records are not the
        # parent's (a resumed parent leaves out as many as it counted)
        child = AdaptiveRun(self.problem, s.state.graph, self.config, adapt,
                            policy or self.policy, recorder=recorder or self.logged.inner,
                            parent_run_id=self.run_id, origin="fork", hooks=hooks,
                            checkpoint_dir=checkpoint_dir, tuning=self.tuning)
        child.load(s, keep_run_id=True)
        # its rewrites and rollbacks are its own (as its limits count them); its
        # trajectories number on from the parent's, and `work` goes on (blacklists and
        # budgets count executed steps)
        child.trajectory_base, child.rewrites, child.rollbacks = child.trainer.trajectory, 0, 0
        child.pause_ms = []
        if snap is None and self.guard.active:  # the trial's way back, which no snapshot holds
            child.guard.snapshot = self.guard.snapshot
        if self.log is not None and not self.ended:
            self._event("fork", "branch", {"child_run_id": child.run_id, "from_step": s.step})
        return child

    # -- logging -----------------------------------------------------------------------------
    def _event(self, kind: str, name: str, detail: dict[str, Any] | None = None,
               before: dict[str, float] | None = None,
               after: dict[str, float] | None = None) -> EventRecord:
        rec = EventRecord(self.run_id, self.trainer.step_count, kind, name,
                          {**(detail or {}), "work": self.work}, dict(before or {}),
                          dict(after or {}))
        self.events.append(rec)
        self.recorder.event(rec)
        return rec

    def start(self) -> None:
        """Log the run's start (through `runtime.runs.start_run`, like every run); `run()`
        and `step()` call it when nobody has. A checkpoint directory that will not take
        this run's checkpoints is refused first, before anything is logged."""
        if self.checkpoint_dir is not None and self.rank0:
            why, self._let_go = claim_checkpoint_dir(self.checkpoint_dir, self.run_id)
            if why:
                raise SnapshotError(f"checkpoint directory {self.checkpoint_dir}: {why}")
        if self.trainer.parallel is not None:  # the clock starts once every rank is set up
            self.trainer.parallel.comm.barrier()
        self.log = start_run(self.trainer)
        if self.trainer.parent_run_id:
            self._event("fork", "start", {"parent_run_id": self.trainer.parent_run_id})
        if self.last_good is None:
            self.last_good = self.snapshot()

    # -- evaluation --------------------------------------------------------------------------
    def measure(self) -> dict[str, float]:
        """Losses of the current model: validation, training (<= 4096 rows), their gap."""
        tr = self.trainer
        val, val_score = tr.evaluate(self.problem.val)
        train, _ = tr.evaluate(self._train_eval)
        gap = (val - train) / train if train > 0 else math.nan
        return tr.agreed({"val_loss": val, f"val_{score_name(self.problem.task)}": val_score,
                          "train_loss": train, "gap": gap,
                          "param_count": float(tr.graph.param_count()),
                          "step": float(tr.step_count)})

    def _decide(self, obs: PolicyObservation) -> Decision | None:
        """The policy's decision: rank 0's, on every rank of a data-parallel run."""
        return self.trainer.agreed(self.policy.decide(obs) if self.rank0 else None)

    def _evaluate(self, epoch: int) -> dict[str, float]:
        return self._count_evaluation(epoch, self.measure())

    def _count_evaluation(self, epoch: int, m: dict[str, float],
                          state: ModelState | None = None) -> dict[str, float]:
        """An evaluation `m` (measured at step m["step"]) as the run's: its results rows,
        the history, and the best model so far (`state`, the model it measured: the
        trainer's when not given, captured only if it is the best) with the patience."""
        step = int(m["step"])
        self.last_metrics = m
        self.history.append({"work": float(self.work), "step": float(step),
                             "epoch": float(epoch), **m})
        assert self.log is not None
        self.log.results(epoch, {k: m[k] for k in ("train_loss", "val_loss",
                                                   f"val_{score_name(self.problem.task)}")},
                         step=step)
        if m["val_loss"] < self.best_val:
            self.best_val, self.best_step = m["val_loss"], step
            self.best_state = state if state is not None else capture(self.trainer)
            self.since_best = 0
        else:
            self.since_best += 1
        return m

    def _evaluates_at(self, step: int, epoch_end: bool) -> bool:
        """Whether the run evaluates after the step that brought it to `step`."""
        every = self.adapt.eval_every
        return bool((every and step % every == 0) or (not every and epoch_end))

    def _metrics(self) -> dict[str, float]:
        if self.last_metrics.get("step") != self.trainer.step_count:
            self.last_metrics = self.measure()
        return self.last_metrics

    # -- the loop ----------------------------------------------------------------------------
    def _batch(self, epoch: int, batch: int) -> np.ndarray:
        stream = self.trainer.stream
        if self._order is None or self._order[0] != epoch:
            self._order = (epoch, stream.order(epoch))
        b = stream.batch_size
        return self._order[1][batch * b:(batch + 1) * b]

    def run(self) -> AdaptResult:
        """Train to the step budget (or an early stop); an exception or Ctrl-C ends the run
        `failed` or `interrupted` in the log before it propagates. Refused once the run has
        ended."""
        self._refuse_ended("run()")
        try:
            if self.log is None:
                self.start()
            assert self.log is not None
            with self.log:
                self._go_on()
                status = "completed"
                while self.trainer.step_count < self.adapt.steps:
                    stop = self.step()
                    if stop:
                        status = stop
                        break
                return self._finish(status)
        finally:
            self._let_go()  # the run has ended: another process may go on with it

    def step(self) -> str | None:
        """One training step and whatever it triggers; a status string to stop the run.
        Refused once the run has ended, or is at the end of its `adapt.steps`."""
        self._refuse_ended("step()")
        tr, p = self.trainer, self.problem
        if tr.step_count >= self.adapt.steps:  # the schedule's end, where run() stops
            raise ConfigError(f"step(): run {self.run_id} is at step {tr.step_count}, the end "
                              f"of its {self.adapt.steps} steps: run() ends it, "
                              "fork(adapt=AdaptConfig(steps=...)) gives a branch more")
        if self.log is None:
            self.start()
        self._go_on()
        bpe = tr.stream.batches_per_epoch()
        if self.position[1] >= bpe:  # a checkpoint of a version that trained on a last
            self.position = (self.position[0] + 1, 0)  # batch of one row: its epoch is over
        while list(self.position) in self.skip:  # a batch an instability rolled back over
            self.skip.remove(list(self.position))
            self._event("skip", "batch", {"epoch": self.position[0], "batch": self.position[1]})
            e, b = self.position
            self.position = (e + 1, 0) if b + 1 == bpe else (e, b + 1)
        epoch, batch = self.position
        idx = self._batch(epoch, batch)
        x, y = p.train.X[idx], p.train.y[idx]
        for hook in self.hooks:
            x, y = hook.before_step(self, x, y)
        rec = tr.train_step(x, y, epoch)
        self.work += 1
        epoch_end = batch + 1 == bpe
        self.position = (epoch + 1, 0) if epoch_end else (epoch, batch + 1)
        obs = Observation("step", tr.step_count, epoch, rec.loss, rec.grad_norm,
                          partial=len(idx) < self.config.batch_size)
        unstable = self.instability.observe(obs)
        if unstable is not None:
            harmful = self._harmful(unstable)
            self._event("trigger", unstable.trigger, {"kind": unstable.kind, **unstable.detail},
                        {"loss": rec.loss})
            if harmful:
                return self._on_instability(unstable, (epoch, batch))
            self.instability.accept(obs)  # a hard batch: part of the loss's distribution
        self.recent = [*self.recent, rec.loss][-self.adapt.guard.steps:]
        if self.guard.active:
            self.guard.observe(rec.loss)
            if self.guard.done() and self._finish_guard():
                return None
        # While a rewrite is on trial the other triggers wait (their state too).
        asking = not self.guard.active
        fired = [f for f in [self.warmup.observe(obs) if self.warmup and asking else None] if f]
        evaluated = False
        if self._evaluates_at(tr.step_count, epoch_end):
            m = self._evaluate(epoch)
            evaluated = True
            if asking and (f := self.plateau.observe(Observation(
                    "eval", tr.step_count, epoch, val_loss=m["val_loss"]))):
                fired.append(f)
        if epoch_end and asking and self.epoch_end and (f := self.epoch_end.observe(
                Observation("epoch_end", tr.step_count, epoch))):
            fired.append(f)
        for f in fired:
            self._on_trigger(f)
        if not self.guard.active:
            if self.checkpoint_dir is not None \
                    and self.work - self.checkpoint_work >= self.adapt.checkpoint_steps:
                self._checkpoint()
            elif evaluated:
                self.last_good = self.snapshot()
            if self.adapt.early_stop and self.since_best >= self.adapt.early_stop:
                self._event("early_stop", "patience", {"evaluations": self.since_best},
                            {"best_val_loss": self.best_val})
                return "early_stopped"
        return None

    def _refuse_ended(self, call: str) -> None:
        """A ConfigError for `call` on a run whose end is logged: rows after it would
        rewrite how the run ended."""
        if self.log is None or self.log.end is None:
            return
        end = self.log.end
        raise ConfigError(f"{call}: run {self.run_id} ended {end.status} at step {end.steps} "
                          "and logs nothing more: fork() branches a new run from its final "
                          "state")

    def rollback(self, snap: Snapshot, reason: str = "by request") -> None:
        """Take the run back to `snap`, one of its snapshots (`snapshot()`), as its own
        rollbacks do: model, data position, triggers, guard and best model so far rewind;
        `work` and the history go on, the rollback counts against `max_rollbacks`, and a
        `rollback` event (name "requested", detail `reason`) and the IR are logged. The
        learning rate and the blacklist stay as they are."""
        self._refuse_ended("rollback()")
        theirs = snap.meta.get("run", {}).get("run_id")
        if theirs != self.run_id:
            raise ConfigError(f"the snapshot is of run {theirs}, not {self.run_id}: "
                              "fork(snapshot) branches from another run's")
        _same_problem(snap.meta["run"], self.problem)
        _outside_trial(snap, "rollback()")
        if self.log is None:
            self.start()
        self._go_on()
        self._rollback(snap, "requested", reason, blacklist=None, lr_backoff=False)
        self.last_good = snap  # on the live trajectory now: an instability comes back here

    def _on_trigger(self, f: Fired) -> None:
        m = self._metrics()
        self._event("trigger", f.trigger, {"kind": f.kind, **f.detail}, m)
        if self.guard.active:  # a second trigger at the step of a rewrite
            self._event("decision", "wait", {"reason": f"guarding the last rewrite "
                                                       f"({self.guard.transform})"})
            return
        if self.rewrites >= self.adapt.max_rewrites:
            self._event("decision", "none", {"reason": "max_rewrites reached"})
            return
        left = self.adapt.steps - self.trainer.step_count
        if f.kind != "instability" and left < self.adapt.guard.steps:
            # the guard could not judge it before the run ends: a rewrite nobody keeps
            self._event("decision", "none", self._none_detail(
                f, reason=f"too late: the guard needs {self.adapt.guard.steps} steps before "
                          "the run ends", steps_left=left), m)
            return
        d = self._decide(self._observation(f, m))
        if d is None or d.transform == NO_CHANGE:  # a "no change" may say why, and on what
            why = {} if d is None else {"reason": d.reason, "source": d.source,
                                        "evidence": d.evidence}
            self._event("decision", "none", self._none_detail(f, **why), m)
            return
        self._event("decision", d.transform, self._decision_detail(d, f), m)
        self.rewrite(d, m)

    def _none_detail(self, f: Fired, **why: Any) -> dict[str, Any]:
        """What a "no change" decision says: the trigger, the policy, why, and the structure
        proposal the run started from."""
        detail: dict[str, Any] = {"trigger": f.trigger, "policy": self.policy.name, **why}
        if self.proposal:
            detail["proposal"] = self.proposal
        return detail

    def _decision_detail(self, d: Decision, f: Fired) -> dict[str, Any]:
        """What a decision event says: the rewrite, why, who decided, and what it acted on
        (the structure proposal the run started from, the proposer's evidence)."""
        out = {"site": d.site, "options": d.options, "reason": d.reason, "source": d.source,
               "trigger": f.trigger}
        if d.evidence:
            out["evidence"] = d.evidence
        if self.proposal:
            out["proposal"] = self.proposal
        return out

    def _observation(self, f: Fired, m: dict[str, float]) -> PolicyObservation:
        refs = {f"best_val_at.{k}": v for k, v in self.best_val_at.items()}
        return PolicyObservation(f, self.trainer.step_count, self.trainer.graph,
                                 {**m, "best_val_loss": self.best_val, **refs},
                                 self.blacklist.blocked(self.work), self.problem.task,
                                 self.rewrites, self.rollbacks, len(self.problem.train))

    def rewrite(self, d: Decision, before: dict[str, float] | None = None) -> bool:
        """Pause, snapshot, rewrite, rebind, resume; the guard then watches. True if applied."""
        tr = self.trainer
        before = before or self._metrics()
        t0 = time.perf_counter()
        pre = self.snapshot()
        old_graph = tr.graph
        try:
            transform = make_transform(d.transform, **d.options)
            rng = np.random.default_rng([self.config.seed, tr.step_count, REWRITE_STREAM])
            new = transform.apply(capture(tr, with_grads=True), d.site, rng)
            _adoptable(tr, new.graph, f"{d.transform} at '{d.site}'")
        except RewriteError as err:
            # blocked as a harmful one is: a policy would propose it at every trigger again
            # (a widen past a ceiling stays past it)
            self.blacklist.block(d.transform, self.work, self.adapt.guard.blacklist_steps)
            self._event("rewrite", d.transform, {"site": d.site, "error": str(err),
                                                 "blacklisted": d.transform})
            return False
        install(tr, new, compile_batch=self.config.batch_size)
        pause_ms = (time.perf_counter() - t0) * 1e3
        self.pause_ms.append(pause_ms)
        after = self.measure()
        self.last_metrics = after
        self._event("rewrite", d.transform, {
            "site": d.site, "options": d.options, "reason": d.reason,
            "function_preserving": transform.function_preserving, "pause_ms": pause_ms,
            "fingerprint_before": fingerprint(old_graph), "fingerprint_after": fingerprint(
                tr.graph)}, before, after)
        self.recorder.snapshot(snapshot_record(self.run_id, tr.step_count, "rewrite", tr.graph))
        self.guard.start(tr.step_count, d.transform, d.site, self.recent, before["val_loss"], pre)
        self.best_val_at[d.transform] = self.best_val
        self.instability.reset_history()  # a new loss distribution: the guard judges it
        self.rewrites += 1
        return True

    def _finish_guard(self) -> bool:
        """The guard's verdict; True if it rolled the rewrite back (in counterfactual mode:
        if the run goes on from the control arm)."""
        m = self.measure()
        self.last_metrics = m
        g = self.guard
        control = self._control_arm() if g.config.counterfactual else None
        v = g.verdict(m["val_loss"], control.metrics["val_loss"] if control else math.nan)
        self._event("guard", g.transform, {"verdict": "harm" if v.harm else "keep",
                                           "reason": v.reason, "site": g.site,
                                           "rewrite_step": g.step, **v.metrics},
                    {"train_loss": v.metrics["pre_mean"], "val_loss": g.val_before},
                    {"train_loss": v.metrics["post_mean"], "val_loss": m["val_loss"]})
        if v.harm:
            self._rollback(g.snapshot, "guard", v.reason, blacklist=g.transform,
                           lr_backoff=False, control=control)
            return True
        if control is not None:
            self._return_to(control.arm, m)
        self.since_best = 0  # the new structure gets its own patience
        g.clear()
        return False

    def _control_arm(self) -> ControlArm:
        """The un-rewritten model trained from the pre-rewrite snapshot over the batches the
        rewrite's trial used (its steps are kept, not logged: they become the run's
        trajectory only if the run goes on from the control arm, `_rollback`; `work` counts
        them). Leaves the trainer on the control arm."""
        tr, pre = self.trainer, self.guard.snapshot
        arm, end = self.snapshot(), self.position
        skips = [tuple(p) for p in pre.meta["run"]["skip"]]
        pre.restore(tr)
        self.position = (pre.epoch, pre.batch)
        bpe = tr.stream.batches_per_epoch()
        kept = MemoryRecorder()
        recorder, tr.recorder = tr.recorder, kept
        losses: list[float] = []
        evals: list[tuple[int, dict[str, float], ModelState]] = []
        try:
            while self.position != end:
                epoch, batch = self.position
                if self.position not in skips:  # the rewritten arm skipped it too
                    idx = self._batch(epoch, batch)
                    losses.append(tr.train_step(self.problem.train.X[idx],
                                                self.problem.train.y[idx], epoch).loss)
                    self.work += 1
                    # where the run would have evaluated it, had it never rewritten
                    if self._evaluates_at(tr.step_count, batch + 1 == bpe):
                        evals.append((epoch, self.measure(), capture(tr)))
                self.position = (epoch + 1, 0) if batch + 1 == bpe else (epoch, batch + 1)
        finally:
            tr.recorder = recorder
        last = evals[-1][1] if evals and evals[-1][1]["step"] == tr.step_count else None
        return ControlArm(arm, last or self.measure(), losses, kept.steps, evals)

    def _return_to(self, arm: Snapshot, metrics: dict[str, float]) -> None:
        """Back on the rewritten arm (measured as `metrics`) after the control arm lost."""
        arm.restore(self.trainer)
        self.position = (arm.epoch, arm.batch)
        self._load_controller(arm)
        self.last_metrics = metrics

    def _harmful(self, f: Fired) -> bool:
        """Whether an instability calls for a rollback: always for a non-finite loss; for a
        spike or a gradient burst, when the validation loss after it is worse than the last
        evaluation's by more than `spike_tolerance` (the verdict goes into its detail)."""
        before = self.last_metrics.get("val_loss", math.nan)
        if f.trigger == "nan" or not math.isfinite(before):
            return True
        after = self.measure()["val_loss"]
        harm = not (math.isfinite(after) and after <= before * (1 + self.adapt.spike_tolerance))
        f.detail.update(val_loss_before=before, val_loss_after=after,
                        verdict="harm" if harm else "transient")
        return harm

    def _on_instability(self, f: Fired, at: tuple[int, int]) -> str | None:
        if self.rollbacks >= self.adapt.max_rollbacks:
            why = f"more than {self.adapt.max_rollbacks} rollbacks"
            self._event("rollback", "give_up", {"reason": why})
            self.stop_reason = f"gave up: {why} (the last: {f.trigger} at step {f.step})"
            return "failed"
        guarding = self.guard.active
        target = self.guard.snapshot if guarding else self.last_good
        assert target is not None
        self._rollback(target, f.trigger, f"{f.trigger} at step {f.step}",
                       blacklist=self.guard.transform if guarding else None, lr_backoff=True)
        self.skip.append(list(at))  # the replay leaves out the batch it happened on
        if not guarding and self.rewrites < self.adapt.max_rewrites:
            d = self._decide(self._observation(f, self._metrics()))
            if d is not None and d.transform != NO_CHANGE:
                self._event("decision", d.transform, self._decision_detail(d, f))
                self.rewrite(d)
        return None

    def _rollback(self, target: Snapshot, name: str, reason: str, *, blacklist: str | None,
                  lr_backoff: bool, control: ControlArm | None = None) -> None:
        """Back to `target`'s model and controller; with a `control` arm (the counterfactual
        guard's, already in the trainer at the same step) the model stays, nothing rewinds."""
        tr = self.trainer
        before = {"step": float(tr.step_count), "lr_scale": self.schedule.scale}
        from_step = tr.step_count
        if control is None:
            target.restore(tr)
            self.position = (target.epoch, target.batch)
        self._load_controller(target)
        if control is not None:  # the control's own recent losses, not the pre-rewrite ones
            self.recent = control.losses[-self.adapt.guard.steps:]
        if lr_backoff:
            self.schedule.scale *= self.adapt.lr_backoff
        if blacklist:
            self.blacklist.block(blacklist, self.work, self.adapt.guard.blacklist_steps)
        self.rollbacks += 1
        tr.trajectory = self.trajectory_base + self.rollbacks  # the kept branch's steps
        if control is not None:  # its steps replace the rewritten arm's, as a replay's would
            for rec in control.steps:
                self.recorder.step(dataclasses.replace(rec, trajectory=tr.trajectory))
            for epoch, m, state in control.evals:  # and its evaluations, the best model too
                self._count_evaluation(epoch, m, state)
        after = control.metrics if control is not None else self.measure()
        self.last_metrics = after
        where = {"to": "control arm"} if control is not None else {}
        # `trajectory`, the one it begins (the rows after it carry it), places the rollback
        # on the warehouse's path even when no row of it follows, or a fork's first comes after
        self._event("rollback", name, {"reason": reason, "from_step": from_step,
                                       "to_step": tr.step_count, "trajectory": tr.trajectory,
                                       **where, "lr_scale": self.schedule.scale,
                                       "blacklisted": blacklist or ""},
                    before, {**after, "lr_scale": self.schedule.scale})
        self.recorder.snapshot(snapshot_record(self.run_id, tr.step_count, "rollback", tr.graph))

    def _checkpoint(self) -> None:
        assert self.checkpoint_dir is not None
        self.checkpoint_work = self.work
        s = self.snapshot()
        path = disk.path_of(self.checkpoint_dir, self.work) if self.rank0 else None
        with interrupts_deferred():  # a Ctrl-C here would lose rows being committed
            self._event("checkpoint", "save", {"path": str(path)})
            # every record logged so far, this event included: a resumed run leaves out
            # what the log holds past them (runtime/replay.py)
            s.meta["run"]["logged"] = dict(self.logged.counts)
            # the run's wall time so far, its earlier processes' included: a resumed run's
            # end says the whole run's, not its last process's (`wall_time_s`)
            s.meta["run"]["wall_s"] = self.log.elapsed() if self.log is not None else 0.0
            # the log first: a run resumed from this checkpoint logs from it on, so every
            # step before it must already be on disk
            self.recorder.flush()
            if self.rank0:
                disk.save(s, self.checkpoint_dir, serial=self.work)
                disk.prune(self.checkpoint_dir, self.adapt.keep_checkpoints)
        self.last_good = s

    def _save_final(self, status: str) -> None:
        """Leave the run's final state (the best model, at the last step) beside its
        checkpoints, for a new run to branch from (`adapt --fork`). Its patience starts
        over: a branch of an early-stopped run would otherwise stop at its first
        evaluation."""
        assert self.checkpoint_dir is not None
        s = self.snapshot()
        s.meta["controller"]["since_best"] = 0
        s.meta["run"]["ended"] = {"status": status, "step": self.trainer.step_count}
        path = Path(self.checkpoint_dir) / disk.FINAL
        self._event("checkpoint", "final", {"path": str(path) if self.rank0 else None})
        if self.rank0:
            disk.save_final(s, self.checkpoint_dir)

    def _finish(self, status: str) -> AdaptResult:
        tr = self.trainer
        assert self.log is not None
        if self.best_state is not None:
            install(tr, self.best_state.copy())
        if self.checkpoint_dir is not None and status in BRANCHABLE:
            self._save_final(status)
        metrics = tr.final_metrics()
        wall = self.log.finish(status, metrics, self.position[0], self.stop_reason)
        return AdaptResult(self.run_id, status, tr.step_count, self.work, wall, metrics,
                           self.best_step, self.best_val, self.rewrites, self.rollbacks,
                           tr.graph, [dict(h) for h in self.history], list(self.events),
                           list(self.pause_ms))


def adaptive_config(config: TrainConfig, adapt: AdaptConfig, train_rows: int) -> TrainConfig:
    """The recipe `config` as an adaptive run of `adapt.steps` steps on `train_rows` training
    rows trains with: its length is the steps (its schedule spans them), not epochs."""
    bpe = BatchStream(train_rows, config.batch_size).batches_per_epoch()
    return dataclasses.replace(config, max_steps=adapt.steps,
                               epochs=math.ceil(adapt.steps / bpe) + 1)


def _adoptable(trainer: Trainer, graph: Graph, rewrite: str) -> None:
    """A RewriteError (the rewrite is not applied, its event says why) if the rewritten
    `graph` fails what the run's first graph passed (`check_trainable`): a widen could
    grow it past the model ceilings."""
    try:
        check_trainable(trainer.problem, graph, trainer.config, "the rewritten graph")
    except ConfigError as err:
        raise RewriteError(f"{rewrite}: {err}") from None


# policies not built in that a resume cannot rebuild as they were, and what to do instead
# (when their checkpoint holds no settings to rebuild them from)
NOT_RESUMABLE = {
    "learned": "the learned rewrite proposer of --from-proposal --service, whose answers "
               "the service gave as its history was then, which a resume cannot rebuild: "
               "run it again (once ended, `--fork DIR --policy NAME` goes on from its final "
               "state)",
}


def _own_policy(run_state: dict[str, Any], given: Policy | None) -> Policy:
    """The policy a checkpoint's run decided with, options and all: `given` if it is that
    one, else the built-in one rebuilt (older checkpoints do not name theirs: `given`,
    else the rules)."""
    own, settings = run_state.get("policy"), run_state.get("policy_settings")
    if own is None:
        return given or RuleBasedPolicy()
    if given is None:
        if own in NOT_RESUMABLE and settings is None:
            raise ConfigError(f"the checkpoint's run decides with policy '{own}': "
                              f"{NOT_RESUMABLE[own]}")
        if own not in POLICIES:
            raise ConfigError(f"the checkpoint's run decides with policy '{own}', which is "
                              f"not a built-in one ({', '.join(POLICIES)}): pass it to resume")
        return make_policy(own, settings)
    if given.name != own:
        raise ConfigError(f"the checkpoint's run decides with policy '{own}', not "
                          f"'{given.name}': a resumed run keeps its policy")
    theirs = policy_settings(given)
    if settings is not None and theirs is not None and \
            json.loads(json.dumps(theirs)) != settings:
        raise ConfigError(f"the checkpoint's run decides with policy '{own}' configured "
                          f"otherwise: a resumed run keeps its policy")
    return given


def claim_checkpoint_dir(directory: str | Path, run_id: str | None = None
                         ) -> tuple[str | None, Callable[[], None]]:
    """`directory` made if need be and held for this process's run (`disk.hold`: held first,
    so a run going on there is refused as such, `DirectoryBusy`), then checked
    (`unusable_checkpoint_dir`): (why it cannot take run `run_id`'s checkpoints, or None;
    the release, a no-op once refused)."""
    why = disk.prepare_dir(directory)
    if why:
        return why, _nothing
    let_go = disk.hold(directory)
    why = unusable_checkpoint_dir(directory, run_id)
    if why:
        let_go()
        return why, _nothing
    return None, let_go


def _nothing() -> None:
    pass


def unusable_checkpoint_dir(directory: str | Path, run_id: str | None = None) -> str | None:
    """Why run `run_id` cannot write its checkpoints in `directory` (created if need be):
    not writable, or another run's checkpoints are there (its serials would collide with
    theirs half-way through the run); None if it can."""
    why = disk.prepare_dir(directory)
    if why:
        return why
    final = disk.final_of(directory)
    if final is not None and _run_of(final) == UNKNOWN:
        return f"holds a final state that cannot be read ({final}): pick an empty directory"
    if final is not None and _run_of(final) != run_id:
        return (f"holds the final state of run {_run_of(final)}, which ended: --fork it, "
                f"or pick an empty directory")
    runs = {p: _run_of(p) for p in disk.checkpoints(directory)}
    others = sorted(set(runs.values()) - {run_id, UNKNOWN})
    if others:
        return (f"holds checkpoints of run {', '.join(others)}: --resume it, or pick an "
                f"empty directory")
    damaged = [p.name for p, r in runs.items() if r == UNKNOWN]
    if damaged:  # whose run they are is not known: no run's serials are safe beside them
        return (f"holds checkpoints that cannot be read (damaged: {', '.join(damaged)}): "
                f"pick an empty directory")
    return None


def branch_point(ended_dir: str | Path, steps: int) -> Path:
    """The final state in `ended_dir` a branch of `steps` steps in all goes on from, after
    refusing a directory without one, or `steps` no more than the ended run took."""
    final = disk.final_of(ended_dir)
    if final is None:
        # (a failed run leaves checkpoints and no end on disk: `adapt --fork` names its end)
        more = ("; its run has not ended (it goes on from its checkpoints: resume), or "
                "ended failed" if disk.checkpoints(ended_dir) else "")
        raise SnapshotError(f"no final state in {ended_dir} (a run leaves one when it ends "
                            f"completed or early-stopped with checkpoints on){more}")
    ended = disk.read_meta(final).get("run", {}).get("ended", {})
    if steps <= int(ended.get("step", 0)):
        raise ConfigError(f"{_ended(final)}: a branch needs more steps in all than that "
                          f"(got {steps})")
    return final


def _ended(final: Path) -> str:
    """How the run whose final state is `final` ended, for a message."""
    ended = disk.read_meta(final).get("run", {}).get("ended", {})
    status = str(ended.get("status", "ended")).replace("_", " ")
    return f"run {_run_of(final)} {status} at step {ended.get('step', '?')}"


def _newest_run_state(directory: str | Path, key: str) -> dict[str, Any] | None:
    """The run state of the newest checkpoint in `directory` whose state names `key`."""
    for path in reversed(disk.checkpoints(directory)):
        r = disk.read_meta(path).get("run")
        if isinstance(r, dict) and r.get(key):
            return r
    return None


def checkpoint_run_id(directory: str | Path) -> str | None:
    """The run whose checkpoints `directory` holds (the newest that names one), or None."""
    r = _newest_run_state(directory, "run_id")
    return str(r["run_id"]) if r else None


def checkpoint_policy(directory: str | Path) -> tuple[str | None, dict[str, Any] | None]:
    """The policy the run whose checkpoints `directory` holds decides with, and its
    settings (the newest readable checkpoint's); (None, None) if none says."""
    r = _newest_run_state(directory, "policy")
    if r is None:
        return None, None
    settings = r.get("policy_settings")
    return str(r["policy"]), settings if isinstance(settings, dict) else None


UNKNOWN = "unknown"  # the run of a checkpoint whose state cannot be read


def _run_of(checkpoint: Path) -> str:
    r = disk.read_meta(checkpoint).get("run")
    return str(r["run_id"]) if isinstance(r, dict) and r.get("run_id") else UNKNOWN


def _outside_trial(snap: Snapshot, call: str) -> None:
    """A snapshot a run can go on from: not one taken during a rewrite's trial, whose guard
    would judge the rewrite without the pre-rewrite state to return to (as checkpoints, it
    waits for the verdict)."""
    if snap.meta.get("controller", {}).get("guard", {}).get("active"):
        raise ConfigError(f"{call}: the snapshot was taken at step {snap.step}, during the "
                          "trial of a rewrite (the guard judges it first): take one after "
                          "the guard's verdict")


def _same_problem(run_meta: Mapping[str, Any], problem: Problem) -> None:
    """A checkpoint goes on only on its own problem; the error names both."""
    if run_meta["problem_id"] != problem.problem_id:
        # names where the checkpoint has one (older ones hold the id alone)
        theirs = f"'{run_meta['problem']}' ({run_meta['problem_id']})" \
            if run_meta.get("problem") else run_meta["problem_id"]
        raise SnapshotError(f"the checkpoint is of problem {theirs}, not "
                            f"'{problem.name}' ({problem.problem_id})")
