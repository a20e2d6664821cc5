"""Candidate traits and their per-problem effects: what the miner correlates with problems.

A **trait** is a yes/no property of a candidate, read from its IR patterns and recipe:
`norm.layernorm > 0` (a count or flag present), `depth >= 3` (a numeric pattern at or above
the median of its distinct values), `optimizer = adamw`. Traits that split the candidates
the same way (`op.relu > 0`, `act.relu > 0`, `motif.linear>relu > 0`), or as exact
complements, are one trait; the first name in `PRIORITY` order is kept.

A trait's **effect** on a problem is the mean normalized score of the candidates that have
it minus that of the candidates that do not (scores averaged over seeds first).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from aicf_induct.induction.meta_dataset import PATTERN_PREFIX

NUMERIC_RECIPE = ("lr", "weight_decay", "batch_size")
# Names earlier here win among traits that split the candidates alike.
PRIORITY = ("depth", "width.max", "width.", "act.", "norm.", "residual.", "dropout.", "lr",
            "weight_decay", "batch_size", "optimizer", "params.", "hidden_layers", "op.", "nodes",
            "motif.")
LATE = ("norm.count", "norm.placement", "act.kinds")  # summaries: the specific name wins


@dataclass(frozen=True)
class Trait:
    name: str  # e.g. "norm.layernorm > 0"
    column: str  # candidate-table column, e.g. "p.norm.layernorm"
    op: str  # ">", ">=" or "="
    value: str  # threshold (a number) or category, as text

    def holds(self, cands: pd.DataFrame) -> np.ndarray:
        """Which rows of a candidate table have this trait."""
        col = cands[self.column]
        if self.op == "=":
            return np.asarray(col.astype(str) == self.value)
        x = col.to_numpy(float)
        thr = float(self.value)
        return np.asarray(x > thr if self.op == ">" else x >= thr)


def _short(column: str) -> str:
    return column[len(PATTERN_PREFIX):] if column.startswith(PATTERN_PREFIX) else column


def _priority(name: str) -> int:
    if name.startswith(LATE):
        return len(PRIORITY)
    return next((i for i, p in enumerate(PRIORITY) if name.startswith(p)), len(PRIORITY))


def candidate_traits(cands: pd.DataFrame, min_candidates: int = 2) -> list[Trait]:
    """The distinct traits of a candidate table (`meta_dataset.candidate_table`) that at
    least `min_candidates` candidates have and at least as many lack."""
    found: list[Trait] = []
    numeric = [c for c in cands.columns if c.startswith(PATTERN_PREFIX)] + [
        c for c in NUMERIC_RECIPE if c in cands.columns]
    for col in numeric:
        values = np.unique(cands[col].to_numpy(float)[np.isfinite(cands[col].to_numpy(float))])
        if len(values) < 2:
            continue
        if values[0] == 0:
            found.append(Trait(f"{_short(col)} > 0", col, ">", "0"))
        if len(values) >= 3 or values[0] != 0:
            thr = values[values >= np.median(values)][0]
            thr = thr if thr > values[0] else values[1]
            found.append(Trait(f"{_short(col)} >= {thr:.3g}", col, ">=", repr(float(thr))))
    if "optimizer" in cands.columns and cands["optimizer"].nunique() > 1:
        found += [Trait(f"optimizer = {v}", "optimizer", "=", str(v))
                  for v in sorted(cands["optimizer"].astype(str).unique())]
    found.sort(key=lambda t: (_priority(t.name), t.name))
    out: list[Trait] = []
    seen: set[bytes] = set()
    for t in found:
        has = t.holds(cands)
        if min(has.sum(), (~has).sum()) < min_candidates:
            continue
        key = (has if not has[0] else ~has).tobytes()  # a complement is the same split
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out


def trait_matrix(cands: pd.DataFrame, traits: list[Trait]) -> np.ndarray:
    """(candidates, traits) 0/1 matrix."""
    return np.stack([t.holds(cands) for t in traits], axis=1).astype(float)


def effects(y: np.ndarray, has: np.ndarray) -> np.ndarray:
    """Per-problem trait effects. y: (..., P, C) scores with NaN where unscored; has:
    (C, T) 0/1. Returns (..., P, T): mean score with the trait minus mean without (NaN
    where a side has no scored candidate)."""
    valid = np.isfinite(y).astype(float)
    yz = np.where(np.isfinite(y), y, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_with = (yz @ has) / (valid @ has)
        mean_without = (yz @ (1 - has)) / (valid @ (1 - has))
    return np.asarray(mean_with - mean_without)
