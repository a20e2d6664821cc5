"""The meta-dataset as one Parquet file: written atomically, read back equal, and a file
that is not one is a DataError naming the file and what is wrong."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aicf_induct.errors import DataError
from aicf_induct.induction.meta_dataset import ID_COLUMNS
from aicf_induct.induction.meta_file import read_meta_file, write_meta_file


def _meta(rows: int = 6) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    cols: dict[str, object] = {c: [f"{c}{i % 3}" for i in range(rows)] for c in ID_COLUMNS}
    for c in ("lr", "weight_decay", "val_score", "test_score", "val_error", "test_error",
              "val_norm_error", "test_norm_error", "rank_score"):
        cols[c] = rng.uniform(size=rows)
    cols["seed"] = np.arange(rows) % 2
    cols["batch_size"] = np.full(rows, 64)
    cols["param_steps"] = rng.integers(1, 10**6, rows)
    cols["f.simple.n_rows_log"] = rng.normal(size=rows)
    cols["f.stat.skewness_mean"] = [np.nan, *rng.normal(size=rows - 1)]
    return pd.DataFrame(cols)


def test_a_meta_dataset_comes_back_as_written(tmp_path: Path) -> None:
    meta = _meta()
    out = write_meta_file(meta, tmp_path / "m.parquet")
    pd.testing.assert_frame_equal(read_meta_file(out), meta)
    assert [p.name for p in tmp_path.iterdir()] == ["m.parquet"]  # no temporary left


def test_what_is_not_a_meta_dataset_is_named(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"absent\.parquet: no such meta-dataset file"):
        read_meta_file(tmp_path / "absent.parquet")
    (tmp_path / "empty.parquet").write_bytes(b"")
    with pytest.raises(DataError, match=r"empty\.parquet: empty file \(0 bytes\)"):
        read_meta_file(tmp_path / "empty.parquet")
    (tmp_path / "text.parquet").write_text("problem,seed\nx,0\n")
    with pytest.raises(DataError, match=r"text\.parquet: not a Parquet file"):
        read_meta_file(tmp_path / "text.parquet")
    _meta().drop(columns="test_norm_error").to_parquet(tmp_path / "short.parquet")
    with pytest.raises(DataError, match=r"short\.parquet: not a meta-dataset: no column "
                                        r"'test_norm_error' \(1 of its 21 columns missing\)"):
        read_meta_file(tmp_path / "short.parquet")
    _meta().iloc[:0].to_parquet(tmp_path / "none.parquet")
    with pytest.raises(DataError, match=r"none\.parquet: a meta-dataset with no runs"):
        read_meta_file(tmp_path / "none.parquet")


def test_nothing_is_written_for_what_cannot_be(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no column 'seed'"):
        write_meta_file(_meta().drop(columns="seed"), tmp_path / "m.parquet")
    with pytest.raises(DataError, match="no folder"):
        write_meta_file(_meta(), tmp_path / "nowhere" / "m.parquet")
    assert list(tmp_path.iterdir()) == []


def test_a_meta_file_is_named_parquet(tmp_path: Path) -> None:
    """What is written is Parquet: a `.csv` name would mislead whoever opens it."""
    with pytest.raises(DataError, match=r"h\.csv: a meta-dataset file is Parquet: name it "
                                        r"\.parquet"):
        write_meta_file(_meta(), tmp_path / "h.csv")
    assert list(tmp_path.iterdir()) == []


def test_a_knowledge_pack_read_as_a_meta_file_is_named_as_one(tmp_path: Path) -> None:
    """A pack given where held-out problems go (`--holdout PACK`) is told apart from a
    file of another schema, and pointed to --pack."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from aicf_induct.induction.pack import META_KEY

    pack = tmp_path / "p.parquet"
    pq.write_table(pa.table({"problem": ["iris"]}).replace_schema_metadata(
        {META_KEY: b"{}"}), pack)
    with pytest.raises(DataError, match=r"p\.parquet is a knowledge pack, not a "
                                        r"meta-dataset: a pack to score goes to --pack"):
        read_meta_file(pack)
