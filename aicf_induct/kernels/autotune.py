"""The autotuner: time every applicable kernel variant once per problem shape, keep the
fastest, and remember the choice across restarts.

`TunedRegistry` wraps a `KernelRegistry`: `select(q)` asks the tuner when more than one
variant applies. The tuner keys a choice by (op, direction + shape, dtype, device), asks
its `timer` for each candidate's time in microseconds (a variant that fails to run gets
infinity and is never chosen), and writes every measurement to its `store`. A
`WarehouseTuningStore` keeps them in the warehouse's `kernel_tuning` table, so a later
process on the same device loads the choices and times nothing.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from aicf_induct.kernels.registry import REGISTRY, Kernel, KernelQuery, KernelRegistry

Timer = Callable[[Kernel, KernelQuery], float]  # microseconds per launch
TuneKey = tuple[str, str, str, str]  # (op, shape_key, dtype, device)


def _attr_text(v: Any) -> str:
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
    def load(self, device: str) -> dict[TuneKey, str]:
        """The chosen kernel per key, for one device."""
        ...

    def save(self, rows: Iterable[Measurement]) -> None:
        ...


class MemoryTuningStore:
    """Choices kept in this process only."""

    def __init__(self) -> None:
        self.rows: list[Measurement] = []

    def load(self, device: str) -> dict[TuneKey, str]:
        return {r.key: r.kernel for r in self.rows if r.chosen and r.device == device}

    def save(self, rows: Iterable[Measurement]) -> None:
        self.rows.extend(rows)


class WarehouseTuningStore:
    """Measurements as rows of the warehouse's `kernel_tuning` table (Parquet parts; read
    back with pyarrow alone, so the GPU machine needs no DuckDB)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def load(self, device: str) -> dict[TuneKey, str]:
        import pyarrow.parquet as pq

        from warehouse.layout import visible_parts

        best: dict[TuneKey, tuple[Any, str]] = {}
        for part in visible_parts(self.root, "kernel_tuning"):
            t = pq.read_table(part, columns=["op", "shape_key", "dtype", "device", "kernel",
                                             "chosen", "measured_at"]).to_pylist()
            for r in t:
                if not r["chosen"] or r["device"] != device:
                    continue
                key = (r["op"], r["shape_key"], r["dtype"], r["device"])
                if key not in best or r["measured_at"] >= best[key][0]:
                    best[key] = (r["measured_at"], r["kernel"])
        return {k: v[1] for k, v in best.items()}

    def save(self, rows: Iterable[Measurement]) -> None:
        from warehouse.writer import Writer

        now = datetime.now(UTC)
        with Writer(self.root) as w:
            for r in rows:
                w.append("kernel_tuning", {
                    "op": r.op, "shape_key": r.shape_key, "dtype": r.dtype,
                    "device": r.device, "kernel": r.kernel, "variant": r.variant,
                    "time_us": r.time_us if math.isfinite(r.time_us) else None,
                    "chosen": r.chosen, "measured_at": now})


class Autotuner:
    """Picks the fastest of several kernels per shape; asks `timer` at most once per key."""

    def __init__(self, timer: Timer, device: str, store: TuningStore | None = None,
                 variants: Mapping[str, str] | None = None) -> None:
        self.timer = timer
        self.device = device
        self.store: TuningStore = store if store is not None else MemoryTuningStore()
        self.variants = dict(variants or {})  # kernel name -> JSON of its parameters
        self.choices: dict[TuneKey, str] = self.store.load(device)
        self.timed = 0  # timer calls made (tests check that a restart times nothing)

    def choose(self, q: KernelQuery, candidates: list[Kernel]) -> Kernel:
        by_name = {k.name: k for k in candidates}
        name = self.pick(q.op, shape_key(q), q.dtype, list(by_name),
                         lambda n: self.timer(by_name[n], q))
        return by_name[name]

    def pick(self, op: str, key_text: str, dtype: str, names: list[str],
             time_us: Callable[[str], float]) -> str:
        """The fastest of `names` (variants of one computation) for this key: the stored
        choice when there is one, else each timed once by `time_us(name)` and the choice
        saved. Kernel variants come through `choose`; whole-step variants call this."""
        key = (op, key_text, dtype, self.device)
        known = self.choices.get(key)
        if known in names:
            return known
        times = [self._time(functools.partial(time_us, n)) for n in names]
        best = min(range(len(names)), key=lambda i: (times[i], i))
        chosen = names[best] if math.isfinite(times[best]) else names[0]
        self.choices[key] = chosen
        self.store.save(Measurement(op, key_text, dtype, self.device, n, t, n == chosen,
                                    self.variants.get(n, "{}"))
                        for n, t in zip(names, times, strict=True))
        return chosen

    def _time(self, measure: Callable[[], float]) -> float:
        self.timed += 1
        try:
            t = float(measure())
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
