"""A table's rows as Arrow, through pyarrow alone (no DuckDB): for readers outside SQL, such
as the kernel tuning store on a GPU machine. Same parts as the views, damaged ones skipped."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from warehouse.layout import visible_parts
from warehouse.parts import mark_unreadable, warn_skipped
from warehouse.schema import table as table_spec


def read_table(root: str | Path, table: str, columns: Sequence[str] | None = None) -> pa.Table:
    """Every visible, readable part of `table`, concatenated; `columns` (default: the
    schema's) in that order, NULL where an older part lacks one. A part pyarrow cannot read is
    skipped and named once on stderr, as the views do."""
    root = Path(root)
    schema = table_spec(table).schema
    names = list(columns) if columns is not None else schema.names
    fields = [schema.field(n) if n in schema.names else pa.field(n, pa.null()) for n in names]
    out: list[pa.Table] = []
    for p in visible_parts(root, table):
        try:
            t = pq.read_table(p)
        except FileNotFoundError:
            continue  # collected by a compaction after the listing
        except (OSError, pa.ArrowException) as err:
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
