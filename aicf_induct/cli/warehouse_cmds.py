"""`aicf-induct sql | runs | report | warehouse ...`: query and maintain the warehouse."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import warehouse
from aicf_induct.atomic_file import write_output
from aicf_induct.cli import options
from aicf_induct.progress import counting
from aicf_induct.records import RUN_STATUSES
from aicf_induct.words import counted
from warehouse import WarehouseError
from warehouse.catalog import one_line
from warehouse.guard import run_guarded_arrow
from warehouse.reports import MAX_COUNT
from warehouse.sql_values import json_column

FORMATS = ("table", "csv", "json", "parquet")
ABANDONED_SHOWN = 20  # abandoned runs `warehouse check` lists one by one
TABLE_ROWS = 10_000  # rows a table printed on stdout lays out (csv, json, -o: all)

RUNS_COLUMNS = ["run_id", "problem_name", "status", "origin", "started_at", "logged_steps",
                "live_steps", "last_loss", "rewrites", "param_count", "score_metric", "score"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--warehouse", metavar="DIR", type=options.warehouse_dir, default=None,
                        help=f"warehouse directory (default: ${warehouse.catalog.ENV_VAR}, "
                             f"else ./{warehouse.catalog.DEFAULT_DIR})")
    out = argparse.ArgumentParser(add_help=False)
    fmt = out.add_mutually_exclusive_group()
    fmt.add_argument("--format", choices=FORMATS, default=None,
                     help="output format (default: --output's extension, .csv, .json or "
                          ".parquet; else table; parquet needs --output)")
    # the other commands' --json, for these three too
    fmt.add_argument("--json", dest="format", action="store_const", const="json",
                     help="the same as --format json")
    out.add_argument("-o", "--output", metavar="FILE", type=Path, default=None,
                     help="write to FILE instead of standard output (replaced whole or not "
                          "at all: a failed write keeps the file there)")

    p = sub.add_parser("sql", parents=[common, out], help="run a read-only SQL query",
                       description="Run one read-only SQL statement (SELECT, DESCRIBE, SHOW) "
                                   "over the warehouse views: problems, problem_features, "
                                   "runs, run_ends, run_resumes, ir_snapshots, ir_patterns, steps, "
                                   "events, results, kernel_tuning, run_structure, run_patterns, "
                                   "run_scores (and raw_<table> with the `date` partition).")
    p.add_argument("query", metavar="SQL", help='e.g. "SELECT count(*) FROM steps"')
    p.set_defaults(func=cmd_sql)

    p = sub.add_parser("runs", parents=[common, out], help="list runs, newest first",
                       description="List runs, newest first, with status, steps, last loss, "
                                   "rewrites and score (the run_summary report, abridged).")
    p.add_argument("--problem", help="only runs on this problem (name or id)")
    p.add_argument("--status", choices=RUN_STATUSES, metavar="STATUS",
                   help=f"only runs with this status ({', '.join(RUN_STATUSES)})")
    p.add_argument("--origin", help="only runs of this origin (cli, sweep, adapt, fork, api, "
                                    "...: `aicf-induct sql \"SELECT DISTINCT origin FROM "
                                    "runs\"` lists a warehouse's)")
    p.add_argument("--limit", type=options.int_at_least(1, MAX_COUNT), default=20,
                   help="at most this many runs (default 20)")
    p.add_argument("--all-columns", action="store_true", help="every run_summary column")
    p.set_defaults(func=cmd_runs)

    names = ", ".join(warehouse.reports())
    p = sub.add_parser("report", parents=[common, out], help="run a pattern report",
                       description=f"Run a pattern report ({names}). Without NAME, list the "
                                   "reports with their parameters.")
    p.add_argument("name", metavar="NAME", nargs="?", help="report name")
    p.add_argument("--problem", help="only this problem (name or id), for reports that "
                                     "take it")
    p.add_argument("--param", "-p", action="append", default=[], metavar="KEY=VALUE",
                   help="a report parameter (repeatable), e.g. -p top=10")
    p.set_defaults(func=cmd_report)

    w = sub.add_parser("warehouse", help="check, compact or rebuild the warehouse",
                       description="Maintain the warehouse directory.")
    wsub = w.add_subparsers(dest="warehouse_command", metavar="ACTION", required=True)
    p = wsub.add_parser("check", parents=[common], help="verify every part is readable and "
                                                        "schemas are compatible",
                        description="Open every visible part, verify its pages and compare "
                                    "its columns with the table's schema; list runs whose "
                                    "writer is gone without ending them (abandoned), rows of "
                                    "runs that have no runs row, and debris of crashed "
                                    "writers. Exit status 1 on an unreadable part, a part "
                                    "with another table's columns or wrong types, a stray "
                                    "*.parquet file, or extra columns that disagree.")
    p.add_argument("--quick", action="store_true",
                   help="read footers only, not every page (damaged pages may go unnoticed)")
    p.add_argument("--repair", action="store_true",
                   help="move unreadable parts, parts with wrong columns and stray files to "
                        "_quarantine/ (no reader lists it), then end abandoned runs with "
                        "status abandoned; says what was moved")
    p.add_argument("--stale", type=options.positive_float, metavar="MINUTES",
                   help="also count as abandoned the runs a service ingests that read "
                        "running but whose client has sent nothing for MINUTES (a client "
                        "killed outright: the server's lease keeps its run running); their "
                        "own end, if it comes later, wins")
    p.set_defaults(func=cmd_check)
    p = wsub.add_parser("compact", parents=[common],
                        help="merge small parts (safe while writers run)",
                        description="Merge each partition's small parts into one, atomically; "
                                    "readers never see a row twice or miss one. Superseded "
                                    "parts are deleted once --grace seconds old.")
    p.add_argument("--grace", type=options.non_negative_float, default=60.0, metavar="SECONDS",
                   help="keep superseded parts this long for readers that already listed "
                        "them (default 60; 0 deletes at once)")
    p.set_defaults(func=cmd_compact)
    p = wsub.add_parser("rebuild", parents=[common],
                        help="write _catalog.duckdb (views) for the DuckDB CLI",
                        description="Write <warehouse>/_catalog.duckdb: the same views as "
                                    "every command sees, for `duckdb -readonly FILE`. It is a "
                                    "snapshot of the parts (and of which runs are still "
                                    "running): run it again to see new ones.")
    p.set_defaults(func=cmd_rebuild)


def _root(args: argparse.Namespace) -> Path:
    return warehouse.default_root(args.warehouse)


def _existing_root(args: argparse.Namespace) -> Path:
    """The warehouse to read or maintain: it must exist and be one (a typo must not read as
    empty)."""
    return warehouse.existing_warehouse(args.warehouse)


def _writable_root(args: argparse.Namespace) -> Path:
    """A warehouse these commands will write into: checked before anything is written."""
    root = _existing_root(args)
    if root.is_dir() and not os.access(root, os.W_OK | os.X_OK):
        raise WarehouseError(f"warehouse {root} is not writable")
    return root


def output_format(fmt: str | None, output: Path | None) -> str:
    """--format, else the one --output's extension names, else a table; a --format that an
    --output's extension contradicts (Parquet bytes in `r.csv`) is refused."""
    named = {".csv": "csv", ".json": "json", ".parquet": "parquet", ".pq": "parquet"}.get(
        output.suffix.lower() if output is not None else "")
    if fmt is not None and named is not None and fmt != named:
        raise WarehouseError(f"--output {output} names a .{named} file and --format is {fmt}: "
                             f"make them agree (or leave --format out)")
    return fmt or named or "table"


def _output_format(fmt: str | None, output: Path | None) -> str:
    """`output_format`, Parquet without --output refused."""
    fmt = output_format(fmt, output)
    if fmt == "parquet" and output is None:
        raise WarehouseError("--format parquet needs --output FILE")
    return fmt


def check_output(args: argparse.Namespace) -> str:
    """The format `emit` will write, after refusing, before the query runs, Parquet
    without --output and an --output that cannot be written."""
    fmt = _output_format(args.format, args.output)
    if args.output is not None:
        options.check_new_file(args.output, "--output")
    return fmt


def emit(result: pd.DataFrame | pa.Table, fmt: str | None, output: Path | None,
         types: list[Any] | None = None) -> None:
    """Print or write a result in the requested format (`output_format`); `types`, the
    query's DuckDB column types, make JSON exact (`json_column`). A file is written through
    a temporary one renamed into place: a failed write leaves the file that was there."""
    fmt = _output_format(fmt, output)
    if fmt != "table":  # JSON objects, a CSV header, a Parquet schema: one value per name
        _distinct_names(list(result.column_names if isinstance(result, pa.Table)
                             else map(str, result.columns)), fmt)
    if fmt == "parquet":
        assert output is not None
        table = _as_arrow(result)
        try:
            _write(output, lambda tmp: pq.write_table(table, tmp))
        except pa.ArrowException as err:  # an interval: Parquet has no type for it
            raise WarehouseError(f"the result cannot be written as Parquet: "
                                 f"{one_line(err)} (--format json takes any value)") from None
        return
    if fmt == "json":
        text = json.dumps(_json_rows(_as_arrow(result), types), indent=1) + "\n"
    else:
        if fmt == "table" and output is None and len(result) > TABLE_ROWS:
            # a table to read: laid out whole, 2.3 million rows took 80 s and 4.6 GB
            print(f"note: the first {TABLE_ROWS:,} of {len(result):,} rows; --format csv "
                  "(or -o FILE) gives them all", file=sys.stderr)
            result = result.slice(0, TABLE_ROWS) if isinstance(result, pa.Table) else \
                result.head(TABLE_ROWS)
        df = _frame(result, fmt) if isinstance(result, pa.Table) else result
        if fmt == "csv":
            text = df.to_csv(index=False)
        elif df.empty:
            text = "(no rows)\n" if len(df.columns) else "(no result)\n"
        else:
            with pd.option_context("display.width", 250, "display.max_colwidth", 60):
                text = df.to_string(index=False) + "\n"
    if output is None:
        sys.stdout.write(text)
    else:
        _write(output, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def _as_arrow(result: pd.DataFrame | pa.Table) -> pa.Table:
    return result if isinstance(result, pa.Table) else \
        pa.Table.from_pandas(result, preserve_index=False)


def _write(output: Path, write: Callable[[Path], object]) -> None:
    """`write(tmp)`, then the temporary file renamed to `output` (`atomic_write`); a device
    or a pipe (/dev/stdout) is written in place: a rename would put a file where it was. An
    OSError names --output, not the temporary file."""
    try:
        write_output(output, write, durable=False)
    except OSError as err:
        raise WarehouseError(f"--output {output}: cannot write it "
                             f"({err.strerror or err})") from None


ONE_VALUE_PER_NAME = {"json": "JSON rows need", "csv": "a CSV header needs",
                      "parquet": "a Parquet file needs"}


def _distinct_names(names: list[str], fmt: str) -> None:
    """Refuse a result with two columns of one name in a format that keeps one value per
    name (a JSON object would drop one silently; pyarrow cannot read such a Parquet file
    back; a CSV reader renames one)."""
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise WarehouseError(f"the result has more than one column named {twice[0]!r}: "
                             f"{ONE_VALUE_PER_NAME[fmt]} distinct names (rename them with AS)")


def _json_rows(t: pa.Table, types: list[Any] | None) -> list[dict[str, Any]]:
    """Rows as JSON objects, each value as the service's SQL route gives it (`json_column`):
    exact, non-finite numbers null, times ISO 8601, anything else JSON has no type for as
    text."""
    names = t.column_names  # distinct: `emit` checked them
    types = types or [None] * t.num_columns
    cols = [json_column(c.combine_chunks(), d) for c, d in zip(t.columns, types, strict=True)]
    return [dict(zip(names, r, strict=True)) for r in zip(*cols, strict=True)]


def _frame(t: pa.Table, fmt: str) -> pd.DataFrame:
    try:
        return t.to_pandas()
    except (pa.ArrowException, ValueError) as err:  # a union, a date past pandas' range
        raise WarehouseError(f"the result cannot be shown as {fmt}: {one_line(err)} "
                             "(--format json takes any value)") from None


def cmd_sql(args: argparse.Namespace) -> int:
    check_output(args)
    # DuckDB's column types beside the result: a UHUGEINT's JSON values need them
    t, types = warehouse.with_retry(_existing_root(args), lambda c: (
        run_guarded_arrow(c, args.query), c.sql(args.query).types))
    emit(t, args.format, args.output, types)
    return 0


def _known_problem(root: Path, problem: str | None, rows: int) -> None:
    """An empty answer filtered on a problem the warehouse does not hold is a typo, said as
    one (as `plot leaderboard` says it), not "(no rows)"."""
    if problem is None or rows:
        return
    hit = warehouse.with_retry(root, lambda c: c.execute(
        "SELECT count(*) FROM problems WHERE name = ? OR problem_id = ?",
        [problem, problem]).fetchone())
    if hit is None or not hit[0]:
        raise WarehouseError(f"no problem '{problem}' in {root} (`aicf-induct sql \"SELECT "
                             f"name FROM problems\"` lists them)")


def cmd_runs(args: argparse.Namespace) -> int:
    params = {"problem": args.problem, "status": args.status, "origin": args.origin,
              "limit": args.limit}
    check_output(args)
    root = _existing_root(args)
    df = warehouse.with_retry(root, lambda c: warehouse.run_report(c, "run_summary", params))
    _known_problem(root, args.problem, len(df))
    if not args.all_columns:
        df = df[RUNS_COLUMNS]
        if output_format(args.format, args.output) == "table":
            df = df.assign(run_id=df["run_id"].str[:12])
    emit(df, args.format, args.output)
    return 0


def _params(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in args.param:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise WarehouseError(f"--param wants KEY=VALUE, got '{item}'")
        if key.strip() in out:  # the last would win, silently
            raise WarehouseError(f"--param {key.strip()} given twice: give it once")
        out[key.strip()] = value
    if args.problem is not None:
        if out.get("problem", args.problem) != args.problem:
            raise WarehouseError(f"--problem {args.problem} and -p problem={out['problem']} "
                                 "disagree: give one")
        out["problem"] = args.problem
    return out


def cmd_report(args: argparse.Namespace) -> int:
    all_reports = warehouse.reports()
    if args.name is None:
        for r in all_reports.values():
            usage = ", ".join(f"{k}={'' if v is None else v}" for k, v in r.params.items())
            print(f"{r.name}  [{usage}]\n    {r.description}")
        return 0
    params = _params(args)
    check_output(args)
    root = _existing_root(args)
    df = warehouse.with_retry(root, lambda c: warehouse.run_report(c, args.name, params))
    _known_problem(root, params.get("problem"), len(df))
    emit(df, args.format, args.output)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    root = _writable_root(args) if args.repair else _existing_root(args)
    with counting(desc="check", unit="part") as update:  # 78 s of 26,000 parts said nothing
        rep = warehouse.check(root, deep=not args.quick, repair=args.repair,
                              stale_s=None if args.stale is None else args.stale * 60,
                              progress=update)
    for table in rep.parts:
        print(f"{table:18s} {rep.parts[table]:6d} parts {rep.rows[table]:12d} rows")
    for note in rep.notes:
        print(f"note: {note}")
    for run in rep.abandoned[:ABANDONED_SHOWN]:
        done = "ended as abandoned" if run.run_id in rep.ended else "abandoned"
        print(f"{done}: run {run.run_id} ({run.origin or '?'}, {run.problem_name or '?'}, "
              f"started {run.started_at}): {run.why()}")
    if len(rep.abandoned) > ABANDONED_SHOWN:
        print(f"... and {len(rep.abandoned) - ABANDONED_SHOWN} more abandoned run(s) "
              "(`aicf-induct runs --status abandoned` lists them)")
    for bad in rep.quarantined:
        print(f"quarantined: {bad.describe()} -> _quarantine/{bad.path}")
    for problem in rep.problems:
        print(f"problem: {problem}")
    tail = ""
    if rep.abandoned and not rep.ended:
        how = "`--repair --stale` ends them" if args.stale is not None else "`--repair` ends them"
        tail = f"; {len(rep.abandoned)} abandoned run(s) ({how})"
    print(("ok" if rep.ok else f"{len(rep.problems)} problem(s)") + tail)
    return 0 if rep.ok else 1


def cmd_compact(args: argparse.Namespace) -> int:
    with counting(desc="compact", unit="part") as update:
        rep = warehouse.compact(_writable_root(args), grace_s=args.grace, progress=update)
    print(f"merged {rep.merged_parts} part(s) into {rep.new_parts} ({counted(rep.rows, 'row')}); "
          f"deleted {rep.deleted_files} file(s)")
    return 0


def cmd_rebuild(args: argparse.Namespace) -> int:
    print(f"wrote {warehouse.rebuild(_writable_root(args))}")
    return 0
