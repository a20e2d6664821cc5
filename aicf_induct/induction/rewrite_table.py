"""The rewrite history's aggregate table: per level and cell of conditions, the effect's
count, mean and variance, guard verdicts and the options used most. It is what the knowledge
pack ships (`rewrites` in its header) and what `RewriteEffects` (rewrite_effects.py) learns
from; tables pool cell by cell, so a shipped pack's and a local warehouse's combine.

**Condition** of a decision: the trigger's kind (schedule, plateau, instability), the
regime (`overfit` when the generalisation gap (val − train) / train exceeds 0.10, as the rule
policy reads it, else `fit`), the task and the problem's size (`small` below 1,000 rows,
else `large`). Cells nest in three levels (`LEVELS`): the transform alone; × trigger kind ×
regime; × task × size. `*` stands for "any".
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

GAP_TOLERANCE = 0.10  # the rule policy's: a gap above it is overfitting
SMALL_ROWS = 1000
KEYS = ("trigger_kind", "regime", "task", "size")
LEVELS: tuple[tuple[str, ...], ...] = ((), ("trigger_kind", "regime"), KEYS)
TABLE_COLUMNS = ("level", "transform", *KEYS, "n", "mean", "var", "kept", "harm", "unstable",
                 "options")
ANY = "*"
MIN_VAR = 1e-3  # floor of s²: effects are relative changes, an sd under 0.03 is not believed
MIN_DF = 10  # degrees of freedom the pooled within-cell variance needs to be used


def regime(gap: float) -> str:
    return "overfit" if math.isfinite(gap) and gap > GAP_TOLERANCE else "fit"


def size(n_rows: float) -> str:
    if not math.isfinite(n_rows):
        return ANY
    return "small" if n_rows < SMALL_ROWS else "large"


def noise_variance(table: pd.DataFrame) -> float:
    """s² of rewrite_effects.py's docstring: the within-cell noise of an effect."""
    deepest = table[table["level"] == len(LEVELS) - 1]
    df = float((deepest["n"] - 1).clip(lower=0).sum())
    if df >= MIN_DF:
        return max(float((deepest["n"] * deepest["var"]).sum()) / df, MIN_VAR)
    top = table[table["level"] == 0]
    n = float(top["n"].sum())
    if n < 2:
        return MIN_VAR * 100  # no history to speak of: a wide prior noise (sd 0.32)
    mean = float((top["n"] * top["mean"]).sum()) / n
    second = float((top["n"] * (top["var"] + top["mean"] ** 2)).sum()) / n
    return max((second - mean ** 2) * n / (n - 1), MIN_VAR)


def conditions_of(history: pd.DataFrame) -> pd.DataFrame:
    """The history with its condition columns (regime, size; task filled)."""
    h = history.copy()
    h["regime"] = [regime(float(g)) for g in h["gap"]]
    h["size"] = [size(float(n)) for n in h["n_rows"]]
    h["task"] = h["task"].fillna("").replace("", ANY).astype(str)
    return h


def aggregate(history: pd.DataFrame) -> pd.DataFrame:
    """Per level and cell: n, mean and (population) variance of the effect, guard verdicts,
    and at level 0 the options used most (ties: the first in sorted order)."""
    h = conditions_of(history)
    h = h[np.isfinite(h["effect"].astype(float))]
    rows = []
    for lvl, keys in enumerate(LEVELS):
        for key, g in h.groupby(["transform", *keys], sort=True):
            key = key if isinstance(key, tuple) else (key,)
            cell = dict(zip(["transform", *keys], key, strict=True))
            e = g["effect"].to_numpy(float)
            v = g["verdict"].astype(str)
            opts = g["options"].astype(str).value_counts()
            rows.append({"level": lvl, **{k: str(cell.get(k, ANY)) for k in KEYS},
                         "transform": str(cell["transform"]), "n": len(e),
                         "mean": float(e.mean()), "var": float(e.var()),
                         "kept": int((v == "keep").sum()), "harm": int((v == "harm").sum()),
                         "unstable": int((v == "unstable").sum()),
                         "options": str(sorted(opts[opts == opts.max()].index)[0])
                         if lvl == 0 else None})
    return _typed(pd.DataFrame(rows, columns=list(TABLE_COLUMNS)))


def _typed(t: pd.DataFrame) -> pd.DataFrame:
    t = t.astype({"level": "int64", "n": "int64", "mean": float, "var": float, "kept": "int64",
                  "harm": "int64", "unstable": "int64"})
    return t.sort_values(["level", "transform", *KEYS]).reset_index(drop=True)


def combine_tables(*tables: pd.DataFrame) -> pd.DataFrame:
    """Cell-wise pooling of aggregate tables (counts add; means and variances combine as
    one sample would give; options: the first table's that has them)."""
    frames = [t for t in tables if t is not None and len(t)]
    if not frames:
        return _typed(pd.DataFrame(columns=list(TABLE_COLUMNS)))
    allrows = pd.concat(frames, ignore_index=True)
    out = []
    for _, g in allrows.groupby(["level", "transform", *KEYS], sort=True):
        n = g["n"].to_numpy(float)
        mean = float((n * g["mean"]).sum() / n.sum())
        second = float((n * (g["var"] + g["mean"] ** 2)).sum() / n.sum())
        first = g.iloc[0]
        opts = next((o for o in g["options"] if isinstance(o, str)), None)
        out.append({**{c: first[c] for c in ("level", "transform", *KEYS)}, "n": int(n.sum()),
                    "mean": mean, "var": max(second - mean ** 2, 0.0),
                    "kept": int(g["kept"].sum()), "harm": int(g["harm"].sum()),
                    "unstable": int(g["unstable"].sum()), "options": opts})
    return _typed(pd.DataFrame(out, columns=list(TABLE_COLUMNS)))


def records(table: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in r.items()} for r in table.to_dict("records")]


def table_records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The table as JSON-ready rows (NaN as null)."""
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
            for r in records(table)]


class DamagedRow(ValueError):
    """A row of a table read back whose values no table holds (its message names it)."""


def table_from_records(rows: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """A table read back from JSON rows (a pack's header); a `DamagedRow` names the first row
    whose values no table holds: a count below 1 made every estimate divide by zero, a
    missing or NaN variance turned it NaN, and options that are no JSON object were passed
    to a transform."""
    table = _typed(pd.DataFrame(list(rows), columns=list(TABLE_COLUMNS)))
    for i, r in enumerate(records(table)):
        why = _row_problem(r)
        if why:
            raise DamagedRow(f"row {i} ({r['transform']}): {why}")
    return table


def _row_problem(r: Mapping[str, Any]) -> str | None:
    if r["level"] not in range(len(LEVELS)) or not isinstance(r["transform"], str):
        return f"level {r['level']!r} or transform {r['transform']!r}"
    if r["n"] < 1 or min(r["kept"], r["harm"], r["unstable"]) < 0:
        return f"count n={r['n']}, kept={r['kept']}, harm={r['harm']}, unstable={r['unstable']}"
    if not (math.isfinite(r["mean"]) and math.isfinite(r["var"]) and r["var"] >= 0):
        return f"mean {r['mean']!r} or variance {r['var']!r}"
    opts = r["options"]
    if opts is not None and not (isinstance(opts, float) and math.isnan(opts)):
        try:
            ok = isinstance(opts, str) and isinstance(json.loads(opts), dict)
        except ValueError:
            ok = False
        if not ok:
            return f"options {opts!r:.60} (a JSON object's text, or null)"
    return None
