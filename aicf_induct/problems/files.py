"""A user's CSV or Parquet file with a named target column.

The file's columns are checked strictly: a free-text, constant, all-missing or date column
is an error naming the column (leave it out with `&drop=COL`), because silently training
without a column the user gave is worse than asking. Row identifiers (rownames, id,
"Unnamed: 0", a 1..n counter) are left out with a note. A `.csv` whose header holds no comma
but semicolons (or tabs) is read with those between values, as spreadsheets export it where
the comma is the decimal mark's neighbour.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from aicf_induct.errors import DataError
from aicf_induct.problems.preprocess import (
    Table,
    TargetError,
    Task,
    UnknownDropColumn,
    is_numeric,
)

CLASSIFICATION_MAX_LEVELS = 20  # an integer target with at most this many values is a class
# The floats written, to the last bit: pandas 2's default CSV parser is off by an ulp at times
# (a different problem id than the same data from Parquet); pandas 3 is exact and deprecates
# the option.
_PANDAS_2 = int(pd.__version__.split(".")[0]) < 3


def read_frame(path: str | Path) -> pd.DataFrame:
    """The file as a DataFrame; every failure is a one-line `DataError` naming the file."""
    p = Path(path)
    if p.is_dir():
        raise DataError(f"{p}: a directory, not a file")
    if not p.is_file():
        raise DataError(f"{p}: no such file")
    if p.stat().st_size == 0:
        raise DataError(f"{p}: the file is empty")
    suffix = p.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            frame = pd.read_parquet(p)
        elif suffix in (".csv", ".tsv", ".txt"):
            sep = "\t" if suffix == ".tsv" else separator(p)
            frame = pd.read_csv(p, sep=sep, float_precision="round_trip") if _PANDAS_2 \
                else pd.read_csv(p, sep=sep)
        else:
            raise DataError(f"{p}: unsupported format '{suffix}' (use .csv, .tsv or .parquet)")
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError,
            OSError, ValueError) as err:
        if isinstance(err, pd.errors.EmptyDataError):
            raise DataError(f"{p}: the file is empty") from None
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DataError(f"{p}: cannot read it ({first})") from None
    if frame.shape[0] == 0:
        raise DataError(f"{p}: the file has a header but no rows")
    return frame


def separator(path: Path) -> str:
    """"," unless the header line holds none and holds ";" or a tab (then that one)."""
    with path.open("rb") as f:
        header = f.readline()
    if b"," not in header:
        for sep in (b";", b"\t"):
            if sep in header:
                return sep.decode()
    return ","


def infer_task(y: pd.Series) -> Task:
    """Strings and booleans are classes; integers with few values too; the rest regression."""
    present = y.dropna()
    if not is_numeric(present):
        return "classification"
    values = present.to_numpy(dtype=float)
    integral = bool((values == values.round()).all())
    if integral and present.nunique() <= CLASSIFICATION_MAX_LEVELS:
        return "classification"
    return "regression"


def file_table(name: str, path: str | Path, target: str | None, task: Task | None = None,
               drop: tuple[str, ...] = ()) -> Table:
    frame = read_frame(path)
    if not target:
        raise TargetError(f"{path}: name the target column with ?target=COL "
                        f"(columns: {', '.join(map(str, frame.columns))})")
    if target not in frame.columns:
        raise TargetError(f"{path}: no column '{target}' to use as the target "
                        f"(columns: {', '.join(map(str, frame.columns))})")
    unknown = [c for c in drop if c not in frame.columns]
    if unknown:
        raise UnknownDropColumn(f"{path}: cannot drop unknown column '{unknown[0]}'")
    y = frame[target]
    if y.notna().sum() == 0:
        raise TargetError(f"{path}: target '{target}' has no values")
    features = frame.drop(columns=[target, *drop])
    return Table(name=name, source="file", frame=features, y=y,
                 task=task or infer_task(y), target=target,
                 dropped=tuple((c, "dropped by request") for c in drop), origin=str(path))
