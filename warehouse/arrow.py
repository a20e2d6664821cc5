"""A table's rows as Arrow, through pyarrow alone (no DuckDB): for readers outside SQL, such
as the kernel tuning store on a GPU machine. Same parts as the views, damaged ones skipped;
a part a compaction collected after the listing lists again, as `catalog.with_retry` does."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from warehouse.catalog import ATTEMPTS, existing_warehouse, wait_for_compaction
from warehouse.errors import WarehouseError
from warehouse.layout import check_root, visible_parts
from warehouse.parts import PartVanished, mark_unreadable, warn_skipped
from warehouse.schema import table as table_spec


def read_table(root: str | Path, table: str, columns: Sequence[str] | str | None = None,
               missing_ok: bool = False) -> pa.Table:
    """Every visible, readable part of `table`, concatenated; `columns` (default: the
    schema's; a str: that one column) in that order, NULL where an older part lacks one. A
    part pyarrow cannot read is skipped and named once on stderr, as the views do. A column
    not of the table is a WarehouseError naming it; `missing_ok` as for `connect` (a
    directory that does not exist, or holds no warehouse, is refused: a typo must not read
    as an empty table)."""
    root = check_root(Path(root))
    if not missing_ok:
        existing_warehouse(root)
    schema = table_spec(table).schema
    # a str is one column's name (iterating it would ask for one column per character)
    names = [columns] if isinstance(columns, str) else \
        list(columns) if columns is not None else schema.names
    unknown = [n for n in names if n not in schema.names]
    if unknown:
        raise WarehouseError(f"table '{table}' has no column(s) {', '.join(map(repr, unknown))} "
                             f"(columns: {', '.join(schema.names)})")
    fields = [schema.field(n) for n in names]
    for attempt in range(ATTEMPTS):
        try:
            return _read(root, table, fields, names)
        except FileNotFoundError:
            # collected by a compaction after the listing: its rows are in an output this
            # listing lacks, so skipping it would return a partial table; list again
            wait_for_compaction(attempt)
    raise WarehouseError(f"table '{table}': compactions kept collecting parts while "
                         "reading; retry")


def _read(root: Path, table: str, fields: list[pa.Field], names: list[str]) -> pa.Table:
    """One listing's parts, read; FileNotFoundError when one of them is gone."""
    out: list[pa.Table] = []
    for p in visible_parts(root, table):
        try:
            t = pq.read_table(p)
        except FileNotFoundError:
            raise
        except (OSError, pa.ArrowException) as err:
            if not p.exists():  # gone under the read, whatever pyarrow called it
                raise PartVanished(2, "listed part vanished", str(p)) from None
            reason = str(err).splitlines()[0] if str(err) else type(err).__name__
            mark_unreadable(p, reason)
            warn_skipped(root, p, reason)
            continue
        out.append(pa.table([t.column(f.name) if f.name in t.column_names
                             else pa.nulls(t.num_rows, f.type) for f in fields],
                            names=names))
    if not out:
        return pa.Table.from_pylist([], schema=pa.schema(fields))
    return pa.concat_tables(out, promote_options="permissive")
