"""The meta-dataset as one Parquet file: what a sweep on another machine brings back in
place of its warehouse (a warehouse of runs with their dynamics is hundreds of MB; the
meta-dataset of 80 problems × 32 candidates × 6 seeds is 0.75 MB).

`write_meta_file` writes it atomically (no half-written file is ever seen); `read_meta_file`
reads one back and says precisely what is wrong with a file that is not one.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from aicf_induct.errors import DataError
from aicf_induct.induction.meta_dataset import ID_COLUMNS


def write_meta_file(meta: pd.DataFrame, path: str | Path) -> Path:
    """`meta` (a meta-dataset: `load_meta_dataset`'s columns) as the Parquet file `path`."""
    from warehouse.layout import atomic_write

    missing = _missing_columns(meta)
    if missing:
        raise DataError(f"not a meta-dataset: no column {missing[0]!r}")
    out = check_meta_path(path)
    atomic_write(out, lambda p: meta.to_parquet(p, index=False))
    return out


def check_meta_path(path: str | Path) -> Path:
    """`path` as a meta-dataset file to write: named .parquet (what is written is Parquet,
    whatever the name says), in a folder that exists."""
    out = Path(path)
    if out.suffix != ".parquet":
        raise DataError(f"{out}: a meta-dataset file is Parquet: name it .parquet")
    if not out.parent.is_dir():
        raise DataError(f"{out}: no folder {out.parent} to write it in")
    return out


def read_meta_file(path: str | Path) -> pd.DataFrame:
    """The meta-dataset in the Parquet file `path` (`write_meta_file`, or
    `induction_holdout.py --save-meta`); a missing, empty or unreadable file, or one without
    a meta-dataset's columns or rows, is a DataError naming the file and what is wrong."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{p}: no such meta-dataset file")
    if p.stat().st_size == 0:
        raise DataError(f"{p}: empty file (0 bytes), not a meta-dataset")
    try:
        meta = pd.read_parquet(p)
    except Exception as err:  # pyarrow raises several kinds for a file that is not Parquet
        raise DataError(f"{p}: not a Parquet file ({type(err).__name__})") from None
    missing = _missing_columns(meta)
    if missing and _is_pack(p):
        raise DataError(f"{p} is a knowledge pack, not a meta-dataset: a pack to score goes "
                        "to --pack; the held-out problems are a warehouse or `corpus meta`'s "
                        "file")
    if missing:
        raise DataError(f"{p}: not a meta-dataset: no column {missing[0]!r} "
                        f"({len(missing)} of its {len(ID_COLUMNS)} columns missing)")
    if meta.empty:
        raise DataError(f"{p}: a meta-dataset with no runs")
    return meta


def _missing_columns(meta: pd.DataFrame) -> list[str]:
    """The meta-dataset columns (`ID_COLUMNS`) that `meta` lacks, in their order."""
    return [c for c in ID_COLUMNS if c not in meta.columns]


def _is_pack(p: Path) -> bool:
    """Whether the Parquet file `p` carries a knowledge pack's header."""
    import pyarrow.parquet as pq

    from aicf_induct.induction.pack import META_KEY

    return META_KEY in (pq.read_schema(p).metadata or {})
