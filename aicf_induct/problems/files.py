"""A user's CSV or Parquet file with a named target column.

The file's columns are checked strictly: a free-text, constant, all-missing, date, time or
duration column (a Parquet timestamp, date, time or duration, or a text column of ISO dates
such as 2024-03-01 in a CSV, a Parquet file or a DataFrame) is an error naming the column
(leave it out with `&drop=COL`), because silently training without a column the user gave
is worse than asking; so is a header naming one column twice or holding a control character
(a NUL byte), and a nested or binary target. Row identifiers (rownames, id, "Unnamed: 0", a
1..n counter) are left out with a note. A `.csv` whose header holds no comma but semicolons
(or tabs) is read with those between values, as spreadsheets
export it where the comma is the decimal mark (a column of numbers written "0,5" is read as
numbers). Parquet decimals are read as floats, and a text column whose every value is a number
(a Parquet string column, a DataFrame's object column) as numbers, as a CSV's is.
"""

from __future__ import annotations

import bz2
import csv
import dataclasses
import decimal
import gzip
import lzma
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from aicf_induct.errors import DataError
from aicf_induct.file_kinds import special_file
from aicf_induct.problems.preprocess import (
    Table,
    TargetError,
    Task,
    UnknownDropColumn,
    check_row_count,
    is_numeric,
    target_issue,
)

CLASSIFICATION_MAX_LEVELS = 20  # an integer target with at most this many values is a class
# The floats written, to the last bit: pandas 2's default CSV parser is off by an ulp at times
# (a different problem id than the same data from Parquet); pandas 3 is exact and deprecates
# the option.
_PANDAS_2 = int(pd.__version__.split(".")[0]) < 3
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # no column name holds one but by mistake
# a CSV cell that is a date, or a date and time, in ISO 8601 (what a date column exports as)
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?")


def read_frame(path: str | Path) -> pd.DataFrame:
    """The file as a DataFrame; every failure is a one-line `DataError` naming the file."""
    p = Path(path)
    if p.is_dir():
        raise DataError(f"{p}: a directory, not a file")
    special = special_file(p)
    if special:
        raise DataError(f"{p}: not a regular file ({special})")
    if not p.is_file():
        raise DataError(f"{p}: no such file")
    if p.stat().st_size == 0:
        raise DataError(f"{p}: the file is empty")
    suffix = _format_suffix(p)
    try:
        if suffix in (".parquet", ".pq"):
            frame = pd.read_parquet(p)
            if any(n is not None for n in frame.index.names):
                # a named index (pandas' to_parquet of an indexed frame) is a column the
                # file holds: it was dropped as row labels, and `target=` could not name it
                frame = frame.reset_index()
            frame = _as_read(frame)  # its decimals, and ISO-date text as dates
        elif suffix in (".csv", ".tsv", ".txt"):
            sep = "\t" if suffix == ".tsv" else separator(p)
            _check_header(p, sep)
            longer = _longer_rows(p, sep)
            if longer == "trailing":
                # rows one field longer than the header, that field empty: a separator at
                # each line's end, not row names in the first field (pandas' reading)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", pd.errors.ParserWarning)
                    frame = _read_csv(p, sep, index_col=False)
            else:
                frame = _read_csv(p, sep)
                frame.attrs["row_names"] = longer == "row names"  # `file_table` says so
            if sep == ";":
                frame = _retyped(frame, _decimal_commas)
            frame = _retyped(frame, _iso_dates)
        else:
            raise DataError(f"{p}: unsupported format '{suffix}' (use .csv, .tsv or .parquet; "
                            f"a .csv or .tsv may be compressed: {', '.join(COMPRESSED)})")
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError,
            OSError, ValueError, EOFError) as err:  # (EOFError: a cut compressed file)
        if isinstance(err, pd.errors.EmptyDataError):
            raise DataError(f"{p}: the file is empty") from None
        if isinstance(err, UnicodeDecodeError):
            raise DataError(f"{p}: {_not_utf8(p)}") from None
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DataError(f"{p}: cannot read it ({first})") from None
    if frame.shape[0] == 0:
        raise DataError(f"{p}: the file has a header but no rows")
    return frame


# compressed text tables, by suffix (`x.csv.gz`): pandas reads them so too
COMPRESSED: dict[str, Callable[..., IO[Any]]] = {".gz": gzip.open, ".bz2": bz2.open,
                                                 ".xz": lzma.open}


def _format_suffix(path: Path) -> str:
    """The table format's suffix: `.csv` of `x.csv.gz` (a compressed one's is under it)."""
    suffix = path.suffix.lower()
    return Path(path.stem).suffix.lower() if suffix in COMPRESSED else suffix


def _open(path: Path, mode: str = "rb", **kwargs: Any) -> IO[Any]:
    """`path` opened as `open` would, decompressed where its suffix says so."""
    opener = COMPRESSED.get(path.suffix.lower())
    if opener is None:
        return path.open(mode, **kwargs)
    return opener(path, mode if "b" in mode else mode + "t", **kwargs)


def _not_utf8(path: Path) -> str:
    """Where a file stops being UTF-8 (pandas' offset is one of its read chunk's)."""
    with _open(path) as f:
        raw = f.read()
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        return (f"not UTF-8 text (byte 0x{raw[err.start]:02x} on line {line}): save it as "
                "UTF-8")
    return "not UTF-8 text: save it as UTF-8"


def _column_list(frame: pd.DataFrame) -> str:
    """The column names for a message: quoted where spaces at an end would not show."""
    return ", ".join(repr(c) if isinstance(c, str) and c != c.strip() else str(c)
                     for c in frame.columns)


def _read_csv(path: Path, sep: str, **kwargs: Any) -> pd.DataFrame:
    if _PANDAS_2:
        kwargs["float_precision"] = "round_trip"
    return pd.read_csv(path, sep=sep, **kwargs)


ROW_NAMES_NOTE = ("the rows have one field more than the header: the first field of each "
                  "was read as the row's name and left out (as R's write.table writes row "
                  "names)")


def _longer_rows(path: Path, sep: str) -> str | None:
    """How to read a file whose first row is longer than its header, which pandas reads as
    row names in the extra first field(s): "trailing" when every longer row is so by one
    empty field at its end (a separator at each line's end, not row names), "row names"
    when every row is one field longer (R's write.table), None when the first row is not
    longer. Any other shape is an error: pandas shifted the header onto the fields, or
    padded the rows shorter than the first, without a word. One pass over the rows."""
    with _open(path, "r", newline="", encoding="utf-8-sig") as f:
        rows = csv.reader(f, delimiter=sep)
        width = len(next(rows, []))
        first = next(rows, [])
        if len(first) <= width:
            return None
        if len(first) > width + 1:
            raise DataError(f"{path}: the first row after the header has {len(first)} fields "
                            f"and the header names {width} columns: name every column in the "
                            "header (or quote a value that holds the separator)")
        trailing = not any(v.strip() for v in first[width:])
        odd: tuple[int, int] | None = None  # the first row of another length, and its length
        for i, row in enumerate(rows, start=2):
            trailing = trailing and not any(v.strip() for v in row[width:])
            if odd is None and len(row) != width + 1 and any(v.strip() for v in row):
                odd = (i, len(row))
    if trailing:
        return "trailing"
    if odd is None:
        return "row names"
    raise DataError(f"{path}: row {odd[0]} after the header has {odd[1]} fields where the "
                    f"first has {width + 1} and the header names {width} columns: give every "
                    "row as many fields")


def _check_header(path: Path, sep: str) -> None:
    """A header naming a column twice is an error: pandas would rename the second `y.1`,
    and a second target column would quietly become a feature."""
    with _open(path, "r", newline="", encoding="utf-8-sig") as f:
        header = next(csv.reader(f, delimiter=sep), [])
    seen: dict[str, int] = {}
    for i, name in enumerate(header, start=1):
        if name in seen and name.strip():  # empty names are pandas' distinct "Unnamed: N"
            raise DataError(f"{path}: the header names column '{name}' twice (columns "
                            f"{seen[name]} and {i}): rename one")
        seen[name] = i


def _retyped(frame: pd.DataFrame,
             convert: Callable[[pd.Series, pd.Series], pd.Series | None]) -> pd.DataFrame:
    """`frame` with each non-numeric column that `convert(column, its present values)`
    gives a new one for replaced by it (copied only when one is)."""
    out = frame
    # the dtypes first: a column taken out and its missing values dropped, for each of
    # 100,000 numeric columns, took 23 s
    for name in [c for c, t in frame.dtypes.items() if not pd.api.types.is_numeric_dtype(t)]:
        col = frame[name]
        present = col.dropna()
        if present.empty:
            continue
        new = convert(col, present)
        if new is not None:
            out = frame.copy() if out is frame else out
            out[name] = new
    return out


def _decimal_commas(col: pd.Series, present: pd.Series) -> pd.Series | None:
    """A `;`-separated file's column written with a decimal comma ("0,126") as numbers; a
    column that does not read as numbers whole stays text."""
    text = present.astype(str)
    if not text.str.contains(",", regex=False).any():
        return None
    numbers = pd.to_numeric(text.str.replace(",", ".", regex=False), errors="coerce")
    return numbers.reindex(col.index) if numbers.notna().all() else None


def _iso_dates(col: pd.Series, present: pd.Series) -> pd.Series | None:
    """A CSV's (a Parquet file's, a DataFrame's) text column of ISO dates as datetimes, so
    that it is reported as dates (as a Parquet timestamp is) rather than as categories or
    free text; a pandas categorical stays (levels the user chose, as in `_text_numbers`)."""
    if col.dtype != object and not pd.api.types.is_string_dtype(col.dtype):
        return None
    for part in (present.iloc[:100], present):  # text is told by its first values, as there
        if not part.astype(str).map(lambda v: _ISO_DATE.fullmatch(v) is not None).all():
            return None
    return pd.to_datetime(col, errors="coerce", utc=True, format="ISO8601")


def _decimals_as_floats(col: pd.Series, present: pd.Series) -> pd.Series | None:
    """A Parquet DECIMAL column (databases' money and measures) as floats, not text."""
    if col.dtype == object and all(isinstance(v, decimal.Decimal) for v in present):
        return col.astype(float)
    return None


# the cells a column of numbers held as text or Python objects has (a bool is no number here:
# a column of them stays two levels, as a CSV's True/False does)
_NUMBER_CELLS = (str, int, float, decimal.Decimal, np.integer, np.floating)


def _text_numbers(col: pd.Series, present: pd.Series) -> pd.Series | None:
    """A text or object column whose every value is a number ("3.5", 7) as numbers, as a
    CSV reader reads such a column; any other column (a pandas categorical: levels the user
    chose; dates, which `to_numeric` would make nanoseconds) stays."""
    if col.dtype != object and not pd.api.types.is_string_dtype(col.dtype):
        return None
    # text is told by its first values: parsing a million words as numbers takes seconds
    for part in (present.iloc[:100], present):
        if col.dtype == object and not all(isinstance(v, _NUMBER_CELLS)
                                           and not isinstance(v, bool) for v in part):
            return None
        # from an array: NumPy's int64 or float64, never pandas' nullable Int64 ("string" cells)
        numbers = pd.Series(pd.to_numeric(part.to_numpy(dtype=object), errors="coerce"),
                            index=part.index)
        if not is_numeric(numbers) or numbers.isna().any():  # "?" in it, or a huge int
            return None
    return numbers.reindex(col.index)


def _as_read(frame: pd.DataFrame) -> pd.DataFrame:
    """A DataFrame given in memory (or read from Parquet) as `read_frame` gives the same table
    from a CSV: Decimal objects as floats (as Parquet's decimals) and ISO-date text as
    datetimes (as a CSV's).
    Decimal commas ("0,5") stay text, as in a comma-separated CSV; `frame_table` then reads
    text numbers as numbers for both."""
    return _retyped(_retyped(frame, _decimals_as_floats), _iso_dates)


def separator(path: Path) -> str:
    """"," unless the header line holds none and holds ";" or a tab (then that one)."""
    with _open(path) as f:
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
    table = frame_table(name, frame, target, task, drop, origin=str(path), source="file")
    if frame.attrs.get("row_names"):
        table = dataclasses.replace(table, notes=(*table.notes, ROW_NAMES_NOTE))
    return table


def frame_table(name: str, frame: pd.DataFrame, target: str | None, task: Task | None = None,
                drop: tuple[str, ...] = (), *, origin: str, source: str,
                in_memory: bool = False) -> Table:
    """A user's table (a file's frame, or one given in memory) with its target and dropped
    columns checked: the one way both reach `prepare`. `origin` names it in messages.
    `in_memory`: a DataFrame not read by `read_frame`, whose text columns are retyped here as
    a file's are there, so that it gives the problem (or the refusal) its CSV gives.

    The rows are renumbered 0..n-1 (a file's already are): the index is no data, a repeated
    label (as `pd.concat` leaves) must break no alignment, and a message's "data row" is the
    row's position, as in a file."""
    if isinstance(frame.columns, pd.MultiIndex):  # its names are tuples: no column to name
        raise DataError(f"{origin}: columns must be single-level names, not a MultiIndex "
                        f"({frame.columns.nlevels} levels, e.g. {frame.columns[0]!r}): flatten "
                        "them, e.g. df.columns = ['_'.join(map(str, c)) for c in df.columns]")
    if not all(isinstance(c, str) for c in frame.columns):  # pd.DataFrame(X)'s 0, 1, ...
        frame = frame.rename(columns=str)  # as a file's header would name them
    twice = frame.columns[frame.columns.duplicated()]
    if len(twice):  # a file's header is checked as read (`_check_header`); a frame here
        raise DataError(f"{origin}: column '{twice[0]}' appears twice: rename one")
    for i, col in enumerate(frame.columns, start=1):  # code that stops a name at a NUL
        if _CONTROL.search(col):  # would not find the column (pandas' KeyError)
            raise DataError(f"{origin}: column {i} of the header, {col!r}, holds a control "
                            "character (a NUL byte, a line break): rename it")
    index = frame.index
    if not (isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1):
        frame = frame.reset_index(drop=True)
    if in_memory:
        frame = _as_read(frame)
    if target in frame.columns:
        # before the per-column retyping, which cannot add a target (`prepare` checks again
        # after it): a table of 100,000 columns took 37 s to say it had 10 rows
        check_row_count(origin, int(frame[target].notna().sum()))
    frame = _retyped(frame, _text_numbers)
    if not target:
        raise TargetError(f"{origin}: name the target column with ?target=COL "
                          f"(columns: {_column_list(frame)})")
    if target not in frame.columns:
        raise TargetError(f"{origin}: no column '{target}' to use as the target "
                          f"(columns: {_column_list(frame)})")
    unknown = [c for c in drop if c not in frame.columns]
    if unknown:
        raise UnknownDropColumn(f"{origin}: cannot drop unknown column '{unknown[0]}'")
    if target in drop:
        raise UnknownDropColumn(f"{origin}: cannot drop the target column '{target}'")
    drop = tuple(dict.fromkeys(drop))  # a name given twice is dropped once
    y = frame[target]
    if y.notna().sum() == 0:
        raise TargetError(f"{origin}: target '{target}' has no values")
    why = target_issue(y)
    if why is not None:  # a class per list's or bytes' text is no classification
        raise TargetError(f"{origin}: target '{target}' is {why}")
    features = frame.drop(columns=[target, *drop])
    return Table(name=name, source=source, frame=features, y=y,
                 task=task or infer_task(y), target=target,
                 dropped=tuple((c, "dropped by request") for c in drop), origin=origin)
