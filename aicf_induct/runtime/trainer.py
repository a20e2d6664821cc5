"""The trainer: epochs of mini-batches over a problem, with a validation split, early
stopping, per-step dynamics and per-epoch metrics sent to a recorder. Deterministic under a
seed: parameter init, batch order and dropout masks all derive from it."""

from __future__ import annotations

import math
import numbers
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from aicf_induct.compiler.fusion import PRECISIONS
from aicf_induct.errors import ConfigError
from aicf_induct.ir.fingerprint import fingerprint
from aicf_induct.ir.graph import Graph
from aicf_induct.json_values import json_safe
from aicf_induct.kernels.autotune import TuningStore
from aicf_induct.problems.problem import Problem, Split
from aicf_induct.problems.splits import check_seed
from aicf_induct.progress import transient
from aicf_induct.records import NullRecorder, Recorder, StepRecord
from aicf_induct.runtime.backend import BACKENDS, Backend, select_backend
from aicf_induct.runtime.clipping import clip_grad_norm_, global_grad_norm
from aicf_induct.runtime.data import BatchStream, least_rows
from aicf_induct.runtime.executor import Executor, check_size, check_values, store_for
from aicf_induct.runtime.metrics import class_accuracy, predicted_classes, score, score_name
from aicf_induct.runtime.optimizers import Optimizer, make_optimizer
from aicf_induct.runtime.parallel import DataParallel
from aicf_induct.runtime.runs import LoggedRun, start_run
from aicf_induct.runtime.schedules import Schedule, make_schedule

EVAL_CHUNK = 4096  # rows per evaluation batch: bounds memory on large splits

# TrainConfig's integer fields and their least value
INT_FIELDS = {"epochs": 1, "batch_size": 1, "patience": 0, "max_steps": 0, "warmup_steps": 0}
# its number fields: (the rule as the CLI words it, the test)
NUMBER_FIELDS: dict[str, tuple[str, Callable[[float], bool]]] = {
    "lr": ("> 0", lambda v: v > 0),  # the optimizers take 0, which trains nothing
    "weight_decay": (">= 0", lambda v: v >= 0),
    "momentum": ("in [0, 1)", lambda v: 0 <= v < 1),
    "clip_norm": (">= 0", lambda v: v >= 0),
    "label_smoothing": ("in [0, 1)", lambda v: 0 <= v < 1),
    "max_wall_s": (">= 0", lambda v: v >= 0),
}


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 50  # passes over the training split
    batch_size: int = 32
    optimizer: str = "adam"  # sgd | adam | adamw
    lr: float = 1e-3
    weight_decay: float = 0.0  # L2 for sgd/adam, decoupled for adamw
    momentum: float = 0.9  # sgd only
    nesterov: bool = False  # sgd only
    schedule: str = "constant"  # constant | cosine
    warmup_steps: int = 0  # linear warm-up before the schedule
    clip_norm: float = 0.0  # clip the global gradient norm to this; 0: no clipping
    patience: int = 10  # early stopping: epochs without a better val loss; 0: off
    label_smoothing: float = 0.0  # cross-entropy only
    seed: int = 0  # init, batch order, dropout
    max_steps: int = 0  # stop after this many steps; 0: no cap
    max_wall_s: float = 0.0  # stop (status "timeout") after this many seconds; 0: no limit
    backend: str = "auto"  # auto | numpy | cupy; auto: CuPy when a GPU is there
    precision: str = "fp32"  # GPU GEMM compute: fp32 | tf32 | bf16 (fp32 master weights)

    def __post_init__(self) -> None:
        # the rules the CLI's options hold (cli/options.py), in their words, for a config
        # built in Python too; NumPy scalars become Python ones (the config is logged and
        # snapshotted as JSON)
        for name, low in INT_FIELDS.items():
            object.__setattr__(self, name, integer_field(name, getattr(self, name), low))
        check_seed(self.seed)
        object.__setattr__(self, "seed", int(self.seed))
        for name, (rule, ok) in NUMBER_FIELDS.items():
            object.__setattr__(self, name, number_field(name, getattr(self, name), rule, ok))
        if self.backend not in BACKENDS:
            raise ConfigError(f"backend must be one of {', '.join(BACKENDS)}, got "
                              f"{self.backend!r}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, got "
                              f"{self.precision!r}")
        if self.nesterov and self.optimizer != "sgd":  # else accepted, and ignored
            raise ConfigError(f"nesterov applies to optimizer 'sgd' only, got optimizer "
                              f"{self.optimizer!r}")

    def make_optimizer(self) -> Optimizer:
        if self.optimizer == "sgd":
            return make_optimizer("sgd", lr=self.lr, momentum=self.momentum,
                                  nesterov=self.nesterov, weight_decay=self.weight_decay)
        if self.optimizer in ("adam", "adamw"):
            # the configured decay, 0 included: the run's logged config is what it trained
            # with (AdamW's own default, 0.01, applied to a 0 once)
            return make_optimizer(self.optimizer, lr=self.lr, weight_decay=self.weight_decay)
        return make_optimizer(self.optimizer, lr=self.lr)  # raises a ConfigError naming it


@dataclass
class FitState:
    """A fit in progress: its logged run, the best (val loss, epoch, state) so far, the
    per-epoch rows and the status it will end with."""

    run: LoggedRun
    best: tuple[float, int, dict[str, np.ndarray]]
    history: list[dict[str, float]] = field(default_factory=list)
    status: str = "completed"  # | early_stopped | timeout
    diverged: int | None = None  # the epoch whose training loss was not finite (it stopped)


@dataclass
class TrainResult:
    run_id: str
    status: str  # completed | early_stopped | timeout
    steps: int
    epochs: int
    best_epoch: int
    wall_time_s: float
    metrics: dict[str, float]  # "<split>_<metric>": final values (best checkpoint)
    history: list[dict[str, float]] = field(default_factory=list)  # per epoch
    error: str | None = None  # why it stopped, when not by plan (a time budget, divergence)

    def as_dict(self) -> dict[str, Any]:
        """What `aicf-induct train --json` prints: JSON-safe (a non-finite metric is null,
        as the service answers it)."""
        return json_safe({"run_id": self.run_id, "status": self.status, "steps": self.steps,
                          **self.metrics})


def check_arguments(problem: Any, graph: Any, config: Any) -> None:
    """A TypeError saying what `Trainer` (and `AdaptiveRun`) takes, for an argument of
    another type (an untraced Module, a dict of settings), before an attribute it lacks
    fails somewhere inside."""
    for name, value, kind, hint in (
            ("problem", problem, Problem, " (load_problem(name) makes one)"),
            ("graph", graph, Graph, " (trace(model, n_features) makes one from a Module)"),
            ("config", config, TrainConfig, "")):
        if not isinstance(value, kind):
            raise TypeError(f"{name}: a {kind.__name__}{hint}, got {type(value).__name__}")


def total_steps(config: TrainConfig, train_rows: int) -> int:
    """The steps a run of `config` on `train_rows` training rows takes at most, which its
    schedule spans: its epochs' batches, capped by `max_steps`."""
    total = config.epochs * BatchStream(train_rows, config.batch_size).batches_per_epoch()
    return min(total, config.max_steps) if config.max_steps else total


def check_trainable(problem: Problem, graph: Graph, config: TrainConfig, source: str) -> None:
    """A ConfigError if `graph` cannot train on `problem` with `config`: a schedule that
    does not fit the run (`make_schedule`: a warm-up as long as the run), past the model
    ceilings (`executor.check_size`, naming `source`), or with batchnorm on batches of one
    row (`BatchStream` leaves out a last batch of one row: these runs have no other), or
    label smoothing on a regression (which mean squared error would ignore).
    `Trainer` checks it before anything is allocated, `AdaptiveRun.rewrite` each rewritten
    graph, and the commands before they open the warehouse (`adapt` before it says what it
    will train)."""
    make_schedule(config.schedule, config.lr, max(total_steps(config, len(problem.train)), 1),
                  config.warmup_steps)
    if config.label_smoothing and problem.task == "regression":  # else ignored: mse has none
        raise ConfigError(f"label_smoothing {config.label_smoothing:g} applies to "
                          f"classification (cross-entropy) only; problem '{problem.name}' is "
                          f"a regression")
    check_size(graph, source)
    if least_rows(graph) < 2:
        return
    if config.batch_size == 1:
        raise ConfigError("batch_size 1: the model has batchnorm, whose variance over one "
                          "row is 0; use batch_size 2 or more")
    if len(problem.train) == 1:
        raise ConfigError(f"problem '{problem.name}', train split: one row: the model has "
                          "batchnorm, whose variance over one row is 0")


class Trainer:
    """Trains `graph` on `problem` under `config`: `fit()` runs the epochs with early
    stopping and returns a `TrainResult`, the run logged to `recorder` (start, steps,
    per-epoch results, final metrics of the best epoch, end). The problem's splits are
    checked against the graph when it is built, before anything is logged; a graph past the
    model ceilings (`executor.check_size`), or one with batchnorm whose batches would be one
    row, is refused before anything is allocated (`check_trainable`).

    `values`: starting parameters (the rest from their initializers, named in
    `missing_values`); `origin`: what the run's row says started it ("python"; the CLI
    says "cli", sweeps "sweep"); `parent_run_id`: the run this one branches from;
    `extra_config`: more keys for the logged config; `tuning`: the GPU autotuner's store;
    `parallel`: this rank's part of a data-parallel run."""

    def __init__(self, problem: Problem, graph: Graph, config: TrainConfig, *,
                 recorder: Recorder | None = None, values: dict[str, np.ndarray] | None = None,
                 origin: str = "python", run_id: str | None = None,
                 parent_run_id: str | None = None, progress: bool = False,
                 extra_config: dict[str, Any] | None = None,
                 tuning: TuningStore | None = None,
                 parallel: DataParallel | None = None) -> None:
        check_arguments(problem, graph, config)
        self.problem, self.graph, self.config = problem, graph, config
        # said before a parameter (or a batch's values) is allocated
        check_trainable(problem, graph, config,
                        f"graph '{graph.name}'" if graph.name else "the graph")
        self.recorder: Recorder = recorder or NullRecorder()
        self.origin, self.parent_run_id = origin, parent_run_id
        self.run_id = run_id or uuid.uuid4().hex
        self.progress = progress
        self.extra_config = dict(extra_config or {})
        loss = "cross_entropy" if problem.task == "classification" else "mse"
        # tuning: where the GPU autotuner keeps its choices (the warehouse's, from the caller)
        self.backend: Backend = select_backend(config.backend, tuning=tuning)
        # data parallel (runtime.parallel): this rank's share of every batch, gradients summed
        self.parallel = parallel
        if parallel is not None and parallel.comm.size == 1 and not _on_device(parallel.comm):
            self.parallel = None  # one rank on the host: nothing to share
        elif parallel is not None and self.backend.is_gpu != _on_device(parallel.comm):
            raise ConfigError("data parallel: the GPU backend sums over NCCL "
                              "(NcclCommunicator), the NumPy backend over the host "
                              f"(PipeCommunicator); got {type(parallel.comm).__name__} on "
                              f"{self.backend.name}")
        # values: checked once here; the parameters they lack start from their initializers,
        # named in `missing_values` for the caller to report (empty when no values are given)
        checked, self.missing_values = (check_values(graph, values) if values is not None
                                        else (None, []))
        self.executor = _executor(self.backend, graph, checked, loss, config,
                                  parallel.comm.rank if parallel is not None else 0)
        self._check_problem()
        self._gpu_step: Any = None  # runtime.cuda_step.CudaStep, on the GPU backend
        self.optimizer = config.make_optimizer()
        self.stream = BatchStream(len(problem.train), config.batch_size, seed=config.seed)
        total = self.total_steps = total_steps(config, len(problem.train))
        self.schedule: Schedule = make_schedule(config.schedule, config.lr, max(total, 1),
                                                config.warmup_steps)
        self.step_count = 0
        # what each step and result row is logged under (`StepRecord.trajectory`): an
        # adaptive run sets it to its rollbacks
        self.trajectory = 0
        self.fitted = False  # `fit` runs once: the run it logs has one start and one end

    @property
    def store(self) -> Any:
        return self.executor.store

    def _check_problem(self) -> None:
        """Every split has rows, fits the graph's input and loss (shapes, dtypes, class
        range) and holds finite numbers: said once, before a run is logged, rather than at
        its first step (an empty split fails in NumPy, a NaN reads as divergence)."""
        p = self.problem
        for name in ("train", "val", "test"):
            split = getattr(p, name)
            try:
                if len(split) == 0:  # every split is evaluated at the end
                    raise ConfigError("no rows (a run reports its loss and score)")
                self.executor.check_batch(split.X, split.y)
                _check_finite("X", split.X, p.feature_names)
                _check_finite("labels", split.y, ())
            except ConfigError as err:
                raise ConfigError(f"problem '{p.name}', {name} split: {err}") from None
        scores = self.executor.n_classes
        # a narrower head fails the label check above; a wider one trains, its extra scores
        # never a target, and logs a model that is not the problem's
        if scores is not None and p.task == "classification" and scores != p.n_classes:
            raise ConfigError(f"problem '{p.name}' has {p.n_classes} classes and the graph "
                              f"outputs {scores} class scores: its last layer's width must be "
                              f"{p.n_classes}")

    # -- one step ----------------------------------------------------------------------------
    def train_step(self, x: np.ndarray, y: np.ndarray, epoch: int) -> StepRecord:
        """One optimizer step on the batch (x, y) at the schedule's learning rate, logged
        as a step row; its loss, gradient norm and update ratio."""
        t0 = time.perf_counter()
        lr = self.schedule.lr(self.step_count)
        if self.backend.is_gpu:
            loss, gnorm, ratio = self._gpu_train_step(x, y, lr)
        else:
            loss = self._cpu_forward_backward(x, y)
            if self.config.clip_norm:
                gnorm = clip_grad_norm_(self.store, self.config.clip_norm)
            else:
                gnorm = global_grad_norm(self.store)
            ratio = self.optimizer.step(self.store, lr)
        rec = StepRecord(run_id=self.run_id, step=self.step_count, epoch=epoch, loss=loss,
                         grad_norm=gnorm, update_ratio=ratio, lr=lr,
                         step_time_s=time.perf_counter() - t0, batch_size=int(x.shape[0]),
                         trajectory=self.trajectory)
        self.step_count += 1
        self.recorder.step(rec)
        return rec

    def _cpu_forward_backward(self, x: np.ndarray, y: np.ndarray) -> float:
        """The batch's loss, its gradient in the store: this rank's share of it, summed over
        the ranks, when training data parallel."""
        dp = self.parallel
        if dp is None:
            return self.executor.train_step(x, y, self.step_count)
        xs, ys = dp.shard(x, y, least_rows(self.graph))
        # fewer rows than ranks (two a rank with batchnorm): an empty share, whose gradient
        # `reduce` zeroes
        loss = self.executor.train_step(xs, ys, self.step_count) if len(xs) else 0.0
        return dp.reduce(self.store.grad, loss, len(xs), len(x))

    def _gpu_train_step(self, x: np.ndarray, y: np.ndarray, lr: float) -> tuple[float, ...]:
        """The whole step as one CUDA graph replay; rebuilt after a rewrite swaps the
        executor or the optimizer."""
        from aicf_induct.runtime.cuda_step import CudaStep

        g = self._gpu_step
        dp = self.parallel
        if g is None or g.executor is not self.executor or g.optimizer is not self.optimizer:
            from aicf_induct.runtime.parallel import device_reduce

            g = self._gpu_step = CudaStep(
                self.executor, self.optimizer, clip_norm=self.config.clip_norm,
                reduce=None if dp is None else device_reduce(dp.comm))
        if dp is None:
            s = g.run(x, y, self.step_count, lr)
        else:
            least = least_rows(self.graph)
            xs, ys = dp.shard(x, y, least)
            if len(xs):
                s = g.run(xs, ys, self.step_count, lr, weight=len(xs) / len(x))
            elif g.built:  # an empty share: a zero gradient into the ranks' sum
                s = g.run_empty(self.step_count, lr)
            else:
                # an empty share before this rank's step was ever built (the first batch,
                # or the first after a rewrite): the batch's first rows at weight 0, so that
                # it builds its step and joins the ranks' first sum, as the others do (NCCL
                # connects the ranks at their first collective: one missing hangs them all)
                s = g.run(x[:least], y[:least], self.step_count, lr, weight=0.0)
        assert s is not None
        return s.loss, s.grad_norm, s.update_ratio

    # -- evaluation --------------------------------------------------------------------------
    def evaluate(self, split: Split) -> tuple[float, float]:
        """(mean loss, score) on a split, in eval mode; (NaN, NaN) for a split of no rows."""
        if len(split) == 0:
            return float("nan"), float("nan")
        total, preds = 0.0, []
        classes: list[np.ndarray | None] = []  # classification: a row's class, not its scores
        for start in range(0, len(split), EVAL_CHUNK):
            x, y = split.X[start:start + EVAL_CHUNK], split.y[start:start + EVAL_CHUNK]
            loss, pred = self.executor.evaluate(x, y)
            total += loss * len(x)
            if self.problem.task == "classification":  # (rows × classes floats: GBs kept)
                classes.append(predicted_classes(self.backend.to_host(pred)))
            else:
                # a copy: the prediction is a view into the eval plan's memory, which the
                # next chunk overwrites (on the CPU, to_host returns the view itself)
                preds.append(np.array(self.backend.to_host(pred)))
        if classes:
            rows = [c for c in classes if c is not None]
            whole = np.concatenate(rows) if len(rows) == len(classes) else None
            return total / len(split), class_accuracy(whole, split.y)
        return total / len(split), score(self.problem.task, np.concatenate(preds), split.y)

    def run_config(self) -> dict[str, Any]:
        """The config the run's row logs: the recipe, the graph's fingerprint, the
        caller's extra keys."""
        return {"train": asdict(self.config), "fingerprint": fingerprint(self.graph),
                **self.extra_config}

    # -- the loop ----------------------------------------------------------------------------
    def fit(self) -> TrainResult:
        """Train to the end of the epochs (or early stopping, `max_steps`, `max_wall_s`),
        keep the best epoch's state and report it; an exception or Ctrl-C ends the logged
        run `failed` or `interrupted` before it propagates."""
        cfg, p = self.config, self.problem
        if self.fitted:  # a second fit logged the same run's start and steps again
            raise ConfigError(f"Trainer.fit: run {self.run_id} was fitted already (a Trainer "
                              "logs one run): a new Trainer trains again, from this one's "
                              "parameters with values=trainer.store.state_arrays()")
        self.fitted = True
        if self.parallel is not None:  # the clock starts once every rank is set up: the
            self.parallel.comm.barrier()  # others' start-up was the first step's time (2 s)
        with start_run(self) as run:
            fit = self.begin_fit(run)
            bar = transient(range(cfg.epochs), enabled=self.progress, desc=f"train {p.name}",
                            unit="epoch")
            try:
                for epoch in bar:
                    losses = self.train_epoch(fit, epoch)
                    if fit.status == "timeout" and not losses:
                        break
                    stop = self.end_epoch(fit, epoch, losses, *self.evaluate(p.val))
                    row = fit.history[-1]
                    bar.set_postfix(loss=f"{row['train_loss']:.4f}",
                                    val=f"{row[f'val_{score_name(p.task)}']:.4f}",
                                    refresh=False)
                    if stop:
                        break
            finally:
                bar.close()
            return self.end_fit(fit)

    # The loop's bookkeeping, in three parts that `fit` and the many-model engine
    # (runtime/many.py, which drives an epoch at a time) share.
    def begin_fit(self, run: LoggedRun) -> FitState:
        """The state of a fit whose start `run` logged: nothing better than the start yet."""
        return FitState(run, (np.inf, -1, self.store.state_arrays()))

    def train_epoch(self, fit: FitState, epoch: int) -> list[float]:
        """The epoch's steps, one by one; the losses of those that ran before the time
        budget ran out (then the status is "timeout")."""
        cfg, train = self.config, self.problem.train
        losses = []
        for idx in self._epoch_batches(epoch):
            if cfg.max_wall_s and self.agreed(fit.run.elapsed() >= cfg.max_wall_s):
                fit.status = "timeout"
                break
            losses.append(self.train_step(train.X[idx], train.y[idx], epoch).loss)
        return losses

    def end_epoch(self, fit: FitState, epoch: int, losses: list[float], val_loss: float,
                  val_score: float) -> bool:
        """Log the epoch's results, keep the best state; True when the fit stops here."""
        cfg = self.config
        # data parallel: every rank decides on rank 0's evaluation (batchnorm's running
        # statistics are per rank), so the ranks keep the same best epoch and stop together
        val_loss, val_score = self.agreed((val_loss, val_score))
        row = {"train_loss": self.epoch_loss(losses),
               "val_loss": val_loss, f"val_{score_name(self.problem.task)}": val_score}
        fit.history.append(row)
        fit.run.results(epoch, row)
        if val_loss < fit.best[0]:
            fit.best = (val_loss, epoch, self.store.state_arrays())
        if fit.status == "timeout" or (cfg.max_steps and self.step_count >= cfg.max_steps):
            return True
        if losses and not math.isfinite(row["train_loss"]):
            # diverged: every later step is NaN too (and NumPy warns at each); the best
            # epoch's state is what the run keeps either way
            fit.status, fit.diverged = "early_stopped", epoch
            return True
        if cfg.patience and epoch - fit.best[1] >= cfg.patience:
            fit.status = "early_stopped"
            return True
        return False

    def epoch_loss(self, losses: list[float]) -> float:
        """The epoch's training loss: its batches' mean losses weighted by their rows, as
        the validation loss is a mean over rows (a plain mean counted a short last batch as
        much as a full one). The batches that ran are the epoch's first (`max_steps` and a
        time budget cut its end)."""
        if not losses:
            return float("nan")
        rows = self.stream.sizes()[:len(losses)]
        if len(rows) != len(losses):  # not this stream's batches: no weights to give them
            return float(np.mean(losses))
        return float(np.average(losses, weights=rows))

    def end_fit(self, fit: FitState, metrics: dict[str, float] | None = None) -> TrainResult:
        """Restore the best state, log the final metrics and the run's end (`metrics`: the
        final metrics of the best state, restored and evaluated by the caller already)."""
        cfg, best = self.config, fit.best
        if metrics is None:
            self.restore_best(fit)
            metrics = self.final_metrics()
        error = (f"time budget of {cfg.max_wall_s:g} s used up after {self.step_count} "
                 f"steps" if fit.status == "timeout" else None)
        if fit.diverged is not None:
            kept = f"epoch {best[1]}'s state kept" if best[1] >= 0 else "no epoch was finite"
            error = (f"diverged: the training loss was not finite in epoch {fit.diverged}; "
                     f"{kept} (a lower learning rate may help)")
        wall = fit.run.finish(fit.status, metrics, len(fit.history) - 1, error)
        return TrainResult(self.run_id, fit.status, self.step_count, len(fit.history), best[1],
                           wall, metrics, fit.history, error)

    def restore_best(self, fit: FitState) -> None:
        """The parameters and buffers of the fit's best epoch, if one was better than the
        start."""
        if fit.best[1] >= 0:
            self.load_state(fit.best[2])

    def agreed(self, value: Any) -> Any:
        """Rank 0's `value` on every rank of a data-parallel run (else `value`)."""
        return value if self.parallel is None else self.parallel.comm.broadcast(value)

    def _epoch_batches(self, epoch: int) -> list[np.ndarray]:
        batches = list(self.stream.epoch(epoch))
        if self.config.max_steps:
            batches = batches[:max(self.config.max_steps - self.step_count, 0)]
        return batches

    def final_metrics(self, evaluate: Callable[[str], tuple[float, float]] | None = None
                      ) -> dict[str, float]:
        """Loss and score of the train, val and test splits (`evaluate(split name)`: how, by
        default `self.evaluate` of the split)."""
        sname = score_name(self.problem.task)
        out: dict[str, float] = {}
        for split_name in ("train", "val", "test"):
            loss, sc = (evaluate(split_name) if evaluate is not None
                        else self.evaluate(getattr(self.problem, split_name)))
            out[f"{split_name}_loss"] = loss
            out[f"{split_name}_{sname}"] = sc
        return out

    def load_state(self, arrays: dict[str, np.ndarray]) -> None:
        """Copy parameters and buffers, by name, into the model in place (`arrays` may be
        host arrays on the GPU backend); the optimizer state is left as it is."""
        for name, value in arrays.items():
            target = self.store.params.get(name)
            if target is None:
                target = self.store.buffers[name]
            target[...] = self.backend.asarray(value)


def integer_field(name: str, value: Any, low: int) -> int:
    """`value` as an int >= `low`, or the CLI's words for why not (`epochs="5"` too)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    if value < low:
        raise ConfigError(f"{name} must be >= {low}, got {value}")
    return int(value)


def number_field(name: str, value: Any, rule: str, ok: Callable[[float], bool]) -> float:
    """`value` as a float if it is a finite number that passes `ok`, or the CLI's words for
    why not."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")
    if not ok(float(value)):
        raise ConfigError(f"{name} must be {rule}, got {value:g}")
    return float(value)


def _check_finite(what: str, a: np.ndarray, columns: tuple[str, ...]) -> None:
    """A ConfigError naming the first NaN or infinity in `a`: its row, and its column (and
    the column's name) for a table."""
    if a.dtype.kind not in "fc" or np.isfinite(a.sum()):
        return  # a sum is finite only if every term is (a non-finite one may be overflow)
    bad = np.argwhere(~np.isfinite(a))
    if not len(bad):
        return
    at = tuple(int(i) for i in bad[0])
    v = a[at]
    kind = "NaN" if np.isnan(v) else "inf" if v.real > 0 else "-inf"
    where = f"row {at[0]}"
    if len(at) == 2:
        named = f" ('{columns[at[1]]}')" if at[1] < len(columns) else ""
        where += f", column {at[1]}{named}"
    elif len(at) > 2:
        where += f", element {at[1:]}"
    raise ConfigError(f"{what}: {kind} in {where}")


def _on_device(comm: Any) -> bool:
    """Whether a data-parallel communicator sums device arrays (NCCL)."""
    from aicf_induct.runtime.parallel import NcclCommunicator

    return isinstance(comm, NcclCommunicator)


def _executor(backend: Backend, graph: Graph, values: dict[str, np.ndarray] | None, loss: str,
              config: TrainConfig, rank: int = 0) -> Executor:
    """An executor on `backend`: the NumPy path, or fused kernels on the GPU; parameters are
    stored in the graph's own dtype either way. `rank`: this rank's of a data-parallel run
    (its dropout masks are its own)."""
    store = store_for(graph, values, seed=config.seed, xp=backend.xp, check=False)
    return Executor(graph, store, loss=loss, label_smoothing=config.label_smoothing,
                    seed=config.seed, device=backend.device, xp=backend.xp,
                    registry=backend.registry, fuse=backend.is_gpu, precision=config.precision,
                    rank=rank)
