"""The autotuner's choices in the warehouse: `kernels.autotune.TuningStore` over the
`kernel_tuning` table (Parquet parts, read back with pyarrow, no SQL; importing the
`warehouse` package still needs DuckDB). The runtime's caller (the CLI) makes one per
warehouse and passes it in. The warehouse knows table schemas, not training: it imports
nothing of the kernels, and a measurement is anything with the row's fields."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from warehouse.arrow import read_table
from warehouse.writer import Writer

TABLE = "kernel_tuning"
TuneKey = tuple[str, str, str, str]  # (op, shape_key, dtype, device), as the autotuner keys


class Measurement(Protocol):
    """One timed candidate (the autotuner's `Measurement`)."""

    @property
    def op(self) -> str: ...
    @property
    def shape_key(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def kernel(self) -> str: ...
    @property
    def variant(self) -> str: ...
    @property
    def time_us(self) -> float: ...
    @property
    def chosen(self) -> bool: ...


class WarehouseTuningStore:
    """Measurements as rows of `kernel_tuning` under `root`; the latest choice per key wins."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    @property
    def where(self) -> str:
        return f"{self.root}/{TABLE}"

    def load(self, device: str) -> dict[TuneKey, str]:
        best: dict[TuneKey, tuple[Any, str]] = {}
        # a device's first run finds no warehouse yet: nothing measured, nothing to refuse
        rows = read_table(self.root, TABLE, ["op", "shape_key", "dtype", "device", "kernel",
                                             "chosen", "measured_at"],
                          missing_ok=True).to_pylist()
        for r in rows:  # a damaged part is skipped with one warning, as every reader does
            if not r["chosen"] or r["device"] != device:
                continue
            key = (r["op"], r["shape_key"], r["dtype"], r["device"])
            if key not in best or r["measured_at"] >= best[key][0]:
                best[key] = (r["measured_at"], r["kernel"])
        return {k: v[1] for k, v in best.items()}

    def save(self, rows: Iterable[Measurement]) -> None:
        now = datetime.now(UTC)
        with Writer(self.root) as w:
            for r in rows:
                w.append(TABLE, {
                    "op": r.op, "shape_key": r.shape_key, "dtype": r.dtype,
                    "device": r.device, "kernel": r.kernel, "variant": r.variant,
                    "time_us": r.time_us if math.isfinite(r.time_us) else None,
                    "chosen": r.chosen, "measured_at": now})

