"""The autotuner: time the applicable variants of a computation once per problem shape, keep
the fastest, and remember the choice across restarts, at a bounded cost.

`TunedRegistry` wraps a `KernelRegistry`: `select(q)` asks the tuner when more than one
variant applies. The tuner keys a choice by (op, direction + shape, dtype, device), asks
its `timer` for each candidate's time in microseconds (a variant that fails to run gets
infinity and is never chosen), and writes the measurements to its `store`, which the
caller passes in (`MemoryTuningStore` here; the warehouse's `kernel_tuning` table through
`warehouse.tuning_store`), so a later process on the same device times nothing.

A tuner never costs more than the work it tunes:
- a candidate whose `floor` (a lower bound on its time, from a cost model) is not under
  the best time so far cannot win, and is never run;
- the timer is told `Limit(us=...)`, ABANDON times the best so far, and stops timing a
  candidate once it is clearly slower;
- all tuning of one tuner (one process) shares a budget of `budget_s` seconds (default
  DEFAULT_BUDGET_S, or $AICF_TUNING_BUDGET_S); once spent, new shapes take their first
  candidate untimed, and a choice cut short is not stored (a later process finishes it);
- $AICF_TUNING_BUDGET_S=off turns tuning off: stored choices are ignored too, so every
  shape takes its first (default) candidate and results depend on nothing timed: a sweep
  repeats bit for bit whatever its processes (`run_sweep(repeatable=True)`, `tuning_off`);
- what it is tuning is said on stderr: one line for a labelled choice (the whole training
  step), one line per process for kernel variants, one when the budget runs out.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from aicf_induct.kernels.registry import REGISTRY, Kernel, KernelQuery, KernelRegistry

TuneKey = tuple[str, str, str, str]  # (op, shape_key, dtype, device)
DEFAULT_BUDGET_S = 10.0  # seconds of tuning a process, in all
BUDGET_ENV = "AICF_TUNING_BUDGET_S"
OFF = "off"  # BUDGET_ENV's value that turns tuning off, stored choices included
ABANDON = 1.25  # a candidate this many times slower than the best so far is clearly slower


@dataclass(frozen=True)
class Limit:
    """How far a timer may go with one candidate: stop (returning the time seen so far)
    once a launch is clearly over `us` microseconds, or after `seconds` in all."""

    us: float = math.inf
    seconds: float = math.inf


class Timer(Protocol):
    def __call__(self, kernel: Kernel, q: KernelQuery, limit: Limit, /) -> float:
        """Microseconds per launch of `kernel` on q's shapes."""
        ...


def _attr_text(v: Any) -> str:
    import json

    return json.dumps(v, sort_keys=True, separators=(",", ":")) if isinstance(v, dict) else str(v)


def shape_key(q: KernelQuery) -> str:
    """The problem a choice is valid for: direction, operand shapes and the attributes that
    change the work (private attrs, starting with '_', are per-instruction state)."""
    shapes = ";".join("x".join(str(d) for d in s) for s in q.shapes)
    attrs = ";".join(f"{k}={_attr_text(v)}" for k, v in sorted(q.attrs.items())
                     if not k.startswith("_"))
    return f"dir={q.direction};shapes={shapes};{attrs}"


@dataclass(frozen=True)
class Measurement:
    op: str
    shape_key: str
    dtype: str
    device: str
    kernel: str
    time_us: float
    chosen: bool
    variant: str = "{}"  # JSON of the variant's tuning parameters

    @property
    def key(self) -> TuneKey:
        return (self.op, self.shape_key, self.dtype, self.device)


class TuningStore(Protocol):
    """Where choices are kept; the caller passes one in (kernels/ import no storage)."""

    @property
    def where(self) -> str:
        """The place, for messages, and to share one tuner per place in a process."""
        ...

    def load(self, device: str) -> dict[TuneKey, str]:
        """The chosen kernel per key, for one device."""
        ...

    def save(self, rows: Iterable[Measurement]) -> None:
        ...


class MemoryTuningStore:
    """Choices kept in this process only."""

    def __init__(self) -> None:
        self.rows: list[Measurement] = []

    @property
    def where(self) -> str:
        return "memory, for this process only"

    def load(self, device: str) -> dict[TuneKey, str]:
        return {r.key: r.kernel for r in self.rows if r.chosen and r.device == device}

    def save(self, rows: Iterable[Measurement]) -> None:
        self.rows.extend(rows)


def tuning_is_off() -> bool:
    """Whether $AICF_TUNING_BUDGET_S says `off`."""
    return os.environ.get(BUDGET_ENV, "").strip().lower() == OFF


@contextmanager
def tuning_off() -> Iterator[None]:
    """Tuning off for what starts inside (the processes spawned inherit it): every shape
    takes its default kernel, so results depend on nothing timed."""
    old = os.environ.get(BUDGET_ENV)
    os.environ[BUDGET_ENV] = OFF
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(BUDGET_ENV, None)
        else:
            os.environ[BUDGET_ENV] = old


def default_budget() -> float:
    """$AICF_TUNING_BUDGET_S when set (seconds, >= 0; `off`: 0), else DEFAULT_BUDGET_S."""
    text = os.environ.get(BUDGET_ENV, "").strip()
    if not text:
        return DEFAULT_BUDGET_S
    if tuning_is_off():
        return 0.0
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # negative or NaN; inf means no cap
        from aicf_induct.errors import ConfigError

        raise ConfigError(f"{BUDGET_ENV}={text!r}: expected seconds, a number >= 0, "
                          f"or '{OFF}'")
    return value


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Autotuner:
    """Picks the fastest of several kernels per shape; asks `timer` at most once per key and
    candidate, within `budget_s` seconds of `clock` in all. With `budget_s` None and
    $AICF_TUNING_BUDGET_S=off it is off: no choice loaded, none timed, every key the
    default."""

    def __init__(self, timer: Timer, device: str, store: TuningStore | None = None,
                 variants: Mapping[str, str] | None = None, *, budget_s: float | None = None,
                 clock: Callable[[], float] = time.perf_counter,
                 say: Callable[[str], None] = _stderr) -> None:
        self.timer = timer
        self.device = device
        self.store: TuningStore = store if store is not None else MemoryTuningStore()
        self.variants = dict(variants or {})  # kernel name -> JSON of its parameters
        self.budget_s = default_budget() if budget_s is None else float(budget_s)
        if not self.budget_s >= 0:
            raise ValueError(f"budget_s must be >= 0, got {budget_s!r}")
        self.off = budget_s is None and tuning_is_off()
        self.clock, self.say = clock, say
        self.choices: dict[TuneKey, str] = {} if self.off else self.store.load(device)
        self.spent_s = 0.0  # seconds of tuning so far
        self.timed = 0  # timer calls made (tests check that a restart times nothing)
        self.pruned = 0  # candidates ruled out by their floor, never run
        self.abandoned = 0  # candidates stopped early as clearly slower
        self._said_kernels = self._said_spent = False

    @property
    def budget_left_s(self) -> float:
        return max(0.0, self.budget_s - self.spent_s)

    def choose(self, q: KernelQuery, candidates: list[Kernel]) -> Kernel:
        by_name = {k.name: k for k in candidates}
        name = self.pick(q.op, shape_key(q), q.dtype, list(by_name),
                         lambda n, limit: self.timer(by_name[n], q, limit))
        return by_name[name]

    def pick(self, op: str, key_text: str, dtype: str, names: list[str],
             time_us: Callable[[str, Limit], float], *,
             floors: Mapping[str, float] | None = None, label: str | None = None) -> str:
        """The fastest of `names` (variants of one computation, the default first) for this
        key: the stored choice when there is one, else each timed once by
        `time_us(name, limit)`, and the choice saved when every candidate got its say.
        `floors`: lower bounds in microseconds (a cost model); candidates are timed in
        rising floor order and one whose floor is not under the best so far is skipped.
        `label`: say on stderr what is being tuned (else one line per process)."""
        key = (op, key_text, dtype, self.device)
        known = self.choices.get(key)
        if known in names:
            return known
        if len(names) < 2:
            return names[0]
        if self.budget_left_s <= 0:  # spent: the default, untimed, kept for this process
            self._note_spent()
            self.choices[key] = names[0]
            return names[0]
        floor = {n: max(0.0, float((floors or {}).get(n, 0.0))) for n in names}
        order = sorted(range(len(names)), key=lambda i: (floor[names[i]], i))
        self._announce(label, names)
        times: dict[str, float] = {}
        complete = True
        start = self.clock()
        for i in order:
            n = names[i]
            best = min(times.values(), default=math.inf)
            if floor[n] >= best:  # cannot win: never run
                self.pruned += 1
                continue
            left = self.budget_s - self.spent_s - (self.clock() - start)
            if left <= 0:
                complete = False
                break
            t = self._time(n, time_us, Limit(us=best * ABANDON, seconds=left))
            if t > best * ABANDON and math.isfinite(t):
                self.abandoned += 1
            times[n] = t
        self.spent_s += self.clock() - start
        if self.budget_left_s <= 0:  # the last candidate's timing may have been cut short
            complete = False
            self._note_spent()
        finite = [n for n in names if math.isfinite(times.get(n, math.inf))]
        chosen = min(finite, key=lambda n: (times[n], names.index(n))) if finite else names[0]
        self.choices[key] = chosen
        if complete:
            self.store.save(Measurement(op, key_text, dtype, self.device, n, t, n == chosen,
                                        self.variants.get(n, "{}"))
                            for n, t in times.items())
        return chosen

    def _note_spent(self) -> None:
        if self._said_spent:
            return
        self._said_spent = True
        if self.off:
            self.say(f"autotune: off ({BUDGET_ENV}={OFF}): every shape uses its default "
                     "kernel, whatever is stored")
        else:
            self.say(f"autotune: the tuning budget of {self.budget_s:g} s is spent; shapes "
                     f"not yet tuned use their default kernel (set {BUDGET_ENV} for more)")

    def _announce(self, label: str | None, names: list[str]) -> None:
        budget = f"at most {self.budget_left_s:.3g} s of the tuning budget"
        if label is not None:
            self.say(f"autotune: timing {label} ({', '.join(names)}; {budget})")
        elif not self._said_kernels:
            self._said_kernels = True
            self.say(f"autotune: timing kernel variants for new shapes on {self.device} "
                     f"(once per shape, kept in {self.store.where}; {budget})")

    def _time(self, name: str, time_us: Callable[[str, Limit], float], limit: Limit) -> float:
        self.timed += 1
        try:
            t = float(time_us(name, limit))
        except Exception as err:  # a variant that cannot run here is simply never chosen,
            if "illegal" in str(err).lower():  # unless it broke the device for everyone
                raise
            return math.inf
        return t if t >= 0 and math.isfinite(t) else math.inf


class TunedRegistry(KernelRegistry):
    """A registry view that lets an autotuner choose among applicable variants; kernels
    registered on the base registry (later ones too) are seen here."""

    def __init__(self, tuner: Autotuner, base: KernelRegistry = REGISTRY) -> None:
        super().__init__()
        self.tuner = tuner
        self.base = base

    def register(self, kernel: Kernel) -> Kernel:
        return self.base.register(kernel)

    def candidates(self, q: KernelQuery) -> list[Kernel]:
        return self.base.candidates(q)

    def select(self, q: KernelQuery) -> Kernel:
        found = self.candidates(q)
        real = [k for k in found if k.priority >= 0] or found  # references only as fallback
        if len(real) > 1:
            return self.tuner.choose(q, real)
        return real[0] if real else self.base.select(q)
