"""The DuckDB catalog: views only, rebuilt from the part files whenever it is opened.

`connect(root)` returns an in-memory DuckDB connection with, for every table, a `raw_<table>`
view over that table's visible parts (an exact, consistent file list; see `layout`), then the
views that warehouse/sql/NN_*.sql define on top (`runs`, `steps`, ..., `run_scores`). The
connection is a snapshot: parts committed later appear on the next `connect`.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import pandas as pd
import pyarrow as pa

from warehouse.claims import CLAIMS
from warehouse.compact import LOCK_FILE
from warehouse.errors import WarehouseError
from warehouse.ingest import INGEST_DIR
from warehouse.keys import KEYS_FILE
from warehouse.layout import check_root, is_part, visible_parts
from warehouse.lease import LEASES, live_writers
from warehouse.parts import Signature, mark_unreadable, part_columns, warn_skipped
from warehouse.schema import TABLES, duckdb_type

ENV_VAR = "AICF_WAREHOUSE"
DEFAULT_DIR = "aicf_warehouse"
CATALOG_FILE = "_catalog.duckdb"
QUARANTINE = "_quarantine"  # where `warehouse check --repair` moves damaged parts
# what a warehouse holds besides its tables: a directory of other entries is none
OWN_ENTRIES = {QUARANTINE, CATALOG_FILE, CLAIMS, LOCK_FILE, INGEST_DIR, KEYS_FILE, LEASES}

T = TypeVar("T")


def default_root(given: str | Path | None = None) -> Path:
    """The warehouse a command means: `given` (its --warehouse), else `$AICF_WAREHOUSE`, else
    ./aicf_warehouse in the working directory."""
    if given is not None:
        return Path(given)
    return Path(os.environ.get(ENV_VAR) or Path.cwd() / DEFAULT_DIR)


def require_warehouse(root: str | Path) -> None:
    """A one-line error for a directory that holds none of a warehouse's entries (an empty one
    is a warehouse nothing was written to yet): a wrong --warehouse must not read as ok, nor
    as an empty warehouse. A path that does not exist, or is no directory, is one too."""
    root = Path(root)
    # worded as `existing_warehouse` words it: the CLI and the service print a WarehouseError
    # as one line, where a raw OSError would be a traceback
    if not root.exists():
        raise WarehouseError(f"no warehouse at {root} (the directory does not exist)")
    if not root.is_dir():
        raise WarehouseError(f"warehouse '{root}' is not a directory")
    names = {n for n in os.listdir(root) if not n.startswith(".")}
    if names and not names & (set(TABLES) | OWN_ENTRIES):
        raise WarehouseError(f"{root} is not a warehouse (no table directory such as runs/ "
                             "or steps/ in it)")


def existing_warehouse(given: str | Path | None,
                       missing: str = "the directory does not exist") -> Path:
    """The warehouse a command reads or maintains (`default_root(given)`): it must exist, be a
    directory and hold a warehouse's entries, so a typo never reads as an empty warehouse.
    `missing` ends the error for one that does not exist (what to do about it)."""
    root = default_root(given)
    if not root.exists():
        raise WarehouseError(f"no warehouse at {root} ({missing})")
    if not root.is_dir():
        raise WarehouseError(f"warehouse '{root}' is not a directory")
    require_warehouse(root)
    return root


def check_served(root: str | Path, setting: str) -> bool:
    """What the service serves, given by `setting` (--warehouse, AICF_SERVICE_WAREHOUSE): a
    warehouse (True); or, where none was logged to yet, a directory to be made in one that
    exists (False: the service starts before any run). A missing parent directory is almost
    surely a typo, and a file or a directory holding other things no warehouse: each a
    one-line error naming `setting` and the path, before anything is created. `aicf-induct
    serve`, `keys create` (which makes the directory in the False case, saying so: a
    service's keys come before its first run) and `create_app` all call this."""
    root = Path(root)
    if root.is_dir():
        try:
            require_warehouse(root)
        except WarehouseError as err:
            raise WarehouseError(f"{setting}: {err}") from None
        return True
    if root.exists():
        raise WarehouseError(f"{setting}: '{root}' is not a directory")
    if not root.parent.is_dir():
        raise WarehouseError(f"{setting}: no warehouse at {root}, nor a directory "
                             f"{root.parent} to make it in: is the path right? (the service "
                             "makes only the warehouse's own directory, at the first run "
                             "logged)")
    return False


def empty_note(root: Path) -> str:
    """What the service says at its start of a warehouse `check_served` found not made yet
    (`aicf-induct serve` once, before its workers start; the app factory when uvicorn runs
    it without `serve`)."""
    return (f"note: no warehouse at {root} yet: this server serves it empty, and the first "
            "run logged through it creates it")


def _lit(s: str) -> str:
    # a SQL string literal for a path we listed ourselves (DDL cannot take parameters)
    return "'" + s.replace("'", "''") + "'"


def raw_view_sql(root: Path, table: str) -> str:
    """SELECT over a table's visible parts, or an empty typed SELECT when it has none."""
    files = visible_parts(root, table)
    if files:
        # one realpath for the root, not one per part (a request lists every part)
        base = root.resolve()
        return scan_sql(table, [base / f.relative_to(root) for f in files])
    cols = [f'CAST(NULL AS {duckdb_type(c.type)}) AS "{c.name}"' for c in TABLES[table].columns]
    return f"SELECT {', '.join(cols)}, CAST(NULL AS DATE) AS date LIMIT 0"


def scan_sql(table: str, files: list[Path]) -> str:
    """SELECT over `table`'s part files (absolute paths we listed). Parts of one column
    signature (`parts.part_columns`, known from their check) are one `read_parquet`, and the
    signatures are unioned by name: `read_parquet(union_by_name = true)` over every part
    opened each part's footer at every bind, and the views bind the raw views many times (a
    warehouse of 8,000 parts took 3.3 s to connect, 0.7 s so). A column the table gained
    later (`Column.later`) reads NULL where no part has it: the union fills it only when
    some part has it, and the views name it, so a warehouse written before it came would
    fail every query."""
    groups: dict[Signature | None, list[Path]] = {}
    for f in files:
        try:
            signature: Signature | None = part_columns(f, table)
        except FileNotFoundError:  # collected since it was listed: DuckDB's bind names it,
            signature = None  # and the reader lists again
        groups.setdefault(signature, []).append(f)
    return with_later_columns(table, " UNION ALL BY NAME ".join(
        f"SELECT * FROM read_parquet([{', '.join(_lit(str(f)) for f in group)}], "
        "hive_partitioning = true, hive_types = {'date': 'DATE'})" for group in groups.values()))


def with_later_columns(table: str, scan: str) -> str:
    """`scan` of `table`'s parts with every column the table gained later (`Column.later`)
    there, NULL where no part has it."""
    later = [f'CAST(NULL AS {duckdb_type(c.type)}) AS "{c.name}"'
             for c in TABLES[table].columns if c.later]
    # WHERE false, not LIMIT 0: a LIMIT would apply to the whole union
    return f"{scan} UNION ALL BY NAME SELECT {', '.join(later)} WHERE false" if later else scan


def sql_files(prefix: str) -> dict[str, str]:
    """warehouse/sql/*.sql whose names start with `prefix` (digits: views), name -> text."""
    out: dict[str, str] = {}
    for f in sorted(resources.files("warehouse").joinpath("sql").iterdir(),
                    key=lambda f: f.name):
        if f.name.endswith(".sql") and f.name.startswith(prefix):
            out[f.name] = f.read_text(encoding="utf-8")
    return out


def view_files() -> dict[str, str]:
    return {n: s for n, s in sql_files("").items() if n[:1].isdigit()}


def live_writers_sql(root: Path) -> str:
    """The writers whose lease is alive now (see `lease`), as a constant SELECT: the `runs`
    view tells a run still being written from an abandoned one by it."""
    ids = sorted(live_writers(root))
    if not ids:
        return "SELECT CAST(NULL AS VARCHAR) AS writer_id LIMIT 0"
    return f"SELECT * FROM (VALUES {', '.join(f'({_lit(w)})' for w in ids)}) t(writer_id)"


def build_views(conn: duckdb.DuckDBPyConnection, root: Path) -> None:
    conn.execute(f"CREATE OR REPLACE VIEW live_writers AS {live_writers_sql(root)}")
    for t in TABLES:
        conn.execute(f"CREATE OR REPLACE VIEW raw_{t} AS {raw_view_sql(root, t)}")
    for name, text in view_files().items():
        try:
            conn.execute(text)
        except duckdb.Error as err:
            if part_error(err):
                raise  # a part was collected or is damaged: the caller lists again
            raise WarehouseError(f"warehouse/sql/{name}: {err}") from None


# Listings tried before giving up when parts vanish under a reader (a compaction collected
# them): only a compaction with no grace period, looping while readers list, gets here, and
# on a loaded machine one listing can lose that race several times in a row.
ATTEMPTS = 25


def wait_for_compaction(attempt: int) -> None:
    """Before a reader's next attempt (of ATTEMPTS): let the compaction that raced it finish."""
    time.sleep(min(0.005 * 2**attempt, 0.2))


def _vanished(err: duckdb.Error) -> bool:
    text = str(err)
    return isinstance(err, duckdb.IOException) and any(
        s in text for s in ("No such file", "not exist", "No files found"))


_QUOTED = re.compile(r"""['"]([^'"]+\.parquet)['"]""")


def _named_parts(err: duckdb.Error, root: Path) -> list[Path]:
    """Warehouse parts the error's message names (not its quote of the statement)."""
    head = str(err).split("\nLINE ", 1)[0]
    base = root.resolve()
    return [p for p in map(Path, _QUOTED.findall(head))
            if p.is_relative_to(base) and p.exists()]


def _names_no_part(err: duckdb.Error, root: Path) -> bool:
    """Whether the paths the error's message names are none of them a part of the warehouse
    (a glob, another name, a path outside it): a file the statement itself names, which
    listing again cannot bring back."""
    head = str(err).split("\nLINE ", 1)[0]
    named = [Path(p) for p in _QUOTED.findall(head)]
    base = root.resolve()
    return bool(named) and not any(p.is_relative_to(base) and is_part(p.name) for p in named)


def _footer_failures(root: Path) -> list[tuple[Path, str]]:
    """Parts whose frame looks whole but whose footer pyarrow cannot parse (DuckDB's error
    for those does not always name the file)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = []
    for t in TABLES:
        for p in visible_parts(root, t):
            try:
                pq.read_metadata(p)
            except FileNotFoundError:
                continue
            except (OSError, pa.ArrowException) as err:
                out.append((p, f"damaged footer: {one_line(err)}"))
    return out


def _page_failures(root: Path) -> list[tuple[Path, str]]:
    """Parts DuckDB cannot decode, found by reading each one whole (only after an error that
    names no file: damaged pages under an intact footer)."""
    out = []
    conn = duckdb.connect()
    try:
        for t in TABLES:
            for p in visible_parts(root, t):
                try:
                    for _ in conn.sql("SELECT * FROM read_parquet(?)",
                                      params=[str(p)]).to_arrow_reader():
                        pass
                except (duckdb.Error, pa.ArrowException, OSError) as err:
                    if p.exists():  # not collected by a compaction meanwhile
                        out.append((p, f"damaged pages: {_reason(err, p)}"))
    finally:
        conn.close()
    return out


def _reason(err: BaseException, path: Path) -> str:
    """DuckDB's message less the path (the warning names it) and the raw bytes a thrift
    error quotes."""
    text = one_line(err).replace(f'Failed to read file "{path}": ', "")
    return "".join(c if c.isprintable() else "?" for c in text).strip()


def _untyped(err: duckdb.Error) -> bool:
    # DuckDB raises its base class for failures inside the Parquet reader's decoders (thrift,
    # varints, decompression): messages that name no file and no SQL problem
    return type(err) is duckdb.Error or "TProtocolException" in str(err)


def part_error(err: duckdb.Error) -> bool:
    """Whether `err` may be about a part file (gone, or damaged) rather than the statement:
    then `with_retry` lists the parts again, skipping a damaged one."""
    return isinstance(err, duckdb.IOException | duckdb.InvalidInputException) or \
        _untyped(err) or bool(_QUOTED.search(str(err).split("\nLINE ")[0]))


def _recover(err: duckdb.Error, root: Path, attempt: int) -> bool:
    """True when listing again may help: a part vanished, or a damaged part is now marked
    unreadable (and skipped by the next listing)."""
    if attempt == ATTEMPTS - 1 or not part_error(err):
        return False
    if _vanished(err):
        if _names_no_part(err, root):
            return False
        wait_for_compaction(attempt)
        return True
    bad = [(p, one_line(err)) for p in _named_parts(err, root)] or _footer_failures(root)
    if not bad and _untyped(err):
        bad = _page_failures(root)  # reads every part: only for errors that name none
    for path, reason in bad:
        mark_unreadable(path, reason)
        warn_skipped(root, path, reason)
    return bool(bad)


def connect(root: str | Path | None = None, read_only: bool = True,
            missing_ok: bool = False) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with every view registered.

    read_only: sandbox the connection: no file access outside the warehouse, and the
    configuration locked. Pair it with `guard.run_guarded` for statements from users.
    missing_ok: a warehouse nothing was logged to yet reads as empty (the service, a sweep's
    first look); else a directory that does not exist, or holds no warehouse, is an error:
    a typo must not read as "no runs yet".
    """
    root = check_root(default_root(root))
    if not missing_ok:
        existing_warehouse(root)
    for attempt in range(ATTEMPTS):
        conn = duckdb.connect()
        conn.execute("SET TimeZone = 'UTC'")
        try:
            build_views(conn, root)
        except duckdb.Error as err:
            conn.close()
            if _recover(err, root, attempt):
                continue
            raise WarehouseError(one_line(err)) from None
        if read_only:
            conn.execute("SET allowed_directories = ?", [[str(root.resolve())]])
            conn.execute("SET enable_external_access = false")
            conn.execute("SET lock_configuration = true")
        return conn
    raise AssertionError("unreachable")


def with_retry(root: str | Path | None, fn: Callable[[duckdb.DuckDBPyConnection], T],
               read_only: bool = True, missing_ok: bool = False) -> T:
    """Run `fn` on a fresh connection; if a part vanished under it (a compaction collected it
    after we listed it) or turned out damaged, list again and retry. `missing_ok` as for
    `connect`."""
    root = check_root(default_root(root))

    def attempt() -> T:
        conn = connect(root, read_only=read_only, missing_ok=missing_ok)
        try:
            return fn(conn)
        finally:
            conn.close()

    return retry_reads(root, attempt)


def retry_reads(root: Path, attempt: Callable[[], T],
                gave_up: Callable[[duckdb.Error], BaseException] | None = None) -> T:
    """The readers' loop: call `attempt` (which lists the parts afresh each time, e.g. by
    `connect`) until it returns. When it raises a DuckDB error about a part (`part_error`:
    one a compaction collected after the listing, or a damaged one), `_recover` (wait for
    the compaction, or mark the damaged part unreadable, so the next listing skips it) and
    call it again. Any other error propagates as raised; a part error recovery cannot help
    is `gave_up(err)` (default: a one-line WarehouseError). `with_retry` and the SQL
    sandbox (`sandbox.run_sql`) read through it."""
    for n in range(ATTEMPTS):
        try:
            return attempt()
        except duckdb.Error as err:
            if not part_error(err):
                raise
            if not _recover(err, root, n):
                raise (gave_up(err) if gave_up is not None
                       else WarehouseError(one_line(err))) from None
    raise AssertionError("unreachable")


def rebuild(root: str | Path | None = None) -> Path:
    """Write root/_catalog.duckdb: the same views, for the DuckDB CLI (`duckdb <file>`).
    It is a snapshot of the file list; run again to pick up new parts."""
    root = check_root(default_root(root))
    root.mkdir(parents=True, exist_ok=True)
    path = root / CATALOG_FILE
    tmp = root / f".tmp-{os.getpid()}{CATALOG_FILE}.partial"
    if not os.access(root, os.W_OK | os.X_OK):
        raise WarehouseError(f"warehouse {root} is not writable")
    try:
        for attempt in range(ATTEMPTS):
            tmp.unlink(missing_ok=True)
            conn = duckdb.connect(str(tmp))
            try:
                build_views(conn, root)
                break
            except duckdb.Error as err:
                if not _recover(err, root, attempt):
                    raise
            finally:
                conn.close()
        os.replace(tmp, path)  # readers of the old catalog keep their open file
    except (duckdb.Error, OSError) as err:
        raise WarehouseError(f"cannot write {path}: {one_line(err)}") from None
    finally:  # on any way out: Ctrl-C and SIGTERM left a 274 kB temporary each time
        tmp.unlink(missing_ok=True)
        Path(f"{tmp}.wal").unlink(missing_ok=True)
    return path


def arrow(conn: duckdb.DuckDBPyConnection, sql: str,
          params: dict[str, Any] | None = None) -> pa.Table:
    """Run a query into Arrow: every DuckDB type kept (intervals, maps, unions)."""
    rel = conn.sql(sql, params=params)
    if rel is None:
        raise WarehouseError("the statement returned no result")
    return rel.to_arrow_table()


def frame(conn: duckdb.DuckDBPyConnection, sql: str,
          params: dict[str, Any] | None = None) -> pd.DataFrame:
    """Run a query into a DataFrame (through Arrow: typed columns, UTC timestamps)."""
    return arrow(conn, sql, params).to_pandas()


def one_line(err: BaseException) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    return " ".join(lines[:2]) if lines else type(err).__name__
