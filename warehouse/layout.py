"""Where files live and how a reader sees a consistent set of them.

    root/<table>/date=YYYY-MM-DD/part-<writer>-<seq>.parquet    a writer's part
    root/<table>/date=YYYY-MM-DD/cpart-<id>.parquet             a compacted part
    root/<table>/date=YYYY-MM-DD/.tmp-<name>-<pid>-<id>.partial  a part being written
    root/<table>/_compactions/<id>.json                         a compaction's commit marker

Visibility rule (what every reader in this package applies):
  * a `part-` file is visible unless a committed marker lists it among its inputs;
  * a `cpart-` file is visible only once its marker is committed, and unless a later marker
    lists it among its inputs.
A marker is written atomically, so committing it switches a compaction's inputs off and its
output on in one step. Readers read the markers, list the files, read the markers again, and
retry if the set changed (see `listed_parts`). Only files named as parts, in a partition
directory (`date=YYYY-MM-DD`), are listed: any other `*.parquet` under the root (copied in by
hand) is a stray that is never read, and `warehouse check` reports it (`stray_files`).
Readers then skip a listed part that is not readable Parquet (truncated, empty, not
Parquet) or whose columns are not its table's, naming it once on stderr (`visible_parts`,
see `parts`). Temporary files start
with `.` and end in `.partial`, so no `*.parquet` glob, nor pyarrow/Polars datasets (which
skip `.`/`_` names), ever matches them.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

# the project's atomic file replacement; warehouse modules import it from here
from aicf_induct.atomic_file import TMP_PREFIX as TMP_PREFIX
from aicf_induct.atomic_file import TMP_SUFFIX as TMP_SUFFIX
from aicf_induct.atomic_file import atomic_write as atomic_write
from aicf_induct.atomic_file import fsync_dir as fsync_dir
from aicf_induct.atomic_file import temp_path as temp_path
from warehouse.errors import WarehouseError
from warehouse.parts import PartVanished, problem_of, readable, relative
from warehouse.schema import TABLES

MARKERS = "_compactions"
# writer and ingest parts (`part-<writer id>-<seq, 8 digits>`), compacted parts
PART_NAME = re.compile(r"(part-.+-[0-9]{8,}|cpart-.+)\.parquet")
PARTITION = re.compile(r"date=([0-9]{4}-[0-9]{2}-[0-9]{2})")


def ensure_dir(path: Path) -> None:
    """mkdir -p, fsyncing each parent whose entry we create so the directory survives a crash."""
    if path.is_dir():
        return
    ensure_dir(path.parent)
    try:
        path.mkdir()
    except FileExistsError:
        return  # another writer made it
    fsync_dir(path.parent)


@dataclass(frozen=True)
class Marker:
    """A committed compaction: `output` replaced `inputs` (paths relative to the table dir)."""

    id: str
    output: str
    inputs: tuple[str, ...]
    committed_at: float  # unix time

    def to_json(self) -> bytes:
        return json.dumps({"id": self.id, "output": self.output, "inputs": list(self.inputs),
                           "committed_at": self.committed_at}).encode()


def table_dir(root: Path, table: str) -> Path:
    return Path(root) / table


def read_markers(tdir: Path) -> dict[str, Marker]:
    out: dict[str, Marker] = {}
    mdir = tdir / MARKERS
    try:
        names = [n for n in os.listdir(mdir) if n.endswith(".json")]
    except FileNotFoundError:
        return out
    for n in names:
        try:
            d = json.loads((mdir / n).read_bytes())
        except FileNotFoundError:
            continue  # collected between listing and reading; the re-read notices
        out[n] = Marker(d["id"], d["output"], tuple(d["inputs"]), float(d["committed_at"]))
    return out


def _marker_names(tdir: Path) -> set[str]:
    try:
        return {n for n in os.listdir(tdir / MARKERS) if n.endswith(".json")}
    except FileNotFoundError:
        return set()


def is_part(name: str) -> bool:
    """Whether a file name is one this package writes as a part (a writer's or an ingest
    batch's `part-<id>-<seq>`, a compaction's `cpart-<id>`); any other `*.parquet` is a stray
    that no reader reads."""
    return PART_NAME.fullmatch(name) is not None


def is_partition(name: str) -> bool:
    """Whether a directory name is a partition writers make (`date=` a UTC day): a file in
    any other directory is no part (read with the others, its path would give no `date`, or
    one that is no date, and fail the table's whole read)."""
    m = PARTITION.fullmatch(name)
    if m is None:
        return False
    try:
        dt.date.fromisoformat(m.group(1))
    except ValueError:
        return False
    return True


def _partition_files(tdir: Path) -> list[str]:
    """Every `*.parquet` file in the table's partition dirs (relative paths), parts or not."""
    out: list[str] = []
    try:
        parts = sorted(os.listdir(tdir))
    except FileNotFoundError:
        return out
    for pdir in parts:
        if not is_partition(pdir) or not (tdir / pdir).is_dir():
            continue
        try:
            names = os.listdir(tdir / pdir)
        except FileNotFoundError:
            continue
        out += [f"{pdir}/{n}" for n in sorted(names)
                if n.endswith(".parquet") and not n.startswith((".", "_"))]
    return out


def list_parquet(tdir: Path) -> list[str]:
    """Every part file under the table dir (relative paths), visible or not."""
    return [f for f in _partition_files(tdir) if is_part(f.rsplit("/", 1)[-1])]


def _parquet_under(top: Path, recurse: bool) -> list[Path]:
    """`*.parquet` files in `top` (and, recurse, in its directories), skipping names that
    start with `.` or `_` (temporaries, compaction markers, the quarantine)."""
    out: list[Path] = []
    try:
        entries = sorted(os.scandir(top), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return out
    for e in entries:
        if e.name.startswith((".", "_")):
            continue
        if e.is_dir(follow_symlinks=False):
            if recurse:
                out += _parquet_under(Path(e.path), True)
        elif e.name.endswith(".parquet"):
            out.append(Path(e.path))
    return out


def stray_files(root: Path) -> list[str]:
    """`*.parquet` files under the root that no reader reads (paths relative to the root):
    in the root itself, anywhere under a table dir but as a part in a partition (a name not
    a part's, a directory not a partition, one deeper down). `check` reports them; read,
    a copied-in file would be taken for the table's rows."""
    root = Path(root)
    out = [p.name for p in _parquet_under(root, False)]
    for table in tables_on_disk(root):
        tdir = table_dir(root, table)
        parts = {tdir / f for f in list_parquet(tdir)}
        out += [f"{table}/{p.relative_to(tdir).as_posix()}"
                for p in _parquet_under(tdir, True) if p not in parts]
    return out


def select_visible(files: list[str], markers: dict[str, Marker]) -> list[str]:
    superseded = {i for m in markers.values() for i in m.inputs}
    committed = {m.output for m in markers.values()}
    return [f for f in files if f not in superseded
            and (not f.rsplit("/", 1)[-1].startswith("cpart-") or f in committed)]


def listed_parts(root: Path, table: str, attempts: int = 50) -> list[Path]:
    """The table's parts that the visibility rule selects, as a consistent snapshot (absolute
    paths, sorted), readable or not: `warehouse check` looks at them all."""
    tdir = table_dir(root, table)
    for _ in range(attempts):
        before = read_markers(tdir)
        files = list_parquet(tdir)
        if _marker_names(tdir) == set(before):
            return [tdir / f for f in select_visible(files, before)]
    raise WarehouseError(f"table '{table}': compactions kept changing while listing; retry")


def visible_parts(root: Path, table: str, attempts: int = 50) -> list[Path]:
    """What readers read: the listed parts less the unreadable ones (each named once on
    stderr; see `parts`). A listed part gone before its check (a compaction collected it:
    its rows are in an output this listing lacks) lists again: never a partial table."""
    for _ in range(attempts):
        try:
            return readable(Path(root), table, listed_parts(root, table))
        except PartVanished:
            continue
    raise WarehouseError(f"table '{table}': compactions kept collecting parts while listing; "
                         "retry")


def unreadable_parts(root: Path) -> list[tuple[str, str]]:
    """(path relative to the root, reason) of every listed part that readers skip (unreadable,
    or not its table's columns); the service's health names them. Cheap: the cached checks
    of `parts`, no data read."""
    root = Path(root)
    out = []
    for table in tables_on_disk(root):
        for p in listed_parts(root, table):
            try:
                reason = problem_of(p, table)
            except FileNotFoundError:
                continue  # collected by a compaction after the listing
            if reason is not None:
                out.append((relative(root, p), reason))
    return out


def check_root(root: Path) -> Path:
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise WarehouseError(f"warehouse '{root}' is not a directory")
    return root


def tables_on_disk(root: Path) -> list[str]:
    return [t for t in TABLES if table_dir(root, t).is_dir()]
