"""Many training runs in one process, interleaved an epoch at a time, so that one engine
(induction.sweep_gpu) keeps a GPU busy with many small models.

A `ModelRun` is one run: a `Trainer`, started and logged through `runs.start_run`, whose
bookkeeping (best state, results, early stopping, the end) is the Trainer's own
(`begin_fit`, `end_epoch`, `end_fit`), so a run trained here logs the rows a run trained
alone logs. `launch()` queues the run's next epoch, `collect()` takes its results:

- on the GPU (`runtime.epoch_gpu.DeviceEpochs`) an epoch is queued on the run's own CUDA
  stream with no host synchronisation: the batches are drawn on the device from the run's
  own seeded order (the order `BatchStream` gives the solo run), each step is one CUDA graph
  replay, per-step statistics go to a device buffer, read back once, at `collect`;
- on the CPU (`HostEpochs`) `launch` runs the epoch's steps through `Trainer.train_epoch`,
  as `Trainer.fit` does: the reference the GPU path is tested against, and what the engine's
  scheduling runs on where there is no GPU.

The time budget (`max_wall_s`) is checked per step on the CPU, as `fit` does, and before each
epoch on the GPU (an epoch, once queued, runs to its end). It is wall time from the run's
start, which the runs in flight share: a run that reaches its budget here has trained fewer
steps than it would alone, the one way its rows can differ from a solo run's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Protocol

from aicf_induct.runtime.runs import start_run
from aicf_induct.runtime.trainer import FitState, Trainer, TrainResult


class Epochs(Protocol):
    def launch(self, fit: FitState, epoch: int) -> None: ...
    def collect(self, fit: FitState, epoch: int) -> tuple[list[float], float, float]:
        """(train losses, val loss, val score) of the epoch launched last."""
        ...


class HostEpochs:
    """Epochs run at `launch`, step by step, exactly as `Trainer.fit` runs them."""

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer
        self._done: tuple[list[float], float, float] | None = None

    def launch(self, fit: FitState, epoch: int) -> None:
        tr = self.trainer
        losses = tr.train_epoch(fit, epoch)
        if fit.status == "timeout" and not losses:  # fit logs no epoch then
            self._done = (losses, 0.0, 0.0)
        else:
            self._done = (losses, *tr.evaluate(tr.problem.val))

    def collect(self, fit: FitState, epoch: int) -> tuple[list[float], float, float]:
        assert self._done is not None, "collect before launch"
        out, self._done = self._done, None
        return out


class ModelRun:
    """One run of many, driven from outside: `launch`, then `collect` until it says the run
    is over, then `finish` (or `abort` for an error or an interrupt)."""

    def __init__(self, trainer: Trainer, epochs: Callable[[], Epochs] | None = None) -> None:
        """Log the run's start, then set up its epochs (`epochs()`; default `HostEpochs`):
        a run that fails to set up is logged as failed, as `Trainer.fit` logs it."""
        self.trainer = trainer
        self.logged = start_run(trainer)
        self._stream: Any = None
        try:
            self.epochs = epochs() if epochs is not None else HostEpochs(trainer)
            # the GPU run's own stream, current for everything of the run
            self._stream = getattr(self.epochs, "stream", None)
            with self._on():
                self.fit = trainer.begin_fit(self.logged)
        except BaseException as err:
            self.logged.abort(err)
            raise
        self.epoch = 0
        self._read_final: Callable[[], dict[str, float]] | None = None  # once queued

    def _on(self) -> Any:
        return self._stream if self._stream is not None else contextlib.nullcontext()

    @property
    def run_id(self) -> str:
        return self.trainer.run_id

    def launch(self) -> bool:
        """Queue the next epoch; False when none is left to run (the run is over)."""
        cfg = self.trainer.config
        if self.epoch >= cfg.epochs:
            return False
        if cfg.max_wall_s and self.logged.elapsed() >= cfg.max_wall_s:
            self.fit.status = "timeout"
            return False
        with self._on():
            self.epochs.launch(self.fit, self.epoch)
        return True

    def collect(self) -> bool:
        """Log the epoch launched last; True when the run is over."""
        with self._on():
            losses, val_loss, val_score = self.epochs.collect(self.fit, self.epoch)
            if self.fit.status == "timeout" and not losses:
                return True
            stop = self.trainer.end_epoch(self.fit, self.epoch, losses, val_loss, val_score)
        self.epoch += 1
        return stop

    def advance(self) -> bool:
        """Collect the epoch in flight and launch the next; True when the run is over. Where
        the epochs can queue the run's final evaluation (the GPU's), the last epoch's
        advance queues it and says False; the next says True and `finish` reads it, so the
        host waits for neither."""
        if self._read_final is not None:
            return True
        over = self.collect() or not self.launch()
        queue = getattr(self.epochs, "launch_final", None)
        if over and queue is not None:
            with self._on():
                queue(self.fit)
            self._read_final = self.epochs.collect_final  # type: ignore[attr-defined]
            return False
        return over

    def finish(self) -> TrainResult:
        """Restore the best state, log the final metrics and the run's end."""
        with self._on():
            if self._read_final is not None:
                return self.trainer.end_fit(self.fit, self._read_final())
            return self.trainer.end_fit(self.fit)

    def abort(self, err: BaseException) -> None:
        """End the run `failed` (an error) or `interrupted` (Ctrl-C), logged, once."""
        self.logged.abort(err)


def model_run(trainer: Trainer, data: Any = None) -> ModelRun:
    """A started run of `trainer`: on the GPU its epochs are queued on a stream of its own
    (`data`: the problem's splits on the device, `epoch_gpu.DeviceData`, shared by its runs);
    on the CPU they run in `launch`."""
    if not trainer.backend.is_gpu:
        return ModelRun(trainer)
    from aicf_induct.runtime.epoch_gpu import DeviceData, DeviceEpochs

    shared = data if data is not None else DeviceData(trainer.problem)
    return ModelRun(trainer, lambda: DeviceEpochs(trainer, shared))


def train_many(trainers: list[Trainer], data: dict[str, Any] | None = None
               ) -> list[TrainResult | BaseException]:
    """Train `trainers` interleaved (a round robin of epochs) until each ends: each one's
    result, or the error that ended it `failed` (the others go on). `data`: the problems'
    splits on the device by problem id, shared (filled here when given)."""
    data = {} if data is None else data
    out: list[TrainResult | BaseException | None] = [None] * len(trainers)
    live: list[tuple[int, ModelRun]] = []
    for i, tr in enumerate(trainers):
        run = None
        try:
            shared = data.get(tr.problem.problem_id)
            if tr.backend.is_gpu and shared is None:
                from aicf_induct.runtime.epoch_gpu import DeviceData

                shared = data[tr.problem.problem_id] = DeviceData(tr.problem)
            run = model_run(tr, shared)
            if run.launch():
                live.append((i, run))
            else:
                out[i] = run.finish()
        except Exception as err:
            if run is not None:
                run.abort(err)
            out[i] = err
    while live:
        still = []
        for i, run in live:
            try:
                if not run.advance():
                    still.append((i, run))
                    continue
                out[i] = run.finish()
            except Exception as err:
                run.abort(err)
                out[i] = err
        live = still
    return [r for r in out if r is not None]
